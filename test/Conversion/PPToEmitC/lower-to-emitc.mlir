// RUN: pipeline-opt %s --pp-fuse-elementwise --pp-memory-plan --pp-lower-to-emitc | FileCheck %s
// RUN: pipeline-opt %s --pp-fuse-elementwise --pp-memory-plan --pp-lower-to-emitc | mlir-translate --mlir-to-cpp | FileCheck %s --check-prefix=CPP
// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s --check-prefix=NOFUSE

// End to end: two stages: tensors are views of the planned arena, ops are
// kernel calls with checked statuses, pp ops are StageContext calls, the
// groups of --pp-fuse-elementwise are generated kernels, and the table
// lists globals, inputs, outputs, functions and each device's actions.
// CHECK: emitc.include "pp/Runtime/Generated.h"
// CHECK-LABEL: emitc.func @stage0_forward
// CHECK-SAME: (%[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">, %[[MB:.*]]: i64)
// CHECK: %[[K:.*]] = call_opaque "pp::rt::gen::kernels"(%[[CTX]])
// The input is stashed: it is read into the stash's buffer.
// CHECK: %[[XV:.*]] = call_opaque "pp::rt::gen::view"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::stashTarget"(%[[CTX]], %[[MB]], %[[XV]])
// CHECK: call_opaque "pp::rt::gen::input"(%[[CTX]], %[[MB]], %[[X]])
// CHECK: %[[W:.*]] = call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[Y:.*]] = call_opaque "pp::rt::gen::view"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"256">
// CHECK: %[[S:.*]] = call_opaque "pp::rt::matmul"(%[[K]], %[[X]], %[[W]], %[[Y]])
// CHECK: call_opaque "pp::rt::gen::check"(%[[CTX]], %[[S]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22onnx.MatMul 'fc'\22">]}
// CHECK: call_opaque "pp::rt::gen::send"(%[[CTX]], %[[MB]], %[[Y]]) {args = [0 : index, #emitc.opaque<"1">, #emitc.opaque<"0">, 1 : index, 2 : index]}
// CHECK: call_opaque "pp::rt::gen::stash"
// CHECK: return
// CHECK-LABEL: emitc.func @stage0_backward
// CHECK: call_opaque "pp::rt::gen::recvView"
// CHECK: call_opaque "pp::rt::gen::unstashView"
// CHECK: call_opaque "pp::rt::gemm"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"1.000000000e+00f">, #emitc.opaque<"0.000000000e+00f">, #emitc.opaque<"true">, #emitc.opaque<"false">, 3 : index]}
// CHECK: call_opaque "pp::rt::gen::accumulate"
// CHECK-LABEL: emitc.func @stage0_update
// CHECK: call_opaque "pp::rt::gen::accumulatedView"
// The step updates the weight's storage: nothing left to write back.
// CHECK: call_opaque "pp::rt::sgdStep"
// CHECK-NOT: writeGlobal
// CHECK: return
// A bias add and its relu become one generated kernel: the per-element
// function reads the bias at i mod 8, and the launch runs it over 32 values.
// CHECK-LABEL: emitc.func @stage1_forward_fused0
// CHECK-SAME: (%[[I:.*]]: i64, %[[OUT:.*]]: !emitc.ptr<f32>, %[[IN0:.*]]: !emitc.ptr<f32>, %[[M0:.*]]: i64, %[[IN1:.*]]: !emitc.ptr<f32>, %[[M1:.*]]: i64)
// CHECK-SAME: specifiers = ["PP_FUSED_INLINE"]
// CHECK: %[[R1:.*]] = rem %[[I]], %[[M1]]
// CHECK: %[[A:.*]] = call_opaque "pp::rt::fused::add"
// CHECK: %[[R:.*]] = call_opaque "pp::rt::fused::relu"(%[[A]])
// CHECK: assign %[[R]]
// CHECK-LABEL: emitc.func @stage1_forward(
// CHECK-NOT: pp::rt::unary
// CHECK: %[[N:.*]] = "emitc.constant"() <{value = 32 : i64}>
// CHECK: call_opaque "pp::rt::fused::forEach"(%{{.*}}, %[[N]], {{.*}}) {template_args = [#emitc.opaque<"stage1_forward_fused0">]}
// CHECK: call_opaque "pp::rt::gen::output"
// CHECK-LABEL: emitc.func @stage1_update_fused0
// CHECK: call_opaque "pp::rt::fused::add"
// CHECK-NEXT: call_opaque "pp::rt::fused::relu"
// CHECK-LABEL: emitc.func @stage1_update(
// CHECK: call_opaque "pp::rt::binary"
// CHECK: call_opaque "pp::rt::gen::writeGlobal"
// CHECK: call_opaque "pp::rt::fused::forEach"({{.*}}) {template_args = [#emitc.opaque<"stage1_update_fused0">]}
// CHECK: call_opaque "pp::rt::gen::writeGlobal"
// CHECK-LABEL: emitc.func @makeProgram()
// CHECK-LABEL: emitc.func @main(
// CHECK-NOT: emitc.verbatim
// NOFUSE-NOT: fused
// NOFUSE: call_opaque "pp::rt::binary"
// NOFUSE: call_opaque "pp::rt::unary"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::UnaryKind(1)">
// CPP: #include "pp/Runtime/Generated.h"
// CPP-LABEL: void stage0_forward(
// CPP-SAME: pp::rt::StageContext& [[CTX:v[0-9]+]], int64_t [[MB:v[0-9]+]]) {
// CPP: pp::rt::Status [[S:v[0-9]+]] = pp::rt::matmul(
// CPP-NEXT: pp::rt::gen::check([[CTX]], [[S]], "onnx.MatMul 'fc'");
// CPP-LABEL: PP_FUSED_INLINE void stage1_forward_fused0(
// CPP: pp::rt::fused::forEach<stage1_forward_fused0>(
// CPP-LABEL: static pp::rt::ProgramInfo makeProgram() {
// CPP-NEXT: pp::rt::ProgramInfo [[P:v[0-9]+]];
// CPP: [[P]].globals = {
// CPP-NEXT: {.name = "w", .dtype = pp::rt::DType::F32, .shape = {8, 8}, .trainable = true, .dataOffset = 0, .ownerStage = 0},
// CPP: [[P]].inputs = {
// CPP-NEXT: {.name = "x", .dtype = pp::rt::DType::F32, .shape = {8, 8}, .randomBound = 10}};
// CPP: [[P]].outputs = {
// CPP-NEXT: {.name = "y", .combine = "concat", .dtype = pp::rt::DType::F32, .shape = {4, 8}}};
// CPP: [[P]].stageGlobals = {
// CPP-NEXT: {0, 2},
// CPP-NEXT: {1}};
// CPP: [[P]].schedule = {
// CPP-NEXT: {
// CPP-NEXT: {.kind = pp::kinds::ActionKind::Forward, .function = 0, .stage = 0, .microBatch = 0},
// CPP: {.kind = pp::kinds::ActionKind::OptimizerStep, .function = 2, .stage = 0, .microBatch = -1}},
// CPP-NEXT: {
// CPP-NEXT: {.kind = pp::kinds::ActionKind::Forward, .function = 3, .stage = 1, .microBatch = 0},
// CPP: {.kind = pp::kinds::ActionKind::OptimizerStep, .function = 4, .stage = 1, .microBatch = -1}}};
// CPP-LABEL: int main(
// CPP-SAME: int [[ARGC:v[0-9]+]], char** [[ARGV:v[0-9]+]]) {
// CPP-NEXT: pp::rt::ProgramInfo [[T:v[0-9]+]] = makeProgram();
// CPP-NEXT: int [[S:v[0-9]+]] = pp::rt::trainMain([[T]], [[ARGC]], [[ARGV]]);
// CPP-NEXT: return [[S]];
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 2, num_stages = 2>, pp.input_names = ["x"], pp.output_names = ["y"]} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %w = onnx.global_read @w : tensor<8x8xf32>
    %y = onnx.MatMul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc")
    pp.send %y, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4x8xf32>
    pp.stash %x, %mb {slot = 0 : i64} : tensor<4x8xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %dy = pp.recv %mb {peer = 1 : i64, tag = 1 : i64} : tensor<4x8xf32>
    %x = pp.unstash %mb {slot = 0 : i64} : tensor<4x8xf32>
    %dw = onnx.Gemm %x, %dy {beta = 0.0 : f32, transA = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    pp.accumulate %dw {slot = 0 : i64} : tensor<8x8xf32>
    return
  }
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %step = onnx.global_read @pp.step : tensor<i64>
    %w = onnx.global_read @w : tensor<8x8xf32>
    %g = pp.accumulated {slot = 0 : i64} : tensor<8x8xf32>
    %new = train.sgd %w, %g, %step {lr = 0.1 : f64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<i64>) -> tensor<8x8xf32>
    train.global_write @w, %new : tensor<8x8xf32>
    return
  }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %y = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4x8xf32>
    %b = onnx.Constant dense<1.0> : tensor<8xf32>
    %a = onnx.Add %y, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = onnx.Relu %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
    pp.output %r, %mb {index = 0 : i64, combine = "concat"} : tensor<4x8xf32>
    pp.send %r, %mb {peer = 0 : i64, tag = 1 : i64} : tensor<4x8xf32>
    return
  }
  // A fused kernel runs where its last op is: an Add reading @v may not move
  // past a write of @v, so Add and Relu stay separate kernels here.
  func.func @stage1_update() attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<update>} {
    %v = onnx.global_read @v : tensor<8xf32>
    %a = onnx.Add %v, %v : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    train.global_write @v, %a : tensor<8xf32>
    %b = onnx.Add %a, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %r = onnx.Relu %b : (tensor<8xf32>) -> tensor<8xf32>
    train.global_write @v, %r : tensor<8xf32>
    return
  }
  onnx.global "trainable" @w : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
  onnx.global "state" @v : tensor<8xf32> = dense<0.5> : tensor<8xf32>
  onnx.global "state" @pp.step : tensor<i64> = dense<0> : tensor<i64>
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
