// Attention split by heads: Q, K and V projections column-parallel (their
// output features are whole heads), the output projection row-parallel;
// found by itself (AUTO) or pinned by name (ATTN).
// The head split flows through Reshape [B, S, H*D] -> [B, S, H, D],
// Transpose, the batched score and value MatMuls, the scale and Softmax,
// and back; each device computes H/tp heads and the output projection's
// partial products are summed once.
// AUTO-LABEL: func.func @attention
// AUTO-COUNT-3: shard.all_slice %{{.*}} slice_axis = 1
// AUTO: shard.all_slice %{{.*}} slice_axis = 0
// AUTO: shard.all_reduce
// AUTO-NOT: shard.all_reduce
// ATTN-LABEL: func.func @attention
// ATTN: %[[WQ:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<8x8xf32> -> tensor<8x4xf32>
// Each device gets only its heads' part of x's gradient from Q, K and V:
// the attribute has --pp-autodiff sum their parts over the group.
// ATTN: %[[Q:.*]] = onnx.MatMul %arg0, %[[WQ]] {train.grad_all_reduce = {axes = array<i16: 0>, grid = @tp, operands = array<i64: 0>}} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
// ATTN: %[[QH:.*]] = onnx.Reshape %[[Q]], %{{.*}} : (tensor<2x4x4xf32>, tensor<4xi64>) -> tensor<2x4x1x4xf32>
// ATTN: %[[QT:.*]] = onnx.Transpose %[[QH]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x1x4xf32>) -> tensor<2x1x4x4xf32>
// ATTN: %[[S:.*]] = onnx.MatMul %[[QT]], %{{.*}} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// ATTN: onnx.Where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x1x4x4xi1>, tensor<2x1x4x4xf32>, tensor<f32>) -> tensor<2x1x4x4xf32>
// ATTN: onnx.Softmax %{{.*}} : (tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// ATTN: %[[O:.*]] = onnx.Reshape %{{.*}}, %{{.*}} : (tensor<2x4x1x4xf32>, tensor<3xi64>) -> tensor<2x4x4xf32>
// ATTN: %[[WO:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// ATTN: %[[P:.*]] = onnx.MatMul %[[O]], %[[WO]] : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// ATTN: %[[Y:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0]
// ATTN-NOT: shard.all_reduce
// ATTN-NOT: shard.all_gather
// ATTN: return %[[Y]]
func.func @attention(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %wq = onnx.global_read @wq : tensor<8x8xf32>
  %wk = onnx.global_read @wk : tensor<8x8xf32>
  %wv = onnx.global_read @wv : tensor<8x8xf32>
  %wo = onnx.global_read @wo : tensor<8x8xf32>
  %heads = onnx.Constant dense<[2, 4, 2, 4]> : tensor<4xi64>
  %merged = onnx.Constant dense<[2, 4, 8]> : tensor<3xi64>
  %scale = onnx.Constant dense<2.0> : tensor<f32>
  %causal = onnx.Constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %masked = onnx.Constant dense<-1.0e+09> : tensor<f32>
  %q = onnx.MatMul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("q_proj")
  %k = onnx.MatMul %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("k_proj")
  %v = onnx.MatMul %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("v_proj")
  %qh = onnx.Reshape %q, %heads : (tensor<2x4x8xf32>, tensor<4xi64>) -> tensor<2x4x2x4xf32>
  %kh = onnx.Reshape %k, %heads : (tensor<2x4x8xf32>, tensor<4xi64>) -> tensor<2x4x2x4xf32>
  %vh = onnx.Reshape %v, %heads : (tensor<2x4x8xf32>, tensor<4xi64>) -> tensor<2x4x2x4xf32>
  %qt = onnx.Transpose %qh {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = onnx.Transpose %kh {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %vt = onnx.Transpose %vh {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %s = onnx.MatMul %qt, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %sd = onnx.Div %s, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %sm = onnx.Where %causal, %sd, %masked : (tensor<1x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = onnx.Softmax %sm {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = onnx.MatMul %p, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ot = onnx.Transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %or = onnx.Reshape %ot, %merged : (tensor<2x4x2x4xf32>, tensor<3xi64>) -> tensor<2x4x8xf32>
  %y = onnx.MatMul %or, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("o_proj")
  return %y : tensor<2x4x8xf32>
}
onnx.global "trainable" @wq : tensor<8x8xf32> = dense<0.1> : tensor<8x8xf32>
onnx.global "trainable" @wk : tensor<8x8xf32> = dense<0.1> : tensor<8x8xf32>
onnx.global "trainable" @wv : tensor<8x8xf32> = dense<0.1> : tensor<8x8xf32>
onnx.global "trainable" @wo : tensor<8x8xf32> = dense<0.1> : tensor<8x8xf32>
