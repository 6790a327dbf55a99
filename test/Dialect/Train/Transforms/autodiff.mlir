// RUN: pipeline-opt %s -split-input-file --pp-autodiff -verify-diagnostics | FileCheck %s
// RUN: pipeline-opt %s -split-input-file --pp-autodiff --mlir-print-debuginfo -verify-diagnostics | FileCheck %s --check-prefix=LOC

// Gemm + Relu + loss: every backward op, and the input gradient of the first
// layer is not computed (nothing needs it).
onnx.global "trainable" @w : tensor<3x4xf32>
onnx.global "trainable" @b : tensor<3xf32>
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {pp.loss}, tensor<3x4xf32> {pp.grad_of = @w}, tensor<3xf32> {pp.grad_of = @b})
func.func @main(%x: tensor<8x4xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @w : tensor<3x4xf32>
  %b = onnx.global_read @b : tensor<3xf32>
  %y = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %r = onnx.Relu %y : (tensor<8x3xf32>) -> tensor<8x3xf32> loc("relu")
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %r, %labels : (tensor<8x3xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x3xf32>)
  // CHECK: %[[Y:.*]] = onnx.Gemm
  // CHECK: %[[R:.*]] = onnx.Relu %[[Y]]
  // CHECK: %[[LOSS:.*]], %[[LOGP:.*]] = onnx.SoftmaxCrossEntropyLoss
  // CHECK: %[[ONE:.*]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
  // CHECK: %[[DR:.*]] = train.softmax_cross_entropy_grad %[[ONE]], %[[LOGP]], %{{.*}} {reduction = "mean"}
  // Relu's gradient reads the sign of its output (that of its input), so
  // the backward keeps one tensor: the output, in both places.
  // CHECK: %[[DY:.*]] = train.unary_grad <Relu> %[[R]], %[[R]], %[[DR]] : tensor<8x3xf32>
  // CHECK-NOT: onnx.Gemm %[[DY]], %{{.*}} {beta = 0.000000e+00 : f32} : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  // CHECK: %[[DW:.*]] = onnx.Gemm %[[DY]], %{{.*}} {beta = 0.000000e+00 : f32, transA = 1 : i64} : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  // CHECK: %[[DB:.*]] = train.reduce_sum_to %[[DY]] : tensor<8x3xf32> to tensor<3xf32>
  // CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
  // LOC: train.unary_grad {{.*}} loc(#[[RELU_BWD:.*]])
  // LOC: #[[RELU:[a-z0-9]*]] = loc("relu")
  // LOC: #[[RELU_BWD]] = loc(fused<"backward">[#[[RELU]]])
  return %loss : tensor<f32>
}

// -----

