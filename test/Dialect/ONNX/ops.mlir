// RUN: pipeline-opt %s | pipeline-opt | FileCheck %s
// RUN: pipeline-opt %s --mlir-print-op-generic | pipeline-opt | FileCheck %s

// Every op of the onnx dialect parses, verifies (including its inferred
// result types) and round-trips in both the custom and the generic form.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>, %b: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: onnx.Relu %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = onnx.Relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Sigmoid
  %1 = onnx.Sigmoid %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Tanh
  %2 = onnx.Tanh %1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Erf
  %3 = onnx.Erf %2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Sqrt
  %4 = onnx.Sqrt %3 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Exp
  %5 = onnx.Exp %4 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Log
  %6 = onnx.Log %5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Neg {{.*}} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  %7 = onnx.Neg %i : (tensor<2x3xi64>) -> tensor<2x3xi64>
  // CHECK: onnx.LeakyRelu {{.*}} {alpha = 2.000000e-01 : f32}
  %8 = onnx.LeakyRelu %6 {alpha = 0.2 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Gelu {{.*}} {approximate = "tanh"}
  %9 = onnx.Gelu %8 {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Softmax {{.*}} {axis = 0 : i64}
  %10 = onnx.Softmax %9 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.LogSoftmax
  %11 = onnx.LogSoftmax %10 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %lo = onnx.Constant dense<0.0> : tensor<f32>
  %hi = onnx.Constant dense<6.0> : tensor<f32>
  // CHECK: onnx.Clip %{{.*}} min %{{.*}} max %{{.*}} : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  %12 = onnx.Clip %11 min %lo max %hi : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: onnx.Clip %{{.*}} max %{{.*}} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %13 = onnx.Clip %12 max %hi : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: onnx.Cast {{.*}} {to = 1 : i64} : (tensor<2x3xi64>) -> tensor<2x3xf32>
  %14 = onnx.Cast %7 {to = 1 : i64} : (tensor<2x3xi64>) -> tensor<2x3xf32>
  // CHECK: onnx.Dropout {{.*}} ratio {{.*}} : (tensor<2x3xf32>, tensor<f32>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
  %15, %mask = onnx.Dropout %14 ratio %lo {seed = 7 : i64} : (tensor<2x3xf32>, tensor<f32>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
  // CHECK: onnx.Not
  %16 = onnx.Not %b : (tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: onnx.Identity
  %17 = onnx.Identity %15 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %18 = onnx.Abs %17 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %19 = onnx.Reciprocal %18 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %20 = onnx.Floor %19 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %21 = onnx.Ceil %20 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Elu {{.*}} {alpha = 5.000000e-01 : f32}
  %22 = onnx.Elu %21 {alpha = 0.5 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Selu {{.*}} {alpha = 1.500000e+00 : f32, gamma = 2.000000e+00 : f32}
  %23 = onnx.Selu %22 {alpha = 1.5 : f32, gamma = 2.0 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Celu
  %24 = onnx.Celu %23 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.ThresholdedRelu {{.*}} {alpha = 2.000000e+00 : f32}
  %25 = onnx.ThresholdedRelu %24 {alpha = 2.0 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Softplus
  %26 = onnx.Softplus %25 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Softsign
  %27 = onnx.Softsign %26 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Sin
  %28 = onnx.Sin %27 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Cos
  %29 = onnx.Cos %28 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Round
  %30 = onnx.Round %29 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %30 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @broadcast
func.func @broadcast(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xi1>) -> tensor<2x3xf32> {
  // CHECK: onnx.Add {{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = onnx.Add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Sub
  %1 = onnx.Sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Mul
  %2 = onnx.Mul %1, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Div
  %3 = onnx.Div %2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Pow
  %4 = onnx.Pow %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Mod {{.*}} {fmod = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %shape = onnx.Constant dense<[1, 3]> : tensor<2xi64>
  %m0 = onnx.Mod %3, %b {fmod = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Max {{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %mx = onnx.Max %m0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Min {{.*}} : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %m = onnx.Min %b, %mx : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.ScatterND {{.*}} {reduction = "max"} : (tensor<2x3xf32>, tensor<1x1xi64>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %row = onnx.Constant dense<[[1]]> : tensor<1x1xi64>
  %u = onnx.Reshape %b, %shape : (tensor<3xf32>, tensor<2xi64>) -> tensor<1x3xf32>
  %s = onnx.ScatterND %m, %row, %u {reduction = "max"} : (tensor<2x3xf32>, tensor<1x1xi64>, tensor<1x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Equal {{.*}} -> tensor<2x3xi1>
  %5 = onnx.Equal %s, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %6 = onnx.Less %4, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %7 = onnx.Greater %4, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %8 = onnx.And %5, %c : (tensor<2x3xi1>, tensor<2x1xi1>) -> tensor<2x3xi1>
  %9 = onnx.Or %8, %7 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: onnx.Where {{.*}} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %10 = onnx.Where %9, %4, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %10 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %bias: tensor<4xf32>,
              %s: tensor<4xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>) {
  // CHECK: onnx.Conv {{.*}} {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : {{.*}} -> tensor<2x4x4x4xf32>
  %0 = onnx.Conv %x, %w, %bias {group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // The adjoint shape back (4 -> 8 with output_padding), and from
  // output_shape: 2 (4 - 1) + 3 - 9 = 0 pads.
  // CHECK: onnx.ConvTranspose {{.*}} -> tensor<2x3x8x8xf32>
  %up = onnx.ConvTranspose %0, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>, output_padding = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: onnx.ConvTranspose {{.*}} -> tensor<2x3x9x9xf32>
  %up9 = onnx.ConvTranspose %0, %w {output_shape = array<i64: 9, 9>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x9x9xf32>
  // CHECK: onnx.BatchNormalization {{.*}} -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %1:3 = onnx.BatchNormalization %0, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: onnx.MaxPool {{.*}} -> (tensor<2x4x2x2xf32>, tensor<2x4x2x2xi64>)
  %2, %indices = onnx.MaxPool %1#0 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> (tensor<2x4x2x2xf32>, tensor<2x4x2x2xi64>)
  // CHECK: onnx.AveragePool {{.*}} -> tensor<2x4x2x2xf32>
  %3 = onnx.AveragePool %2 {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = 1 : i64} : (tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32>
  // CHECK: onnx.MaxPool {{.*}}ceil_mode = 1{{.*}} -> (tensor<2x4x1x1xf32>, tensor<2x4x1x1xi64>)
  %4:2 = onnx.MaxPool %3 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64} : (tensor<2x4x2x2xf32>) -> (tensor<2x4x1x1xf32>, tensor<2x4x1x1xi64>)
  // CHECK: onnx.GlobalAveragePool {{.*}} -> tensor<2x4x1x1xf32>
  %5 = onnx.GlobalAveragePool %4#0 : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %6 = onnx.GlobalMaxPool %5 : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: onnx.Flatten {{.*}} -> tensor<2x4xf32>
  %7 = onnx.Flatten %6 : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %wt = onnx.Constant dense<1.0> : tensor<4x4xf32>
  // CHECK: onnx.Gemm {{.*}} {alpha = 5.000000e-01 : f32, transB = 1 : i64}
  %8 = onnx.Gemm %7, %wt, %bias {alpha = 0.5 : f32, transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK: onnx.MatMul {{.*}} -> tensor<2x4xf32>
  %9 = onnx.MatMul %8, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // CHECK: onnx.LayerNormalization {{.*}} -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %10:3 = onnx.LayerNormalization %9, %s, %bias : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  // CHECK: onnx.SoftmaxCrossEntropyLoss {{.*}} -> (tensor<f32>, tensor<2x4xf32>)
  %11:2 = onnx.SoftmaxCrossEntropyLoss %10#0, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %11#0, %10#0 : tensor<f32>, tensor<2x4xf32>
}

// CHECK-LABEL: func.func @reduce
func.func @reduce(%x: tensor<4x8x32xf32>) -> (tensor<4x32xf32>, tensor<4x1x1xf32>) {
  // CHECK: onnx.ReduceMean {{.*}} -> tensor<4x32xf32>
  %0 = onnx.ReduceMean %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8x32xf32>) -> tensor<4x32xf32>
  %axes = onnx.Constant dense<[1, 2]> : tensor<2xi64>
  // CHECK: onnx.ReduceSum {{.*}} -> tensor<4x1x1xf32>
  %1 = onnx.ReduceSum %x, %axes : (tensor<4x8x32xf32>, tensor<2xi64>) -> tensor<4x1x1xf32>
  // CHECK: onnx.ReduceMax {{.*}} -> tensor<4x32xf32>
  %2 = onnx.ReduceMax %x {axes = array<i64: -2>, keepdims = 0 : i64} : (tensor<4x8x32xf32>) -> tensor<4x32xf32>
  // CHECK: onnx.ReduceMin {{.*}} -> tensor<1x1x1xf32>
  %3 = onnx.ReduceMin %x : (tensor<4x8x32xf32>) -> tensor<1x1x1xf32>
  return %0, %1 : tensor<4x32xf32>, tensor<4x1x1xf32>
}

// CHECK-LABEL: func.func @movement
func.func @movement(%x: tensor<2x3x4xf32>, %idx: tensor<5xi64>) -> (tensor<4x6xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>) {
  %shape = onnx.Constant dense<[4, -1]> : tensor<2xi64>
  // CHECK: onnx.Reshape {{.*}} -> tensor<4x6xf32>
  %0 = onnx.Reshape %x, %shape : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<4x6xf32>
  // CHECK: onnx.Transpose {{.*}} {perm = array<i64: 2, 0, 1>} {{.*}} -> tensor<4x2x3xf32>
  %1 = onnx.Transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %ax = onnx.Constant dense<[0]> : tensor<1xi64>
  // CHECK: onnx.Unsqueeze {{.*}} -> tensor<1x4x2x3xf32>
  %2 = onnx.Unsqueeze %1, %ax : (tensor<4x2x3xf32>, tensor<1xi64>) -> tensor<1x4x2x3xf32>
  // CHECK: onnx.Squeeze {{.*}} -> tensor<4x2x3xf32>
  %3 = onnx.Squeeze %2, %ax : (tensor<1x4x2x3xf32>, tensor<1xi64>) -> tensor<4x2x3xf32>
  // CHECK: onnx.Concat {{.*}} {axis = 0 : i64} {{.*}} -> tensor<8x2x3xf32>
  %4 = onnx.Concat %3, %3 {axis = 0 : i64} : (tensor<4x2x3xf32>, tensor<4x2x3xf32>) -> tensor<8x2x3xf32>
  %sizes = onnx.Constant dense<[1, 2]> : tensor<2xi64>
  // CHECK: onnx.Split {{.*}} -> (tensor<2x1x4xf32>, tensor<2x2x4xf32>)
  %5:2 = onnx.Split %x, %sizes {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> (tensor<2x1x4xf32>, tensor<2x2x4xf32>)
  // CHECK: onnx.Split {{.*}} {axis = 2 : i64, num_outputs = 2 : i64} {{.*}} -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  %6:2 = onnx.Split %x {axis = 2 : i64, num_outputs = 2 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  %st = onnx.Constant dense<[0]> : tensor<1xi64>
  %en = onnx.Constant dense<[-1]> : tensor<1xi64>
  %a1 = onnx.Constant dense<[1]> : tensor<1xi64>
  // CHECK: onnx.Slice {{.*}} axes {{.*}} -> tensor<2x2x4xf32>
  %7 = onnx.Slice %x, %st, %en axes %a1 : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4xf32>
  // CHECK: onnx.Gather {{.*}} {axis = 1 : i64} {{.*}} -> tensor<2x5x4xf32>
  %8 = onnx.Gather %x, %idx {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  %eshape = onnx.Constant dense<[2, 2, 1]> : tensor<3xi64>
  // CHECK: onnx.Expand {{.*}} -> tensor<2x2x4xf32>
  %9 = onnx.Expand %7, %eshape : (tensor<2x2x4xf32>, tensor<3xi64>) -> tensor<2x2x4xf32>
  // CHECK: onnx.Shape {{.*}} -> tensor<3xi64>
  %10 = onnx.Shape %9 : (tensor<2x2x4xf32>) -> tensor<3xi64>
  // CHECK: onnx.ConstantOfShape {{.*}} -> tensor<2x2x1xf32>
  %11 = onnx.ConstantOfShape %eshape {value = dense<1.0> : tensor<1xf32>} : (tensor<3xi64>) -> tensor<2x2x1xf32>
  %pads = onnx.Constant dense<[0, 1, -1, 0, 2, 1]> : tensor<6xi64>
  %pv = onnx.Constant dense<2.5> : tensor<f32>
  // CHECK: onnx.Pad %{{.*}}, %{{.*}} value %{{.*}} : (tensor<2x3x4xf32>, tensor<6xi64>, tensor<f32>) -> tensor<2x6x4xf32>
  %12 = onnx.Pad %x, %pads value %pv : (tensor<2x3x4xf32>, tensor<6xi64>, tensor<f32>) -> tensor<2x6x4xf32>
  %ppads = onnx.Constant dense<[3, 1]> : tensor<2xi64>
  %paxes = onnx.Constant dense<[-1]> : tensor<1xi64>
  // CHECK: onnx.Pad %{{.*}}, %{{.*}} axes %{{.*}} {mode = "reflect"} : (tensor<2x3x4xf32>, tensor<2xi64>, tensor<1xi64>) -> tensor<2x3x8xf32>
  %13 = onnx.Pad %x, %ppads axes %paxes {mode = "reflect"} : (tensor<2x3x4xf32>, tensor<2xi64>, tensor<1xi64>) -> tensor<2x3x8xf32>
  // CHECK: onnx.Range {{.*}} -> tensor<3xi64>
  %r0 = onnx.Constant dense<5> : tensor<i64>
  %r1 = onnx.Constant dense<-1> : tensor<i64>
  %r2 = onnx.Constant dense<-2> : tensor<i64>
  %14 = onnx.Range %r0, %r1, %r2 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  // CHECK: onnx.Size {{.*}} -> tensor<i64>
  %15 = onnx.Size %x : (tensor<2x3x4xf32>) -> tensor<i64>
  return %0, %8, %5#0, %9 : tensor<4x6xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>, tensor<2x2x4xf32>
}

// CHECK-LABEL: onnx.global "trainable" @w : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
onnx.global "trainable" @w : tensor<2xf32> = dense<[1.0, 2.0]> : tensor<2xf32>
// CHECK: onnx.global "state" @mean : tensor<2xf32>
onnx.global "state" @mean : tensor<2xf32>
// CHECK-LABEL: func.func @globals
func.func @globals() -> tensor<2xf32> {
  // CHECK: onnx.global_read @w : tensor<2xf32>
  %0 = onnx.global_read @w : tensor<2xf32>
  return %0 : tensor<2xf32>
}
