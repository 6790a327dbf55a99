// RUN: pipeline-opt %s -split-input-file --pp-optimizer="lr=0.1 momentum=0.9 nesterov=true weight-decay=0.01" -verify-diagnostics | FileCheck %s --check-prefix=SGD
// RUN: pipeline-opt %s -split-input-file --pp-optimizer="kind=adamw lr=0.001" -verify-diagnostics | FileCheck %s --check-prefix=ADAMW
// weight-decay-min-rank=2 (nanoGPT's groups): the vector @w is not decayed,
// the matrix @m is.
// RUN: pipeline-opt %s -split-input-file --pp-optimizer="kind=adamw lr=0.001 weight-decay=0.1 weight-decay-min-rank=2" -verify-diagnostics | FileCheck %s --check-prefix=RANK
// RUN: echo 'func.func @main(%%l: tensor<f32>) -> (tensor<f32> {pp.loss}) { return %%l : tensor<f32> }' | not pipeline-opt --pp-optimizer=weight-decay-min-rank=-1 2>&1 | FileCheck %s --check-prefix=RANK-ERR
// RANK-ERR: error: invalid optimizer option weight-decay-min-rank: expected a rank >= 0, got -1

onnx.global "trainable" @w : tensor<3xf32>
// SGD-LABEL: func.func @main
// SGD-SAME: -> (tensor<f32> {pp.loss})
// SGD: %[[STEP0:.*]] = onnx.global_read @pp.step : tensor<i64>
// SGD: %[[STEP:.*]] = onnx.Add %[[STEP0]]
// SGD: train.global_write @pp.step, %[[STEP]]
// SGD: %[[W:.*]] = onnx.global_read @w
// SGD: %[[BUF:.*]] = onnx.global_read @w.momentum
// SGD: %[[NEW:.*]], %[[NEWBUF:.*]] = train.sgd %[[W]], %arg1, %[[STEP]] momentum_buffer %[[BUF]] {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = true, weight_decay = 1.000000e-02 : f64}
// SGD: train.global_write @w.momentum, %[[NEWBUF]]
// SGD: train.global_write @w, %[[NEW]]
// SGD: return %arg0 : tensor<f32>
// SGD: onnx.global "state" @pp.step : tensor<i64> = dense<0> : tensor<i64>
// SGD: onnx.global "state" @w.momentum : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32>
// ADAMW-LABEL: func.func @main
// ADAMW: %[[M:.*]] = onnx.global_read @w.adam_m
// ADAMW: %[[V:.*]] = onnx.global_read @w.adam_v
// ADAMW: %[[P:.*]], %[[M1:.*]], %[[V1:.*]] = train.adam %{{.*}}, %arg1, %[[M]], %[[V]], %{{.*}} {decoupled = true, lr = 1.000000e-03 : f64}
// ADAMW-DAG: train.global_write @w.adam_m, %[[M1]]
// ADAMW-DAG: train.global_write @w.adam_v, %[[V1]]
// ADAMW-DAG: train.global_write @w, %[[P]]
// RANK-LABEL: func.func @main
// RANK: train.adam {{.*}} {decoupled = true, lr = 1.000000e-03 : f64} : (tensor<3xf32>
// RANK: train.adam {{.*}} {decoupled = true, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<2x3xf32>
onnx.global "trainable" @m : tensor<2x3xf32>
func.func @main(%loss: tensor<f32>, %g: tensor<3xf32>, %gm: tensor<2x3xf32>) -> (tensor<f32> {pp.loss}, tensor<3xf32> {pp.grad_of = @w}, tensor<2x3xf32> {pp.grad_of = @m}) {
  return %loss, %g, %gm : tensor<f32>, tensor<3xf32>, tensor<2x3xf32>
}

// -----

// expected-error @+1 {{no result is marked pp.grad_of: run --pp-autodiff first}}
func.func @main(%loss: tensor<f32>) -> (tensor<f32> {pp.loss}) {
  return %loss : tensor<f32>
}

