// RUN: pipeline-opt %s --pp-schedule="kind=1f1b" | FileCheck %s --check-prefix=ONEF
// RUN: pipeline-opt %s --pp-schedule="kind=gpipe" | FileCheck %s --check-prefix=GPIPE
// RUN: pipeline-opt %s --pp-schedule="kind=interleaved chunks=2" | FileCheck %s --check-prefix=INTER
// RUN: not pipeline-opt %s --pp-schedule="kind=zb-h1" 2>&1 | FileCheck %s --check-prefix=ZB
// RUN: not pipeline-opt %s --pp-schedule="kind=interleaved chunks=3" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not pipeline-opt %s --pp-schedule="kind=zigzag" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not pipeline-opt %s --pp-schedule="kind=1f1b chunks=0" 2>&1 | FileCheck %s --check-prefix=CHUNKS0
// RUN: not pipeline-opt %s --pp-schedule="kind=1f1b chunks=1,2" 2>&1 | FileCheck %s --check-prefix=CHUNKS2

// Four stage programs with 4 micro-batches: on 4 devices (1F1B, GPipe) or
// on 2 devices with 2 chunks each (interleaved: device 0 holds stages 0, 2).
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 4, num_stages = 4, stage_devices = ["a", "b", "c", "d"]>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage1_update() attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage2_forward(%mb: tensor<i64>) attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage2_backward(%mb: tensor<i64>) attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage2_update() attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage3_forward(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage3_backward(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage3_update() attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<update>} { return }
}

// 1F1B: stage 1 warms up with p - s - 1 = 2 forwards, then alternates.
// ONEF: pp.schedule
// ONEF-LABEL: pp.device 1 attributes {name = "b"}
// ONEF-NEXT: pp.action forward @stage1_forward {micro_batch = 0 : i64, stage = 1 : i64, weight_version = 0 : i64}
// ONEF-NEXT: pp.action forward @stage1_forward {micro_batch = 1 : i64
// ONEF-NEXT: pp.action forward @stage1_forward {micro_batch = 2 : i64
// ONEF-NEXT: pp.action backward @stage1_backward {micro_batch = 0 : i64
// ONEF-NEXT: pp.action forward @stage1_forward {micro_batch = 3 : i64
// ONEF-NEXT: pp.action backward @stage1_backward {micro_batch = 1 : i64
// ONEF-NEXT: pp.action backward @stage1_backward {micro_batch = 2 : i64
// ONEF-NEXT: pp.action backward @stage1_backward {micro_batch = 3 : i64
// ONEF-NEXT: pp.action optimizer_step @stage1_update {micro_batch = -1 : i64, stage = 1 : i64
// ONEF-LABEL: pp.device 3 attributes {name = "d"}
// ONEF-NEXT: pp.action forward @stage3_forward {micro_batch = 0 : i64
// ONEF-NEXT: pp.action backward @stage3_backward {micro_batch = 0 : i64

// GPipe: all forwards, then all backwards.
// GPIPE-LABEL: pp.device 0
// GPIPE-COUNT-4: pp.action forward @stage0_forward
// GPIPE-COUNT-4: pp.action backward @stage0_backward
// GPIPE-NEXT: pp.action optimizer_step @stage0_update

// Interleaved: 2 devices, device 0 holds stages 0 and 2.
// INTER: pp.plan = #pp.plan<schedule = "interleaved", micro_batches = 4, chunks = 2, num_stages = 4,
// INTER: pp.schedule {
// INTER-LABEL: pp.device 0 attributes {name = "a"}
// INTER-NEXT: pp.action forward @stage0_forward {micro_batch = 0 : i64, stage = 0 : i64
// INTER-NEXT: pp.action forward @stage0_forward {micro_batch = 1 : i64, stage = 0 : i64
// INTER-NEXT: pp.action forward @stage2_forward {micro_batch = 0 : i64, stage = 2 : i64
// INTER-LABEL: pp.device 1 attributes {name = "b"}
// INTER-NOT: @stage0_
// INTER-NOT: @stage2_
// INTER: }

// ZB: schedule zb-h1 runs input and weight gradients apart: split with --pp-split-stages="split-backward=true"
// CHUNKS: 4 stages do not split into 3 chunks per device

// No sentinel: an explicit 0 is an error, not "the plan's".
// CHUNKS0: pp-schedule: chunks must be >= 1, got 0
// CHUNKS2: pp-schedule: chunks takes one value, got 2
// KIND: pipeline-opt: for the --kind option: unknown value 'zigzag': expected 'gpipe', '1f1b', 'interleaved', 'zb-h1', 'zb-h2', 'zb-v', 'dualpipev', 'pipedream', 'pipedream-2bw', 'nf1b', 'v-timeprest', 'i-timeprest', 'hetpipe' or nothing (the default)
