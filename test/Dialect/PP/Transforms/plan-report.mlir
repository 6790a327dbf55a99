// RUN: pipeline-opt %s -split-input-file --pp-schedule="kind=gpipe" --pp-plan-report="cluster=%clusters/compute-bound.json" -o /dev/null | FileCheck %s --check-prefix=GPIPE
// RUN: pipeline-opt %s -split-input-file --pp-schedule="kind=1f1b" --pp-plan-report="cluster=%clusters/compute-bound.json" -o /dev/null | FileCheck %s --check-prefix=ONEF
// RUN: pipeline-opt %s -split-input-file --pp-schedule="kind=interleaved chunks=2" --pp-plan-report="cluster=%clusters/compute-bound.json" -o /dev/null | FileCheck %s --check-prefix=INTER
// RUN: pipeline-opt %s -split-input-file --pp-schedule="kind=1f1b" --pp-plan-report="cluster=%clusters/shared-cores.json" -o /dev/null | FileCheck %s --check-prefix=SHARED
// RUN: pipeline-opt %s -split-input-file --pp-schedule="kind=1f1b" --pp-plan-report="cluster=%clusters/compute-bound.json dir=%t.plan summary=" -o /dev/null
// RUN: FileCheck %s --input-file=%t.plan/plan.json --check-prefix=JSON
// RUN: FileCheck %s --input-file=%t.plan/timeline.json --check-prefix=TRACE
// RUN: FileCheck %s --input-file=%t.plan/timeline.svg --check-prefix=SVG
// The devices' simulated busy time in a step, which generated programs set
// against what they measure (pp.planned_busy_ns): 4 Relus of 6.47 us each.
// RUN: pipeline-opt %s -split-input-file --pp-schedule="kind=1f1b" --pp-plan-report="cluster=%clusters/compute-bound.json summary=" | FileCheck %s --check-prefix=BUSY
// BUSY: pp.planned_busy_ns = array<i64: 25891, 25891, 25891, 25891>

// Four identical stages (one Relu each, links that cost nothing): the simulated bubble
// is the closed form, (p-1)/(m+p-1) = 3/7 for GPipe and 1F1B with p = m = 4,
// and (p-1)/(v*m+p-1) = 1/9 for interleaving 2 chunks on p = 2 devices.
// GPIPE: == predicted step: 4 stages on 4 devices, schedule gpipe, 4 micro-batches of 64 ==
// GPIPE: bubble 42.9%
// ONEF: bubble 42.9%
// INTER: == predicted step: 4 stages on 2 devices, schedule interleaved, 4 micro-batches of 64 ==
// INTER: bubble 11.1%
// The same devices sharing one processor (shared-cores.json): a device's op
// slows down while the others run, so the step is the 16 stage-micro-batches
// of work back to back (16 x 6.5 us), where 1F1B alone takes 7 x 6.5 us.
// SHARED: shared processors: 4 devices of n0 ask for 4.00 of its 1.00 processors
// SHARED-NEXT: iteration 0.104 ms
// SHARED: 4 stages take 103.6 us per step against 103.6 us of compute back to back
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 4, num_stages = 4, stage_devices = ["n0/gpu0", "n0/gpu1", "n0/gpu2", "n0/gpu3"]>, pp.input_names = [], pp.output_names = []} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<64x1024xf32>
    %y = onnx.Relu %x : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<64x1024xf32>
    %y = onnx.Relu %x : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return
  }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage1_update() attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage2_forward(%mb: tensor<i64>) attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<64x1024xf32>
    %y = onnx.Relu %x : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return
  }
  func.func @stage2_backward(%mb: tensor<i64>) attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage2_update() attributes {pp.stage = 2 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage3_forward(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<64x1024xf32>
    %y = onnx.Relu %x : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return
  }
  func.func @stage3_backward(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage3_update() attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<update>} { return }
}

// JSON: "schedule": "1f1b",
// JSON: "micro_batches": 4,
// JSON: "devices": [
// JSON: "name": "n0/gpu0",
// JSON: "kind": "P4000",
// JSON: "stages": [
// JSON: "forward_seconds":
// JSON: "ops": [
// JSON-NEXT: "onnx.Relu"
// JSON: "prediction": {
// JSON-NEXT: "iteration_seconds":
// JSON-NEXT: "bubble_fraction": 0.428571
// TRACE: {"traceEvents":[
// TRACE: "name":"F0","cat":"forward","ph":"X"
// SVG: <svg
// SVG-COUNT-36: <rect
