// RUN: pipeline-opt %s -split-input-file --pp-autodiff --pp-optimizer --pp-split-stages="microbatches=4" -verify-diagnostics | FileCheck %s
// RUN: pipeline-opt %s -split-input-file --pp-autodiff --pp-optimizer --pp-split-stages="microbatches=4 split-backward=true" -verify-diagnostics | FileCheck %s --check-prefix=ZB
// No sentinel: microbatches=0 is an error, not "the plan's".
// RUN: not pipeline-opt %s -split-input-file --pp-autodiff --pp-optimizer --pp-split-stages="microbatches=0" 2>&1 | FileCheck %s --check-prefix=MB0
// MB0: pp-split-stages: microbatches must be in 1..65536, got 0

// Two Gemm layers on two stages. Stage 0 sends its activation forward and
// gets the gradient back; each stage stashes what its backward reads, sums
// its weight gradients over the micro-batches and updates its own weights;
// the loss gradient is scaled by 1/4 (the step's loss is the mean over the
// micro-batches).
onnx.global "trainable" @w0 : tensor<6x4xf32>
onnx.global "trainable" @w1 : tensor<3x6xf32>
func.func @main(%x: tensor<8x4xf32> {onnx.name = "x"}, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}) {
  %w0 = onnx.global_read @w0 {pp.stage = 0 : i64} : tensor<6x4xf32>
  %h = onnx.Gemm %x, %w0 {transB = 1 : i64, pp.stage = 0 : i64} : (tensor<8x4xf32>, tensor<6x4xf32>) -> tensor<8x6xf32>
  %w1 = onnx.global_read @w1 {pp.stage = 1 : i64} : tensor<3x6xf32>
  %r = onnx.Relu %h {pp.stage = 1 : i64} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %y = onnx.Gemm %r, %w1 {transB = 1 : i64, pp.stage = 1 : i64} : (tensor<8x6xf32>, tensor<3x6xf32>) -> tensor<8x3xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %y, %labels {pp.stage = 1 : i64} : (tensor<8x3xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x3xf32>)
  return %loss : tensor<f32>
}
// CHECK: module attributes {pp.input_names = ["x", "input1"], pp.output_names = ["loss"], pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 4, num_stages = 2>}
// CHECK-LABEL: func.func @stage0_forward
// CHECK-SAME: (%[[MB:.*]]: tensor<i64> {pp.micro_batch}) attributes {pp.phase = #pp.phase<forward>, pp.stage = 0 : i64}
// CHECK: %[[X:.*]] = pp.input %[[MB]] {index = 0 : i64} : tensor<8x4xf32>
// CHECK: %[[H:.*]] = onnx.Gemm %[[X]]
// CHECK: pp.send %[[H]], %[[MB]] {peer = 1 : i64, tag = 0 : i64} : tensor<8x6xf32>
// CHECK-NOT: pp.stash
// CHECK-LABEL: func.func @stage0_backward
// CHECK: %[[G:.*]] = pp.recv %{{.*}} {peer = 1 : i64, tag = 1 : i64} : tensor<8x6xf32>
// CHECK: %[[XS:.*]] = pp.input %{{.*}} {index = 0 : i64} : tensor<8x4xf32>
// CHECK: %[[DW0:.*]] = onnx.Gemm %[[G]], %[[XS]]
// CHECK: pp.accumulate %[[DW0]] {slot = 0 : i64} : tensor<6x4xf32>
// CHECK-LABEL: func.func @stage0_update
// CHECK: train.global_write @pp.step
// CHECK: %[[SUM:.*]] = pp.accumulated {slot = 0 : i64} : tensor<6x4xf32>
// CHECK: train.sgd %{{.*}}, %[[SUM]]
// CHECK: train.global_write @w0
// CHECK-LABEL: func.func @stage1_forward
// CHECK: %[[A:.*]] = pp.recv %{{.*}} {peer = 0 : i64, tag = 0 : i64} : tensor<8x6xf32>
// CHECK: onnx.Relu %[[A]]
// CHECK: pp.input %{{.*}} {index = 1 : i64} : tensor<8xi64>
// CHECK: pp.stash %{{.*}}, %{{.*}} {slot = 0 : i64} : tensor<8x3xf32>
// CHECK: pp.output %{{.*}}, %{{.*}} {combine = "mean", index = 0 : i64} : tensor<f32>
// CHECK-LABEL: func.func @stage1_backward
// CHECK: onnx.Constant dense<2.500000e-01> : tensor<f32>
// CHECK: pp.send %{{.*}}, %{{.*}} {peer = 0 : i64, tag = 1 : i64} : tensor<8x6xf32>
// CHECK-LABEL: func.func @stage1_update
// CHECK: train.global_write @w1
// CHECK-NOT: func.func @main

