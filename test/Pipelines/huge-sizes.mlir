// A model whose bytes overflow int64 (or exceed the 1 TiB tensor limit of
// pp/Support/InputLimits.h) is an error, not a plan with negative samples/s.
// RUN: not pipeline-opt %s --pp-compile="cluster=2xT4 loss=mse report=" -o /dev/null 2>&1 | FileCheck %s
// CHECK: huge-sizes.mlir:[[# @LINE + 6]]:8: error: pp-partition: a value of type 'tensor<4611686018427387904x4xf32>' has more than the limit of 1099511627776 bytes: too large to plan

onnx.global "trainable" @w : tensor<4x4xf32>
func.func @main(%x: tensor<4611686018427387904x4xf32>) -> tensor<4611686018427387904x4xf32> {
  %w = onnx.global_read @w : tensor<4x4xf32>
  // 2^62 x 4 floats: 2^66 bytes.
  %a = onnx.MatMul %x, %w : (tensor<4611686018427387904x4xf32>, tensor<4x4xf32>) -> tensor<4611686018427387904x4xf32>
  return %a : tensor<4611686018427387904x4xf32>
}

