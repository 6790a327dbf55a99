// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s

// Elementwise ops: one runtime kernel call each, on arena views, with the
// status checked under the op's name; pp.fused: a per-element function and
// its launch.

// CHECK-LABEL: emitc.func @unary(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">, %[[MB:.*]]: i64)
// CHECK: %[[K:.*]] = call_opaque "pp::rt::gen::kernels"(%[[CTX]])
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}
// CHECK: %[[R:.*]] = call_opaque "pp::rt::gen::view"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"256">,
// CHECK: %[[S:.*]] = call_opaque "pp::rt::unary"(%[[K]], %[[X]], %[[R]]) {args = [0 : index, #emitc.opaque<"pp::rt::UnaryKind(1)">, 1 : index, 2 : index]}
// CHECK: call_opaque "pp::rt::gen::check"(%[[CTX]], %[[S]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22onnx.Relu 'relu'\22">]}
// LeakyRelu passes its slope.
// CHECK: call_opaque "pp::rt::unary"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::UnaryKind(2)">, 1 : index, 2 : index, #emitc.opaque<"2.500000000e-01f">]}
// Gelu with approximate = "tanh" is GeluTanh.
// CHECK: call_opaque "pp::rt::unary"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::UnaryKind(7)">, 1 : index, 2 : index]}
// CHECK: return

// CHECK-LABEL: emitc.func @binary(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 8}">]}
// CHECK: %[[B:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{8}">]}
// CHECK: %[[A:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: call_opaque "pp::rt::binary"(%{{.*}}, %[[X]], %[[B]], %[[A]]) {args = [0 : index, #emitc.opaque<"pp::rt::BinaryKind(0)">, 1 : index, 2 : index, 3 : index]}
// CHECK: %[[C:.*]] = call_opaque "pp::rt::gen::view"{{.*}}#emitc.opaque<"pp::rt::DType::Bool">
// CHECK: call_opaque "pp::rt::binary"(%{{.*}}, %[[X]], %[[B]], %[[C]]) {args = [0 : index, #emitc.opaque<"pp::rt::BinaryKind(6)">
// CHECK: %[[W:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: call_opaque "pp::rt::where"(%{{.*}}, %[[C]], %[[A]], %[[B]], %[[W]])

// An absent optional operand is a null pointer.
// CHECK-LABEL: emitc.func @clip_cast(
// CHECK: %[[HI:.*]] = call_opaque "pp::rt::gen::constant"(%{{.*}}) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[P:.*]] = call_opaque "pp::rt::gen::addr"(%[[HI]])
// CHECK: call_opaque "pp::rt::clip"(%{{.*}}, %{{.*}}, %[[P]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"nullptr">, 2 : index, 3 : index]}
// CHECK: call_opaque "pp::rt::gen::view"{{.*}}#emitc.opaque<"pp::rt::DType::F64">
// CHECK: call_opaque "pp::rt::cast"

// Dropout: ratio and training mode are constants, and in training mode the
// context says whether the running pass trains (the identity in an
// evaluation); the seed is the step's
// seed of the op's stream unless the op has one, and the offset places the
// micro-batch's 32 elements in the mini-batch.
// CHECK-LABEL: emitc.func @dropout(
// CHECK-SAME: %[[CTX:[^:]*]]: !emitc.opaque<"pp::rt::StageContext&">, %[[MB:[^:]*]]: i64)
// CHECK: %[[SEED:.*]] = call_opaque "pp::rt::gen::dropoutSeed"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"3ull">]}
// CHECK: %[[OFF:.*]] = call_opaque "pp::rt::gen::dropoutOffset"(%[[MB]]) {args = [0 : index, #emitc.opaque<"32">]}
// CHECK: %[[TR:.*]] = call_opaque "pp::rt::gen::training"(%[[CTX]])
// CHECK: call_opaque "pp::rt::dropout"(%{{.*}}, %{{.*}}, %[[TR]], %[[SEED]], %[[OFF]], %{{.*}}, %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"2.500000000e-01f">, 2 : index, 3 : index, 4 : index, 5 : index, 6 : index]}
// CHECK-NOT: gen::dropoutSeed
// CHECK: %[[OFF2:.*]] = call_opaque "pp::rt::gen::dropoutOffset"(%[[MB]])
// CHECK: %[[TR2:.*]] = call_opaque "pp::rt::gen::training"(%[[CTX]])
// CHECK: call_opaque "pp::rt::dropout"(%{{.*}}, %{{.*}}, %[[TR2]], %[[OFF2]], %{{.*}}, %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"2.500000000e-01f">, 2 : index, #emitc.opaque<"7ull">, 3 : index, 4 : index, 5 : index]}

