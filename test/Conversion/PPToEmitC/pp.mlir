// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s

// Stage functions become (StageContext&, micro-batch) functions, pp ops
// StageContext calls; the micro-batch is the argument or, in per-step
// functions, a constant. The table and main() are EmitC too: a
// ProgramInfo variable whose members are assigned, and calls.

// CHECK: emitc.include "pp/Runtime/Generated.h"
// CHECK-LABEL: emitc.func @stage0_forward(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">, %[[MB:.*]]: i64) {
// CHECK-NEXT: call_opaque "pp::rt::gen::kernels"(%[[CTX]]) : (!emitc.opaque<"pp::rt::StageContext&">) -> !emitc.opaque<"pp::rt::Context&">
// CHECK-NEXT: %[[XV:.*]] = call_opaque "pp::rt::gen::view"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}
// CHECK-NEXT: %[[X:.*]] = call_opaque "pp::rt::gen::stashTarget"(%[[CTX]], %[[MB]], %[[XV]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index, 2 : index]}
// CHECK-NEXT: call_opaque "pp::rt::gen::input"(%[[CTX]], %[[MB]], %[[X]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index, 2 : index]}
// CHECK-NEXT: call_opaque "pp::rt::gen::send"(%[[CTX]], %[[MB]], %[[X]]) {args = [0 : index, #emitc.opaque<"1">, #emitc.opaque<"0">, 1 : index, 2 : index]}
// CHECK-NEXT: call_opaque "pp::rt::gen::stash"(%[[CTX]], %[[MB]], %[[X]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index, 2 : index]}
// CHECK-NEXT: return

// CHECK-LABEL: emitc.func @stage0_backward(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">, %[[MB:.*]]: i64) {
// A message is read in the driver's buffer (received ahead), not the arena.
// CHECK: %[[DY:.*]] = call_opaque "pp::rt::gen::recvView"(%[[CTX]], %[[MB]]) {args = [0 : index, #emitc.opaque<"1">, #emitc.opaque<"1">, 1 : index, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}
// The stash is read in place, and the gradient is computed in its sum when
// it is the step's first (accumulateTarget).
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::unstashView"(%[[CTX]], %[[MB]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index]}
// CHECK: %[[GV:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: %[[G:.*]] = call_opaque "pp::rt::gen::accumulateTarget"(%[[CTX]], %[[GV]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index]}
// CHECK: call_opaque "pp::rt::binary"(%{{.*}}, %[[DY]], %[[X]], %[[G]])
// CHECK: call_opaque "pp::rt::gen::accumulate"(%[[CTX]], %[[G]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index]}

// A function without a micro-batch argument still takes one.
// CHECK-LABEL: emitc.func @stage0_update(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">, %{{.*}}: i64) {
// CHECK: %[[G:.*]] = call_opaque "pp::rt::gen::accumulatedView"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[C:.*]] = "emitc.constant"() <{value = 0 : i64}> : () -> i64
// CHECK: call_opaque "pp::rt::gen::send"(%[[CTX]], %[[C]], %[[G]])

// CHECK-LABEL: emitc.func @stage1_forward(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">, %[[MB:.*]]: i64) {
// CHECK: %[[Y:.*]] = call_opaque "pp::rt::gen::recvView"
// CHECK: call_opaque "pp::rt::gen::output"(%[[CTX]], %[[MB]], %[[Y]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index, 2 : index]}

// CHECK-LABEL: emitc.func @stage1_update(
// CHECK: %[[C:.*]] = "emitc.constant"() <{value = 0 : i64}> : () -> i64
// CHECK: call_opaque "pp::rt::gen::recvView"(%{{.*}}, %[[C]]) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"2">, 1 : index, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}

