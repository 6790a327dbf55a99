// RUN: pipeline-opt %s --pp-optimizer="lr=0.1 loss-scale=dynamic loss-scale-interval=3" -verify-diagnostics | FileCheck %s --check-prefix=LS
// RUN: pipeline-opt %s --pp-optimizer="lr=0.1 loss-scale=static loss-scale-value=1024" -verify-diagnostics | FileCheck %s --check-prefix=STATIC
// RUN: not pipeline-opt %s --pp-optimizer="loss-scale=huge" 2>&1 | FileCheck %s --check-prefix=BAD-KIND
// RUN: not pipeline-opt %s --pp-optimizer="loss-scale=static loss-scale-value=0" 2>&1 | FileCheck %s --check-prefix=BAD-VALUE
// RUN: not pipeline-opt %s --pp-optimizer="loss-scale=dynamic loss-scale-interval=0" 2>&1 | FileCheck %s --check-prefix=BAD-INTERVAL

// Loss scaling: the seed is multiplied by the scale and the gradient by its
// reciprocal; the weight, the step counter and the scale change only when
// every updated weight is finite (NaN is the one value not equal to
// itself). The counter and scale updates are marked for every stage.
// LS-LABEL: func.func @main
// LS: %[[SEED:.*]] = onnx.Constant dense<1.000000e+00> : tensor<f32> {pp.loss_seed}
// LS: %[[S:.*]] = onnx.global_read @pp.loss_scale : tensor<f32>
// LS: %[[SCALED:.*]] = onnx.Mul %[[SEED]], %[[S]]
// LS: %[[G:.*]] = onnx.Mul %arg0, %[[SCALED]]
// LS: %[[INV:.*]] = onnx.Div %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// LS: %[[UNSCALED:.*]] = onnx.Mul %[[G]], %[[INV]]
// LS: %[[W:.*]] = onnx.global_read @w
// LS: %[[NEW:.*]] = train.sgd %[[W]], %[[UNSCALED]]
// LS: %[[D:.*]] = onnx.Sub %[[NEW]], %[[W]]
// LS: %[[Z:.*]] = onnx.Mul %[[D]], %{{.*}}
// LS: %[[T:.*]] = onnx.ReduceSum %[[Z]]
// LS: %[[FINITE:.*]] = onnx.Equal %[[T]], %[[T]]
// LS: %[[SEL:.*]] = onnx.Where %[[FINITE]], %[[NEW]], %[[W]]
// LS: train.global_write @w, %[[SEL]]
// LS: %[[STEP:.*]] = onnx.Where %[[FINITE]], {{.*}} {pp.every_stage}
// LS: train.global_write @pp.step, %[[STEP]]
// LS: %[[SCALE:.*]] = onnx.Where %[[FINITE]], {{.*}} {pp.every_stage}
// LS: %[[GOOD:.*]] = onnx.Where %[[FINITE]], {{.*}} {pp.every_stage}
// LS: train.global_write @pp.loss_scale, %[[SCALE]]
// LS: train.global_write @pp.loss_scale_good_steps, %[[GOOD]]
// LS: onnx.global "state" @pp.loss_scale : tensor<f32> = dense<6.553600e+04>
// STATIC-LABEL: func.func @main
// STATIC: train.global_write @pp.step
// STATIC-NOT: train.global_write @pp.loss_scale
// STATIC: onnx.global "state" @pp.loss_scale : tensor<f32> = dense<1.024000e+03>
// BAD-KIND: pipeline-opt: for the --loss-scale option: unknown value 'huge': expected 'none', 'static' or 'dynamic'
// BAD-VALUE: error: invalid optimizer option loss-scale-value
// BAD-INTERVAL: error: invalid optimizer option loss-scale-interval=0 (must be >= 1)
onnx.global "trainable" @w : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @main(%x: tensor<3xf32>) -> (tensor<f32> {pp.loss}, tensor<3xf32> {pp.grad_of = @w}) {
  %loss = onnx.ReduceSum %x {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
  %seed = onnx.Constant dense<1.0> : tensor<f32> {pp.loss_seed}
  %g = onnx.Mul %x, %seed : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %loss, %g : tensor<f32>, tensor<3xf32>
}
