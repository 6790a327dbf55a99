// RUN: not pp-interpret %s 2>&1 | FileCheck %s

// Device 0 runs its backward before its forward: the backward waits for a
// gradient that needs stage 1's forward, which waits for stage 0's forward.
// The runner reports the cycle instead of hanging.
// CHECK: error: deadlock: every device waits for a message nobody sends;
// CHECK-SAME: device 0 in backward(stage 0, mb 0) waits for pp.recv from stage 1 (tag 1, micro-batch 0);
// CHECK-SAME: device 1 in forward(stage 1, mb 0) waits for pp.recv from stage 0 (tag 0, micro-batch 0);
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>, pp.input_names = [], pp.output_names = []} {
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
