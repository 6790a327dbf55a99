// RUN: pipeline-opt %s -split-input-file --pp-add-loss -verify-diagnostics | FileCheck %s
// RUN: pipeline-opt %s -split-input-file --pp-add-loss="kind=mse" -verify-diagnostics | FileCheck %s --check-prefix=MSE
// RUN: pipeline-opt %s -split-input-file --pp-add-loss="class-axis=-1" -verify-diagnostics | FileCheck %s --check-prefix=LAST
// Labels the loss skips (VOC's mask borders): on the loss and the logits.
// RUN: pipeline-opt %s -split-input-file --pp-add-loss="ignore-index=255" -verify-diagnostics | FileCheck %s --check-prefix=IGNORE
// Label smoothing, as PyTorch's: (1 - eps) x the cross-entropy + eps x the
// mean over the labels not ignored of -(1/C) sum_c log softmax.
// RUN: pipeline-opt %s -split-input-file --pp-add-loss="ignore-index=255 label-smoothing=0.25" -verify-diagnostics | FileCheck %s --check-prefix=SMOOTH
// RUN: echo 'func.func @main(%%v: tensor<4x3xf32>) -> tensor<4x3xf32> { return %%v : tensor<4x3xf32> }' | not pipeline-opt --pp-add-loss=label-smoothing=1.5 2>&1 | FileCheck %s --check-prefix=SMOOTH-RANGE
// SMOOTH-RANGE: error: label-smoothing must lie in [0, 1], got 1.500000e+00
// RUN: echo 'func.func @main(%%v: tensor<4x3xf32>) -> tensor<4x3xf32> { return %%v : tensor<4x3xf32> }' | not pipeline-opt --pp-add-loss="label-smoothing=0.1 kind=mse" 2>&1 | FileCheck %s --check-prefix=SMOOTH-MSE
// SMOOTH-MSE: error: label-smoothing is an option of softmax-cross-entropy, not of loss=mse
// Class weights (PyTorch's weight=): the loss's weights operand; with label
// smoothing, the smoothing term weighs each class and divides by the
// counted labels' weights (an ignored label gathers class 0's, counted 0).
// RUN: echo 'func.func @main(%%v: tensor<4x3xf32>) -> tensor<4x3xf32> { return %%v : tensor<4x3xf32> }' | pipeline-opt --pp-add-loss="class-weights=1,2,0.5 label-smoothing=0.1" | FileCheck %s --check-prefix=WEIGHTS
// WEIGHTS: %[[W:.*]] = onnx.Constant dense<[1.000000e+00, 2.000000e+00, 5.000000e-01]> : tensor<3xf32>
// WEIGHTS: onnx.SoftmaxCrossEntropyLoss %arg0, %arg1, %[[W]] {ignore_index = -100 : i64}
// WEIGHTS: %[[LP:.*]] = onnx.LogSoftmax %arg0 {axis = 1 : i64}
// WEIGHTS: %[[WLP:.*]] = onnx.Mul %[[LP]], %{{.*}} : (tensor<4x3xf32>, tensor<3xf32>)
// WEIGHTS: onnx.ReduceMean %[[WLP]] {axes = array<i64: 1>, keepdims = 0 : i64}
// WEIGHTS: %[[KEPT:.*]] = onnx.Not
// WEIGHTS: %[[SAFE:.*]] = onnx.Where %[[KEPT]], %arg1, %{{.*}} : (tensor<4xi1>, tensor<4xi64>, tensor<i64>)
// WEIGHTS: onnx.Gather %{{.*}}, %[[SAFE]] : (tensor<3xf32>, tensor<4xi64>) -> tensor<4xf32>
// RUN: echo 'func.func @main(%%v: tensor<4x3xf32>) -> tensor<4x3xf32> { return %%v : tensor<4x3xf32> }' | not pipeline-opt --pp-add-loss=class-weights=1,2 2>&1 | FileCheck %s --check-prefix=WEIGHTS-COUNT
// WEIGHTS-COUNT: error: class-weights has 2 weights, the logits 'tensor<4x3xf32>' have 3 classes (dim 1)
// RUN: echo 'func.func @main(%%v: tensor<4x3xf32>) -> tensor<4x3xf32> { return %%v : tensor<4x3xf32> }' | not pipeline-opt --pp-add-loss=class-weights=1,-2,1 2>&1 | FileCheck %s --check-prefix=WEIGHTS-SIGN
// WEIGHTS-SIGN: error: class-weights must be finite and >= 0, got -2.000000e+00
// Logits without a class dim: softmax-cross-entropy refuses them, naming mse.
// RUN: echo 'func.func @main(%%v: tensor<4xf32>) -> tensor<4xf32> { return %%v : tensor<4xf32> }' | not pipeline-opt --pp-add-loss 2>&1 | FileCheck %s --check-prefix=RANK1
// RANK1: error: softmax-cross-entropy needs logits with a batch and a class dim, got 'tensor<4xf32>' (loss=mse takes any shape)

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<8xi64> {onnx.name = "labels"}) -> (tensor<f32> {pp.loss}, tensor<8x3xf32> {onnx.name = "logits", pp.class_axis = 1 : i64, pp.ignore_index = -100 : i64})
// CHECK: %[[LOGITS:.*]] = onnx.Relu
// CHECK: %[[LOSS:[^,]*]], %{{.*}} = onnx.SoftmaxCrossEntropyLoss %[[LOGITS]], %[[LABELS]] {ignore_index = -100 : i64} :
// CHECK: return %[[LOSS]], %[[LOGITS]]
// MSE-LABEL: func.func @main
// LAST-LABEL: func.func @main
// IGNORE-LABEL: func.func @main
// SMOOTH-LABEL: func.func @main
// MSE-SAME: %[[T:[^:]*]]: tensor<8x3xf32> {onnx.name = "labels"}) -> (tensor<f32> {pp.loss}, tensor<8x3xf32> {onnx.name = "logits"})
// MSE: %[[D:.*]] = onnx.Sub %{{.*}}, %[[T]]
// MSE: %[[SQ:.*]] = onnx.Mul %[[D]], %[[D]]
// MSE: onnx.ReduceMean %[[SQ]] {keepdims = 0 : i64} : (tensor<8x3xf32>) -> tensor<f32>
func.func @main(%x: tensor<8x4xf32>) -> (tensor<8x3xf32> {onnx.name = "logits"}) {
  %w = onnx.Constant dense<1.0> : tensor<4x3xf32>
  %0 = onnx.MatMul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %1 = onnx.Relu %0 : (tensor<8x3xf32>) -> tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}

