// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc --split-input-file -verify-diagnostics
// An op without a kernel mapping is reported at the op (and nothing else).
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x"], pp.output_names = []} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4xf32>
    // expected-error @below {{code generation does not support this op yet}}
    func.call @helper(%x) : (tensor<4xf32>) -> ()
    return
  }
  func.func private @helper(tensor<4xf32>)
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// Operands that configure a kernel must be constants.
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x", "r"], pp.output_names = []} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4xf32>
    %r = pp.input %mb {index = 1 : i64} : tensor<f32>
    // expected-error @below {{code generation needs a constant operand here}}
    %y, %m = onnx.Dropout %x ratio %r : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xi1>)
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// The micro-batch of a pp op is the function's argument or a constant.
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x"], pp.output_names = []} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %next = onnx.Add %mb, %mb : (tensor<i64>, tensor<i64>) -> tensor<i64>
    // expected-error @below {{code generation needs the micro-batch as the stage function's argument or a constant}}
    %x = pp.input %next {index = 0 : i64} : tensor<4xf32>
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// Stage functions return nothing.
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x"], pp.output_names = []} {
  // expected-error @below {{a stage function takes at most the micro-batch and returns nothing}}
  func.func @stage0_forward(%mb: tensor<i64>) -> tensor<4xf32> attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4xf32>
    return %x : tensor<4xf32>
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}

// -----

// Code generation allocates the memory plan: a stage function the schedule
// never runs has none.
module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x"], pp.output_names = []} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    return
  }
  // expected-error @below {{stage function has no planned arena (pp.arena_bytes): run --pp-memory-plan}}
  func.func @stage0_spare(%mb: tensor<i64>) attributes {pp.stage = 3 : i64, pp.phase = #pp.phase<forward>} {
    return
  }
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @stage0_forward {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
