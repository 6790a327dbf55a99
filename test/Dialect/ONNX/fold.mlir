// RUN: pipeline-opt %s --canonicalize | FileCheck %s

// The folders that make exported shape sub-graphs static (the importer
// folds each op as it creates it; --canonicalize runs the same folders).

// torch's Expand target: Where(Equal(shape, -1), 1, shape). (Expand's
// verifier needs a constant shape, so the target is returned.)
// CHECK-LABEL: func.func @expand_shape
func.func @expand_shape() -> tensor<3xi64> {
  // CHECK-NEXT: %[[SHAPE:.*]] = onnx.Constant dense<[3, 1, 1]> : tensor<3xi64>
  // CHECK-NEXT: return %[[SHAPE]]
  %shape = onnx.Constant dense<[3, -1, -1]> : tensor<3xi64>
  %ones = onnx.Constant dense<1> : tensor<3xi64>
  %minus = onnx.Constant dense<-1> : tensor<i64>
  %m = onnx.Mul %ones, %minus : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %eq = onnx.Equal %shape, %m : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %target = onnx.Where %eq, %ones, %shape : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %target : tensor<3xi64>
}

// CHECK-LABEL: func.func @constants
func.func @constants(%x: tensor<2x3x4xf32>) -> (tensor<i64>, tensor<3xi64>, tensor<4xf32>, tensor<2x3xi64>, tensor<2xi1>) {
  // CHECK-DAG: onnx.Constant dense<24> : tensor<i64>
  // CHECK-DAG: onnx.Constant dense<[5, 3, 1]> : tensor<3xi64>
  // CHECK-DAG: onnx.Constant dense<[1.000000e+00, 1.500000e+00, 2.000000e+00, 2.500000e+00]> : tensor<4xf32>
  // CHECK-DAG: onnx.Constant dense<{{\[}}[1, 2, 3], [1, 2, 3]]> : tensor<2x3xi64>
  // CHECK-DAG: onnx.Constant dense<[false, true]> : tensor<2xi1>
  // CHECK-NOT: onnx.Size
  // CHECK-NOT: onnx.Range
  // CHECK-NOT: onnx.Expand
  // CHECK-NOT: onnx.Equal
  %size = onnx.Size %x : (tensor<2x3x4xf32>) -> tensor<i64>
  %s = onnx.Constant dense<5> : tensor<i64>
  %l = onnx.Constant dense<0> : tensor<i64>
  %d = onnx.Constant dense<-2> : tensor<i64>
  %r = onnx.Range %s, %l, %d : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  %fs = onnx.Constant dense<1.0> : tensor<f32>
  %fl = onnx.Constant dense<2.6> : tensor<f32>
  %fd = onnx.Constant dense<0.5> : tensor<f32>
  %rf = onnx.Range %fs, %fl, %fd : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  %row = onnx.Constant dense<[1, 2, 3]> : tensor<3xi64>
  %shape = onnx.Constant dense<[2, 3]> : tensor<2xi64>
  %e = onnx.Expand %row, %shape : (tensor<3xi64>, tensor<2xi64>) -> tensor<2x3xi64>
  %a = onnx.Constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = onnx.Constant dense<2.0> : tensor<f32>
  %eq = onnx.Equal %a, %b : (tensor<2xf32>, tensor<f32>) -> tensor<2xi1>
  return %size, %r, %rf, %e, %eq : tensor<i64>, tensor<3xi64>, tensor<4xf32>, tensor<2x3xi64>, tensor<2xi1>
}

