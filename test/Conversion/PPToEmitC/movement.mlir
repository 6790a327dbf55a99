// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s

// Globals and constants are StageContext calls by id (constants numbered
// in order of first use, equal values once); reshape-like ops copy into
// their own buffer; data movement is one kernel call each.

// CHECK-LABEL: emitc.func @state(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">
// CHECK: call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: call_opaque "pp::rt::gen::constant"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: call_opaque "pp::rt::gen::constant"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// Shape of a static tensor is a constant.
// CHECK: call_opaque "pp::rt::gen::constant"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK: call_opaque "pp::rt::gen::constant"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"2">]}
// CHECK: %[[Z:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: call_opaque "pp::rt::fill"(%{{.*}}, %[[Z]]) {args = [0 : index, 1 : index, #emitc.opaque<"0.0">]}
// CHECK: call_opaque "pp::rt::fill"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"1.5000000000000000e+00">]}

// CHECK-LABEL: emitc.func @reshapes(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 8}">]}
// CHECK: %[[R:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{8, 4}">]}
// CHECK: %[[XR:.*]] = call_opaque "pp::rt::gen::reshaped"(%[[X]]) {args = [0 : index, #emitc.opaque<"{8, 4}">]}
// CHECK: call_opaque "pp::rt::copy"(%{{.*}}, %[[XR]], %[[R]])
// CHECK: %[[F:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{1, 32}">]}
// CHECK: %[[RR:.*]] = call_opaque "pp::rt::gen::reshaped"(%[[R]]) {args = [0 : index, #emitc.opaque<"{1, 32}">]}
// CHECK: call_opaque "pp::rt::copy"(%{{.*}}, %[[RR]], %[[F]])
// Transpose without perm reverses the dims.
// CHECK: call_opaque "pp::rt::transpose"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{1, 0}">, 2 : index]}
// CHECK: call_opaque "pp::rt::expand"(%{{.*}}, %[[X]], %{{.*}})

// CHECK-LABEL: emitc.func @pieces(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 8}">]}
// CHECK: %[[I:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::I64">, #emitc.opaque<"{3}">]}
// CHECK: %[[L:.*]] = call_opaque "pp::rt::gen::pointers"(%[[X]], %[[X]])
// CHECK: call_opaque "pp::rt::concat"(%{{.*}}, %[[L]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"1">, 2 : index]}
// CHECK: %[[A:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 3}">]}
// CHECK: %[[B:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 5}">]}
// CHECK: %[[O:.*]] = call_opaque "pp::rt::gen::mutablePointers"(%[[A]], %[[B]])
// CHECK: call_opaque "pp::rt::split"(%{{.*}}, %[[X]], %[[O]]) {args = [0 : index, 1 : index, #emitc.opaque<"1">, 2 : index]}
// CHECK: call_opaque "pp::rt::slice"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 1}">, #emitc.opaque<"std::vector<int64_t>{1, 2}">, 2 : index]}
// CHECK: call_opaque "pp::rt::slice"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 1}">, #emitc.opaque<"std::vector<int64_t>{1, 1}">, 2 : index]}
// CHECK: call_opaque "pp::rt::gather"(%{{.*}}, %[[X]], %[[I]], %{{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"0">, 3 : index]}
// Pad: begin then end counts of every dim, the mode, the constant.
// CHECK: call_opaque "pp::rt::pad"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 2, 1, -1}">, #emitc.opaque<"pp::rt::PadMode::Constant">, #emitc.opaque<"1.5{{.*}}">, 2 : index]}
// CHECK: call_opaque "pp::rt::pad"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 2, 0, 3}">, #emitc.opaque<"pp::rt::PadMode::Reflect">, #emitc.opaque<"0{{.*}}">, 2 : index]}
// CHECK: call_opaque "pp::rt::scatterND"(%{{.*}}, %[[X]], %{{.*}}, %{{.*}}, %{{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"pp::rt::ScatterReduction(1)">, 4 : index]}

