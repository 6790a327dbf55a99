// RUN: pipeline-opt %s --split-input-file --pp-memory-plan="report=-" | FileCheck %s

// A chain of 1 KB values: each dies at its user, so two buffers suffice and
// values alternate between them.
// CHECK: == memory plan per device
// CHECK: device 0 gpu0          : persistent 0.0 MB, accumulators 0.0 MB, stash 0.0 MB, arena 0.0 MB: peak 0.0 MB
// CHECK: device 1 gpu1          : persistent 0.0 MB, accumulators 0.3 MB, stash 0.3 MB, arena 0.3 MB: peak 0.8 MB
// CHECK: module attributes {{.*}}pp.planned_peak_bytes = array<i64: 2120, 786432>
// CHECK-LABEL: func.func @stage0_forward
// CHECK-SAME: pp.arena_bytes = 2048 : i64
// CHECK: pp.input {{.*}}pp.offsets = array<i64: 0>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 1024>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 0>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 1024>
// An optimizer step whose new weight goes back to the global it read gets
// no buffer (-2: computed in the global's storage) and its write is
// in_place; the step's momentum buffer is read again after the step, so it
// keeps a buffer and its write.
// CHECK-LABEL: func.func @stage0_update
// CHECK: train.sgd {{.*}}pp.offsets = array<i64: -2, 256>
// CHECK: train.global_write @w, {{.*}}pp.in_place
// CHECK: train.global_write @w.momentum, %{{[^ ]*}} :
// CHECK-NOT: pp.in_place
// CHECK: return
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
  // function needs a 256 KB arena (the unstashed value is read in place,
  // from the stash): peak 768 KB.
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
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %step = onnx.global_read @pp.step : tensor<i64>
    %w = onnx.global_read @w : tensor<8xf32>
    %buf = onnx.global_read @w.momentum : tensor<8xf32>
    %g = onnx.Relu %w : (tensor<8xf32>) -> tensor<8xf32>
    %nw, %nbuf = train.sgd %w, %g, %step momentum_buffer %buf {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    %again = onnx.Relu %buf : (tensor<8xf32>) -> tensor<8xf32>
    train.global_write @w, %nw : tensor<8xf32>
    train.global_write @w.momentum, %nbuf : tensor<8xf32>
    return
  }
  onnx.global "trainable" @w : tensor<8xf32> = dense<0.5> : tensor<8xf32>
  onnx.global "state" @w.momentum : tensor<8xf32> = dense<0.0> : tensor<8xf32>
  onnx.global "state" @pp.step : tensor<i64> = dense<0> : tensor<i64>
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

// -----

// Received messages live in the driver's buffers, lent to the function
// (no arena offset: -1): per size, twice the most one function receives
// (the running action's and the next one's, received ahead). Stage 1's
// forward receives two 64 KB messages, its backward one 64 KB and one
// 4 KB: 2 x (2 x 64 KB + 4 KB) = 270336 bytes, beside a 64 KB arena.
// CHECK: == memory plan per device
// CHECK-SAME: messages = receive buffers
// CHECK: device 1 gpu1          : persistent 0.0 MB, accumulators 0.0 MB, stash 0.0 MB, arena 0.1 MB, messages 0.3 MB: peak 0.3 MB
// CHECK: module attributes {{.*}}pp.planned_peak_bytes = array<i64: 65536, 335872>
// CHECK-LABEL: func.func @stage1_forward
// CHECK-SAME: pp.arena_bytes = 65536 : i64
// CHECK: pp.recv {{.*}}pp.offsets = array<i64: -1>
// CHECK: pp.recv {{.*}}pp.offsets = array<i64: -1>
// CHECK: onnx.Add {{.*}}pp.offsets = array<i64: 0>
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 2>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<16384xf32>
    pp.send %x, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<16384xf32>
    pp.send %x, %mb {peer = 1 : i64, tag = 1 : i64} : tensor<16384xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %x = onnx.Constant dense<1.0> : tensor<16384xf32>
    %y = onnx.Constant dense<1.0> : tensor<1024xf32>
    pp.send %x, %mb {peer = 1 : i64, tag = 2 : i64} : tensor<16384xf32>
    pp.send %y, %mb {peer = 1 : i64, tag = 3 : i64} : tensor<1024xf32>
    return
  }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %a = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<16384xf32>
    %b = pp.recv %mb {peer = 0 : i64, tag = 1 : i64} : tensor<16384xf32>
    %c = onnx.Add %a, %b : (tensor<16384xf32>, tensor<16384xf32>) -> tensor<16384xf32>
    pp.output %c, %mb {index = 0 : i64, combine = "concat"} : tensor<16384xf32>
    return
  }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} {
    %a = pp.recv %mb {peer = 0 : i64, tag = 2 : i64} : tensor<16384xf32>
    %b = pp.recv %mb {peer = 0 : i64, tag = 3 : i64} : tensor<1024xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
    pp.device 1 attributes {name = "gpu1"} {
      pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage1_backward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// A reshape of a planned value is a view: it takes that value's offset, and
// the value's bytes stay taken until the view's last use (so the second
// Relu cannot reuse them). A value that goes to pp.stash may be computed in
// the stash's buffer: a reshape of it keeps a buffer and its copy.
// CHECK-LABEL: func.func @stage0_forward
// CHECK-SAME: pp.arena_bytes = 2048 : i64
// CHECK: pp.input {{.*}}pp.offsets = array<i64: 0>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 1024>
// CHECK: onnx.Reshape {{.*}}pp.offsets = array<i64: 1024>
// CHECK: onnx.Flatten {{.*}}pp.offsets = array<i64: 1024>
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 0>
// CHECK-LABEL: func.func @stage0_backward
// CHECK: onnx.Relu {{.*}}pp.offsets = array<i64: 1024>
// CHECK: onnx.Reshape {{.*}}pp.offsets = array<i64: 0>
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<256xf32>
    %shape = onnx.Constant dense<[16, 16]> : tensor<2xi64>
    %a = onnx.Relu %x : (tensor<256xf32>) -> tensor<256xf32>
    %r = onnx.Reshape %a, %shape : (tensor<256xf32>, tensor<2xi64>) -> tensor<16x16xf32>
    %f = onnx.Flatten %r {axis = 0 : i64} : (tensor<16x16xf32>) -> tensor<1x256xf32>
    %b = onnx.Relu %f : (tensor<1x256xf32>) -> tensor<1x256xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<256xf32>
    %shape = onnx.Constant dense<[16, 16]> : tensor<2xi64>
    %a = onnx.Relu %x : (tensor<256xf32>) -> tensor<256xf32>
    pp.stash %a, %mb {slot = 0 : i64} : tensor<256xf32>
    %r = onnx.Reshape %a, %shape : (tensor<256xf32>, tensor<2xi64>) -> tensor<16x16xf32>
    %b = onnx.Relu %r : (tensor<16x16xf32>) -> tensor<16x16xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action backward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
