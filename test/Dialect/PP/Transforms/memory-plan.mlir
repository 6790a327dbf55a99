// RUN: pipeline-opt %s --pp-memory-plan="report=-" | FileCheck %s

// A chain of 1 KB values: each dies at its user, so two buffers suffice and
// values alternate between them.
// CHECK: == memory plan per device
// CHECK: device 0 gpu0          : persistent 0.0 MB, accumulators 0.0 MB, stash 0.0 MB, arena 0.0 MB: peak 0.0 MB
// CHECK: device 1 gpu1          : persistent 0.0 MB, accumulators 0.3 MB, stash 0.3 MB, arena 0.3 MB: peak 0.9 MB
// CHECK: module attributes {{.*}}pp.planned_peak_bytes = array<i64: 2048, 851968>
// CHECK-LABEL: func.func @stage0_forward
// CHECK-SAME: pp.arena_bytes = 2048 : i64
// CHECK: pp.input {{.*}}pp.offsets = array<i64: 0>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 1024>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 0>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 1024>
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 4, num_stages = 2>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<256xf32>
    %a = onnx.Relu %x : (tensor<256xf32>) -> tensor<256xf32>
    %b = onnx.Relu %a : (tensor<256xf32>) -> tensor<256xf32>
    %c = onnx.Relu %b : (tensor<256xf32>) -> tensor<256xf32>
    return
  }
  // Stage 1 keeps 64 KB per micro-batch for its backward (GPipe holds all
  // 4 micro-batches: 256 KB) and sums a 256 KB gradient; its largest
  // function needs a 320 KB arena: peak 832 KB.
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<16384xf32>
    pp.stash %x, %mb {slot = 0 : i64} : tensor<16384xf32>
    return
  }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} {
    %x = pp.unstash %mb {slot = 0 : i64} : tensor<16384xf32>
    %g = onnx.Concat %x, %x, %x, %x {axis = 0 : i64} : (tensor<16384xf32>, tensor<16384xf32>, tensor<16384xf32>, tensor<16384xf32>) -> tensor<65536xf32>
    pp.accumulate %g {slot = 0 : i64} : tensor<65536xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "gpu1"} {
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 1 : i64, weight_version = 0 : i64}
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 2 : i64, weight_version = 0 : i64}
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 3 : i64, weight_version = 0 : i64}
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 1 : i64, weight_version = 0 : i64}
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 2 : i64, weight_version = 0 : i64}
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 3 : i64, weight_version = 0 : i64}
    }
  }
}
