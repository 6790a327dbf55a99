// RUN: pipeline-opt %s | pipeline-opt | FileCheck %s

// A two-stage pipeline: stage 0 sends its activation forward and receives
// the gradient back; the module-level pp.num_stages makes the dialect check
// that the transfers pair up.
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  // CHECK-LABEL: func.func @stage0
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) -> tensor<4xf32> attributes {pp.stage = 0 : i64} {
    // CHECK: pp.send %{{.*}}, %{{.*}} {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    pp.send %x, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    // CHECK: pp.recv %{{.*}} {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
    %g = pp.recv %mb {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
    return %g : tensor<4xf32>
  }
  // CHECK-LABEL: func.func @stage1
  func.func @stage1(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} {
    %a = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    pp.send %a, %mb {peer = 0 : i64, tag = 1 : i64} : tensor<4xf32>
    return
  }
}
