// RUN: pipeline-opt %s --pp-schedule="kind=interleaved chunks=2" | FileCheck %s --check-prefix=ORDER
// RUN: not pipeline-opt %s --pp-verify-schedule 2>&1 | FileCheck %s --check-prefix=STUCK

// A weight that stages 0 and 2 both read: stage 0 updates it and sends the
// new value to stage 2's update. Interleaved on 2 devices puts both stages
// on device 0, whose last backward is stage 0's, so the built order runs
// stage 2's update first; --pp-schedule runs the sender first instead.
// ORDER-LABEL: pp.device 0
// ORDER: pp.action backward @stage0_backward {micro_batch = 3 : i64
// ORDER-NEXT: pp.action optimizer_step @stage0_update
// ORDER-NEXT: pp.action optimizer_step @stage2_update
// ORDER-LABEL: pp.device 1
// ORDER: pp.action optimizer_step @stage3_update
// ORDER-NEXT: pp.action optimizer_step @stage1_update
// The hand-made schedule of the same module in the built order deadlocks.
// STUCK: error: the schedule deadlocks: every device left waits in a pp.recv for a message that no device can send
// STUCK: note: device 0 is stuck at action 16, optimizer_step(stage 2): its pp.recv from stage 0 (tag 7, micro-batch 0) waits; its pp.send is in @stage0_update, which optimizer_step(stage 0) (action 17) on device 0 runs after the receiver: the schedule runs the receiver first
// STUCK-NOT: note: device 1
module attributes {pp.plan = #pp.plan<schedule = "interleaved", micro_batches = 4, chunks = 2, num_stages = 4, stage_devices = ["a", "b", "a", "b"]>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %zero = onnx.Constant dense<0> : tensor<i64>
    %w = onnx.Constant dense<1.0> : tensor<4xf32>
    pp.send %w, %zero {peer = 2 : i64, tag = 7 : i64} : tensor<4xf32>
    return
  }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage1_update() attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage2_forward(%mb: tensor<i64>) attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage2_backward(%mb: tensor<i64>) attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage2_update() attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<update>} {
    %zero = onnx.Constant dense<0> : tensor<i64>
    %w = pp.recv %zero {peer = 0 : i64, tag = 7 : i64} : tensor<4xf32>
    return
  }
  func.func @stage3_forward(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage3_backward(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage3_update() attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<update>} { return }
  pp.schedule {
    pp.device 0 attributes {name = "a"} {
      pp.action forward @stage0_forward {micro_batch = 0 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage0_forward {micro_batch = 1 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage2_forward {micro_batch = 0 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action forward @stage2_forward {micro_batch = 1 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action forward @stage0_forward {micro_batch = 2 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage2_backward {micro_batch = 0 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action forward @stage0_forward {micro_batch = 3 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage2_backward {micro_batch = 1 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action forward @stage2_forward {micro_batch = 2 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {micro_batch = 0 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage2_forward {micro_batch = 3 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {micro_batch = 1 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage2_backward {micro_batch = 2 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action backward @stage2_backward {micro_batch = 3 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {micro_batch = 2 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {micro_batch = 3 : i64, stage = 0 : i64, weight_version = 0 : i64}
      pp.action optimizer_step @stage2_update {micro_batch = -1 : i64, stage = 2 : i64, weight_version = 0 : i64}
      pp.action optimizer_step @stage0_update {micro_batch = -1 : i64, stage = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "b"} {
      pp.action optimizer_step @stage1_update {micro_batch = -1 : i64, stage = 1 : i64, weight_version = 0 : i64}
      pp.action optimizer_step @stage3_update {micro_batch = -1 : i64, stage = 3 : i64, weight_version = 0 : i64}
    }
  }
}