// The table: the arena of each function is pp.arena_bytes of the memory
// plan, the actions name functions by index.
// CHECK-LABEL: emitc.func @makeProgram() -> !emitc.opaque<"pp::rt::ProgramInfo"> attributes {specifiers = ["static"]}
// CHECK: %[[P:.*]] = "emitc.variable"() <{value = #emitc.opaque<"">}> : () -> !emitc.lvalue<!emitc.opaque<"pp::rt::ProgramInfo">>
// CHECK: %[[NAME:.*]] = "emitc.member"(%[[P]]) <{member = "modelName"}>
// CHECK: %[[V:.*]] = literal "\22two\22" : !emitc.opaque<"std::string">
// CHECK: assign %[[V]] : !emitc.opaque<"std::string"> to %[[NAME]]
// CHECK: literal "pp::kinds::ScheduleKind::OneFOneB"
// CHECK: <{member = "deviceNames"}>
// CHECK: literal "{\0A    \22gpu0\22,\0A    \22gpu1\22}"
// CHECK: <{member = "plannedPeakBytes"}>
// CHECK: <{member = "inputs"}>
// CHECK: literal "{\0A    {.name = \22x\22, .dtype = pp::rt::DType::F32, .shape = {8, 8}, .randomBound = 10}}"
// CHECK: <{member = "outputs"}>
// CHECK: literal "{\0A    {.name = \22y\22, .combine = \22concat\22, .dtype = pp::rt::DType::F32, .shape = {4, 8}}}"
// CHECK: <{member = "functions"}>
// CHECK-SAME: !emitc.lvalue<!emitc.opaque<"std::vector<pp::rt::FunctionInfo>">>
// Each function lists its receives (peer stage, tag, micro-batch: -2 for
// the function's, dtype, shape) for the driver to post ahead.
// CHECK: literal "{\0A    {.name = \22stage0_forward\22, .function = &stage0_forward, .stage = 0, .phase = pp::kinds::Phase::Forward, .arenaBytes = 256},\0A    {.name = \22stage0_backward\22, .function = &stage0_backward, .stage = 0, .phase = pp::kinds::Phase::Backward, .arenaBytes = 256, .receives = {{[{][{]}}.peerStage = 1, .tag = 1, .microBatch = -2, .dtype = pp::rt::DType::F32, .shape = {4, 8}{{[}][}]}}},
// CHECK-SAME: {.name = \22stage1_forward\22, .function = &stage1_forward, .stage = 1, .phase = pp::kinds::Phase::Forward, .arenaBytes = 0, .receives = {{[{][{]}}.peerStage = 0, .tag = 0, .microBatch = -2, .dtype = pp::rt::DType::F32, .shape = {4, 8}{{[}][}]}}},
// CHECK-SAME: {.name = \22stage1_update\22, .function = &stage1_update, .stage = 1, .phase = pp::kinds::Phase::Update, .arenaBytes = 0, .receives = {{[{][{]}}.peerStage = 0, .tag = 2, .microBatch = 0, .dtype = pp::rt::DType::F32, .shape = {4, 8}{{[}][}]}}}}"
// CHECK: <{member = "schedule"}>
// CHECK: literal "{\0A    {\0A        {.kind = pp::kinds::ActionKind::Forward, .function = 0, .stage = 0, .microBatch = 0},
// CHECK-SAME: {.kind = pp::kinds::ActionKind::OptimizerStep, .function = 4, .stage = 1, .microBatch = -1}}}"
// CHECK: %[[R:.*]] = load %[[P]]
// CHECK: return %[[R]]
// CHECK-LABEL: emitc.func @main(
// CHECK-SAME: %[[ARGC:.*]]: !emitc.opaque<"int">, %[[ARGV:.*]]: !emitc.ptr<!emitc.ptr<!emitc.opaque<"char">>>) -> !emitc.opaque<"int">
// CHECK: %[[T:.*]] = call @makeProgram()
// CHECK: %[[S:.*]] = call_opaque "pp::rt::trainMain"(%[[T]], %[[ARGC]], %[[ARGV]])
// CHECK: return %[[S]]

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 2, num_stages = 2>, pp.input_names = ["x"], pp.output_names = ["y"], onnx.graph_name = "two"} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    pp.send %x, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4x8xf32>
    pp.stash %x, %mb {slot = 0 : i64} : tensor<4x8xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %dy = pp.recv %mb {peer = 1 : i64, tag = 1 : i64} : tensor<4x8xf32>
    %x = pp.unstash %mb {slot = 0 : i64} : tensor<4x8xf32>
    %g = onnx.Mul %dy, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    pp.accumulate %g {slot = 0 : i64} : tensor<4x8xf32>
    return
  }
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %g = pp.accumulated {slot = 0 : i64} : tensor<4x8xf32>
    %c = onnx.Constant dense<0> : tensor<i64>
    pp.send %g, %c {peer = 1 : i64, tag = 2 : i64} : tensor<4x8xf32>
    return
  }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %y = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4x8xf32>
    pp.output %y, %mb {index = 0 : i64, combine = "concat"} : tensor<4x8xf32>
    pp.send %y, %mb {peer = 0 : i64, tag = 1 : i64} : tensor<4x8xf32>
    return
  }
  func.func @stage1_update() attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<update>} {
    %c = onnx.Constant dense<0> : tensor<i64>
    %g = pp.recv %c {peer = 0 : i64, tag = 2 : i64} : tensor<4x8xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 1 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 1 : i64, weight_version = 0 : i64}
      pp.action optimizer_step @stage0_update {stage = 0 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "gpu1"} {
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 1 : i64, weight_version = 0 : i64}
      pp.action optimizer_step @stage1_update {stage = 1 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
    }
  }
}
