// RUN: pipeline-opt %s -split-input-file --pp-partition="cluster=2xRTX2060 schedule=gpipe microbatches=4096" -verify-diagnostics
// RUN: not pipeline-opt %s --pp-partition="cluster=3xNOPE" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not pipeline-opt %s --pp-partition="cluster=%S/no-such-cluster.json" 2>&1 | FileCheck %s --check-prefix=FILE
// KIND: error: cluster: {{.*}}NOPE
// FILE: error: cluster: {{.*}}no-such-cluster.json

// 4096 micro-batches of a 64 MB activation cannot stay on 6 GB GPUs.
onnx.global "trainable" @w : tensor<4096x4096xf32>
// expected-error @+1 {{the model does not fit the cluster with schedule gpipe and 4096 micro-batches; the best plan still needs}}
func.func @main(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %w = onnx.global_read @w : tensor<4096x4096xf32>
  %a = onnx.MatMul %x, %w : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %r = onnx.Relu %a : (tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  return %r : tensor<4096x4096xf32>
}
