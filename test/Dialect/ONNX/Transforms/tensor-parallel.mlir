// --pp-tensor-parallel annotates Megatron's column-then-row pairs, then runs
// upstream's --sharding-propagation and --shard-partition (with the onnx
// ops' sharding models), which write the per-device program with its
// collectives.
// RUN: not pipeline-opt %s -split-input-file --pp-tensor-parallel="tp=2 partition=false" 2>/dev/null | FileCheck %s --check-prefix=ANNOTATE
// RUN: pipeline-opt %s -split-input-file -verify-diagnostics --pp-tensor-parallel=tp=2 | FileCheck %s --check-prefix=PARTITION
// RUN: pipeline-opt %s -split-input-file --pp-tensor-parallel=tp=1 | FileCheck %s --check-prefix=ONE
// RUN: pipeline-opt %S/Inputs/tensor-parallel-pins.mlir --pp-tensor-parallel="tp=2 pin=^down$=row" | FileCheck %S/Inputs/tensor-parallel-pins.mlir --check-prefix=PIN
// RUN: not pipeline-opt %S/Inputs/tensor-parallel-pins.mlir --pp-tensor-parallel="tp=2 pin=up=diagonal" 2>&1 | FileCheck %s --check-prefix=PIN-BAD
// PIN-BAD: error: pp-tensor-parallel: pin 'up=diagonal' is not PATTERN=column or PATTERN=row with a valid regex
// RUN: not pipeline-opt %S/Inputs/tensor-parallel-pins.mlir --pp-tensor-parallel="tp=2 pin=nowhere=row" 2>&1 | FileCheck %s --check-prefix=PIN-NONE
// PIN-NONE: error: pp-tensor-parallel: pin pattern 'nowhere' matches no op
// RUN: pipeline-opt %S/Inputs/tensor-parallel-attention.mlir --pp-tensor-parallel="tp=2 pin=^[qkv]_proj$=column,^o_proj$=row" | FileCheck %S/Inputs/tensor-parallel-attention.mlir --check-prefix=ATTN
// RUN: pipeline-opt %S/Inputs/tensor-parallel-attention.mlir --pp-tensor-parallel=tp=2 | FileCheck %S/Inputs/tensor-parallel-attention.mlir --check-prefix=AUTO
// The whole test GPT (2 blocks; its fused QKV projection keeps attention
// whole): each block's MLP splits, with one all-reduce, and nothing is
// gathered.
// RUN: pipeline-opt %models/gpt.onnx --pp-tensor-parallel=tp=2 | FileCheck %s --check-prefix=GPT
// GPT-LABEL: func.func @main
// GPT-COUNT-2: shard.all_reduce
// GPT-NOT: shard.all_reduce
// GPT-NOT: shard.all_gather
// RUN: pipeline-opt %S/Inputs/tensor-parallel-gather.mlir -verify-diagnostics --pp-tensor-parallel="tp=2 pin=^up$=column,^down$=row" -o /dev/null

