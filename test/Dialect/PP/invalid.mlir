// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{num_stages must be >= 1, got 0}}
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 0>} {
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{has no matching pp.recv on stage 1 (peer 0, tag 7)}}
    pp.send %x, %mb {peer = 1 : i64, tag = 7 : i64} : tensor<4xf32>
    return
  }
  func.func @stage1(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} {
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @stage0(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} {
    return
  }
  func.func @stage1(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} {
    // expected-error @+1 {{has no matching pp.send on stage 0 (peer 1, tag 3)}}
    %a = pp.recv %mb {peer = 0 : i64, tag = 3 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    pp.send %x, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
  func.func @stage1(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} {
    // expected-error @+1 {{receives 'tensor<8xf32>' but the send has 'tensor<4xf32>'}}
    %a = pp.recv %mb {peer = 0 : i64, tag = 0 : i64} : tensor<8xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{peer is the op's own stage 0}}
    pp.send %x, %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{stage 0 or peer 5 is out of range for 2 stages}}
    pp.send %x, %mb {peer = 5 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
  func.func @nostage(%mb: tensor<i64>, %x: tensor<4xf32>) {
    // expected-error @+1 {{is not inside a function marked pp.stage}}
    pp.send %x, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
  func.func @stage0(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{has no pp.stash of slot 4 on stage 0}}
    %a = pp.unstash %mb {slot = 4 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    pp.stash %x, %mb {slot = 0 : i64} : tensor<4xf32>
    // expected-error @+1 {{takes 'tensor<2xf32>' but slot 0 holds 'tensor<4xf32>'}}
    %a = pp.unstash %mb {slot = 0 : i64} : tensor<2xf32>
    return
  }
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
  func.func @stage0() attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{has no pp.accumulate of slot 1 on stage 0}}
    %g = pp.accumulated {slot = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

func.func @f(%mb: tensor<i64>, %x: tensor<f32>) {
  // expected-error @+1 {{combine must be mean, sum or concat, got 'max'}}
  pp.output %x, %mb {index = 0 : i64, combine = "max"} : tensor<f32>
  return
}

// -----

func.func @f(%mb: tensor<i64>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{class_axis 0 must name a non-batch dim of 'tensor<2x3xf32>'}}
  pp.output %x, %mb {index = 1 : i64, combine = "concat", class_axis = 0 : i64} : tensor<2x3xf32>
  return
}

// -----

// expected-error @+2 {{unknown ScheduleKind 'zigzag'}}
// expected-error @+1 {{failed to parse PP_PlanAttr parameter 'schedule'}}
module attributes {pp.plan = #pp.plan<schedule = "zigzag", micro_batches = 1, num_stages = 1>} {
}

// -----

// expected-error @+1 {{'pp.schedule' op needs the enclosing module's pp.plan}}
pp.schedule {
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} { return }
func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} { return }
// expected-error @+1 {{'pp.schedule' op has 1 devices but the plan's 2 stages in 1 chunks need 2}}
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
}
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2>} {
func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} { return }
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{stage 1 belongs on device 1, not 0}}
    pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
  pp.device 1 attributes {name = "b"} {
  }
}
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{a forward action needs a micro_batch >= 0}}
    pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
  }
}
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} { return }
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{callee @stage0_backward does not hold the forward of its stage}}
    pp.action forward @stage0_backward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
}
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{unknown action kind 'sideways'}}
    pp.action sideways {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
}
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 1>} {
func.func @stage0_update() attributes {pp.stage = 0 : i64} { return }
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{callee @nowhere is not a function}}
    pp.action optimizer_step @nowhere {stage = 0 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
  }
}
}

// -----

// The pp.* attributes are the dialect's, with their declared types.
// expected-error @+1 {{pp.stage must be an integer >= 0, got "first"}}
func.func @f() attributes {pp.stage = "first"} { return }

// -----

// expected-error @+1 {{unknown pp dialect attribute pp.stages}}
func.func @f() attributes {pp.stages = 1 : i64} { return }

// -----

// expected-error @+1 {{pp.grad_of must be a symbol reference, got 1 : i64}}
func.func @f() -> (tensor<f32> {pp.grad_of = 1 : i64}) {
  %c = onnx.Constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error @+1 {{stage_devices names 1 devices for 2 stages}}
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 2, num_stages = 2, stage_devices = ["a"]>} {
}

// -----

// Heterogeneous virtual workers: one placement per replica, a device for
// every stage, every device used, as many devices in every replica.
// expected-error @+1 {{placements has 1 entries for 2 replicas}}
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 3, data_parallel = 2, placements = [array<i64: 0, 0, 1>]>} {
}

