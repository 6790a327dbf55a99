// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s

// Normalisation, softmax and losses: one kernel call each, every result a
// view of its planned offset.

// Training-mode BatchNormalization keeps the batch statistics in scratch
// (the gradient recomputes them) and asks the context whether the running
// pass trains (gen::training: false in train --eval-data's evaluation,
// which normalises with the running statistics); inference passes null
// pointers and false.
// CHECK-LABEL: emitc.func @batch_norm(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{2, 3, 4, 4}">]}
// CHECK-COUNT-4: call_opaque "pp::rt::gen::global"
// CHECK: %[[Y:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{2, 3, 4, 4}">]}
// CHECK: %[[RM:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{3}">]}
// CHECK: %[[RV:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{3}">]}
// CHECK: %[[TR:.*]] = call_opaque "pp::rt::gen::training"(%{{.*}}) {args = [0 : index]} : (!emitc.opaque<"pp::rt::StageContext&">) -> i1
// CHECK: %[[S0:.*]] = call_opaque "pp::rt::gen::scratch"(%{{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{3}">, #emitc.opaque<"0">]}
// CHECK: %[[P0:.*]] = call_opaque "pp::rt::gen::addrMut"(%[[S0]])
// CHECK: %[[S1:.*]] = call_opaque "pp::rt::gen::scratch"(%{{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::DType::F32">, #emitc.opaque<"{3}">, #emitc.opaque<"1">]}
// CHECK: %[[P1:.*]] = call_opaque "pp::rt::gen::addrMut"(%[[S1]])
// CHECK: %[[ST:.*]] = call_opaque "pp::rt::batchNorm"(%{{.*}}, %[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[TR]], %[[Y]], %[[RM]], %[[RV]], %[[P0]], %[[P1]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 5 : index, #emitc.opaque<"9.999999747e-06f">, #emitc.opaque<"8.999999762e-01f">, 6 : index, 7 : index, 8 : index, 9 : index, 10 : index, 11 : index, #emitc.opaque<"false">]}
// CHECK: call_opaque "pp::rt::gen::check"(%{{.*}}, %[[ST]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22onnx.BatchNormalization 'bn1'\22">]}
// Inference mode; its fused Relu is the last argument.
// CHECK-NOT: gen::training
// CHECK: call_opaque "pp::rt::batchNorm"({{.*}}#emitc.opaque<"false">, 6 : index, 7 : index, 8 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"nullptr">, #emitc.opaque<"false">, #emitc.opaque<"pp::rt::UnaryKind(1)">]}

// CHECK-LABEL: emitc.func @layer_norm(
// CHECK: call_opaque "pp::rt::layerNorm"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"1">, #emitc.opaque<"9.999999747e-06f">, 3 : index, 4 : index, 5 : index]}
// float64 data with stash_type 1: the statistics are float32 views.
// CHECK: %[[Y64:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::F64">, #emitc.opaque<"{4, 8}">]}
// CHECK: %[[M32:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::F32">, #emitc.opaque<"{4, 1}">]}
// CHECK: %[[I32:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::F32">, #emitc.opaque<"{4, 1}">]}
// CHECK: call_opaque "pp::rt::layerNorm"({{.*}}, %[[Y64]], %[[M32]], %[[I32]])

// CHECK-LABEL: emitc.func @softmax_loss(
// CHECK: %[[X:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::F32">, #emitc.opaque<"{4, 8}">]}
// CHECK: %[[L:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"pp::rt::DType::I64">, #emitc.opaque<"{4}">]}
// CHECK: call_opaque "pp::rt::softmax"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"1">, #emitc.opaque<"false">, 2 : index]}
// CHECK: call_opaque "pp::rt::softmax"(%{{.*}}, %[[X]], %{{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"true">, 2 : index]}
// CHECK: %[[LOSS:.*]] = call_opaque "pp::rt::gen::view"{{.*}}#emitc.opaque<"{}">]}
// CHECK: %[[LOGP:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: call_opaque "pp::rt::softmaxCrossEntropy"(%{{.*}}, %[[X]], %[[L]], %[[LOSS]], %[[LOGP]]) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"true">, #emitc.opaque<"3">, #emitc.opaque<"\22mean\22">, 3 : index, 4 : index]}
// CHECK: call_opaque "pp::rt::gen::output"(%{{.*}}, %{{.*}}, %[[LOSS]])

module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x", "b", "i"], pp.output_names = ["y"]} {
  func.func @batch_norm(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 1 : i64} : tensor<2x3x4x4xf32>
    %s = onnx.global_read @s : tensor<3xf32>
    %b = onnx.global_read @b : tensor<3xf32>
    %m = onnx.global_read @m : tensor<3xf32>
    %v = onnx.global_read @v : tensor<3xf32>
    %y, %rm, %rv = onnx.BatchNormalization %x, %s, %b, %m, %v {training_mode = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) loc("bn1")
    %e, %erm, %erv = onnx.BatchNormalization %x, %s, %b, %m, %v {pp.activation = "Relu"} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    return
  }
  func.func @layer_norm(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %s = onnx.global_read @ls : tensor<8xf32>
    %y, %mean, %inv = onnx.LayerNormalization %x, %s {axis = -1 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
    %x64 = onnx.global_read @x64 : tensor<4x8xf64>
    %s64 = onnx.global_read @ls64 : tensor<8xf64>
    %y64, %mean32, %inv32 = onnx.LayerNormalization %x64, %s64 {axis = -1 : i64, stash_type = 1 : i64} : (tensor<4x8xf64>, tensor<8xf64>) -> (tensor<4x8xf64>, tensor<4x1xf32>, tensor<4x1xf32>)
    return
  }
  func.func @softmax_loss(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<forward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %l = pp.input %mb {index = 2 : i64} : tensor<4xi64>
    %p = onnx.Softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %q = onnx.LogSoftmax %x {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %loss, %logp = onnx.SoftmaxCrossEntropyLoss %x, %l {ignore_index = 3 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x8xf32>)
    pp.output %loss, %mb {index = 0 : i64, combine = "mean"} : tensor<f32>
    return
  }
  onnx.global "trainable" @s : tensor<3xf32> = dense<1.0> : tensor<3xf32>
  onnx.global "trainable" @b : tensor<3xf32> = dense<0.0> : tensor<3xf32>
  onnx.global "state" @m : tensor<3xf32> = dense<0.0> : tensor<3xf32>
  onnx.global "state" @v : tensor<3xf32> = dense<1.0> : tensor<3xf32>
  onnx.global "trainable" @ls : tensor<8xf32> = dense<1.0> : tensor<8xf32>
  onnx.global "trainable" @ls64 : tensor<8xf64> = dense<1.0> : tensor<8xf64>
  onnx.global "trainable" @x64 : tensor<4x8xf64> = dense<0.5> : tensor<4x8xf64>
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action forward @batch_norm {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
    }
  }
}
