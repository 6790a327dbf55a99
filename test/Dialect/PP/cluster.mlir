// The cluster a cluster= option names, as --pp-partition puts it on the
// module (#pp.cluster): it prints and parses back to itself, and the passes
// after partition read it instead of parsing a cluster= of their own.
//
// RUN: split-file %s %t
// RUN: pipeline-opt %t/attr.mlir | pipeline-opt | FileCheck %s --check-prefix=ATTR
// RUN: pipeline-opt %t/report.mlir --pp-schedule="kind=1f1b" --pp-plan-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: pipeline-opt %t/report.mlir --pp-schedule="kind=1f1b" --pp-plan-report="cluster=2xP4000" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not pipeline-opt %t/report.mlir --pp-schedule="kind=1f1b" --pp-plan-report="cluster=3xT4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: pipeline-opt %t/partition.mlir --pp-partition | FileCheck %s --check-prefix=PARTITION

//--- attr.mlir
// Every field: entries with or without their #pp. prefix, a node with its
// own link and shared processors, an explicit link, virtual workers.
// ATTR: module attributes {pp.cluster = #pp.cluster<devices = [<name = "a", kind = "T4", flops_f32 = 8.100000e+12, flops_f16 = 6.500000e+13, flops_f64 = 2.500000e+11, memory_bytes = 16000000000, memory_bandwidth = 3.200000e+11>, <name = "b", kind = "X", flops_f32 = 1.000000e+00, flops_f16 = 2.000000e+00, flops_f64 = 1.000000e-01, memory_bytes = 1, memory_bandwidth = 1.500000e-07, node = 1, processors = 5.000000e-01>],
// ATTR-SAME: nodes = [<name = "n0">, <name = "n1", intra_node = <bandwidth = 1.000000e+09, latency = 2.000000e-06>, shared_processors = 2.000000e+00>],
// ATTR-SAME: intra_node = <bandwidth = 1.600000e+10, latency = 1.000000e-05>, inter_node = <bandwidth = 1.250000e+10, latency = 1.000000e-05>,
// ATTR-SAME: links = [<a = 0, b = 1, bandwidth = 3.000000e+09, latency = 1.000000e-01>], virtual_workers = {{\[\[}}0], [1]]>}
module attributes {pp.cluster = #pp.cluster<devices = [<name = "a", kind = "T4", flops_f32 = 8.1e12, flops_f16 = 6.5e13, flops_f64 = 2.5e11, memory_bytes = 16000000000, memory_bandwidth = 3.2e11>, #pp.cluster_device<name = "b", kind = "X", flops_f32 = 1.0, flops_f16 = 2.0, flops_f64 = 0.1, memory_bytes = 1, memory_bandwidth = 1.5e-7, node = 1, processors = 0.5>], nodes = [<name = "n0">, <name = "n1", intra_node = <bandwidth = 1.0e9, latency = 2.0e-6>, shared_processors = 2.0>], intra_node = <bandwidth = 1.6e10, latency = 1.0e-05>, inter_node = #pp.link<bandwidth = 1.25e10, latency = 1.0e-05>, links = [<a = 0, b = 1, bandwidth = 3.0e9, latency = 0.1>], virtual_workers = [[0], [1]]>} {
}

//--- report.mlir
// The cluster of cluster=2xP4000: --pp-plan-report reads it, and takes the
// same cluster= too; another is an error naming both.
// REPORT: == predicted step: 2 stages on 2 devices, schedule 1f1b, 4 micro-batches of 64 ==
// REPORT: 0 node0/gpu0 P4000
// REPORT: 1 node0/gpu1 P4000
// REPORT: iteration 0.044 ms
// OTHER: error: pp-plan-report: cluster=3xT4 (3xT4) is another cluster than the module's pp.cluster (2xP4000): give one of them
module attributes {pp.cluster = #pp.cluster<devices = [<name = "node0/gpu0", kind = "P4000", flops_f32 = 5.300000e+12, flops_f16 = 5.300000e+12, flops_f64 = 1.660000e+11, memory_bytes = 8589934592, memory_bandwidth = 2.430000e+11>, <name = "node0/gpu1", kind = "P4000", flops_f32 = 5.300000e+12, flops_f16 = 5.300000e+12, flops_f64 = 1.660000e+11, memory_bytes = 8589934592, memory_bandwidth = 2.430000e+11>], nodes = [<name = "node0">], intra_node = <bandwidth = 1.600000e+10, latency = 3.000000e-06>, inter_node = <bandwidth = 2.500000e+10, latency = 5.000000e-06>>, pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 4, num_stages = 2, stage_devices = ["node0/gpu0", "node0/gpu1"]>, pp.input_names = [], pp.output_names = []} {
  func.func @stage0_forward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<64x1024xf32>
    %y = onnx.Relu %x : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return
  }
  func.func @stage0_backward(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage0_update() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} { return }
  func.func @stage1_forward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<64x1024xf32>
    %y = onnx.Relu %x : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return
  }
  func.func @stage1_backward(%mb: tensor<i64>) attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<backward>} { return }
  func.func @stage1_update() attributes {pp.stage = 1 : i64, pp.phase = #pp.phase<update>} { return }
}

//--- partition.mlir
// --pp-partition with no cluster= plans for the module's.
// PARTITION: pp.plan = #pp.plan<schedule = "1f1b", micro_batches = 8, num_stages = 2, stage_devices = ["left", "right"]>
module attributes {pp.cluster = #pp.cluster<devices = [<name = "left", kind = "P4000", flops_f32 = 5.3e12, flops_f16 = 5.3e12, flops_f64 = 1.66e11, memory_bytes = 8589934592, memory_bandwidth = 2.43e11>, <name = "right", kind = "P4000", flops_f32 = 5.3e12, flops_f16 = 5.3e12, flops_f64 = 1.66e11, memory_bytes = 8589934592, memory_bandwidth = 2.43e11>], nodes = [<name = "node0">], intra_node = <bandwidth = 1.6e10, latency = 3.0e-06>, inter_node = <bandwidth = 2.5e10, latency = 5.0e-06>>} {
  onnx.global "trainable" @w1 : tensor<1024x1024xf32>
  onnx.global "trainable" @w2 : tensor<1024x1024xf32>
  func.func @main(%x: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
    %w1 = onnx.global_read @w1 : tensor<1024x1024xf32>
    %w2 = onnx.global_read @w2 : tensor<1024x1024xf32>
    %a = onnx.MatMul %x, %w1 : (tensor<512x1024xf32>, tensor<1024x1024xf32>) -> tensor<512x1024xf32>
    %b = onnx.MatMul %a, %w2 : (tensor<512x1024xf32>, tensor<1024x1024xf32>) -> tensor<512x1024xf32>
    return %b : tensor<512x1024xf32>
  }
}
