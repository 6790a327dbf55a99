// RUN: pipeline-opt %s --split-input-file --pp-model-summary -o /dev/null | FileCheck %s

// CHECK-LABEL: == model summary ==
// CHECK: function @main
// CHECK:   input  x: tensor<4x8xf32>
// CHECK:   output y: tensor<4x2xf32>
// CHECK: parameters:
// CHECK:   trainable      2 tensors           18 elements        72B
// CHECK:   state          1 tensors            2 elements         8B
// CHECK:   constant       0 tensors            0 elements          0B
// 2*4*2*8 Gemm + 8 Relu elements:
// CHECK: ops: 2 (forward FLOPs per step: 136)
// CHECK:   onnx.Gemm                        1        128 FLOPs
// CHECK:   onnx.Relu                        1          8 FLOPs
onnx.global "trainable" @w : tensor<2x8xf32>
onnx.global "trainable" @b : tensor<2xf32>
onnx.global "state" @s : tensor<2xf32>
func.func @main(%x: tensor<4x8xf32> {onnx.name = "x"}) -> (tensor<4x2xf32> {onnx.name = "y"}) {
  %w = onnx.global_read @w : tensor<2x8xf32>
  %b = onnx.global_read @b : tensor<2xf32>
  %0 = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<4x8xf32>, tensor<2x8xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %1 = onnx.Relu %0 : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %1 : tensor<4x2xf32>
}

// -----

// Four MatMuls of 2^61 FLOPs each: the total, 2^63, is past int64's range
// (it used to print a negative count); FLOPs are summed in double.
// CHECK-LABEL: == model summary ==
// CHECK: ops: 4 (forward FLOPs per step: 9.22E)
// CHECK:   onnx.MatMul                      4      9.22E FLOPs
func.func @main(%a: tensor<1048576x1048576xf32>, %b: tensor<1048576x1048576xf32>) -> (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) {
  %0 = onnx.MatMul %a, %b : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  %1 = onnx.MatMul %b, %a : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  %2 = onnx.MatMul %a, %a : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  %3 = onnx.MatMul %b, %b : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  return %0, %1, %2, %3 : tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>
}
