// RUN: pipeline-opt %s -split-input-file --pp-add-loss --pp-mixed-precision -verify-diagnostics | FileCheck %s
// RUN: pipeline-opt %s -split-input-file --pp-add-loss --pp-mixed-precision=precision=fp16 -verify-diagnostics | FileCheck %s --check-prefix=FP16
// RUN: pipeline-opt %s -split-input-file --pp-add-loss --pp-mixed-precision --pp-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD
// RUN: pipeline-opt %s -split-input-file --pp-add-loss=kind=mse --pp-mixed-precision -verify-diagnostics | FileCheck %s --check-prefix=MSE
// RUN: not pipeline-opt %s -split-input-file --pp-mixed-precision=precision=int8 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: pipeline-opt %s -split-input-file --pp-add-loss --pp-mixed-precision=precision=fp32 -verify-diagnostics | FileCheck %s --check-prefix=FP32

// BAD: pipeline-opt: for the --precision option: unknown value 'int8': expected 'bf16', 'fp16' or 'fp32'

// A linear layer: the input and the fp32 master weights are cast once each,
// the GEMM and ReLU run in bf16, the loss in fp32; the step's results keep
// their fp32 types.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {pp.loss}, tensor<8x3xf32> {onnx.name = "logits", pp.class_axis = 1 : i64, pp.ignore_index = -100 : i64})
// CHECK-DAG: %[[X:.*]] = onnx.Cast %arg0 {to = 16 : i64} : (tensor<8x4xf32>) -> tensor<8x4xbf16>
// CHECK-DAG: %[[W:.*]] = onnx.global_read @w : tensor<3x4xf32>
// CHECK-DAG: %[[WL:.*]] = onnx.Cast %[[W]] {to = 16 : i64} : (tensor<3x4xf32>) -> tensor<3x4xbf16>
// CHECK-DAG: %[[BL:.*]] = onnx.Cast %{{.*}} {to = 16 : i64} : (tensor<3xf32>) -> tensor<3xbf16>
// CHECK: %[[Y:.*]] = onnx.Gemm %[[X]], %[[WL]], %[[BL]] {transB = 1 : i64} : (tensor<8x4xbf16>, tensor<3x4xbf16>, tensor<3xbf16>) -> tensor<8x3xbf16>
// CHECK: %[[R:.*]] = onnx.Relu %[[Y]] : (tensor<8x3xbf16>) -> tensor<8x3xbf16>
// CHECK: %[[RF:.*]] = onnx.Cast %[[R]] {to = 1 : i64} : (tensor<8x3xbf16>) -> tensor<8x3xf32>
// CHECK: %[[LOSS:.*]], %{{.*}} = onnx.SoftmaxCrossEntropyLoss %[[RF]], %arg1 {ignore_index = -100 : i64} : (tensor<8x3xf32>, tensor<8xi64>)
// CHECK: return %[[LOSS]], %[[RF]] : tensor<f32>, tensor<8x3xf32>
// FP16-LABEL: func.func @main
// FP16: onnx.Gemm %{{.*}} : (tensor<8x4xf16>, tensor<3x4xf16>, tensor<3xf16>) -> tensor<8x3xf16>
// FP16: onnx.Cast %{{.*}} {to = 1 : i64} : (tensor<8x3xf16>) -> tensor<8x3xf32>
// FP32-LABEL: func.func @main
// FP32-NOT: onnx.Cast
// FP32: onnx.Gemm %arg0, %{{.*}} : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
// The gradient of a weight is cast back to fp32 for the optimizer.
// GRAD-LABEL: func.func @main
// GRAD: %[[DW:.*]] = onnx.Cast %{{.*}} {to = 1 : i64} : (tensor<3x4xbf16>) -> tensor<3x4xf32>
// GRAD: return %{{.*}}, %[[DW]], %{{.*}} : tensor<f32>, tensor<8x3xf32>, tensor<3x4xf32>, tensor<3xf32>
onnx.global "trainable" @w : tensor<3x4xf32> = dense<0.5> : tensor<3x4xf32>
onnx.global "trainable" @b : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @main(%x: tensor<8x4xf32>) -> (tensor<8x3xf32> {onnx.name = "logits"}) {
  %w = onnx.global_read @w : tensor<3x4xf32>
  %b = onnx.global_read @b : tensor<3xf32>
  %0 = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %1 = onnx.Relu %0 : (tensor<8x3xf32>) -> tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}

// -----

// BatchNormalization keeps its running statistics (state) in fp32; Dropout
// keeps its ratio; a constant operand folds into a bf16 constant; the MSE
// loss that --pp-add-loss builds runs in fp32.
// CHECK-LABEL: func.func @main
// CHECK: %[[Y:.*]], %[[M:.*]], %[[V:.*]] = onnx.BatchNormalization %{{.*}} : (tensor<2x4x3x3xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xbf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK: onnx.Dropout %[[Y]] ratio %{{.*}} training_mode %{{.*}} : (tensor<2x4x3x3xbf16>, tensor<f32>, tensor<i1>)
// CHECK: %[[C:.*]] = onnx.Constant dense<2.000000e+00> : tensor<bf16>
// CHECK: onnx.Mul %{{.*}}, %[[C]] : (tensor<2x4x3x3xbf16>, tensor<bf16>) -> tensor<2x4x3x3xbf16>
// CHECK-NOT: onnx.Constant dense<2.000000e+00> : tensor<f32>
// MSE-LABEL: func.func @main
// MSE: %[[Z:.*]] = onnx.Mul %{{.*}} -> tensor<2x4x3x3xbf16>
// MSE: %[[ZF:.*]] = onnx.Cast %[[Z]] {to = 1 : i64}
// MSE: onnx.Sub %[[ZF]], %arg1 : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>)
// MSE: onnx.ReduceMean %{{.*}} : (tensor<2x4x3x3xf32>) -> tensor<f32>
onnx.global "trainable" @s : tensor<4xf32> = dense<1.0> : tensor<4xf32>
onnx.global "state" @m : tensor<4xf32> = dense<0.0> : tensor<4xf32>
func.func @main(%x: tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32> {
  %s = onnx.global_read @s : tensor<4xf32>
  %m = onnx.global_read @m : tensor<4xf32>
  %y, %rm, %rv = onnx.BatchNormalization %x, %s, %s, %m, %m {training_mode = 1 : i64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = onnx.Constant dense<0.1> : tensor<f32>
  %t = onnx.Constant dense<true> : tensor<i1>
  %d, %mask = onnx.Dropout %y ratio %r training_mode %t : (tensor<2x4x3x3xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xi1>)
  %two = onnx.Constant dense<2.0> : tensor<f32>
  %z = onnx.Mul %d, %two : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32>
  return %z : tensor<2x4x3x3xf32>
}

// -----

// expected-error @+1 {{pp-mixed-precision: @main already has gradients: run it before --pp-autodiff}}
func.func @main(%x: tensor<2x3xf32>, %l: tensor<2xi64>) -> (tensor<f32> {pp.loss}, tensor<2x3xf32> {pp.grad_of = @w}) {
  %loss, %p = onnx.SoftmaxCrossEntropyLoss %x, %l : (tensor<2x3xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  return %loss, %x : tensor<f32>, tensor<2x3xf32>
}
