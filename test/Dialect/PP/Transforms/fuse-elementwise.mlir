// RUN: pipeline-opt %s --pp-fuse-elementwise --split-input-file | FileCheck %s
// RUN: pipeline-opt %s --pp-fuse-elementwise=activations=false --split-input-file | FileCheck %s --check-prefix=NOACT

// A bias add, its relu and a scale: one tree of single-use values of one
// type; the bias (a suffix of the shape) and the scalar are inputs, in
// order of first use. The kernel sits where the last op was.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[S:.*]]: tensor<f32>)
// CHECK: %[[M:.*]] = onnx.MatMul
// CHECK-NEXT: %[[F:.*]] = pp.fused %[[M]], %[[B]], %[[S]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[M0:.*]]: tensor<4x8xf32>, %[[B0:.*]]: tensor<8xf32>, %[[S0:.*]]: tensor<f32>):
// CHECK-NEXT:   %[[A:.*]] = onnx.Add %[[M0]], %[[B0]]
// CHECK-NEXT:   %[[R:.*]] = onnx.Relu %[[A]]
// CHECK-NEXT:   %[[Y:.*]] = onnx.Mul %[[R]], %[[S0]]
// CHECK-NEXT:   pp.yield %[[Y]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @chain(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  %m = onnx.MatMul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = onnx.Add %m, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = onnx.Relu %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = onnx.Mul %r, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A value used twice is computed once, so it ends its group; the tree
// below it starts another. Its uses read it as an input.
// CHECK-LABEL: func.func @shared
// CHECK: %[[E:.*]] = pp.fused %{{.*}} : (tensor<16xf32>) -> tensor<16xf32> {
// CHECK:   onnx.Neg
// CHECK:   onnx.Exp
// CHECK: }
// CHECK: pp.fused %[[E]] : (tensor<16xf32>) -> tensor<16xf32> {
// CHECK-NEXT: ^bb0(%[[E0:.*]]: tensor<16xf32>):
// CHECK-NEXT:   %[[T:.*]] = onnx.Add %[[E0]], %[[E0]]
// CHECK-NEXT:   onnx.Sqrt %[[T]]
func.func @shared(%x: tensor<16xf32>) -> tensor<16xf32> {
  %n = onnx.Neg %x : (tensor<16xf32>) -> tensor<16xf32>
  %e = onnx.Exp %n : (tensor<16xf32>) -> tensor<16xf32>
  %t = onnx.Add %e, %e : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %q = onnx.Sqrt %t : (tensor<16xf32>) -> tensor<16xf32>
  return %q : tensor<16xf32>
}

// -----

// Nothing to fuse: a single op, integers, a broadcast that is not a suffix
// (read at i mod 4 it would be wrong), ops without a scalar function.
// CHECK-LABEL: func.func @unfused
// CHECK-NOT: pp.fused
// CHECK: return
func.func @unfused(%x: tensor<4x8xf32>, %c: tensor<4x1xf32>, %i: tensor<8xi64>) -> (tensor<4x8xf32>, tensor<8xi64>, tensor<4x8xf32>) {
  %r = onnx.Relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = onnx.Add %r, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %j = onnx.Add %i, %i : (tensor<8xi64>, tensor<8xi64>) -> tensor<8xi64>
  %k = onnx.Neg %j : (tensor<8xi64>) -> tensor<8xi64>
  %f = onnx.Floor %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = onnx.Abs %f : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a, %k, %g : tensor<4x8xf32>, tensor<8xi64>, tensor<4x8xf32>
}

// -----

// A kernel runs where its last op is: an Add reading @v may not move past a
// write of @v, so the group before the write stays a separate op; the tree
// after it fuses.
// CHECK-LABEL: func.func @global_write
// CHECK: %[[V:.*]] = onnx.global_read @v
// CHECK-NEXT: %[[A:.*]] = onnx.Add %[[V]], %[[V]]
// CHECK-NEXT: train.global_write @v, %[[A]]
// CHECK-NEXT: %[[F:.*]] = pp.fused %[[A]] : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: train.global_write @v, %[[F]]
func.func @global_write() {
  %v = onnx.global_read @v : tensor<8xf32>
  %a = onnx.Add %v, %v : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  train.global_write @v, %a : tensor<8xf32>
  %b = onnx.Add %a, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = onnx.Relu %b : (tensor<8xf32>) -> tensor<8xf32>
  train.global_write @v, %r : tensor<8xf32>
  return
}
onnx.global "state" @v : tensor<8xf32> = dense<0.5> : tensor<8xf32>