// Zero bubble: stage 1's input gradient (sent to stage 0) is in
// backward_input; its weight gradient in backward_weight, which gets the
// Relu gradient through a stash.
// ZB-LABEL: func.func @stage1_backward_input
// ZB: train.softmax_cross_entropy_grad
// ZB: pp.stash
// ZB: pp.send
// ZB-NOT: pp.accumulate
// ZB-LABEL: func.func @stage1_backward_weight
// ZB: pp.unstash
// ZB: pp.accumulate

// -----

// A weight read on two stages (tied): the stage that sums its gradient
// updates it and sends the new value to the other holder.
onnx.global "trainable" @e : tensor<4x4xf32>
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {pp.loss}) {
  %e = onnx.global_read @e {pp.stage = 0 : i64} : tensor<4x4xf32>
  %h = onnx.MatMul %x, %e {pp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = onnx.Tanh %h {pp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = onnx.MatMul %t, %e {pp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %loss = onnx.ReduceSum %y {keepdims = 0 : i64, pp.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// CHECK-LABEL: func.func @stage0_update
// CHECK: %[[NEW:.*]] = train.sgd
// CHECK: train.global_write @e, %[[NEW]]
// CHECK: pp.send %[[NEW]], %{{.*}} {peer = 1 : i64
// CHECK-LABEL: func.func @stage1_update
// CHECK: %[[GOT:.*]] = pp.recv %{{.*}} {peer = 0 : i64
// CHECK: train.global_write @e, %[[GOT]]

// -----

// A forward op without a stage: the step was not partitioned first.
onnx.global "trainable" @w : tensor<3x4xf32>
func.func @main(%x: tensor<8x4xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @w : tensor<3x4xf32>
  // expected-error @+1 {{has no pp.stage: run --pp-partition before --pp-autodiff}}
  %y = onnx.Gemm %x, %w {transB = 1 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %y, %labels {pp.stage = 0 : i64} : (tensor<8x3xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x3xf32>)
  return %loss : tensor<f32>
}

// -----

// A classifier's logits (pp.class_axis and pp.ignore_index, from
// --pp-add-loss) keep their class dim and the label the loss skips on their
// pp.output: generated programs count its top-1 hits without that label.
// CHECK-LABEL: func.func @stage0_forward
// CHECK: pp.output %{{.*}}, %{{.*}} {combine = "mean", index = 0 : i64} : tensor<f32>
// CHECK: pp.output %{{.*}}, %{{.*}} {class_axis = 1 : i64, combine = "concat", ignore_index = 255 : i64, index = 1 : i64} : tensor<8x3xf32>
onnx.global "trainable" @w : tensor<3x4xf32>
func.func @main(%x: tensor<8x4xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}, tensor<8x3xf32> {pp.class_axis = 1 : i64, pp.ignore_index = 255 : i64}) {
  %w = onnx.global_read @w {pp.stage = 0 : i64} : tensor<3x4xf32>
  %y = onnx.Gemm %x, %w {transB = 1 : i64, pp.stage = 0 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %y, %labels {ignore_index = 255 : i64, pp.stage = 0 : i64} : (tensor<8x3xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x3xf32>)
  return %loss, %y : tensor<f32>, tensor<8x3xf32>
}