// -----

// Sequence logits [N, S, V]: classes move to dim 1 and labels are [N, S];
// the logits keep their own class dim (pp.class_axis), which the runtime's
// accuracy reads.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.*}}: tensor<2x5xi64> {onnx.name = "labels"}) -> (tensor<f32> {pp.loss}, tensor<2x5x7xf32> {pp.class_axis = 2 : i64, pp.ignore_index = -100 : i64})
// CHECK: %[[T:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : (tensor<2x5x7xf32>) -> tensor<2x7x5xf32>
// CHECK: onnx.SoftmaxCrossEntropyLoss %[[T]]
// MSE-LABEL: func.func @main
// LAST-LABEL: func.func @main
// IGNORE-LABEL: func.func @main
// SMOOTH-LABEL: func.func @main
func.func @main(%x: tensor<2x5x7xf32>) -> tensor<2x5x7xf32> {
  %0 = onnx.Relu %x : (tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  return %0 : tensor<2x5x7xf32>
}

// -----

// Per-pixel logits [N, C, H, W] (a segmentation model): by default the
// classes are dim 1, as PyTorch and ONNX lay them out, and labels are
// [N, H, W]; class-axis=-1 takes the last dim instead.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.*}}: tensor<2x4x6xi64> {onnx.name = "labels"}) -> (tensor<f32> {pp.loss}, tensor<2x5x4x6xf32> {pp.class_axis = 1 : i64, pp.ignore_index = -100 : i64})
// CHECK-NOT: onnx.Transpose
// CHECK: onnx.SoftmaxCrossEntropyLoss %{{.*}} {ignore_index = -100 : i64} : (tensor<2x5x4x6xf32>, tensor<2x4x6xi64>)
// MSE-LABEL: func.func @main
// LAST-LABEL: func.func @main
// SMOOTH-LABEL: func.func @main
// SMOOTH-SAME: %[[L:[^:]*]]: tensor<2x4x6xi64>
// SMOOTH: %[[X:.*]] = onnx.Relu
// SMOOTH: %[[CE:[^,]*]], %{{.*}} = onnx.SoftmaxCrossEntropyLoss %[[X]], %[[L]] {ignore_index = 255 : i64}
// SMOOTH: %[[LP:.*]] = onnx.LogSoftmax %[[X]] {axis = 1 : i64}
// SMOOTH: %[[CM:.*]] = onnx.ReduceMean %[[LP]] {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x5x4x6xf32>) -> tensor<2x4x6xf32>
// SMOOTH: %[[IG:.*]] = onnx.Constant dense<255> : tensor<i64>
// SMOOTH: %[[EQ:.*]] = onnx.Equal %[[L]], %[[IG]]
// SMOOTH: %[[KEPT:.*]] = onnx.Not %[[EQ]]
// SMOOTH: %[[W:.*]] = onnx.Cast %[[KEPT]] {to = 1 : i64}
// SMOOTH: %[[XW:.*]] = onnx.Mul %[[CM]], %[[W]]
// SMOOTH: %[[XWM:.*]] = onnx.ReduceMean %[[XW]] {keepdims = 0 : i64}
// SMOOTH: %[[WM:.*]] = onnx.ReduceMean %[[W]] {keepdims = 0 : i64}
// SMOOTH: %[[S:.*]] = onnx.Div %[[XWM]], %[[WM]]
// SMOOTH: %[[KEEP:.*]] = onnx.Constant dense<7.500000e-01> : tensor<f32>
// SMOOTH: %[[CEK:.*]] = onnx.Mul %[[CE]], %[[KEEP]]
// SMOOTH: %[[EPS:.*]] = onnx.Constant dense<2.500000e-01> : tensor<f32>
// SMOOTH: %[[SE:.*]] = onnx.Mul %[[S]], %[[EPS]]
// SMOOTH: %[[LOSS:.*]] = onnx.Sub %[[CEK]], %[[SE]]
// SMOOTH: return %[[LOSS]], %[[X]]
// IGNORE-LABEL: func.func @main
// IGNORE-SAME: -> (tensor<f32> {pp.loss}, tensor<2x5x4x6xf32> {pp.class_axis = 1 : i64, pp.ignore_index = 255 : i64})
// IGNORE: onnx.SoftmaxCrossEntropyLoss %{{.*}} {ignore_index = 255 : i64} : (tensor<2x5x4x6xf32>, tensor<2x4x6xi64>)
// LAST-SAME: %{{.*}}: tensor<2x5x4xi64> {onnx.name = "labels"}) -> (tensor<f32> {pp.loss}, tensor<2x5x4x6xf32> {pp.class_axis = 3 : i64, pp.ignore_index = -100 : i64})
// LAST: onnx.Transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
func.func @main(%x: tensor<2x5x4x6xf32>) -> tensor<2x5x4x6xf32> {
  %0 = onnx.Relu %x : (tensor<2x5x4x6xf32>) -> tensor<2x5x4x6xf32>
  return %0 : tensor<2x5x4x6xf32>
}

// -----

// A model with its own loss keeps it.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {pp.loss})
// CHECK-NOT: onnx.SoftmaxCrossEntropyLoss
// CHECK: onnx.SoftmaxCrossEntropyLoss
// CHECK-NOT: onnx.SoftmaxCrossEntropyLoss
// MSE-LABEL: func.func @main
// MSE-SAME: -> (tensor<f32> {pp.loss})
func.func @main(%x: tensor<2x3xf32>, %l: tensor<2xi64>) -> tensor<f32> {
  %0:2 = onnx.SoftmaxCrossEntropyLoss %x, %l : (tensor<2x3xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  return %0#0 : tensor<f32>
}

// -----

// expected-error @+1 {{the loss needs float logits of rank >= 1, got 'tensor<4xi64>'}}
func.func @main(%x: tensor<4xi64>) -> tensor<4xi64> {
  return %x : tensor<4xi64>
}
