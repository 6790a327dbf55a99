// RUN: pipeline-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{pp.num_stages must be a positive integer}}
module attributes {pp.num_stages = 0 : i64} {
}

// -----

module attributes {pp.num_stages = 2 : i64} {
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

module attributes {pp.num_stages = 2 : i64} {
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

module attributes {pp.num_stages = 2 : i64} {
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

module attributes {pp.num_stages = 2 : i64} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{peer is the op's own stage 0}}
    pp.send %x, %mb {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.num_stages = 2 : i64} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{stage 0 or peer 5 is out of range for 2 stages}}
    pp.send %x, %mb {peer = 5 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.num_stages = 2 : i64} {
  func.func @nostage(%mb: tensor<i64>, %x: tensor<4xf32>) {
    // expected-error @+1 {{is not inside a function marked pp.stage}}
    pp.send %x, %mb {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.num_stages = 1 : i64} {
  func.func @stage0(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} {
    // expected-error @+1 {{has no pp.stash of slot 4 on stage 0}}
    %a = pp.unstash %mb {slot = 4 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {pp.num_stages = 1 : i64} {
  func.func @stage0(%mb: tensor<i64>, %x: tensor<4xf32>) attributes {pp.stage = 0 : i64} {
    pp.stash %x, %mb {slot = 0 : i64} : tensor<4xf32>
    // expected-error @+1 {{takes 'tensor<2xf32>' but slot 0 holds 'tensor<4xf32>'}}
    %a = pp.unstash %mb {slot = 0 : i64} : tensor<2xf32>
    return
  }
}

// -----

module attributes {pp.num_stages = 1 : i64} {
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

func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
// expected-error @+1 {{unknown schedule kind 'zigzag'}}
pp.schedule attributes {kind = "zigzag", micro_batches = 1 : i64, chunks = 1 : i64} {
}

// -----

func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64} { return }
pp.schedule attributes {kind = "1f1b", micro_batches = 1 : i64, chunks = 1 : i64} {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{stage 1 belongs on device 1, not 0}}
    pp.action "forward" @stage1_forward {stage = 1 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
  }
  pp.device 1 attributes {name = "b"} {
  }
}

// -----

func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64} { return }
pp.schedule attributes {kind = "1f1b", micro_batches = 1 : i64, chunks = 1 : i64} {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{a forward action needs a micro_batch >= 0}}
    pp.action "forward" @stage0_forward {stage = 0 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
  }
}

// -----

func.func @stage0_update() attributes {pp.stage = 0 : i64} { return }
pp.schedule attributes {kind = "1f1b", micro_batches = 1 : i64, chunks = 1 : i64} {
  pp.device 0 attributes {name = "a"} {
    // expected-error @+1 {{callee @nowhere is not a function}}
    pp.action "optimizer_step" @nowhere {stage = 0 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
  }
}
