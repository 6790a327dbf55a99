// RUN: pipeline-opt %s -split-input-file --pp-plan-report="cluster=%clusters/compute-bound.json" -verify-diagnostics -o /dev/null

// Stage 1 runs the backward of micro-batch 0 before its forward: the
// simulator reports the stuck devices instead of a time.
module attributes {pp.num_stages = 2 : i64, pp.micro_batches = 1 : i64, pp.device_order = ["n0/gpu0", "n0/gpu1"]} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} { return }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} { return }
  // expected-error-re @+1 {{the schedule deadlocks: {{.*}}device 1{{.*}}backward(stage 1, mb 0){{.*}}forward(stage 1, mb 0)}}
  pp.schedule attributes {kind = "1f1b", micro_batches = 1 : i64, chunks = 1 : i64} {
    pp.device 0 attributes {name = "n0/gpu0"} {
      pp.action "forward" @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action "backward" @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "n0/gpu1"} {
      pp.action "backward" @stage1_backward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action "forward" @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

module attributes {pp.num_stages = 1 : i64, pp.micro_batches = 1 : i64, pp.device_order = ["elsewhere"]} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
  // expected-error @+1 {{device 'elsewhere' of the schedule is not in the cluster}}
  pp.schedule attributes {kind = "1f1b", micro_batches = 1 : i64, chunks = 1 : i64} {
    pp.device 0 attributes {name = "elsewhere"} {
      pp.action "forward" @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
