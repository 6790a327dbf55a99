// RUN: pipeline-opt %s -split-input-file --pp-plan-report="cluster=%clusters/compute-bound.json" -verify-diagnostics -o /dev/null

// Stage 1 runs the backward of micro-batch 0 before its forward: the
// simulator reports the stuck devices instead of a time.
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2, stage_devices = ["n0/gpu0", "n0/gpu1"]>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} { return }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} { return }
  // expected-error-re @+1 {{the schedule deadlocks: {{.*}}device 1{{.*}}backward(stage 1, mb 0){{.*}}forward(stage 1, mb 0)}}
  pp.schedule {
    pp.device 0 attributes {name = "n0/gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "n0/gpu1"} {
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1, stage_devices = ["elsewhere"]>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} { return }
  // expected-error @+1 {{device 'elsewhere' of the schedule is not in the cluster}}
  pp.schedule {
    pp.device 0 attributes {name = "elsewhere"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
