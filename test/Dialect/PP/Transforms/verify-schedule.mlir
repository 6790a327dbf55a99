// RUN: not pipeline-opt %s -split-input-file --pp-verify-schedule 2>&1 | FileCheck %s

// A cycle across devices (device 0's backward before its forward): both
// stuck devices are named, with the send each waits for.
// CHECK: error: the schedule deadlocks
// CHECK: note: device 0 is stuck at action 0, backward(stage 0, mb 0): its pp.recv from stage 1 (tag 1, micro-batch 0) waits; its pp.send is in @stage1_backward, which backward(stage 1, mb 0) (action 1) on device 1 has not reached
// CHECK: note: device 1 is stuck at action 0, forward(stage 1, mb 0): its pp.recv from stage 0 (tag 0, micro-batch 0) waits; its pp.send is in @stage0_forward, which forward(stage 0, mb 0) (action 1) on device 0 has not reached
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %a = onnx.Constant dense<1.0> : tensor<4xf32>
    pp.send %a, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %g = pp.recv %mb {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
    return
  }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %a = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} {
    %g = onnx.Constant dense<2.0> : tensor<4xf32>
    pp.send %g, %mb {peer = 0 : i64, tag = 1 : i64} : tensor<4xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "gpu1"} {
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// A recv whose micro-batch has no sender: micro-batch 1's forward is
// missing from device 0.
// CHECK: error: the schedule deadlocks
// CHECK: note: device 1 is stuck at action 1, forward(stage 1, mb 1): its pp.recv from stage 0 (tag 0, micro-batch 1) waits; its pp.send is in @stage0_forward, which no action of the schedule runs for micro-batch 1
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 2, num_stages = 2>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %a = onnx.Constant dense<1.0> : tensor<4xf32>
    pp.send %a, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %a = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "gpu1"} {
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 1 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// A backward that unstashes what its forward has not yet kept.
// CHECK: error: the schedule unstashes before it stashes: device 0 (action 0, backward(stage 0, mb 0)) takes slot 0 of micro-batch 0, which no earlier action of stage 0 on the device stashed
// CHECK: note: the pp.unstash
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %a = onnx.Constant dense<1.0> : tensor<4xf32>
    pp.stash %a, %mb {slot = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %a = pp.unstash %mb {slot = 0 : i64} : tensor<4xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
