// RUN: pipeline-opt %s -split-input-file --pp-partition="cluster=2xH100 try-device-orders=false report=%t.report" -verify-diagnostics | FileCheck %s
// RUN: FileCheck %s --input-file=%t.report --check-prefix=REPORT

// A chain of two matmuls with a heavy first layer splits between them: every
// op gets a stage, stages are monotone along the edges, and weight reads sit
// on the stage of their user. The cluster, parsed once, goes on the module
// for the passes after this one.
onnx.global "trainable" @w1 : tensor<1024x1024xf32>
onnx.global "trainable" @w2 : tensor<1024x1024xf32>
// CHECK-LABEL: module attributes {pp.cluster = #pp.cluster<devices = [<name = "node0/gpu0", kind = "H100", {{.*}}>, <name = "node0/gpu1", kind = "H100", {{.*}}>], nodes = [<name = "node0">], intra_node = <{{.*}}>, inter_node = <{{.*}}>>, pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 8, num_stages = 2, stage_devices = ["node0/gpu0", "node0/gpu1"]>}
// CHECK: onnx.global_read @w1 {{.*}}{pp.stage = 0 : i64}
// CHECK: onnx.global_read @w2 {{.*}}{pp.stage = 1 : i64}
// CHECK: onnx.MatMul {{.*}} {pp.stage = 0 : i64}
// CHECK: onnx.Relu {{.*}} {pp.stage = {{[01]}} : i64}
// CHECK: onnx.MatMul {{.*}} {pp.stage = 1 : i64}
// REPORT: == pipeline plan: 2 stages, schedule 1f1b, 8 micro-batches, exact over 3 ops ==
// REPORT: stage 0: node0/gpu0
// REPORT: stage 1: node0/gpu1
// REPORT: bottleneck {{[0-9.]+}} ms per micro-batch
func.func @main(%x: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  %w1 = onnx.global_read @w1 : tensor<1024x1024xf32>
  %w2 = onnx.global_read @w2 : tensor<1024x1024xf32>
  %a = onnx.MatMul %x, %w1 : (tensor<512x1024xf32>, tensor<1024x1024xf32>) -> tensor<512x1024xf32>
  %r = onnx.Relu %a : (tensor<512x1024xf32>) -> tensor<512x1024xf32>
  %b = onnx.MatMul %r, %w2 : (tensor<512x1024xf32>, tensor<1024x1024xf32>) -> tensor<512x1024xf32>
  return %b : tensor<512x1024xf32>
}
