// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

func.func @relu_on_integers(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = onnx.Relu %x : (tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @wrong_result_type(%x: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+2 {{'onnx.Softmax' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Softmax %x : (tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Unary kernels are Elementwise (upstream's trait checks the shapes first).
func.func @elementwise_shape(%x: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'onnx.Relu' op all non-scalar operands/results must have the same shape and base type}}
  %0 = onnx.Relu %x : (tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @add_mixed_element_types(%a: tensor<4xf32>, %b: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{failed to verify that all of {A, B} have same element type}}
  %0 = onnx.Add %a, %b : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @not_broadcastable(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{operand shapes are not broadcast-compatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Add %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{MatMul contraction dims differ: 3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.MatMul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_contraction(%a: tensor<2x3xf32>, %b: tensor<5x4xf32>) -> tensor<2x5xf32> {
  // expected-error @+2 {{Gemm contraction dims differ: 3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Gemm %a, %b {transB = 1 : i64} : (tensor<2x3xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{Conv input channels 3 != W channels 2 x group 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Conv %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @pool_window_too_large(%x: tensor<1x3x2x2xf32>) -> tensor<1x3x1x1xf32> {
  // expected-error @+2 {{window of size 3 exceeds the padded input of size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = onnx.MaxPool %x {kernel_shape = array<i64: 3, 3>} : (tensor<1x3x2x2xf32>) -> (tensor<1x3x1x1xf32>, tensor<1x3x1x1xi64>)
  return %0#0 : tensor<1x3x1x1xf32>
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = onnx.Softmax %x {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @reshape_not_constant(%x: tensor<2x3xf32>, %s: tensor<2xi64>) -> tensor<3x2xf32> {
  // expected-error @+2 {{Reshape 'shape' is not a constant: the result shape cannot be made static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Reshape %x, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @reshape_element_count(%x: tensor<2x3xf32>) -> tensor<4x2xf32> {
  %s = onnx.Constant dense<[4, 2]> : tensor<2xi64>
  // expected-error @+2 {{Reshape from 6 to 8 elements}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Reshape %x, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{perm is not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Transpose %x {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @squeeze_non_unit(%x: tensor<2x3xf32>) -> tensor<3xf32> {
  %axes = onnx.Constant dense<[0]> : tensor<1xi64>
  // expected-error @+2 {{Squeeze axis 0 has size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Squeeze %x, %axes : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{Concat inputs differ in dim 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @split_sizes(%x: tensor<5xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %s = onnx.Constant dense<[2, 2]> : tensor<2xi64>
  // expected-error @+2 {{Split sizes do not sum to dim 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = onnx.Split %x, %s : (tensor<5xf32>, tensor<2xi64>) -> (tensor<2xf32>, tensor<2xf32>)
  return %0#0, %0#1 : tensor<2xf32>, tensor<2xf32>
}

// -----

func.func @batchnorm_channels(%x: tensor<2x4x3x3xf32>, %s: tensor<3xf32>) -> tensor<2x4x3x3xf32> {
  // expected-error @+2 {{BatchNormalization scale and B must be of type tensor<4xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = onnx.BatchNormalization %x, %s, %s, %s, %s : (tensor<2x4x3x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x4x3x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x4x3x3xf32>
}

// -----

func.func @batchnorm_statistics(%x: tensor<2x4x3x3xbf16>, %s: tensor<4xbf16>, %m: tensor<4xf32>, %v: tensor<3xf32>) -> tensor<2x4x3x3xbf16> {
  // expected-error @+2 {{BatchNormalization mean and var must be of one type of shape [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = onnx.BatchNormalization %x, %s, %s, %m, %v : (tensor<2x4x3x3xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<3xf32>) -> (tensor<2x4x3x3xbf16>, tensor<4xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x4x3x3xbf16>
}

// -----

func.func @sce_labels(%s: tensor<8x10xf32>, %l: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+2 {{labels shape does not match scores without C}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = onnx.SoftmaxCrossEntropyLoss %s, %l : (tensor<8x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<8x10xf32>)
  return %0#0 : tensor<f32>
}

// -----

func.func @gelu_mode(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{approximate must be 'none' or 'tanh'}}
  %0 = onnx.Gelu %x {approximate = "fast"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @conv_transpose_output_padding(%x: tensor<1x2x3x3xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<1x3x6x6xf32> {
  // expected-error @+2 {{output_padding 2 of spatial dim 0 must be >= 0 and less than the stride 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ConvTranspose %x, %w {strides = array<i64: 2, 2>, output_padding = array<i64: 2, 0>} : (tensor<1x2x3x3xf32>, tensor<2x3x3x3xf32>) -> tensor<1x3x6x6xf32>
  return %0 : tensor<1x3x6x6xf32>
}

// -----

func.func @celu_alpha(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{alpha must not be 0}}
  %0 = onnx.Celu %x {alpha = 0.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @cast_unknown_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{unsupported ONNX data type 8 in 'to'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Cast %x {to = 8 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{kind must be 'trainable', 'state' or 'constant', got 'weights'}}
onnx.global "weights" @w : tensor<2xf32>

// -----

// expected-error @+1 {{trainable globals must have a float element type}}
onnx.global "trainable" @w : tensor<2xi64>

// -----

// expected-error @+1 {{initial value type 'tensor<3xf32>' does not match 'tensor<2xf32>'}}
onnx.global "trainable" @w : tensor<2xf32> = dense<1.0> : tensor<3xf32>

// -----

func.func @read_missing() -> tensor<2xf32> {
  // expected-error @+1 {{'nope' does not name an onnx.global}}
  %0 = onnx.global_read @nope : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

onnx.global "trainable" @w : tensor<2xf32>
func.func @read_wrong_type() -> tensor<3xf32> {
  // expected-error @+1 {{result type 'tensor<3xf32>' does not match the global's type 'tensor<2xf32>'}}
  %0 = onnx.global_read @w : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @pad_dynamic_pads(%x: tensor<2x3xf32>, %p: tensor<4xi64>) -> tensor<3x4xf32> {
  // expected-error @+2 {{Pad 'pads' is not a constant: the result shape cannot be made static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %x, %p : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @pad_mode(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %p = onnx.Constant dense<[0, 1, 0, 1]> : tensor<4xi64>
  // expected-error @+2 {{Pad mode 'wrap' is not supported (constant, reflect, edge)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %x, %p {mode = "wrap"} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @pad_overcrop(%x: tensor<2x3xf32>) -> tensor<2x0xf32> {
  %p = onnx.Constant dense<[0, -2, 0, -2]> : tensor<4xi64>
  // expected-error @+2 {{Pad crops dim 1 of size 3 by more than its size}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %x, %p : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x0xf32>
  return %0 : tensor<2x0xf32>
}

// -----

func.func @pad_count(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %p = onnx.Constant dense<[1, 1]> : tensor<2xi64>
  // expected-error @+2 {{Pad has 2 pads for 2 axes; it needs two per axis}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %x, %p : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @pad_value_type(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %p = onnx.Constant dense<[0, 1, 0, 1]> : tensor<4xi64>
  %v = onnx.Constant dense<1> : tensor<i64>
  // expected-error @+2 {{Pad constant_value must be one element of the data's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %x, %p value %v : (tensor<2x3xf32>, tensor<4xi64>, tensor<i64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @pad_edge_empty(%x: tensor<2x0xf32>) -> tensor<2x2xf32> {
  %p = onnx.Constant dense<[0, 1, 0, 1]> : tensor<4xi64>
  // expected-error @+2 {{Pad cannot edge-pad the empty dim 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Pad %x, %p {mode = "edge"} : (tensor<2x0xf32>, tensor<4xi64>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @range_dynamic(%n: tensor<i64>) -> tensor<3xi64> {
  %z = onnx.Constant dense<0> : tensor<i64>
  // expected-error @+2 {{Range 'limit' is not a constant: the result shape cannot be made static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Range %z, %n, %z : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// Dims a model declares may multiply past int64 while a 0 dim keeps the
// tensor empty.
func.func @flatten_overflow(%x: tensor<0x4294967296x4294967296xf32>) -> tensor<0x0xf32> {
  // expected-error @+2 {{Flatten of 3 dims overflows int64 at axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.Flatten %x {axis = 1 : i64} : (tensor<0x4294967296x4294967296xf32>) -> tensor<0x0xf32>
  return %0 : tensor<0x0xf32>
}


// -----

func.func @mod_floored_float(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Mod' op fmod must be 1 for floating-point operands}}
  %0 = onnx.Mod %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @mod_fmod_value(%a: tensor<3xi64>) -> tensor<3xi64> {
  // expected-error @+1 {{'onnx.Mod' op fmod must be 0 or 1, not 2}}
  %0 = onnx.Mod %a, %a {fmod = 2 : i64} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @scatter_nd_updates(%d: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{ScatterND updates have shape [2, 4], expected indices.shape[:-1] + data.shape[k:] = [2, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterND %d, %i, %u : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @scatter_nd_reduction(%d: tensor<4xf32>, %i: tensor<1x1xi64>, %u: tensor<1xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{ScatterND reduction 'sum' is not none, add, mul, max or min}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterND %d, %i, %u {reduction = "sum"} : (tensor<4xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @scatter_nd_index(%d: tensor<4x3xf32>, %u: tensor<1xf32>) -> tensor<4x3xf32> {
  %i = onnx.Constant dense<[[1, 3]]> : tensor<1x2xi64>
  // expected-error @+2 {{ScatterND index 3 is out of range for dim 1 of size 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = onnx.ScatterND %d, %i, %u : (tensor<4x3xf32>, tensor<1x2xi64>, tensor<1xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
