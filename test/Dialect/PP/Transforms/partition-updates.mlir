// The partitioner counts the optimizer updates a schedule makes per
// micro-batch: once a step (1F1B: 1/m per micro-batch), every
// update-every micro-batches (nF1B), after every micro-batch (PipeDream,
// HetPipe). A profile's update rate (the "optimizer" entry's
// parameter_bytes_per_ms, which `train --write-profile` measures) times an
// update by its weights' bytes: @w's 4 MiB take 3 ms here, against 2 ms of
// forward and backward per op. 1F1B keeps the even cut (4 ms against
// 4 + 3/8); updating after every micro-batch leaves the weighted op alone on
// its stage (6 ms against 2 + 3); nF1B every 2 keeps the even cut (4
// against 4 + 3/2 beats 6). Without the rate an update is a roofline
// stream of the weights at the H100's bandwidth (microseconds): the even
// cut again.
// RUN: rm -rf %t && mkdir -p %t
// RUN: printf '{"H100": {"a": {"forward_ms": 1, "backward_ms": 1}, "b": {"forward_ms": 1, "backward_ms": 1}, "c": {"forward_ms": 1, "backward_ms": 1}, "d": {"forward_ms": 1, "backward_ms": 1}, "optimizer": {"forward_ms": 3, "parameter_bytes_per_ms": 1398101.3333333}}}\n' > %t/rate.json
// RUN: printf '{"H100": {"a": {"forward_ms": 1, "backward_ms": 1}, "b": {"forward_ms": 1, "backward_ms": 1}, "c": {"forward_ms": 1, "backward_ms": 1}, "d": {"forward_ms": 1, "backward_ms": 1}, "optimizer": {"forward_ms": 3}}}\n' > %t/norate.json
// RUN: pipeline-opt %s --pp-partition="cluster=2xH100 schedule=1f1b microbatches=8 profile=%t/rate.json try-device-orders=false report=-" -o /dev/null | FileCheck %s --check-prefix=ONCE
// ONCE: stage 0: node0/gpu0 2 ops 4.002 ms
// ONCE-NEXT: stage 1: node0/gpu1 2 ops 4.377 ms
// RUN: pipeline-opt %s --pp-partition="cluster=2xH100 schedule=hetpipe microbatches=8 profile=%t/rate.json try-device-orders=false report=-" -o /dev/null | FileCheck %s --check-prefix=EVERY
// RUN: pipeline-opt %s --pp-partition="cluster=2xH100 schedule=pipedream microbatches=8 profile=%t/rate.json try-device-orders=false report=-" -o /dev/null | FileCheck %s --check-prefix=EVERY
// EVERY: stage 0: node0/gpu0 3 ops 6.002 ms
// EVERY-NEXT: stage 1: node0/gpu1 1 ops 5.002 ms
// RUN: pipeline-opt %s --pp-partition="cluster=2xH100 schedule=nf1b update-every=2 microbatches=8 profile=%t/rate.json try-device-orders=false report=-" -o /dev/null | FileCheck %s --check-prefix=TWO
// TWO: stage 0: node0/gpu0 2 ops 4.002 ms
// TWO-NEXT: stage 1: node0/gpu1 2 ops 5.502 ms
// RUN: pipeline-opt %s --pp-partition="cluster=2xH100 schedule=hetpipe microbatches=8 profile=%t/norate.json try-device-orders=false report=-" -o /dev/null | FileCheck %s --check-prefix=ROOFLINE
// ROOFLINE: stage 0: node0/gpu0 2 ops 4.002 ms
// ROOFLINE-NEXT: stage 1: node0/gpu1 2 ops 4.006 ms
// A rate that is not a positive number is refused, naming the field.
// RUN: printf '{"H100": {"optimizer": {"forward_ms": 3, "parameter_bytes_per_ms": 0}}}\n' > %t/zero.json
// RUN: not pipeline-opt %s --pp-partition="cluster=2xH100 schedule=hetpipe microbatches=8 profile=%t/zero.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: zero.json: H100.optimizer.parameter_bytes_per_ms: expected a number > 0 and <= 1e15 (bytes of weights updated per ms)
onnx.global "trainable" @w : tensor<1024x1024xf32>
func.func @main(%x: tensor<8x1024xf32>) -> tensor<8x1024xf32> {
  %w = onnx.global_read @w : tensor<1024x1024xf32>
  %a = onnx.Relu %x : (tensor<8x1024xf32>) -> tensor<8x1024xf32> loc("a")
  %b = onnx.Relu %a : (tensor<8x1024xf32>) -> tensor<8x1024xf32> loc("b")
  %c = onnx.Relu %b : (tensor<8x1024xf32>) -> tensor<8x1024xf32> loc("c")
  %d = onnx.MatMul %c, %w : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32> loc("d")
  return %d : tensor<8x1024xf32>
}
