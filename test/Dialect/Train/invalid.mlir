// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

func.func @kind_without_gradient(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has no gradient kernel for unary kind 'Floor'}}
  %0 = train.unary_grad <Floor> %x, %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unknown_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{unknown unary kind 'Bogus'}}
  // expected-error @+1 {{failed to parse Train_UnaryKindAttr parameter 'value'}}
  %0 = train.unary_grad <Bogus> %x, %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @bad_reduce(%x: tensor<2x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{result type 'tensor<3xf32>' does not broadcast to the operand type 'tensor<2x4xf32>'}}
  %0 = train.reduce_sum_to %x : tensor<2x4xf32> to tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @slice_out_of_bounds(%dy: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{slice of dim 1 is out of bounds}}
  %0 = train.slice_grad %dy {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

onnx.global "constant" @c : tensor<4xf32>
func.func @write_constant(%x: tensor<4xf32>) {
  // expected-error @+1 {{cannot write the constant global 'c'}}
  train.global_write @c, %x : tensor<4xf32>
  return
}

// -----

func.func @sgd_momentum_without_buffer(%p: tensor<4xf32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{a momentum buffer is required exactly when momentum is non-zero}}
  %0 = train.sgd %p, %p, %s {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @pad_grad_shape(%dy: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{dim 1 of dx padded by [1, 0] is not dy's 4}}
  %0 = train.pad_grad %dy {mode = "reflect", pads = array<i64: 0, 1, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @pad_grad_mode(%dy: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{mode must be 'constant', 'reflect' or 'edge', got 'wrap'}}
  %0 = train.pad_grad %dy {mode = "wrap", pads = array<i64: 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul_contraction(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>) {
  // expected-error @+1 {{contraction dims differ: 4 vs 3}}
  %0 = train.matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<2x3x4xf32>, %b: tensor<1x3x4xf32>) {
  // expected-error @+1 {{result type 'tensor<2x3x4xf32>' is not the product's shape 'tensor<2x4x4xf32>'}}
  %0 = train.matmul %a, %b {trans_a} : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{batch dims do not broadcast}}
  %0 = train.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{operands need rank >= 2, got 1 and 2}}
  %0 = train.matmul %a, %b : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  return
}
