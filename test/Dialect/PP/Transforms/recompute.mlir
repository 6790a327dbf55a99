// RUN: split-file %s %t
// RUN: pipeline-opt %t/policies.mlir -split-input-file --pp-autodiff --pp-optimizer --pp-recompute | FileCheck %s --check-prefix=NONE
// RUN: pipeline-opt %t/policies.mlir -split-input-file --pp-autodiff --pp-optimizer --pp-recompute="policy=full report=-" | FileCheck %s --check-prefix=FULL
// RUN: pipeline-opt %t/policies.mlir -split-input-file --pp-autodiff --pp-optimizer --pp-recompute="policy=selective" | FileCheck %s --check-prefix=SEL
// RUN: pipeline-opt %t/policies.mlir -split-input-file --pp-autodiff --pp-optimizer --pp-recompute="policy=auto cluster=2xH100 report=-" | FileCheck %s --check-prefix=FIT
// RUN: pipeline-opt %t/policies.mlir -split-input-file --pp-autodiff --pp-optimizer --pp-recompute="policy=auto cluster=2xH100 activation-budget=1000 report=-" | FileCheck %s --check-prefix=TIGHT
// RUN: pipeline-opt %t/errors.mlir -split-input-file --pp-recompute="policy=auto cluster=2xH100 activation-budget=16" -verify-diagnostics
// RUN: not pipeline-opt %t/policies.mlir -split-input-file --pp-autodiff --pp-optimizer --pp-recompute="microbatches=0" 2>&1 | FileCheck %s --check-prefix=MB0
// MB0: pp-recompute: microbatches must be in 1..65536, got 0

// End to end on two test models: the recomputed steps split into stage
// programs and get a schedule; the clones land in the backward functions.
// With no cluster= of its own, --pp-recompute reads the cluster that
// --pp-partition put on the module (#pp.cluster): its devices and times.
// RUN: pipeline-opt %models/transformer.onnx --batch-size=2 --pp-add-loss --pp-partition=cluster=2xH100 --pp-autodiff --pp-optimizer --pp-recompute="policy=full report=-" --pp-split-stages="microbatches=2" --pp-schedule --mlir-elide-resource-strings-if-larger=1 | FileCheck %s --check-prefix=MODELS
// RUN: pipeline-opt %models/resnet18.onnx --batch-size=2 --pp-add-loss --pp-partition=cluster=2xH100 --pp-autodiff --pp-optimizer --pp-recompute="policy=full report=-" --pp-split-stages="microbatches=2 split-backward=true" --pp-schedule="kind=zb-h1" --mlir-elide-resource-strings-if-larger=1 | FileCheck %s --check-prefix=MODELS
// MODELS: == recompute: policy
// MODELS-NEXT: stage 0 (node0/gpu0): kept per micro-batch {{.*}}; added forward {{[0-9.]+}} us
// MODELS-NEXT: stage 1 (node0/gpu1): kept per micro-batch {{.*}}; added forward {{[0-9.]+}} us
// MODELS: func.func @stage0_forward
// MODELS-NOT: pp.recompute
// MODELS: func.func @stage0_backward
// MODELS: pp.recompute
// MODELS: pp.schedule

// The training steps are built by --pp-autodiff and --pp-optimizer from the
// staged forwards of policies.mlir; errors.mlir holds hand-written steps.

// NONE: pp.loss_seed
// NONE-NOT: pp.recompute

// Under a large budget nothing is recomputed.
// FIT: == recompute: policy auto, schedule 1f1b, 8 micro-batches, 2 stages ==
// FIT-NEXT: stage 0 (node0/gpu0): kept per micro-batch 512 B {{.*}} -> 512 B {{.*}}; 0 ops recomputed
// FIT-NEXT: stage 1 (node0/gpu1): kept per micro-batch 768 B {{.*}} -> 768 B {{.*}}; 0 ops recomputed
// FIT-NOT: pp.recompute

//--- policies.mlir

