// RUN: pipeline-opt %s | pipeline-opt | FileCheck %s

onnx.global "trainable" @w : tensor<4xf32>
// CHECK-LABEL: func.func @grads
func.func @grads(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>, %m: tensor<2x4xi1>, %idx: tensor<3xi64>) {
  // CHECK: train.unary_grad <Sigmoid>
  %0 = train.unary_grad <Sigmoid> %x, %x, %dy : tensor<2x4xf32>
  // CHECK: train.reduce_sum_to %{{.*}} : tensor<2x4xf32> to tensor<4xf32>
  %1 = train.reduce_sum_to %0 : tensor<2x4xf32> to tensor<4xf32>
  // CHECK: train.softmax_grad {{.*}} {axis = 1 : i64, log = true}
  %2 = train.softmax_grad %x, %dy {axis = 1 : i64, log = true} : tensor<2x4xf32>
  // CHECK: train.dropout_grad
  %3 = train.dropout_grad %dy, %m {ratio = 0.5 : f32} : tensor<2x4xf32>, tensor<2x4xi1>
  // CHECK: train.matmul %{{.*}}, %{{.*}} {trans_b} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
  %mm = train.matmul %x, %dy {trans_b} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
  // CHECK: train.slice_grad {{.*}} -> tensor<2x6xf32>
  %4 = train.slice_grad %dy {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x6xf32>
  // CHECK: train.pad_grad {{.*}} {mode = "edge", pads = array<i64: 0, 1, 0, -1>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %pg = train.pad_grad %dy {mode = "edge", pads = array<i64: 0, 1, 0, -1>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK: train.gather_grad
  %5 = train.gather_grad %x, %idx {axis = 0 : i64} : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<2x4xf32>
  %w = onnx.global_read @w : tensor<4xf32>
  // CHECK: train.global_write @w
  train.global_write @w, %1 : tensor<4xf32>
  return
}
