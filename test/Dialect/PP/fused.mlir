// pp.fused: round trip, and the interpreter runs its body op by op (a
// fused kernel computes what the ops would).

// RUN: pipeline-opt %s | pipeline-opt | FileCheck %s
// RUN: pp-interpret %s --func=fused --print | FileCheck %s --check-prefix=INTERP
// RUN: pp-interpret %s --func=unfused --print | FileCheck %s --check-prefix=INTERP

// CHECK-LABEL: func.func @fused
// CHECK: %[[R:.*]] = pp.fused %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>):
// CHECK-NEXT:   %[[A:.*]] = onnx.Add %[[X]], %[[B]]
// CHECK-NEXT:   %[[Y:.*]] = onnx.Relu %[[A]]
// CHECK-NEXT:   %[[Z:.*]] = onnx.Mul %[[Y]], %[[X]]
// CHECK-NEXT:   pp.yield %[[Z]] : tensor<2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]

// INTERP: output 0 "y": tensor<2x3xf32> finite
// INTERP-NEXT: [-0, 0, 6, 10.5, -0, 8.75]
func.func @fused() -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %x = onnx.Constant dense<[[-1.0, 0.5, 2.0], [3.0, -4.0, 2.5]]> : tensor<2x3xf32>
  %b = onnx.Constant dense<[0.5, -1.0, 1.0]> : tensor<3xf32>
  %r = pp.fused %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> {
  ^bb0(%x0: tensor<2x3xf32>, %b0: tensor<3xf32>):
    %a = onnx.Add %x0, %b0 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %y = onnx.Relu %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %z = onnx.Mul %y, %x0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    pp.yield %z : tensor<2x3xf32>
  }
  return %r : tensor<2x3xf32>
}
func.func @unfused() -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %x = onnx.Constant dense<[[-1.0, 0.5, 2.0], [3.0, -4.0, 2.5]]> : tensor<2x3xf32>
  %b = onnx.Constant dense<[0.5, -1.0, 1.0]> : tensor<3xf32>
  %a = onnx.Add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %y = onnx.Relu %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %z = onnx.Mul %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %z : tensor<2x3xf32>
}