// An MLP pair of Gemms (weights [out, in], transB): the first weight and
// bias split along the output features, the second weight along its input
// features.
// ANNOTATE: shard.grid @tp(shape = 2)
// ANNOTATE-LABEL: func.func @mlp_pair
// ANNOTATE: %[[W1:.*]] = shard.sharding @tp split_axes = {{\[\[}}0]]
// ANNOTATE: shard.shard %{{.*}} to %[[W1]] annotate_for_users : tensor<32x16xf32>
// ANNOTATE: shard.shard %{{.*}} to %{{.*}} annotate_for_users : tensor<32xf32>
// ANNOTATE: onnx.Gemm
// ANNOTATE: %[[W2:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]]
// ANNOTATE: shard.shard %{{.*}} to %[[W2]] annotate_for_users : tensor<16x32xf32>
// ANNOTATE: onnx.Gemm
// Each device multiplies by its half of the first weight (and adds its half
// of the bias), applies the activation to its half of the features,
// multiplies by its half of the second weight's inputs, and the halves'
// products are summed by one all-reduce, after which the bias is added once.
// PARTITION-LABEL: func.func @mlp_pair
// PARTITION: %[[S1:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<32x16xf32> -> tensor<16x16xf32>
// PARTITION: %[[B1:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// Its input x is whole on every device, the product split: each device's
// gradient of x is only its half's part, and --pp-autodiff sums it over
// the group (Megatron's f), as the attribute says.
// PARTITION: %[[H:.*]] = onnx.Gemm %arg0, %[[S1]], %[[B1]] {train.grad_all_reduce = {axes = array<i16: 0>, grid = @tp, operands = array<i64: 0>}, transB = 1 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// PARTITION: %[[R:.*]] = onnx.Relu %[[H]] : (tensor<8x16xf32>) -> tensor<8x16xf32>
// PARTITION: %[[S2:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<16x32xf32> -> tensor<16x16xf32>
// PARTITION: %[[P:.*]] = onnx.Gemm %[[R]], %[[S2]] {transB = 1 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// PARTITION: %[[SUM:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
// PARTITION: %[[Y:.*]] = onnx.Add %[[SUM]], %{{.*}} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// PARTITION: return %[[Y]]
// PARTITION-NOT: shard.all_reduce
// tp=1 changes nothing.
// ONE-NOT: shard.
func.func @mlp_pair(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %w1 = onnx.global_read @w1 : tensor<32x16xf32>
  %b1 = onnx.global_read @b1 : tensor<32xf32>
  %w2 = onnx.global_read @w2 : tensor<16x32xf32>
  %b2 = onnx.global_read @b2 : tensor<16xf32>
  %h = onnx.Gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = onnx.Relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = onnx.Gemm %r, %w2, %b2 {transB = 1 : i64} : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
onnx.global "trainable" @w1 : tensor<32x16xf32> = dense<0.1> : tensor<32x16xf32>
onnx.global "trainable" @b1 : tensor<32xf32> = dense<0.1> : tensor<32xf32>
onnx.global "trainable" @w2 : tensor<16x32xf32> = dense<0.1> : tensor<16x32xf32>
onnx.global "trainable" @b2 : tensor<16xf32> = dense<0.1> : tensor<16xf32>

// -----

// A transformer block's MLP as torch exports GPT's: MatMuls of [in, out]
// weights on [batch, sequence, features] activations, bias Adds, and GELU
// spelled out as x * (1 + erf(x / sqrt 2)) / 2 (x used twice), then the
// residual Add.
// PARTITION-LABEL: func.func @gpt_mlp
// PARTITION: %[[S1:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<32x128xf32> -> tensor<32x64xf32>
// PARTITION: %[[H:.*]] = onnx.MatMul %arg0, %[[S1]] {train.grad_all_reduce = {axes = array<i16: 0>, grid = @tp, operands = array<i64: 0>}} : (tensor<4x16x32xf32>, tensor<32x64xf32>) -> tensor<4x16x64xf32>
// PARTITION: %[[B1:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<128xf32> -> tensor<64xf32>
// PARTITION: onnx.Add %[[B1]], %[[H]] : (tensor<64xf32>, tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
// PARTITION: onnx.Erf %{{.*}} : (tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
// PARTITION: %[[G:.*]] = onnx.Mul %{{.*}}, %{{.*}} : (tensor<4x16x64xf32>, tensor<f32>) -> tensor<4x16x64xf32>
// PARTITION: %[[S2:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<128x32xf32> -> tensor<64x32xf32>
// PARTITION: %[[P:.*]] = onnx.MatMul %[[G]], %[[S2]] : (tensor<4x16x64xf32>, tensor<64x32xf32>) -> tensor<4x16x32xf32>
// PARTITION: %[[SUM:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0] : tensor<4x16x32xf32> -> tensor<4x16x32xf32>
// PARTITION: %[[YB:.*]] = onnx.Add %{{.*}}, %[[SUM]] : (tensor<32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
// PARTITION: onnx.Add %arg0, %[[YB]] : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
// PARTITION-NOT: shard.all_reduce
func.func @gpt_mlp(%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %one = onnx.Constant dense<1.0> : tensor<f32>
  %sqrt2 = onnx.Constant dense<1.41421354> : tensor<f32>
  %w1 = onnx.global_read @fc.weight : tensor<32x128xf32>
  %b1 = onnx.global_read @fc.bias : tensor<128xf32>
  %w2 = onnx.global_read @proj.weight : tensor<128x32xf32>
  %b2 = onnx.global_read @proj.bias : tensor<32xf32>
  %h = onnx.MatMul %x, %w1 : (tensor<4x16x32xf32>, tensor<32x128xf32>) -> tensor<4x16x128xf32>
  %hb = onnx.Add %b1, %h : (tensor<128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
  %d = onnx.Div %hb, %sqrt2 : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
  %e = onnx.Erf %d : (tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
  %e1 = onnx.Add %e, %one : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
  %m = onnx.Mul %hb, %e1 : (tensor<4x16x128xf32>, tensor<4x16x128xf32>) -> tensor<4x16x128xf32>
  %g = onnx.Mul %m, %half : (tensor<4x16x128xf32>, tensor<f32>) -> tensor<4x16x128xf32>
  %y = onnx.MatMul %g, %w2 : (tensor<4x16x128xf32>, tensor<128x32xf32>) -> tensor<4x16x32xf32>
  %yb = onnx.Add %b2, %y : (tensor<32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %r = onnx.Add %x, %yb : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  return %r : tensor<4x16x32xf32>
}
onnx.global "trainable" @fc.weight : tensor<32x128xf32> = dense<0.1> : tensor<32x128xf32>
onnx.global "trainable" @fc.bias : tensor<128xf32> = dense<0.1> : tensor<128xf32>
onnx.global "trainable" @proj.weight : tensor<128x32xf32> = dense<0.1> : tensor<128x32xf32>
onnx.global "trainable" @proj.bias : tensor<32xf32> = dense<0.1> : tensor<32xf32>

// -----

// Features that tp does not divide: the pair stays whole, with a remark.
// PARTITION-LABEL: func.func @odd_features
// PARTITION-NOT: shard.all_reduce
func.func @odd_features(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w1 = onnx.global_read @u1 : tensor<3x4xf32>
  %w2 = onnx.global_read @u2 : tensor<4x3xf32>
  // expected-remark @+1 {{pp-tensor-parallel: 3 features do not split over tp = 2; this pair stays whole}}
  %h = onnx.Gemm %x, %w1 {transB = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %y = onnx.Gemm %h, %w2 {transB = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
onnx.global "trainable" @u1 : tensor<3x4xf32> = dense<0.1> : tensor<3x4xf32>
onnx.global "trainable" @u2 : tensor<4x3xf32> = dense<0.1> : tensor<4x3xf32>

// -----

// The grid's name must be free.
// expected-error @+1 {{pp-tensor-parallel: symbol @tp is taken by something other than a grid of shape 2}}
func.func @tp(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

// -----

// Ops without a sharding model of their own stay whole on every device:
// LayerNormalization takes the summed output.
// PARTITION-LABEL: func.func @layer_norm_after
// PARTITION: %[[SUM:.*]] = shard.all_reduce
// PARTITION: onnx.LayerNormalization %[[SUM]]
func.func @layer_norm_after(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %w1 = onnx.global_read @v1 : tensor<32x16xf32>
  %w2 = onnx.global_read @v2 : tensor<16x32xf32>
  %g = onnx.global_read @vg : tensor<16xf32>
  %h = onnx.Gemm %x, %w1 {transB = 1 : i64} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %r = onnx.Relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = onnx.Gemm %r, %w2 {transB = 1 : i64} : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  %n, %mean, %inv = onnx.LayerNormalization %y, %g, %g : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x1xf32>, tensor<8x1xf32>)
  return %n : tensor<8x16xf32>
}
onnx.global "trainable" @v1 : tensor<32x16xf32> = dense<0.1> : tensor<32x16xf32>
onnx.global "trainable" @v2 : tensor<16x32xf32> = dense<0.1> : tensor<16x32xf32>
onnx.global "trainable" @vg : tensor<16xf32> = dense<0.1> : tensor<16xf32>

// -----

// A constant tensor operand (which propagation leaves unannotated and
// upstream's partition would crash on) is whole on every device.
// PARTITION-LABEL: func.func @constant_operand
// PARTITION: %[[Y:.*]] = shard.all_reduce
// PARTITION: %[[C:.*]] = onnx.Constant dense<0.000000e+00> : tensor<8x16xf32>
// PARTITION: onnx.Concat %[[Y]], %[[C]] {axis = 0 : i64}
func.func @constant_operand(%x: tensor<8x16xf32>) -> tensor<16x16xf32> {
  %w1 = onnx.global_read @c1 : tensor<32x16xf32>
  %w2 = onnx.global_read @c2 : tensor<16x32xf32>
  %h = onnx.Gemm %x, %w1 {transB = 1 : i64} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %r = onnx.Relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = onnx.Gemm %r, %w2 {transB = 1 : i64} : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  %c = onnx.Constant dense<0.0> : tensor<8x16xf32>
  %out = onnx.Concat %y, %c {axis = 0 : i64} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  return %out : tensor<16x16xf32>
}
onnx.global "trainable" @c1 : tensor<32x16xf32> = dense<0.1> : tensor<32x16xf32>
onnx.global "trainable" @c2 : tensor<16x32xf32> = dense<0.1> : tensor<16x32xf32>