// Two stages. Stage 0 keeps %r (Relu's backward reads the sign of its
// output, not %h), stage 1 keeps %r (for its weight gradient), %t (Tanh's
// backward reads its output, not %o) and the log-probabilities.
onnx.global "trainable" @w1 : tensor<16x16xf32>
onnx.global "trainable" @w2 : tensor<16x4xf32>
func.func @main(%x: tensor<8x16xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}) {
  %w1 = onnx.global_read @w1 {pp.stage = 0 : i64} : tensor<16x16xf32>
  %h = onnx.MatMul %x, %w1 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %r = onnx.Relu %h {pp.stage = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %w2 = onnx.global_read @w2 {pp.stage = 1 : i64} : tensor<16x4xf32>
  %o = onnx.MatMul %r, %w2 {pp.stage = 1 : i64} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %t = onnx.Tanh %o {pp.stage = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %t, %labels {pp.stage = 1 : i64} : (tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x4xf32>)
  return %loss : tensor<f32>
}

// Full: every stage keeps only its inputs. Stage 1 recomputes from %r (made
// by stage 0), stage 0 from the step input; each clone comes just before
// the first backward op of its stage that reads it. The forward is intact.
// FULL: == recompute: policy full, schedule 1f1b, 8 micro-batches, 2 stages ==
// FULL-NEXT: stage 0: kept per micro-batch 512 B {{.*}} -> 0 B {{.*}}; 2 ops recomputed
// FULL-NEXT: stage 1: kept per micro-batch 768 B {{.*}} -> 512 B {{.*}}; 3 ops recomputed
// FULL-LABEL: func.func @main
// FULL: %[[H:.*]] = onnx.MatMul %arg0, %{{.*}} {pp.stage = 0 : i64}
// FULL-NEXT: %[[R:.*]] = onnx.Relu %[[H]] {pp.stage = 0 : i64}
// FULL: %[[O:.*]] = onnx.MatMul %[[R]], %[[W2:.*]] {pp.stage = 1 : i64}
// FULL-NEXT: %[[T:.*]] = onnx.Tanh %[[O]] {pp.stage = 1 : i64}
// FULL-NEXT: %[[LOSS:.*]], %{{.*}} = onnx.SoftmaxCrossEntropyLoss %[[T]], %arg1 {pp.stage = 1 : i64}
// FULL-NEXT: %[[SEED:.*]] = onnx.Constant {{.*}} {pp.loss_seed}
// FULL-NEXT: %[[O2:.*]] = onnx.MatMul %[[R]], %[[W2]] {pp.recompute, pp.stage = 1 : i64}
// FULL-NEXT: %[[T2:.*]] = onnx.Tanh %[[O2]] {pp.recompute, pp.stage = 1 : i64}
// FULL-NEXT: %{{.*}}, %[[LOGP2:.*]] = onnx.SoftmaxCrossEntropyLoss %[[T2]], %arg1 {pp.recompute, pp.stage = 1 : i64}
// FULL-NEXT: %[[DT:.*]] = train.softmax_cross_entropy_grad %[[SEED]], %[[LOGP2]], %arg1
// FULL-NEXT: %[[DO:.*]] = train.unary_grad <Tanh> %[[T2]], %[[T2]], %[[DT]]
// FULL: onnx.Transpose %[[R]] {{.*}}pp.stage = 1 : i64
// FULL: %[[H2:.*]] = onnx.MatMul %arg0, %{{.*}} {pp.recompute, pp.stage = 0 : i64}
// FULL-NEXT: %[[R2:.*]] = onnx.Relu %[[H2]] {pp.recompute, pp.stage = 0 : i64}
// FULL-NEXT: train.unary_grad <Relu> %[[R2]], %[[R2]], %{{.*}} {pp.stage = 0 : i64}
// FULL: return %[[LOSS]]

// Selective recomputes memory-bound ops whose outputs are not kept anyway:
// here none, since the backwards of Relu and Tanh read their outputs.
// SEL-LABEL: func.func @main
// SEL: %[[R:.*]] = onnx.Relu
// SEL: %[[T:.*]] = onnx.Tanh
// SEL-NOT: pp.recompute
// SEL: train.unary_grad <Tanh> %[[T]], %[[T]]
// SEL-NOT: pp.recompute
// SEL: train.unary_grad <Relu> %[[R]], %[[R]]
// SEL-NOT: pp.recompute
// SEL: return

// A budget of 1000 bytes: stage 0 (2 micro-batches in flight under 1F1B)
// must drop its activations; stage 1 (one in flight) fits as it is.
// TIGHT: == recompute: policy auto, schedule 1f1b, 8 micro-batches, 2 stages ==
// TIGHT-NEXT: stage 0 (node0/gpu0): kept per micro-batch 512 B {{.*}} -> 0 B {{.*}}; 2 ops recomputed; added forward {{.*}} us; 2 in flight x kept 0 B vs budget 1000 B
// TIGHT-NEXT: stage 1 (node0/gpu1): kept per micro-batch 768 B {{.*}} -> 768 B {{.*}}; 0 ops recomputed; added forward 0.000 us; 1 in flight x kept 768 B vs budget 1000 B
// TIGHT-LABEL: func.func @main
// TIGHT: pp.loss_seed
// TIGHT-NOT: pp.recompute, pp.stage = 1
// TIGHT: %[[H2:.*]] = onnx.MatMul %arg0, %{{.*}} {pp.recompute, pp.stage = 0 : i64}
// TIGHT-NEXT: %[[R2:.*]] = onnx.Relu %[[H2]] {pp.recompute, pp.stage = 0 : i64}
// TIGHT-NEXT: train.unary_grad <Relu> %[[R2]], %[[R2]]
// TIGHT: return

// -----

// Dropout is never recomputed: its output and mask stay kept, and the
// recomputed Gelu reads the forward Dropout's output.
onnx.global "trainable" @w1 : tensor<16x16xf32>
onnx.global "trainable" @w2 : tensor<16x4xf32>
func.func @main(%x: tensor<8x16xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}) {
  %w1 = onnx.global_read @w1 {pp.stage = 0 : i64} : tensor<16x16xf32>
  %h = onnx.MatMul %x, %w1 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %ratio = onnx.Constant dense<5.000000e-01> : tensor<f32>
  %train = onnx.Constant dense<true> : tensor<i1>
  %d, %mask = onnx.Dropout %h ratio %ratio training_mode %train {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<f32>, tensor<i1>) -> (tensor<8x16xf32>, tensor<8x16xi1>)
  %g = onnx.Gelu %d {pp.stage = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %w2 = onnx.global_read @w2 {pp.stage = 0 : i64} : tensor<16x4xf32>
  %o = onnx.MatMul %g, %w2 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %o, %labels {pp.stage = 0 : i64} : (tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x4xf32>)
  return %loss : tensor<f32>
}
// FULL: stage 0: kept per micro-batch 1280 B {{.*}} -> 640 B {{.*}}; 3 ops recomputed
// FULL-LABEL: func.func @main
// FULL: %[[D:.*]], %[[MASK:.*]] = onnx.Dropout
// FULL: pp.loss_seed
// FULL-NOT: onnx.Dropout
// FULL: %[[G2:.*]] = onnx.Gelu %[[D]] {pp.recompute, pp.stage = 0 : i64}
// FULL-NEXT: onnx.MatMul %[[G2]], %{{.*}} {pp.recompute, pp.stage = 0 : i64}
// FULL-NOT: onnx.Dropout
// FULL: train.unary_grad <GeluErf> %[[D]], %[[D]]
// FULL-NEXT: train.dropout_grad %{{.*}}, %[[MASK]]
// FULL-NOT: onnx.Dropout
// FULL: return

// SEL-LABEL: func.func @main
// SEL: %[[D:.*]], %{{.*}} = onnx.Dropout
// SEL-NOT: onnx.Dropout
// SEL: onnx.Gelu %[[D]] {pp.recompute, pp.stage = 0 : i64}
// SEL-NOT: onnx.Dropout
// SEL: return

// TIGHT: stage 0 (node0/gpu0): kept per micro-batch 1280 B {{.*}} -> 768 B {{.*}}; 1 ops recomputed; added forward {{.*}} us; 1 in flight x kept 768 B vs budget 1000 B
// TIGHT-LABEL: func.func @main
// TIGHT: %[[D:.*]], %{{.*}} = onnx.Dropout
// TIGHT-NOT: onnx.Dropout
// TIGHT: onnx.Gelu %[[D]] {pp.recompute, pp.stage = 0 : i64}
// TIGHT-NOT: onnx.Dropout
// TIGHT: return

// -----

// Selective on an attention-like chain: both Reshapes, Softmax and the
// scaling by a scalar are recomputed from Tanh's output (which Tanh's
// backward keeps anyway); the MatMuls are not.
onnx.global "trainable" @w1 : tensor<16x16xf32>
onnx.global "trainable" @w2 : tensor<16x4xf32>
func.func @main(%x: tensor<8x16xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}) {
  %w1 = onnx.global_read @w1 {pp.stage = 0 : i64} : tensor<16x16xf32>
  %m = onnx.MatMul %x, %w1 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %s = onnx.Tanh %m {pp.stage = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %shape3 = onnx.Constant dense<[8, 4, 4]> : tensor<3xi64>
  %re = onnx.Reshape %s, %shape3 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<3xi64>) -> tensor<8x4x4xf32>
  %sm = onnx.Softmax %re {axis = -1 : i64, pp.stage = 0 : i64} : (tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  %shape2 = onnx.Constant dense<[8, 16]> : tensor<2xi64>
  %fl = onnx.Reshape %sm, %shape2 {pp.stage = 0 : i64} : (tensor<8x4x4xf32>, tensor<2xi64>) -> tensor<8x16xf32>
  %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
  %sc = onnx.Mul %fl, %half {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %w2 = onnx.global_read @w2 {pp.stage = 0 : i64} : tensor<16x4xf32>
  %o = onnx.MatMul %sc, %w2 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %loss, %logp = onnx.SoftmaxCrossEntropyLoss %o, %labels {pp.stage = 0 : i64} : (tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x4xf32>)
  return %loss : tensor<f32>
}
// SEL-LABEL: func.func @main
// SEL: %[[M:.*]] = onnx.MatMul %arg0
// SEL-NEXT: %[[S:.*]] = onnx.Tanh %[[M]] {pp.stage = 0 : i64}
// SEL: pp.loss_seed
// SEL-NOT: onnx.MatMul {{.*}}pp.recompute
// SEL-NOT: onnx.Tanh {{.*}}pp.recompute
// SEL: %[[RE2:.*]] = onnx.Reshape %[[S]], %{{.*}} {pp.recompute, pp.stage = 0 : i64}
// SEL-NEXT: %[[SM2:.*]] = onnx.Softmax %[[RE2]] {pp.recompute, pp.stage = 0 : i64}
// SEL-NEXT: %[[FL2:.*]] = onnx.Reshape %[[SM2]], %{{.*}} {pp.recompute, pp.stage = 0 : i64}
// SEL-NEXT: %[[SC2:.*]] = onnx.Mul %[[FL2]], %{{.*}} {pp.recompute, pp.stage = 0 : i64}
// SEL-NEXT: onnx.Transpose %[[SC2]]
// SEL-NOT: onnx.MatMul {{.*}}pp.recompute
// SEL: train.softmax_grad %[[SM2]]
// SEL: train.unary_grad <Tanh> %[[S]], %[[S]]
// SEL: return

// -----

// Training-mode BatchNorm can be recomputed (same batch statistics); the
// running statistics written back are still the forward's.
onnx.global "trainable" @s : tensor<2xf32>
onnx.global "trainable" @bias : tensor<2xf32>
onnx.global "state" @mean : tensor<2xf32>
onnx.global "state" @var : tensor<2xf32>
func.func @main(%x: tensor<4x2x3x3xf32>) -> (tensor<f32> {pp.loss}) {
  %s = onnx.global_read @s {pp.stage = 0 : i64} : tensor<2xf32>
  %b = onnx.global_read @bias {pp.stage = 0 : i64} : tensor<2xf32>
  %m = onnx.global_read @mean {pp.stage = 0 : i64} : tensor<2xf32>
  %v = onnx.global_read @var {pp.stage = 0 : i64} : tensor<2xf32>
  %y:3 = onnx.BatchNormalization %x, %s, %b, %m, %v {training_mode = 1 : i64, pp.stage = 0 : i64} : (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>)
  %r = onnx.Relu %y#0 {pp.stage = 0 : i64} : (tensor<4x2x3x3xf32>) -> tensor<4x2x3x3xf32>
  %sq = onnx.Mul %r, %r {pp.stage = 0 : i64} : (tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>) -> tensor<4x2x3x3xf32>
  %loss = onnx.ReduceMean %sq {keepdims = 0 : i64, pp.stage = 0 : i64} : (tensor<4x2x3x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// FULL-LABEL: func.func @main
// FULL: %[[Y:.*]], %[[RM:.*]], %[[RV:.*]] = onnx.BatchNormalization %arg0, {{.*}} {pp.stage = 0 : i64, training_mode = 1 : i64}
// FULL: pp.loss_seed
// FULL: %[[Y2:.*]], %{{.*}}, %{{.*}} = onnx.BatchNormalization %arg0, {{.*}} {pp.recompute, pp.stage = 0 : i64, training_mode = 1 : i64}
// FULL-NEXT: %[[R2:.*]] = onnx.Relu %[[Y2]] {pp.recompute, pp.stage = 0 : i64}
// FULL-NEXT: onnx.Mul %{{.*}}, %[[R2]]
// FULL: train.unary_grad <Relu> %[[R2]], %[[R2]]
// FULL: train.global_write @mean, %[[RM]]
// FULL: train.global_write @var, %[[RV]]

// Selective: Relu's output is kept for its backward, so nothing is
// recomputed (BatchNorm's output is not kept).
// SEL-LABEL: func.func @main
// SEL: %[[Y:.*]], %{{.*}}, %{{.*}} = onnx.BatchNormalization
// SEL-NEXT: %[[R:.*]] = onnx.Relu %[[Y]] {pp.stage = 0 : i64}
// SEL: pp.loss_seed
// SEL-NOT: pp.recompute
// SEL: train.unary_grad <Relu> %[[R]], %[[R]]

//--- errors.mlir

// expected-error @+1 {{no loss gradient seed (pp.loss_seed): run --pp-partition, --pp-autodiff and --pp-optimizer before --pp-recompute}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = onnx.Relu %x {pp.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Stage 1 (on node0/gpu0 by the plan, GPipe: 4 micro-batches in
// flight) keeps %r, made by stage 0, even under full recomputation.
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 4, num_stages = 2, stage_devices = ["node0/gpu1", "node0/gpu0"]>} {
  onnx.global "trainable" @w1 : tensor<16x16xf32>
  onnx.global "trainable" @w2 : tensor<16x4xf32>
  // expected-error @+1 {{pp-recompute: stage 1 on node0/gpu0 does not fit even with full recomputation: 4 micro-batches in flight x 512 kept bytes = 2048 bytes for an activation budget of 16 bytes, 2032 bytes short}}
  func.func @main(%x: tensor<8x16xf32>, %labels: tensor<8xi64>) -> (tensor<f32> {pp.loss}, tensor<16x16xf32>, tensor<16x4xf32>) {
    %w1 = onnx.global_read @w1 {pp.stage = 0 : i64} : tensor<16x16xf32>
    %h = onnx.MatMul %x, %w1 {pp.stage = 0 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %r = onnx.Relu %h {pp.stage = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %w2 = onnx.global_read @w2 {pp.stage = 1 : i64} : tensor<16x4xf32>
    %o = onnx.MatMul %r, %w2 {pp.stage = 1 : i64} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %loss, %logp = onnx.SoftmaxCrossEntropyLoss %o, %labels {pp.stage = 1 : i64} : (tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x4xf32>)
    %seed = onnx.Constant dense<1.000000e+00> : tensor<f32> {pp.loss_seed}
    %do = train.softmax_cross_entropy_grad %seed, %logp, %labels {pp.stage = 1 : i64, reduction = "mean"} : (tensor<f32>, tensor<8x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
    %w2t = onnx.Transpose %w2 {perm = array<i64: 1, 0>, pp.stage = 1 : i64} : (tensor<16x4xf32>) -> tensor<4x16xf32>
    %dr = onnx.MatMul %do, %w2t {pp.stage = 1 : i64} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    %rt = onnx.Transpose %r {perm = array<i64: 1, 0>, pp.stage = 1 : i64} : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %dw2 = onnx.MatMul %rt, %do {pp.stage = 1 : i64} : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
    %dh = train.unary_grad <Relu> %h, %r, %dr {pp.stage = 0 : i64} : tensor<8x16xf32>
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>, pp.stage = 0 : i64} : (tensor<8x16xf32>) -> tensor<16x8xf32>
    %dw1 = onnx.MatMul %xt, %dh {pp.stage = 0 : i64} : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
    return %loss, %dw1, %dw2 : tensor<f32>, tensor<16x16xf32>, tensor<16x4xf32>
  }
}
