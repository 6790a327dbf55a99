// RUN: pipeline-opt %s --pp-partition="cluster=2xRTX2060 schedule=gpipe microbatches=4096 recompute=auto report=-" -o /dev/null | FileCheck %s
// RUN: not pipeline-opt %s --pp-partition="cluster=2xRTX2060 schedule=gpipe microbatches=4096 recompute=none" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not pipeline-opt %s --pp-partition="cluster=2xRTX2060 recompute=sometimes" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// 4096 micro-batches of a 64 MB activation cannot stay on 6 GB GPUs, but
// the weights fit when the activations are recomputed.
// CHECK: bottleneck {{.*}}; fits only with recomputation (memory counts stage inputs, not activations)
// NONE: error: the model does not fit the cluster with schedule gpipe and 4096 micro-batches
// BAD: pipeline-opt: for the --recompute option: unknown value 'sometimes': expected 'none', 'full', 'selective' or 'auto'
onnx.global "trainable" @w : tensor<4096x4096xf32>
func.func @main(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %w = onnx.global_read @w : tensor<4096x4096xf32>
  %a = onnx.MatMul %x, %w : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %r = onnx.Relu %a : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  return %r : tensor<4096x4096xf32>
}