// Tied weight read twice and a value with two uses: adjoints are summed.
onnx.global "trainable" @e : tensor<4x4xf32>
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {pp.loss}) {
  %e1 = onnx.global_read @e : tensor<4x4xf32>
  %e2 = onnx.global_read @e : tensor<4x4xf32>
  %h = onnx.MatMul %x, %e1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %sq = onnx.Mul %h, %h : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %o = onnx.MatMul %sq, %e2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %loss = onnx.ReduceMean %o {keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  // CHECK: onnx.ReduceMean
  // CHECK: %[[DSQ_A:.*]] = onnx.Mul %{{.*}}, %[[H:.*]] :
  // CHECK: %[[DSQ_B:.*]] = onnx.Mul %{{.*}}, %[[H]] :
  // CHECK: %[[DH:.*]] = onnx.Add %[[DSQ_A]], %[[DSQ_B]]
  // CHECK: %[[DE1:.*]] = onnx.MatMul %{{.*}}, %[[DH]]
  // CHECK: %[[DE:.*]] = onnx.Add %[[DE1]], %{{.*}}
  // CHECK: return %{{.*}}, %[[DE]] : tensor<f32>, tensor<4x4xf32>
  return %loss : tensor<f32>
}

// -----

// A weight against activations with batch dims (a Linear on [b, l, k]):
// the batch dims fold into the rows of two GEMMs, so dW is one GEMM (its
// sum over the rows is the GEMM's own) and no per-batch K x N products
// are summed afterwards.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32>
// CHECK: %[[V:.*]] = onnx.global_read @v
// CHECK: %[[H:.*]] = onnx.MatMul %[[X]], %{{.*}} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
// CHECK: onnx.MatMul %[[H]], %[[V]] : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[DY:.*]] = onnx.Reshape %{{.*}}, %{{.*}} : (tensor<2x3x5xf32>, tensor<2xi64>) -> tensor<6x5xf32>
// CHECK: %[[HR:.*]] = onnx.Reshape %[[H]], %{{.*}} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
// CHECK: %[[DH:.*]] = onnx.Gemm %[[DY]], %[[V]] {{{.*}}transB = 1 : i64} : (tensor<6x5xf32>, tensor<4x5xf32>) -> tensor<6x4xf32>
// CHECK: onnx.Reshape %[[DH]], %{{.*}} : (tensor<6x4xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[DV:.*]] = onnx.Gemm %[[HR]], %[[DY]] {{{.*}}transA = 1 : i64{{.*}}} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NOT: train.reduce_sum_to
// CHECK: return %{{.*}}, %{{.*}}, %[[DV]]
onnx.global "trainable" @w : tensor<4x4xf32>
onnx.global "trainable" @v : tensor<4x5xf32>
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @w : tensor<4x4xf32>
  %v = onnx.global_read @v : tensor<4x5xf32>
  %h = onnx.MatMul %x, %w : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %y = onnx.MatMul %h, %v : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %loss = onnx.ReduceMean %y {keepdims = 0 : i64} : (tensor<2x3x5xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Training BatchNorm: batch_norm_grad, and running statistics written back.
onnx.global "trainable" @s : tensor<2xf32>
onnx.global "trainable" @bias : tensor<2xf32>
onnx.global "state" @mean : tensor<2xf32>
onnx.global "state" @var : tensor<2xf32>
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<4x2x3x3xf32>) -> (tensor<f32> {pp.loss}) {
  %s = onnx.global_read @s : tensor<2xf32>
  %b = onnx.global_read @bias : tensor<2xf32>
  %m = onnx.global_read @mean : tensor<2xf32>
  %v = onnx.global_read @var : tensor<2xf32>
  %y:3 = onnx.BatchNormalization %x, %s, %b, %m, %v {training_mode = 1 : i64} : (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>)
  %loss = onnx.ReduceMean %y#0 {keepdims = 0 : i64} : (tensor<4x2x3x3xf32>) -> tensor<f32>
  // CHECK: %{{.*}}, %[[RM:.*]], %[[RV:.*]] = onnx.BatchNormalization
  // CHECK: train.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32}
  // CHECK-DAG: train.global_write @mean, %[[RM]]
  // CHECK-DAG: train.global_write @var, %[[RV]]
  return %loss : tensor<f32>
}

// -----

onnx.global "trainable" @w : tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @w : tensor<4xf32>
  %a = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{no gradient rule for 'onnx.Floor', which lies between a parameter and the loss}}
  %f = onnx.Floor %a : (tensor<4xf32>) -> tensor<4xf32>
  %loss = onnx.ReduceSum %f {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{no result is marked pp.loss: run --pp-add-loss first}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A training step that already has gradients is not differentiated again
// (that would add every gradient twice).
onnx.global "trainable" @w2 : tensor<3x4xf32>
// expected-error @+1 {{@main is already differentiated (it returns gradients): run --pp-autodiff once}}
func.func @main(%x: tensor<8x4xf32>) -> (tensor<f32> {pp.loss}, tensor<3x4xf32> {pp.grad_of = @w2}) {
  %w = onnx.global_read @w2 : tensor<3x4xf32>
  %l = onnx.ReduceSum %w {keepdims = 0 : i64} : (tensor<3x4xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<3x4xf32>
}

// -----

// Dropouts without a stream get the next free ones, in order, so their
// masks are fixed before split-stages spreads them over stages.
onnx.global "trainable" @wd : tensor<2x4xf32>
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @wd : tensor<2x4xf32>
  %h = onnx.Mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = onnx.Constant dense<0.5> : tensor<f32>
  %t = onnx.Constant dense<true> : tensor<i1>
  // CHECK: onnx.Dropout {{.*}} {stream = 6 : i64}
  // CHECK: onnx.Dropout {{.*}} {stream = 5 : i64}
  // CHECK: onnx.Dropout {{.*}} {seed = 3 : i64, stream = 7 : i64}
  %a, %ma = onnx.Dropout %h ratio %r training_mode %t : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %b, %mb = onnx.Dropout %a ratio %r training_mode %t {stream = 5 : i64} : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %c, %mc = onnx.Dropout %b ratio %r training_mode %t {seed = 3 : i64} : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %loss = onnx.ReduceSum %c {keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Ratio 0 and inference mode keep every element unscaled: their gradient
// is dy itself; ratio 0.5 in training mode masks and scales it.
onnx.global "trainable" @wz : tensor<2x4xf32>
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @wz : tensor<2x4xf32>
  %h = onnx.Mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %zero = onnx.Constant dense<0.0> : tensor<f32>
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %on = onnx.Constant dense<true> : tensor<i1>
  %off = onnx.Constant dense<false> : tensor<i1>
  %a, %ma = onnx.Dropout %h ratio %zero training_mode %on : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %b, %mb = onnx.Dropout %a ratio %half training_mode %off : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  // CHECK: %{{.*}}, %[[MASK:.*]] = onnx.Dropout {{.*}} {stream = 2 : i64}
  %c, %mc = onnx.Dropout %b ratio %half training_mode %on : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  %loss = onnx.ReduceSum %c {keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  // CHECK: %[[DC:.*]] = train.dropout_grad %{{.*}}, %[[MASK]] {ratio = 5.000000e-01 : f32}
  // CHECK-NOT: train.dropout_grad
  // CHECK: onnx.Mul %[[DC]], %{{.*}}
  return %loss : tensor<f32>
}

// -----

// Tensor parallelism: the per-device program of --pp-tensor-parallel. The
// gradient of a sum over the group (shard.all_reduce) passes through, a
// weight slice's gradient is gathered, and the parts of a whole value's
// gradient that split ops give (operands marked train.grad_all_reduce) are
// added and summed over the group once, before the whole use's gradient
// (the residual) joins them.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {pp.loss}, tensor<4xf32> {pp.grad_of = @e}, tensor<4x8xf32> {pp.grad_of = @u}, tensor<4x8xf32> {pp.grad_of = @v}, tensor<8x4xf32> {pp.grad_of = @d})
// CHECK: shard.all_reduce
// CHECK: %[[DR:.*]] = train.softmax_cross_entropy_grad
// CHECK: %[[DAB:.*]] = onnx.MatMul %[[DR]], %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[DD:.*]] = shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[DV:.*]] = shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: %[[PARTS:.*]] = onnx.Add %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[DU:.*]] = shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: %[[WHOLE:.*]] = shard.all_reduce %[[PARTS]] on @tp grid_axes = [0] : tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK: %[[DH:.*]] = onnx.Add %[[DR]], %[[WHOLE]]
// CHECK: %[[DE:.*]] = train.reduce_sum_to %[[DH]] : tensor<2x4xf32> to tensor<4xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return %{{.*}}, %[[DE]], %[[DU]], %[[DV]], %[[DD]]
shard.grid @tp(shape = 2)
onnx.global "trainable" @e : tensor<4xf32>
onnx.global "trainable" @u : tensor<4x8xf32>
onnx.global "trainable" @v : tensor<4x8xf32>
onnx.global "trainable" @d : tensor<8x4xf32>
func.func @main(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {pp.loss}) {
  %e = onnx.global_read @e : tensor<4xf32>
  %h = onnx.Add %x, %e : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %u = onnx.global_read @u : tensor<4x8xf32>
  %us = shard.all_slice %u on @tp grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %a = onnx.MatMul %h, %us {train.grad_all_reduce = {axes = array<i16: 0>, grid = @tp, operands = array<i64: 0>}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %v = onnx.global_read @v : tensor<4x8xf32>
  %vs = shard.all_slice %v on @tp grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %b = onnx.MatMul %h, %vs {train.grad_all_reduce = {axes = array<i16: 0>, grid = @tp, operands = array<i64: 0>}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %ab = onnx.Mul %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %d = onnx.global_read @d : tensor<8x4xf32>
  %ds = shard.all_slice %d on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %p = onnx.MatMul %ab, %ds : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x4xf32> -> tensor<2x4xf32>
  %r = onnx.Add %s, %h : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %r, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

// Staged (a stage-wise mix: stage 0 whole, stage 1 split): the parts of
// the gradient of stage 0's %h are summed over the group on stage 1, where
// the split op that made them runs, and stage 0 gets the whole gradient.
// CHECK-LABEL: func.func @main
// CHECK: shard.all_reduce %{{.*}} on @tp grid_axes = [0] {pp.stage = 1 : i64}
// CHECK: train.softmax_cross_entropy_grad
// CHECK: %[[WHOLE:.*]] = shard.all_reduce %{{.*}} on @tp grid_axes = [0] {pp.stage = 1 : i64}
// CHECK: onnx.Mul %[[WHOLE]], %{{.*}} {pp.stage = 0 : i64}
shard.grid @tp(shape = 2)
onnx.global "trainable" @e : tensor<2x4xf32>
onnx.global "trainable" @u : tensor<4x8xf32>
onnx.global "trainable" @d : tensor<8x4xf32>
func.func @main(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {pp.loss}) {
  %e = onnx.global_read @e {pp.stage = 0 : i64} : tensor<2x4xf32>
  %h = onnx.Mul %x, %e {pp.stage = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %u = onnx.global_read @u {pp.stage = 1 : i64} : tensor<4x8xf32>
  %us = shard.all_slice %u on @tp grid_axes = [0] slice_axis = 1 {pp.stage = 1 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  %a = onnx.MatMul %h, %us {pp.stage = 1 : i64, train.grad_all_reduce = {axes = array<i16: 0>, grid = @tp, operands = array<i64: 0>}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %d = onnx.global_read @d {pp.stage = 1 : i64} : tensor<8x4xf32>
  %ds = shard.all_slice %d on @tp grid_axes = [0] slice_axis = 0 {pp.stage = 1 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
  %p = onnx.MatMul %a, %ds {pp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = shard.all_reduce %p on @tp grid_axes = [0] {pp.stage = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %s, %labels {pp.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

shard.grid @tp(shape = 2)
onnx.global "trainable" @w : tensor<2x4xf32>
func.func @main(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @w : tensor<2x4xf32>
  %h = onnx.Mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{no gradient rule for a shard.all_reduce of max (only sum)}}
  %m = shard.all_reduce %h on @tp grid_axes = [0] reduction = max : tensor<2x4xf32> -> tensor<2x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %m, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
}

// -----

// Max as torch.maximum: each operand's gradient where it was picked, half
// on a tie; the broadcast operand's summed back to its shape. ReduceMax as
// torch.amax: split evenly among the elements equal to the max.
onnx.global "trainable" @w : tensor<2x4xf32>
onnx.global "trainable" @v : tensor<4xf32>
// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {pp.loss}) {
  %w = onnx.global_read @w : tensor<2x4xf32>
  %v = onnx.global_read @v : tensor<4xf32>
  %h = onnx.Mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = onnx.Max %h, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %r = onnx.ReduceMax %m {axes = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %s = onnx.Mul %m, %r : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %s, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss : tensor<f32>
  // CHECK: %[[HIT:.*]] = onnx.Equal %[[M:.*]], %{{.*}} : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xi1>
  // CHECK: %[[MASK:.*]] = onnx.Where %[[HIT]], %{{.*}}, %{{.*}} : (tensor<2x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x4xf32>
  // CHECK: %[[COUNT:.*]] = onnx.ReduceSum %[[MASK]], %{{.*}} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  // CHECK: %[[SHARE:.*]] = onnx.Div %{{.*}}, %[[COUNT]] : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  // CHECK: onnx.Mul %[[MASK]], %[[SHARE]]
  // CHECK: %[[AWINS:.*]] = onnx.Greater %[[H:.*]], %[[V:.*]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK: %[[BWINS:.*]] = onnx.Less %[[H]], %[[V]]
  // CHECK: %[[TIE:.*]] = onnx.Equal %[[H]], %[[V]]
  // CHECK: %[[HALF:.*]] = onnx.Where %[[TIE]]
  // CHECK: %[[DH:.*]] = onnx.Where %[[AWINS]], %{{.*}}, %[[HALF]]
  // CHECK: %[[DV:.*]] = onnx.Where %[[BWINS]], %{{.*}}, %[[HALF]]
  // CHECK: train.reduce_sum_to %[[DV]] : tensor<2x4xf32> to tensor<4xf32>
}