// -----

// expected-error @+1 {{placements[1] must be an array<i64> of 3 devices}}
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 3, data_parallel = 2, placements = [array<i64: 0, 0, 1>, array<i64: 0, 1>]>} {
}

// -----

// expected-error @+1 {{placements[1] gives device 1 no stage}}
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 3, data_parallel = 2, placements = [array<i64: 0, 0, 1>, array<i64: 0, 2, 2>]>} {
}

// -----

// expected-error @+1 {{placements[1] uses 3 devices, placements[0] 2}}
module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 3, data_parallel = 2, placements = [array<i64: 0, 0, 1>, array<i64: 0, 1, 2>]>} {
}

// -----

// expected-error @+1 {{placements need one chunk per device, got chunks = 2}}
module attributes {pp.plan = #pp.plan<schedule = "interleaved", micro_batches = 2, chunks = 2, num_stages = 4, data_parallel = 2, placements = [array<i64: 0, 0, 1, 1>, array<i64: 0, 1, 1, 1>]>} {
}

// -----

module attributes {pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 1, num_stages = 2, data_parallel = 2, placements = [array<i64: 0, 1>, array<i64: 0, 1>]>} {
func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} { return }
func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} { return }
// expected-error @+1 {{'pp.schedule' op needs a replica: the plan places the stages of each replica on its own}}
pp.schedule {
  pp.device 0 attributes {name = "a"} {
    pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
  pp.device 1 attributes {name = "b"} {
    pp.action forward @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
}
}

// -----

// Only the activations a kernel applies: Relu, on a convolution, a batch
// norm or a Gemm.
func.func @activation_kind(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{pp.activation must be "Relu" on an onnx.Conv, onnx.BatchNormalization or onnx.Gemm, got "Sigmoid"}}
  %0 = onnx.Conv %x, %w {pp.activation = "Sigmoid"} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @activation_op(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{pp.activation must be "Relu" on an onnx.Conv, onnx.BatchNormalization or onnx.Gemm, got "Relu"}}
  %0 = onnx.MatMul %x, %x {pp.activation = "Relu"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// expected-error @+1 {{device 'a' is in node 1 of 1}}
module attributes {pp.cluster = #pp.cluster<devices = [<name = "a", kind = "T4", flops_f32 = 1.0, flops_f16 = 1.0, flops_f64 = 1.0, memory_bytes = 1, memory_bandwidth = 1.0, node = 1>], nodes = [<name = "n0">], intra_node = <bandwidth = 1.0, latency = 0.0>, inter_node = <bandwidth = 1.0, latency = 0.0>>} {
}

// -----

// expected-error @+1 {{a link needs two different devices of 1, got 0 and 0}}
module attributes {pp.cluster = #pp.cluster<devices = [<name = "a", kind = "T4", flops_f32 = 1.0, flops_f16 = 1.0, flops_f64 = 1.0, memory_bytes = 1, memory_bandwidth = 1.0>], nodes = [<name = "n0">], intra_node = <bandwidth = 1.0, latency = 0.0>, inter_node = <bandwidth = 1.0, latency = 0.0>, links = [<a = 0, b = 0, bandwidth = 1.0, latency = 0.0>]>} {
}

// -----

// expected-error @+1 {{a virtual worker needs devices of 1, got array<i64: 0, 1>}}
module attributes {pp.cluster = #pp.cluster<devices = [<name = "a", kind = "T4", flops_f32 = 1.0, flops_f16 = 1.0, flops_f64 = 1.0, memory_bytes = 1, memory_bandwidth = 1.0>], nodes = [<name = "n0">], intra_node = <bandwidth = 1.0, latency = 0.0>, inter_node = <bandwidth = 1.0, latency = 0.0>, virtual_workers = [[0, 1]]>} {
}

// -----

// expected-error @+1 {{a cluster needs at least one device and one node}}
module attributes {pp.cluster = #pp.cluster<intra_node = <bandwidth = 1.0, latency = 0.0>, inter_node = <bandwidth = 1.0, latency = 0.0>>} {
}

// -----

// expected-error @+1 {{pp.cluster must be a #pp.cluster on the module}}
func.func private @f() attributes {pp.cluster = #pp.cluster<devices = [<name = "a", kind = "T4", flops_f32 = 1.0, flops_f16 = 1.0, flops_f64 = 1.0, memory_bytes = 1, memory_bandwidth = 1.0>], nodes = [<name = "n0">], intra_node = <bandwidth = 1.0, latency = 0.0>, inter_node = <bandwidth = 1.0, latency = 0.0>>}
