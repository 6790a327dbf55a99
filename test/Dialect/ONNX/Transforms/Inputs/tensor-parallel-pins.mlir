// Pins by ONNX node name: "down" alone, row-parallel. As upstream's
// partition does for a function argument it splits, each device takes its
// slice of the input features as the argument; the partial products are
// summed, then the bias added.
// PIN-LABEL: func.func @pinned(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32>
// PIN: %[[W:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<16x32xf32> -> tensor<16x16xf32>
// PIN: %[[P:.*]] = onnx.Gemm %arg0, %[[W]] {transB = 1 : i64} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// PIN: %[[S:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
// PIN: onnx.Add %[[S]], %{{.*}} : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
func.func @pinned(%x: tensor<8x32xf32>) -> tensor<8x16xf32> {
  %w = onnx.global_read @q : tensor<16x32xf32>
  %b = onnx.global_read @qb : tensor<16xf32>
  %y = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32> loc("down")
  return %y : tensor<8x16xf32>
}
onnx.global "trainable" @q : tensor<16x32xf32> = dense<0.1> : tensor<16x32xf32>
onnx.global "trainable" @qb : tensor<16xf32> = dense<0.1> : tensor<16xf32>