// -----

// Backward chains: the Relu gradient and the scaling of its input fuse;
// f64 works like f32. Attributes and locations stay on the fused ops.
// CHECK-LABEL: func.func @backward
// CHECK: pp.fused %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
// CHECK: train.unary_grad <Relu> {{.*}} {pp.stage = 1 : i64}
// CHECK-NEXT: onnx.Div
func.func @backward(%x: tensor<2x3xf64>, %y: tensor<2x3xf64>, %dy: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %g = train.unary_grad <Relu> %x, %y, %dy {pp.stage = 1 : i64} : tensor<2x3xf64>
  %d = onnx.Div %g, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  return %d : tensor<2x3xf64>
}

// -----

// A Relu of a convolution's output that nothing else reads becomes the
// convolution's activation; the batch norm's Relu too (its running
// statistics stay separate results). The Add + Relu of a residual is a
// pp.fused tree as before.
// CHECK-LABEL: func.func @activations
// NOACT-LABEL: func.func @activations
// NOACT-NOT: pp.activation
// NOACT: onnx.Relu
// NOACT-NOT: pp.activation
// NOACT: return
// CHECK: %[[C:.*]] = onnx.Conv %{{.*}} {pp.activation = "Relu"}
// CHECK-NOT: onnx.Relu
// CHECK: %[[Y:.*]], %[[M:.*]], %{{.*}} = onnx.BatchNormalization %[[C]], {{.*}} {pp.activation = "Relu", training_mode = 1 : i64}
// CHECK-NOT: onnx.Relu
// CHECK: %[[F:.*]] = pp.fused %[[Y]], %[[C]]
// CHECK: onnx.Add
// CHECK: onnx.Relu
// CHECK: return %[[F]], %[[M]]
func.func @activations(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %s: tensor<4xf32>) -> (tensor<2x4x6x6xf32>, tensor<4xf32>) {
  %c = onnx.Conv %x, %w, %b : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %r = onnx.Relu %c : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %n:3 = onnx.BatchNormalization %r, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>)
  %m = onnx.Relu %n#0 : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %a = onnx.Add %m, %r : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %y = onnx.Relu %a : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  return %y, %n#1 : tensor<2x4x6x6xf32>, tensor<4xf32>
}

// -----

// Not fused: a convolution output that something else reads too (it must
// stay as it is), kinds other than Relu, and producers whose kernel takes no
// activation.
// CHECK-LABEL: func.func @activations_unfused
// CHECK-NOT: pp.activation
// CHECK: onnx.Relu
// CHECK: onnx.Sigmoid
// CHECK: onnx.LeakyRelu
// CHECK: onnx.Relu
// CHECK: return
func.func @activations_unfused(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %g: tensor<8x8xf32>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<8x8xf32>) {
  %c = onnx.Conv %x, %w : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %r = onnx.Relu %c : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %d = onnx.Conv %x, %w : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %s = onnx.Sigmoid %d : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %e = onnx.Conv %x, %w : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %l = onnx.LeakyRelu %e {alpha = 0.1 : f32} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %m = onnx.MatMul %g, %g : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %k = onnx.Relu %m : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r, %c, %s, %l, %k : tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>, tensor<8x8xf32>
}

// -----

// A linear layer's Relu becomes the Gemm's activation (oneDNN's matmul
// applies it with the bias); a Gemm whose output is read elsewhere too keeps
// its Relu.
// CHECK-LABEL: func.func @gemm_activation
// CHECK: %[[H:.*]] = onnx.Gemm %{{.*}}, %{{.*}}, %{{.*}} {pp.activation = "Relu", transB = 1 : i64}
// CHECK-NOT: onnx.Relu
// CHECK: %[[O:.*]] = onnx.Gemm %[[H]], %{{.*}} : (
// CHECK: %[[R:.*]] = onnx.Relu %[[O]]
// CHECK: return %[[R]], %[[O]]
// NOACT-LABEL: func.func @gemm_activation
// NOACT-NOT: pp.activation
// NOACT: onnx.Relu
// NOACT: onnx.Relu
// NOACT: return
func.func @gemm_activation(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %v: tensor<32x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %g = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h = onnx.Relu %g : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %o = onnx.Gemm %h, %v : (tensor<8x32xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
  %r = onnx.Relu %o : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r, %o : tensor<8x4xf32>, tensor<8x4xf32>
}
