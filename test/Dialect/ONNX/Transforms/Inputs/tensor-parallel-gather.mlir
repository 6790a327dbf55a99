// A split that would have to be gathered (Softmax, without a split model,
// between two pinned Gemms) is an error naming the op, not a crash.
func.func @gathered(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %w1 = onnx.global_read @q1 : tensor<32x16xf32>
  %w2 = onnx.global_read @q2 : tensor<16x32xf32>
  %h = onnx.Gemm %x, %w1 {transB = 1 : i64} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32> loc("up")
  // expected-error @+1 {{pp-tensor-parallel: cannot partition onnx.Softmax: it needs a split tensor gathered (an op without a split model between pinned ops?), which is not built yet}}
  %n = onnx.Softmax %h {axis = 1 : i64} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = onnx.Gemm %n, %w2 {transB = 1 : i64} : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32> loc("down")
  return %y : tensor<8x16xf32>
}
onnx.global "trainable" @q1 : tensor<32x16xf32> = dense<0.1> : tensor<32x16xf32>
onnx.global "trainable" @q2 : tensor<16x32xf32> = dense<0.1> : tensor<16x32xf32>
