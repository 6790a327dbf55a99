// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s

// Contractions, convolution, pooling and reductions: one kernel call each;
// window geometry as the interpreter computes it (pp/Interpreter/OpParams.h).

// CHECK-LABEL: emitc.func @contractions(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">
// CHECK: %[[K:.*]] = call_opaque "pp::rt::gen::kernels"(%[[CTX]])
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: %[[W:.*]] = call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[C:.*]] = call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK: %[[M:.*]] = call_opaque "pp::rt::gen::view"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"256">, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}
// CHECK: %[[S:.*]] = call_opaque "pp::rt::matmul"(%[[K]], %[[X]], %[[W]], %[[M]]) {args = [0 : index, 1 : index, 2 : index, 3 : index]}
// CHECK: call_opaque "pp::rt::gen::check"(%[[CTX]], %[[S]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22onnx.MatMul 'fc1'\22">]}
// CHECK: %[[G:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: %[[CP:.*]] = call_opaque "pp::rt::gen::addr"(%[[C]])
// CHECK: call_opaque "pp::rt::gemm"(%[[K]], %[[M]], %[[W]], %[[CP]], %[[G]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"2.000000000e+00f">, #emitc.opaque<"1.000000000e+00f">, #emitc.opaque<"false">, #emitc.opaque<"true">, 4 : index]}
// A fused Relu (pp.activation) is the Gemm's last argument.
// CHECK: call_opaque "pp::rt::gemm"(%[[K]], %[[G]], %[[W]], %{{.*}}, %{{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"1.000000000e+00f">, #emitc.opaque<"1.000000000e+00f">, #emitc.opaque<"false">, #emitc.opaque<"false">, 4 : index, #emitc.opaque<"pp::rt::UnaryKind(1)">]}

// CHECK-LABEL: emitc.func @conv_pool(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{2, 4, 8, 8}">]}
// CHECK: %[[W:.*]] = call_opaque "pp::rt::gen::global"
// CHECK: %[[B:.*]] = call_opaque "pp::rt::gen::global"
// CHECK: %[[Y:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{2, 4, 4, 4}">]}
// CHECK: %[[BP:.*]] = call_opaque "pp::rt::gen::addr"(%[[B]])
// CHECK: call_opaque "pp::rt::conv"(%{{.*}}, %[[X]], %[[W]], %[[BP]], %[[Y]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"pp::rt::WindowParams{std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, 2}">, 4 : index]}
// A fused activation (pp.activation) is the kernel's last argument.
// CHECK: call_opaque "pp::rt::conv"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"pp::rt::WindowParams{std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, 2}">, 3 : index, #emitc.opaque<"pp::rt::UnaryKind(1)">]}
// MaxPool writes its indices through a pointer.
// CHECK: %[[P:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::F32">, #emitc.opaque<"{2, 4, 2, 2}">]}
// CHECK: %[[I:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::I64">, #emitc.opaque<"{2, 4, 2, 2}">]}
// CHECK: %[[IP:.*]] = call_opaque "pp::rt::gen::addrMut"(%[[I]])
// CHECK: call_opaque "pp::rt::maxPool"(%{{.*}}, %[[Y]], %[[P]], %[[IP]]) {args = [0 : index, 1 : index, #emitc.opaque<"pp::rt::WindowParams{std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, 1}">, 2 : index, 3 : index]}
// CHECK: call_opaque "pp::rt::avgPool"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"pp::rt::WindowParams{std::vector<int64_t>{3, 3}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, 1}">, #emitc.opaque<"true">, 2 : index]}
// Global pools reduce the spatial dims: Mean (1), then Max (2).
// CHECK: call_opaque "pp::rt::reduce"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::ReduceKind(1)">, 1 : index, #emitc.opaque<"std::vector<int64_t>{2, 3}">, 2 : index]}
// CHECK: call_opaque "pp::rt::reduce"(%{{.*}}, %[[P]], %{{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::ReduceKind(2)">, 1 : index, #emitc.opaque<"std::vector<int64_t>{2, 3}">, 2 : index]}

