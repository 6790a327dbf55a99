// RUN: pipeline-opt %s --pp-training-step="optimizer=adamw lr=0.001 weight-decay=0.01" | FileCheck %s

// The named pipeline runs loss, autodiff and optimizer in one flag.
onnx.global "trainable" @w : tensor<3x4xf32>
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{[^:]*}}: tensor<8xi64> {onnx.name = "labels"}) -> (tensor<f32> {pp.loss}, tensor<8x3xf32> {pp.class_axis = 1 : i64, pp.ignore_index = -100 : i64})
// CHECK: train.softmax_cross_entropy_grad
// CHECK: train.adam {{.*}} {decoupled = true, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK: train.global_write @w,
func.func @main(%x: tensor<8x4xf32>) -> tensor<8x3xf32> {
  %w = onnx.global_read @w : tensor<3x4xf32>
  %y = onnx.Gemm %x, %w {transB = 1 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  return %y : tensor<8x3xf32>
}
