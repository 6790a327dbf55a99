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

// Left alone: a Transpose that moves more than the last two dims, and a
// Gemm with C (its transpose would transpose C too).
// CHECK-LABEL: func.func @kept
// CHECK: onnx.Transpose %{{.*}} {perm = array<i64: 1, 0, 2>}
// CHECK: onnx.MatMul
// CHECK: %[[G:.*]] = onnx.Gemm
// CHECK: onnx.Transpose %[[G]]
func.func @kept(%x: tensor<3x2x4xf32>, %y: tensor<2x4x5xf32>, %a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3x5xf32>) -> (tensor<2x3x5xf32>, tensor<5x3xf32>) {
  %xt = onnx.Transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  %m = onnx.MatMul %xt, %y : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %g = onnx.Gemm %a, %b, %c : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %gt = onnx.Transpose %g {perm = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
  return %m, %gt : tensor<2x3x5xf32>, tensor<5x3xf32>
}

// -----

// Attention's scores s = q k^T and their gradients as --pp-autodiff writes
// them: dq = dy (k^T)^T, whose two swaps cancel into a plain MatMul of k;
// dk = (q^T dy)^T, the transposed product swapped into dy^T q. Every
// Transpose goes.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x3x7x5xf32>, %[[K:[^:]*]]: tensor<2x3x7x5xf32>, %[[DY:[^:]*]]: tensor<2x3x7x7xf32>)
// CHECK-NEXT: %[[S:.*]] = train.matmul %[[Q]], %[[K]] {pp.stage = 0 : i64, trans_b} : (tensor<2x3x7x5xf32>, tensor<2x3x7x5xf32>) -> tensor<2x3x7x7xf32>
// CHECK-NEXT: %[[DQ:.*]] = onnx.MatMul %[[DY]], %[[K]] : (tensor<2x3x7x7xf32>, tensor<2x3x7x5xf32>) -> tensor<2x3x7x5xf32>
// CHECK-NEXT: %[[DK:.*]] = train.matmul %[[DY]], %[[Q]] {trans_a} : (tensor<2x3x7x7xf32>, tensor<2x3x7x5xf32>) -> tensor<2x3x7x5xf32>
// CHECK-NEXT: return %[[S]], %[[DQ]], %[[DK]]
func.func @attention(%q: tensor<2x3x7x5xf32>, %k: tensor<2x3x7x5xf32>, %dy: tensor<2x3x7x7xf32>) -> (tensor<2x3x7x7xf32>, tensor<2x3x7x5xf32>, tensor<2x3x7x5xf32>) {
  %kt = onnx.Transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x7x5xf32>) -> tensor<2x3x5x7xf32>
  %s = onnx.MatMul %q, %kt {pp.stage = 0 : i64} : (tensor<2x3x7x5xf32>, tensor<2x3x5x7xf32>) -> tensor<2x3x7x7xf32>
  %ktt = onnx.Transpose %kt {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x5x7xf32>) -> tensor<2x3x7x5xf32>
  %dq = onnx.MatMul %dy, %ktt : (tensor<2x3x7x7xf32>, tensor<2x3x7x5xf32>) -> tensor<2x3x7x5xf32>
  %qt = onnx.Transpose %q {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x7x5xf32>) -> tensor<2x3x5x7xf32>
  %dkt = onnx.MatMul %qt, %dy : (tensor<2x3x5x7xf32>, tensor<2x3x7x7xf32>) -> tensor<2x3x5x7xf32>
  %dk = onnx.Transpose %dkt {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x5x7xf32>) -> tensor<2x3x7x5xf32>
  return %s, %dq, %dk : tensor<2x3x7x7xf32>, tensor<2x3x7x5xf32>, tensor<2x3x7x5xf32>
}

// -----

// Broadcast batch dims keep broadcasting through the flags; a transposed
// product that something else reads stays, and so does its Transpose.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x1x7x6xf32>, %[[DY:[^:]*]]: tensor<1x3x7x4xf32>)
// CHECK-NEXT: %[[P:.*]] = train.matmul %[[A]], %[[DY]] {trans_a} : (tensor<2x1x7x6xf32>, tensor<1x3x7x4xf32>) -> tensor<2x3x6x4xf32>
// CHECK-NEXT: %[[PT:.*]] = onnx.Transpose %[[P]]
// CHECK-NEXT: return %[[P]], %[[PT]]
func.func @broadcast(%a: tensor<2x1x7x6xf32>, %dy: tensor<1x3x7x4xf32>) -> (tensor<2x3x6x4xf32>, tensor<2x3x4x6xf32>) {
  %at = onnx.Transpose %a {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x1x7x6xf32>) -> tensor<2x1x6x7xf32>
  %p = onnx.MatMul %at, %dy : (tensor<2x1x6x7xf32>, tensor<1x3x7x4xf32>) -> tensor<2x3x6x4xf32>
  %pt = onnx.Transpose %p {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x6x4xf32>) -> tensor<2x3x4x6xf32>
  return %p, %pt : tensor<2x3x6x4xf32>, tensor<2x3x4x6xf32>
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
