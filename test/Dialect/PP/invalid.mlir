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
