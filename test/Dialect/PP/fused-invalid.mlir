// RUN: pipeline-opt %s --split-input-file -verify-diagnostics

func.func @not_fusible(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'pp.fused' op result must be a static f32 or f64 tensor, got 'tensor<4xi64>'}}
  %r = pp.fused %x : (tensor<4xf32>) -> tensor<4xi64> {
  ^bb0(%x0: tensor<4xf32>):
    %c = onnx.Cast %x0 {to = 7 : i64} : (tensor<4xf32>) -> tensor<4xi64>
    pp.yield %c : tensor<4xi64>
  }
  return %x : tensor<4xf32>
}

// -----

func.func @no_scalar_function(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = pp.fused %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x0: tensor<4xf32>):
    // expected-error @below {{'onnx.Floor' op cannot run in a fused kernel}}
    %f = onnx.Floor %x0 : (tensor<4xf32>) -> tensor<4xf32>
    pp.yield %f : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @not_a_suffix(%x: tensor<4x8xf32>, %c: tensor<4x1xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{input 1 of type 'tensor<4x1xf32>' is neither the result's shape, a scalar nor a suffix of it, in the result's element type}}
  %r = pp.fused %x, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %c0: tensor<4x1xf32>):
    %a = onnx.Add %x0, %c0 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    pp.yield %a : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @other_type_inside(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = pp.fused %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
    // expected-error @below {{'onnx.Relu' op in a fused kernel must have the kernel's result type 'tensor<4x8xf32>'}}
    %n = onnx.Relu %b0 : (tensor<8xf32>) -> tensor<8xf32>
    %a = onnx.Add %x0, %n : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    pp.yield %a : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @yield_type(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %r = pp.fused %x, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> {
  ^bb0(%x0: tensor<4xf32>, %s0: tensor<f32>):
    // expected-error @below {{'pp.yield' op yields 'tensor<f32>', the op returns 'tensor<4xf32>'}}
    pp.yield %s0 : tensor<f32>
  }
  return %r : tensor<4xf32>
}