// pp.fused: out[i] = f(x[i mod 32], b[i mod 8]) before its stage function,
// run over the 32 elements of the result.
// CHECK-LABEL: emitc.func @fused_fused0(
// CHECK-SAME: %[[I:.*]]: i64, %[[OUT:.*]]: !emitc.ptr<f32>, %[[IN0:.*]]: !emitc.ptr<f32>, %[[M0:.*]]: i64, %[[IN1:.*]]: !emitc.ptr<f32>, %[[M1:.*]]: i64)
// CHECK-SAME: specifiers = ["PP_FUSED_INLINE"]
// CHECK: %[[R0:.*]] = rem %[[I]], %[[M0]]
// CHECK: %[[L0:.*]] = subscript %[[IN0]][%[[R0]]]
// CHECK: %[[X:.*]] = load %[[L0]]
// CHECK: %[[R1:.*]] = rem %[[I]], %[[M1]]
// CHECK: %[[L1:.*]] = subscript %[[IN1]][%[[R1]]]
// CHECK: %[[B:.*]] = load %[[L1]]
// CHECK: %[[A:.*]] = call_opaque "pp::rt::fused::add"(%[[X]], %[[B]]) : (f32, f32) -> f32
// CHECK: %[[S:.*]] = call_opaque "pp::rt::fused::sigmoid"(%[[A]])
// CHECK: %[[M:.*]] = call_opaque "pp::rt::fused::mul"(%[[S]], %[[X]])
// CHECK: %[[Y:.*]] = subscript %[[OUT]][%[[I]]]
// CHECK: assign %[[M]] : f32 to %[[Y]]
// CHECK: return
// CHECK-LABEL: emitc.func @fused(
// CHECK-NOT: pp::rt::unary
// CHECK-NOT: pp::rt::binary
// CHECK: %[[XV:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 8}">]}
// CHECK: %[[BV:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{8}">]}
// CHECK: %[[YV:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{4, 8}">]}
// CHECK: %[[N:.*]] = "emitc.constant"() <{value = 32 : i64}>
// CHECK: %[[YP:.*]] = call_opaque "pp::rt::fused::data"(%[[YV]]) {template_args = [#emitc.opaque<"float">]}
// CHECK: %[[XP:.*]] = call_opaque "pp::rt::fused::data"(%[[XV]])
// CHECK: %[[XN:.*]] = "emitc.constant"() <{value = 32 : i64}>
// CHECK: %[[BP:.*]] = call_opaque "pp::rt::fused::data"(%[[BV]])
// CHECK: %[[BN:.*]] = "emitc.constant"() <{value = 8 : i64}>
// CHECK: %[[ST:.*]] = call_opaque "pp::rt::fused::forEach"(%{{.*}}, %[[N]], %[[YP]], %[[XP]], %[[XN]], %[[BP]], %[[BN]]) {template_args = [#emitc.opaque<"fused_fused0">]}
// CHECK: call_opaque "pp::rt::gen::check"(%{{.*}}, %[[ST]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22onnx.Mul 'swish' fused with onnx.Add 'bias_add', onnx.Sigmoid\22">]}
// CHECK: call_opaque "pp::rt::gen::output"(%{{.*}}, %{{.*}}, %[[YV]])

module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x", "b", "i"], pp.output_names = ["y"]} {
  func.func @unary(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %r = onnx.Relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("relu")
    %l = onnx.LeakyRelu %x {alpha = 0.25 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %g = onnx.Gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return
  }
  func.func @binary(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %b = pp.input %mb {index = 1 : i64} : tensor<8xf32>
    %a = onnx.Add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %c = onnx.Less %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
    %w = onnx.Where %c, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    return
  }
  func.func @clip_cast(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %hi = onnx.Constant dense<6.0> : tensor<f32>
    %y = onnx.Clip %x max %hi : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %d = onnx.Cast %y {to = 11 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf64>
    return
  }
  func.func @dropout(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %r = onnx.Constant dense<0.25> : tensor<f32>
    %t = onnx.Constant dense<true> : tensor<i1>
    %y, %m = onnx.Dropout %x ratio %r training_mode %t {stream = 3 : i64} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
    %z, %n = onnx.Dropout %x ratio %r training_mode %t {seed = 7 : i64} : (tensor<4x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
    return
  }
  func.func @fused(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %b = pp.input %mb {index = 1 : i64} : tensor<8xf32>
    %r = pp.fused %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%x0: tensor<4x8xf32>, %b0: tensor<8xf32>):
      %a = onnx.Add %x0, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("bias_add")
      %s = onnx.Sigmoid %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %m = onnx.Mul %s, %x0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("swish")
      pp.yield %m : tensor<4x8xf32>
    } loc("swish")
    pp.output %r, %mb {index = 0 : i64, combine = "concat"} : tensor<4x8xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @unary {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
