// RUN: pipeline-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(pp-fold-transposes))' | FileCheck %s

// torch's Linear of a 3-D input: the batch dims fold into the rows of one
// Gemm that reads the weight with transB; the Transpose goes.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[W:.*]] = onnx.global_read @w
// CHECK: %[[ROWS:.*]] = onnx.Reshape %[[X]], %{{.*}} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
// CHECK: %[[Y:.*]] = onnx.Gemm %[[ROWS]], %[[W]] {{{.*}}pp.stage = 1 : i64, transB = 1 : i64} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
// CHECK: %[[OUT:.*]] = onnx.Reshape %[[Y]], %{{.*}} : (tensor<6x5xf32>, tensor<3xi64>) -> tensor<2x3x5xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %[[OUT]]
onnx.global "trainable" @w : tensor<5x4xf32>
func.func @linear(%x: tensor<2x3x4xf32>) -> tensor<2x3x5xf32> {
  %w = onnx.global_read @w : tensor<5x4xf32>
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %y = onnx.MatMul %x, %t {pp.stage = 1 : i64} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// The backward of that Linear: dx = dy W (the recomputed transpose read
// through transB, which flips off) and dW = (x^T dy)^T = dy^T x (the
// transposed product swapped). A Transpose that something else reads
// stays for that reader, while the Gemm reads its input through transA.
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[X:[^:]*]]: tensor<6x4xf32>, %[[DY:[^:]*]]: tensor<6x5xf32>)
// CHECK: %[[W:.*]] = onnx.global_read @w
// CHECK: %[[DX:.*]] = onnx.Gemm %[[DY]], %[[W]] {beta = 0.000000e+00 : f32} : (tensor<6x5xf32>, tensor<5x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[DW:.*]] = onnx.Gemm %[[DY]], %[[X]] {beta = 0.000000e+00 : f32, transA = 1 : i64} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK: %[[KEPT:.*]] = onnx.Transpose %[[X]]
// CHECK: %[[P:.*]] = onnx.Gemm %[[X]], %[[DY]] {beta = 0.000000e+00 : f32, transA = 1 : i64} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK: return %[[DX]], %[[DW]], %[[KEPT]], %[[P]]
onnx.global "trainable" @w : tensor<5x4xf32>
func.func @backward(%x: tensor<6x4xf32>, %dy: tensor<6x5xf32>) -> (tensor<6x4xf32>, tensor<5x4xf32>, tensor<4x6xf32>, tensor<4x5xf32>) {
  %w = onnx.global_read @w : tensor<5x4xf32>
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %dx = onnx.Gemm %dy, %t {beta = 0.0 : f32, transB = 1 : i64} : (tensor<6x5xf32>, tensor<4x5xf32>) -> tensor<6x4xf32>
  %dt = onnx.Gemm %x, %dy {beta = 0.0 : f32, transA = 1 : i64} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %dw = onnx.Transpose %dt {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  %xt = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %p = onnx.Gemm %xt, %dy {beta = 0.0 : f32} : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  return %dx, %dw, %xt, %p : tensor<6x4xf32>, tensor<5x4xf32>, tensor<4x6xf32>, tensor<4x5xf32>
}

// -----

// Left alone: a Transpose of more than 2 dims, and a Gemm with C (its
// transpose would transpose C too).
// CHECK-LABEL: func.func @kept
// CHECK: onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1>}
// CHECK: onnx.MatMul
// CHECK: %[[G:.*]] = onnx.Gemm
// CHECK: onnx.Transpose %[[G]]
func.func @kept(%x: tensor<2x3x4xf32>, %y: tensor<2x3x5xf32>, %a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x5xf32>) -> (tensor<2x4x5xf32>, tensor<5x3xf32>) {
  %xt = onnx.Transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %m = onnx.MatMul %xt, %y : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %g = onnx.Gemm %a, %b, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %gt = onnx.Transpose %g {perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
  return %m, %gt : tensor<2x4x5xf32>, tensor<5x3xf32>
}

// -----

// Mixed precision casts the transposed weight: the Gemm reads a cast of the
// weight itself, and the Transpose and its Cast go.
// CHECK-LABEL: func.func @cast
// CHECK: %[[W:.*]] = onnx.global_read @w
// CHECK: %[[WC:.*]] = onnx.Cast %[[W]] {to = 16 : i64} : (tensor<5x4xf32>) -> tensor<5x4xbf16>
// CHECK: onnx.Gemm %{{.*}}, %[[WC]] {{{.*}}transB = 1 : i64} : (tensor<6x4xbf16>, tensor<5x4xbf16>) -> tensor<6x5xbf16>
// CHECK-NOT: onnx.Transpose
// CHECK: return
onnx.global "trainable" @w : tensor<5x4xf32>
func.func @cast(%x: tensor<2x3x4xbf16>) -> tensor<2x3x5xbf16> {
  %w = onnx.global_read @w : tensor<5x4xf32>
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %c = onnx.Cast %t {to = 16 : i64} : (tensor<4x5xf32>) -> tensor<4x5xbf16>
  %y = onnx.MatMul %x, %c : (tensor<2x3x4xbf16>, tensor<4x5xbf16>) -> tensor<2x3x5xbf16>
  return %y : tensor<2x3x5xbf16>
}