// 16-bit floats pool too (the kernels compute them through float).
// CHECK-LABEL: emitc.func @pool_16bit(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::BF16">, #emitc.opaque<"{2, 4, 4, 4}">]}
// CHECK: %[[P:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::BF16">, #emitc.opaque<"{2, 4, 2, 2}">]}
// CHECK: %[[I:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::I64">, #emitc.opaque<"{2, 4, 2, 2}">]}
// CHECK: %[[IP:.*]] = call_opaque "pp::rt::gen::addrMut"(%[[I]])
// CHECK: call_opaque "pp::rt::maxPool"(%{{.*}}, %[[X]], %[[P]], %[[IP]])
// CHECK: %[[Q:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::F16">, #emitc.opaque<"{2, 4, 2, 2}">]}
// CHECK: call_opaque "pp::rt::maxPool"(%{{.*}}, %{{.*}}, %[[Q]], %{{.*}})
// CHECK: call_opaque "pp::rt::avgPool"

// Axes are normalised; ReduceSum reads them from a constant, all of them
// when absent, and copies with noop_with_empty_axes.
// CHECK-LABEL: emitc.func @reductions(
// CHECK: call_opaque "pp::rt::reduce"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::ReduceKind(1)">, 1 : index, #emitc.opaque<"std::vector<int64_t>{1}">, 2 : index]}
// CHECK: call_opaque "pp::rt::reduce"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::ReduceKind(0)">, 1 : index, #emitc.opaque<"std::vector<int64_t>{0}">, 2 : index]}
// CHECK: call_opaque "pp::rt::reduce"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::ReduceKind(0)">, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 1}">, 2 : index]}
// CHECK: %[[R:.*]] = call_opaque "pp::rt::gen::reshaped"
// CHECK: call_opaque "pp::rt::copy"(%{{.*}}, %[[R]], %{{.*}})

module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x", "b", "i"], pp.output_names = ["y"]} {
  func.func @contractions(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %w = onnx.global_read @w : tensor<8x8xf32>
    %c = onnx.global_read @c : tensor<8xf32>
    %m = onnx.MatMul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc1")
    %g = onnx.Gemm %m, %w, %c {alpha = 2.0 : f32, transB = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %h = onnx.Gemm %g, %w, %c {pp.activation = "Relu"} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    pp.output %h, %mb {index = 0 : i64, combine = "concat"} : tensor<4x8xf32>
    return
  }
  func.func @conv_pool(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 1 : i64} : tensor<2x4x8x8xf32>
    %w = onnx.global_read @k : tensor<4x2x3x3xf32>
    %b = onnx.global_read @kb : tensor<4xf32>
    %y = onnx.Conv %x, %w, %b {group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
    %z = onnx.Conv %x, %w {group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>, pp.activation = "Relu"} : (tensor<2x4x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x4x4xf32>
    %p, %i = onnx.MaxPool %y {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> (tensor<2x4x2x2xf32>, tensor<2x4x2x2xi64>)
    %a = onnx.AveragePool %y {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = 1 : i64} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
    %ga = onnx.GlobalAveragePool %a : (tensor<2x4x4x4xf32>) -> tensor<2x4x1x1xf32>
    %gm = onnx.GlobalMaxPool %p : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
    return
  }
  func.func @pool_16bit(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 1 : i64} : tensor<2x4x4x4xbf16>
    %p, %i = onnx.MaxPool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xbf16>) -> (tensor<2x4x2x2xbf16>, tensor<2x4x2x2xi64>)
    %h = onnx.Cast %x {to = 10 : i64} : (tensor<2x4x4x4xbf16>) -> tensor<2x4x4x4xf16>
    %q, %j = onnx.MaxPool %h {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf16>) -> (tensor<2x4x2x2xf16>, tensor<2x4x2x2xi64>)
    %a = onnx.AveragePool %h {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x4xf16>) -> tensor<2x4x4x4xf16>
    return
  }
  func.func @reductions(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %mean = onnx.ReduceMean %x {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
    %axes = onnx.Constant dense<[0]> : tensor<1xi64>
    %sum = onnx.ReduceSum %x, %axes : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
    %all = onnx.ReduceSum %x : (tensor<4x8xf32>) -> tensor<1x1xf32>
    %none = onnx.ReduceSum %x {noop_with_empty_axes = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
  onnx.global "trainable" @w : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
  onnx.global "trainable" @c : tensor<8xf32> = dense<0.0> : tensor<8xf32>
  onnx.global "trainable" @k : tensor<4x2x3x3xf32> = dense<0.1> : tensor<4x2x3x3xf32>
  onnx.global "trainable" @kb : tensor<4xf32> = dense<0.0> : tensor<4xf32>
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @contractions {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