// The table lists the globals and each distinct constant with its place in
// the data file.
// CHECK-LABEL: emitc.func @makeProgram(
// CHECK: literal "{\0A    {.name = \22w\22, .dtype = pp::rt::DType::F32, .shape = {2, 3}, .trainable = true, .dataOffset = 0, .ownerStage = 0}}" : !emitc.opaque<"std::vector<pp::rt::GlobalInfo>">
// CHECK: literal "{\0A    {.dtype = pp::rt::DType::F32, .shape = {3}, .dataOffset = 256},\0A    {.dtype = pp::rt::DType::I64, .shape = {1}, .dataOffset = 512},

module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x", "b", "i"], pp.output_names = ["y"]} {
  func.func @state(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %w = onnx.global_read @w : tensor<2x3xf32>
    %c = onnx.Constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %d = onnx.Constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %s = onnx.Shape %w {start = -1 : i64} : (tensor<2x3xf32>) -> tensor<1xi64>
    %shape = onnx.Constant dense<[2, 3]> : tensor<2xi64>
    %z = onnx.ConstantOfShape %shape : (tensor<2xi64>) -> tensor<2x3xf32>
    %o = onnx.ConstantOfShape %shape {value = dense<1.5> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x3xf32>
    return
  }
  func.func @reshapes(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %shape = onnx.Constant dense<[8, 4]> : tensor<2xi64>
    %r = onnx.Reshape %x, %shape : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<8x4xf32>
    %f = onnx.Flatten %r {axis = 0 : i64} : (tensor<8x4xf32>) -> tensor<1x32xf32>
    %t = onnx.Transpose %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %eshape = onnx.Constant dense<[2, 4, 8]> : tensor<3xi64>
    %e = onnx.Expand %x, %eshape : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<2x4x8xf32>
    return
  }
  func.func @pieces(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %i = pp.input %mb {index = 2 : i64} : tensor<3xi64>
    %c = onnx.Concat %x, %x {axis = -1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
    %sizes = onnx.Constant dense<[3, 5]> : tensor<2xi64>
    %a, %b = onnx.Split %x, %sizes {axis = 1 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> (tensor<4x3xf32>, tensor<4x5xf32>)
    %st = onnx.Constant dense<[1]> : tensor<1xi64>
    %en = onnx.Constant dense<[7]> : tensor<1xi64>
    %ax = onnx.Constant dense<[1]> : tensor<1xi64>
    %sp = onnx.Constant dense<[2]> : tensor<1xi64>
    %s = onnx.Slice %x, %st, %en axes %ax steps %sp : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x3xf32>
    // torch's "to the end": INT64_MAX, read as an integer (not via double).
    %end = onnx.Constant dense<[9223372036854775807]> : tensor<1xi64>
    %tail = onnx.Slice %x, %st, %end axes %ax : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x7xf32>
    %g = onnx.Gather %x, %i {axis = 0 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
    %pads = onnx.Constant dense<[0, 2, 1, -1]> : tensor<4xi64>
    %pv = onnx.Constant dense<1.5> : tensor<f32>
    %p = onnx.Pad %x, %pads value %pv : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<5x9xf32>
    %rpads = onnx.Constant dense<[2, 3]> : tensor<2xi64>
    %raxes = onnx.Constant dense<[1]> : tensor<1xi64>
    %r = onnx.Pad %x, %rpads axes %raxes {mode = "reflect"} : (tensor<4x8xf32>, tensor<2xi64>, tensor<1xi64>) -> tensor<4x13xf32>
    %rows = onnx.Constant dense<[[0], [2], [-1]]> : tensor<3x1xi64>
    %sc = onnx.ScatterND %x, %rows, %g {reduction = "add"} : (tensor<4x8xf32>, tensor<3x1xi64>, tensor<3x8xf32>) -> tensor<4x8xf32>
    return
  }
  onnx.global "trainable" @w : tensor<2x3xf32> = dense<0.5> : tensor<2x3xf32>
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @state {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
