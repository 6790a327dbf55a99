// RUN: pipeline-opt %s -split-input-file -verify-diagnostics --pp-verify-static-shapes | FileCheck %s

// CHECK-LABEL: func.func @static
func.func @static(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{argument #0 has a dynamic type 'tensor<?xf32>'}}
func.func @dynamic_argument(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