// An all-zero Pad (torchvision's DenseNet) is the identity; others stay.
// CHECK-LABEL: func.func @pads
func.func @pads(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x5x4xf32>) {
  // CHECK: %[[P:.*]] = onnx.Pad %arg0
  // CHECK-NEXT: return %arg0, %[[P]]
  %zeros = onnx.Constant dense<0> : tensor<8xi64>
  %y = onnx.Pad %x, %zeros : (tensor<1x2x4x4xf32>, tensor<8xi64>) -> tensor<1x2x4x4xf32>
  %crop = onnx.Constant dense<[0, 0, 2, 0, 0, 0, -1, 0]> : tensor<8xi64>
  %z = onnx.Pad %x, %crop {mode = "edge"} : (tensor<1x2x4x4xf32>, tensor<8xi64>) -> tensor<1x2x5x4xf32>
  return %y, %z : tensor<1x2x4x4xf32>, tensor<1x2x5x4xf32>
}

// torch's pads: a [rank, 2] table reversed along dim 0 (a 2-D Slice with
// step -1), transposed and flattened.
// CHECK-LABEL: func.func @torch_pads
func.func @torch_pads() -> tensor<8xi64> {
  // CHECK-NEXT: %[[P:.*]] = onnx.Constant dense<[0, 0, 2, 1, 0, 0, 1, 0]> : tensor<8xi64>
  // CHECK-NEXT: return %[[P]]
  %table = onnx.Constant dense<[[1, 0], [2, 1], [0, 0], [0, 0]]> : tensor<4x2xi64>
  %st = onnx.Constant dense<[-1]> : tensor<1xi64>
  %en = onnx.Constant dense<[-9223372036854775807]> : tensor<1xi64>
  %ax = onnx.Constant dense<[0]> : tensor<1xi64>
  %sp = onnx.Constant dense<[-1]> : tensor<1xi64>
  %rev = onnx.Slice %table, %st, %en axes %ax steps %sp : (tensor<4x2xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x2xi64>
  %t = onnx.Transpose %rev {perm = array<i64: 1, 0>} : (tensor<4x2xi64>) -> tensor<2x4xi64>
  %shape = onnx.Constant dense<[-1]> : tensor<1xi64>
  %flat = onnx.Reshape %t, %shape : (tensor<2x4xi64>, tensor<1xi64>) -> tensor<8xi64>
  return %flat : tensor<8xi64>
}

// Neg of small constants (ONNX's expanded LayerNormalization negates its
// reduced-axes count); a non-constant Neg stays.
// CHECK-LABEL: func.func @neg
func.func @neg(%x: tensor<2xf32>) -> (tensor<2xi64>, tensor<2xf32>, tensor<2xf32>) {
  // CHECK-DAG: onnx.Constant dense<[-2, 3]> : tensor<2xi64>
  // CHECK-DAG: onnx.Constant dense<[-1.500000e+00, 0.000000e+00]> : tensor<2xf32>
  // CHECK-DAG: onnx.Neg %{{.*}} : (tensor<2xf32>) -> tensor<2xf32>
  %i = onnx.Constant dense<[2, -3]> : tensor<2xi64>
  %f = onnx.Constant dense<[1.5, -0.0]> : tensor<2xf32>
  %ni = onnx.Neg %i : (tensor<2xi64>) -> tensor<2xi64>
  %nf = onnx.Neg %f : (tensor<2xf32>) -> tensor<2xf32>
  %nx = onnx.Neg %x : (tensor<2xf32>) -> tensor<2xf32>
  return %ni, %nf, %nx : tensor<2xi64>, tensor<2xf32>, tensor<2xf32>
}

// Window shifts and paddings (torchvision's swin_t: pad = (w - W % w) % w).
// CHECK-LABEL: func.func @mod
func.func @mod() -> (tensor<4xi64>, tensor<4xi64>, tensor<2xi32>, tensor<2xf32>) {
  // CHECK-DAG: onnx.Constant dense<[2, -2, -1, 1]> : tensor<4xi64>
  // CHECK-DAG: onnx.Constant dense<[-1, 1, -1, 1]> : tensor<4xi64>
  // CHECK-DAG: onnx.Constant dense<0> : tensor<2xi32>
  // CHECK-DAG: onnx.Constant dense<[-1.500000e+00, 1.500000e+00]> : tensor<2xf32>
  // CHECK-NOT: onnx.Mod
  %a = onnx.Constant dense<[-7, 7, -7, 7]> : tensor<4xi64>
  %b = onnx.Constant dense<[3, -3, -3, 3]> : tensor<4xi64>
  %floored = onnx.Mod %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %truncated = onnx.Mod %a, %b {fmod = 1 : i64} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %min = onnx.Constant dense<[-2147483648, 5]> : tensor<2xi32>
  %minus = onnx.Constant dense<-1> : tensor<i32>
  %zero = onnx.Mod %min, %minus : (tensor<2xi32>, tensor<i32>) -> tensor<2xi32>
  %x = onnx.Constant dense<[-7.5, 7.5]> : tensor<2xf32>
  %y = onnx.Constant dense<[2.0, -2.0]> : tensor<2xf32>
  %f = onnx.Mod %x, %y {fmod = 1 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %floored, %truncated, %zero, %f : tensor<4xi64>, tensor<4xi64>, tensor<2xi32>, tensor<2xf32>
}

// A remainder of a division by zero is not folded (the kernel reports it).
// CHECK-LABEL: func.func @mod_by_zero
func.func @mod_by_zero() -> tensor<2xi64> {
  // CHECK: onnx.Mod
  %a = onnx.Constant dense<[1, 2]> : tensor<2xi64>
  %z = onnx.Constant dense<0> : tensor<i64>
  %r = onnx.Mod %a, %z : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  return %r : tensor<2xi64>
}

// swin_t's shifted-window mask: zeros, then regions numbered through
// ScatterND at index tables concatenated from constants.
// CHECK-LABEL: func.func @scatter_nd_mask
func.func @scatter_nd_mask() -> (tensor<3x3xf32>, tensor<2x2x2xi64>) {
  // CHECK-DAG: onnx.Constant dense<{{\[}}[0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 2.000000e+00, 2.000000e+00], [0.000000e+00, 2.000000e+00, 2.000000e+00]]> : tensor<3x3xf32>
  // CHECK-DAG: onnx.Constant dense<{{\[}}{{\[}}[1, 1], [1, 2]], {{\[}}[2, 1], [2, 2]]]> : tensor<2x2x2xi64>
  // CHECK-NOT: onnx.ScatterND
  // CHECK-NOT: onnx.Concat
  %zeros = onnx.Constant dense<0.0> : tensor<3x3xf32>
  %rows = onnx.Constant dense<[[[1], [1]], [[2], [2]]]> : tensor<2x2x1xi64>
  %cols = onnx.Constant dense<[[[1], [-1]], [[1], [-1]]]> : tensor<2x2x1xi64>
  %at = onnx.Concat %rows, %cols {axis = -1 : i64} : (tensor<2x2x1xi64>, tensor<2x2x1xi64>) -> tensor<2x2x2xi64>
  %two = onnx.Constant dense<2.0> : tensor<2x2xf32>
  %mask = onnx.ScatterND %zeros, %at, %two : (tensor<3x3xf32>, tensor<2x2x2xi64>, tensor<2x2xf32>) -> tensor<3x3xf32>
  %normal = onnx.Constant dense<[[[1, 1], [1, 2]], [[2, 1], [2, 2]]]> : tensor<2x2x2xi64>
  return %mask, %normal : tensor<3x3xf32>, tensor<2x2x2xi64>
}

// With a reduction the op stays (the kernel combines).
// CHECK-LABEL: func.func @scatter_nd_add
func.func @scatter_nd_add() -> tensor<3xf32> {
  // CHECK: onnx.ScatterND {{.*}} {reduction = "add"}
  %d = onnx.Constant dense<1.0> : tensor<3xf32>
  %i = onnx.Constant dense<[[0], [0]]> : tensor<2x1xi64>
  %u = onnx.Constant dense<2.0> : tensor<2xf32>
  %r = onnx.ScatterND %d, %i, %u {reduction = "add"} : (tensor<3xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
