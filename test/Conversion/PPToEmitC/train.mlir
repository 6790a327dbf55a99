// RUN: pipeline-opt %s --pp-memory-plan --pp-lower-to-emitc | FileCheck %s

// The train dialect: an optimizer step updates the globals it replaces in
// place (--pp-memory-plan marks the results and the writes) and otherwise
// copies its functional inputs into the new values' buffers and updates
// those; gradients are one kernel call each; global writes are StageContext
// calls by id.

// CHECK-LABEL: emitc.func @sgd(
// CHECK-SAME: %[[CTX:.*]]: !emitc.opaque<"pp::rt::StageContext&">
// CHECK: %[[K:.*]] = call_opaque "pp::rt::gen::kernels"(%[[CTX]])
// CHECK: %[[STEP:.*]] = call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"5">]}
// CHECK: %[[W:.*]] = call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[BUF:.*]] = call_opaque "pp::rt::gen::global"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK: %[[G:.*]] = call_opaque "pp::rt::gen::accumulatedView"(%[[CTX]])
// CHECK-NOT: pp::rt::copy
// CHECK: %[[NBP:.*]] = call_opaque "pp::rt::gen::addrMut"(%[[BUF]])
// CHECK: %[[N:.*]] = call_opaque "pp::rt::gen::readInt"(%[[STEP]])
// CHECK: %[[LR:.*]] = call_opaque "pp::rt::gen::learningRate"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"1.0000000000000001e-01">]}
// CHECK: %[[S:.*]] = call_opaque "pp::rt::sgdStep"(%[[K]], %[[W]], %[[G]], %[[NBP]], %[[N]], %[[LR]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 5 : index, #emitc.opaque<"9.0000000000000002e-01">, #emitc.opaque<"0.0000000000000000e+00">, #emitc.opaque<"0.0000000000000000e+00">, #emitc.opaque<"true">]}
// CHECK: call_opaque "pp::rt::gen::check"(%[[CTX]], %[[S]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22train.sgd\22">]}
// CHECK-NOT: writeGlobal
// CHECK: return

// The old weight is read again after the step: the step updates a copy,
// which the write then stores. The momentum buffer is still updated in
// place.
// CHECK-LABEL: emitc.func @sgd_old_weight_read_after(
// CHECK: %[[W:.*]] = call_opaque "pp::rt::gen::global"(%{{.*}}) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[BUF:.*]] = call_opaque "pp::rt::gen::global"(%{{.*}}) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK: call_opaque "pp::rt::gen::accumulatedView"
// CHECK: %[[NW:.*]] = call_opaque "pp::rt::gen::view"
// CHECK: call_opaque "pp::rt::copy"(%{{.*}}, %[[W]], %[[NW]])
// CHECK-NOT: pp::rt::copy
// CHECK: call_opaque "pp::rt::gen::addrMut"(%[[BUF]])
// CHECK: call_opaque "pp::rt::sgdStep"(%{{.*}}, %[[NW]],
// CHECK: call_opaque "pp::rt::unary"(%{{.*}}, %[[W]],
// CHECK: call_opaque "pp::rt::gen::writeGlobal"(%{{.*}}, %[[NW]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index]}
// CHECK-NEXT: call_opaque "pp::rt::gen::writeGlobal"(%{{.*}}, %{{.*}}) {args = [0 : index, #emitc.opaque<"3">, 1 : index]}
// CHECK-NEXT: return

// CHECK-LABEL: emitc.func @adam(
// CHECK-NOT: pp::rt::copy
// CHECK: call_opaque "pp::rt::adamStep"({{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 5 : index, 6 : index, #emitc.opaque<"9.0000000000000002e-01">, #emitc.opaque<"9.9900000000000000e-01">, #emitc.opaque<"1.0000000000000000e-08">, #emitc.opaque<"1.0000000000000000e-02">, #emitc.opaque<"true">]}
// CHECK-NOT: writeGlobal
// CHECK: return

// CHECK-LABEL: emitc.func @grads(
// CHECK: call_opaque "pp::rt::unaryGrad"({{.*}}) {args = [0 : index, #emitc.opaque<"pp::rt::UnaryKind(4)">, 1 : index, 2 : index, 3 : index, 4 : index, #emitc.opaque<"0.000000000e+00f">]}
// CHECK: %[[DBV:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{8}">]}
// CHECK: %[[DB:.*]] = call_opaque "pp::rt::gen::accumulateTarget"(%{{.*}}, %[[DBV]])
// CHECK: call_opaque "pp::rt::reduceSumTo"(%{{.*}}, %{{.*}}, %[[DB]])
// CHECK: call_opaque "pp::rt::softmaxGrad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"1">, #emitc.opaque<"true">, 3 : index]}
// CHECK: call_opaque "pp::rt::dropoutGrad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"5.000000000e-01f">, 3 : index]}
// CHECK: call_opaque "pp::rt::matmul"({{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"true">, #emitc.opaque<"false">]}
// CHECK: call_opaque "pp::rt::sliceGrad"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 1}">, #emitc.opaque<"std::vector<int64_t>{1, 2}">, 2 : index]}
// CHECK: call_opaque "pp::rt::gatherGrad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"0">, 3 : index]}
// CHECK: call_opaque "pp::rt::padGrad"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"std::vector<int64_t>{0, 2, 1, -1}">, #emitc.opaque<"pp::rt::PadMode::Reflect">, 2 : index]}
// CHECK: call_opaque "pp::rt::gen::accumulate"(%{{.*}}, %[[DB]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index]}

// batch_norm_grad recomputes the batch statistics into scratch first.
// CHECK-LABEL: emitc.func @norm_grads(
// CHECK: call_opaque "pp::rt::gen::constant"
// CHECK: call_opaque "pp::rt::gen::view"{{.*}}"{4, 8}">]}
// CHECK: call_opaque "pp::rt::gen::view"{{.*}}"{8}">]}
// CHECK: %[[DBIAS:.*]] = call_opaque "pp::rt::gen::view"{{.*}}"{8}">]}
// CHECK: %[[DBP:.*]] = call_opaque "pp::rt::gen::addrMut"(%[[DBIAS]])
// CHECK: call_opaque "pp::rt::layerNormGrad"({{.*}}, %[[DBP]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 5 : index, #emitc.opaque<"1">, 6 : index, 7 : index, 8 : index]}
// CHECK: %[[MEAN:.*]] = call_opaque "pp::rt::gen::scratch"{{.*}}#emitc.opaque<"0">]}
// CHECK: %[[INV:.*]] = call_opaque "pp::rt::gen::scratch"{{.*}}#emitc.opaque<"1">]}
// CHECK: call_opaque "pp::rt::batchNormStatistics"(%{{.*}}, %{{.*}}, %[[MEAN]], %[[INV]]) {args = [0 : index, 1 : index, #emitc.opaque<"9.9999997473787516e-06">, 2 : index, 3 : index]}
// CHECK: call_opaque "pp::rt::batchNormGrad"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[MEAN]], %[[INV]],

// CHECK-LABEL: emitc.func @window_grads(
// CHECK: call_opaque "pp::rt::convGradInput"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"pp::rt::WindowParams{std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 1}, 2}">, 3 : index]}
// CHECK: call_opaque "pp::rt::convGradWeight"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"pp::rt::WindowParams{
// CHECK: call_opaque "pp::rt::maxPoolGrad"
// CHECK: call_opaque "pp::rt::avgPoolGrad"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"pp::rt::WindowParams{std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, 1}">, #emitc.opaque<"false">, 2 : index]}

// CHECK-LABEL: emitc.func @loss_grad(
// CHECK: call_opaque "pp::rt::softmaxCrossEntropyGrad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"false">, #emitc.opaque<"0">, #emitc.opaque<"\22sum\22">, 4 : index]}

module attributes {pp.plan = #pp.plan<schedule = "gpipe", micro_batches = 1, num_stages = 1>, pp.input_names = ["x", "b", "i"], pp.output_names = ["y"]} {
  func.func @sgd() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %step = onnx.global_read @pp.step : tensor<i64>
    %w = onnx.global_read @w : tensor<8xf32>
    %buf = onnx.global_read @w.momentum : tensor<8xf32>
    %g = pp.accumulated {slot = 0 : i64} : tensor<8xf32>
    %nw, %nbuf = train.sgd %w, %g, %step momentum_buffer %buf {lr = 0.1 : f64, momentum = 0.9 : f64, nesterov = true} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    train.global_write @w, %nw : tensor<8xf32>
    train.global_write @w.momentum, %nbuf : tensor<8xf32>
    return
  }
  func.func @sgd_old_weight_read_after() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %step = onnx.global_read @pp.step : tensor<i64>
    %w = onnx.global_read @w : tensor<8xf32>
    %buf = onnx.global_read @w.momentum : tensor<8xf32>
    %g = pp.accumulated {slot = 0 : i64} : tensor<8xf32>
    %nw, %nbuf = train.sgd %w, %g, %step momentum_buffer %buf {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    %old = onnx.Relu %w : (tensor<8xf32>) -> tensor<8xf32>
    train.global_write @w, %nw : tensor<8xf32>
    train.global_write @w.momentum, %nbuf : tensor<8xf32>
    train.global_write @w.v, %old : tensor<8xf32>
    return
  }
  func.func @adam() attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<update>} {
    %step = onnx.global_read @pp.step : tensor<i64>
    %w = onnx.global_read @w : tensor<8xf32>
    %m = onnx.global_read @w.m : tensor<8xf32>
    %v = onnx.global_read @w.v : tensor<8xf32>
    %g = pp.accumulated {slot = 0 : i64} : tensor<8xf32>
    %nw, %nm, %nv = train.adam %w, %g, %m, %v, %step {lr = 0.001 : f64, decoupled = true, weight_decay = 0.01 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    train.global_write @w, %nw : tensor<8xf32>
    train.global_write @w.m, %nm : tensor<8xf32>
    train.global_write @w.v, %nv : tensor<8xf32>
    return
  }
  func.func @grads(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %i = pp.input %mb {index = 2 : i64} : tensor<3xi64>
    %dx = train.unary_grad <Tanh> %x, %x, %x : tensor<4x8xf32>
    %db = train.reduce_sum_to %dx : tensor<4x8xf32> to tensor<8xf32>
    %ds = train.softmax_grad %x, %dx {axis = -1 : i64, log = true} : tensor<4x8xf32>
    %mask = onnx.Less %x, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
    %dd = train.dropout_grad %ds, %mask {ratio = 0.5 : f32} : tensor<4x8xf32>, tensor<4x8xi1>
    %dm = train.matmul %dd, %x {trans_a} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    pp.accumulate %dm {slot = 1 : i64} : tensor<8x8xf32>
    %dsl = train.slice_grad %dd {starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : (tensor<4x8xf32>) -> tensor<4x16xf32>
    %dg = train.gather_grad %dsl, %i {axis = -2 : i64} : (tensor<4x16xf32>, tensor<3xi64>) -> tensor<5x16xf32>
    %dp = train.pad_grad %dsl {mode = "reflect", pads = array<i64: 0, 2, 1, -1>} : (tensor<4x16xf32>) -> tensor<3x15xf32>
    pp.accumulate %db {slot = 0 : i64} : tensor<8xf32>
    return
  }
  func.func @norm_grads(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %x = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %s = onnx.global_read @w : tensor<8xf32>
    %mean = onnx.Constant dense<0.0> : tensor<4x1xf32>
    %dx, %dscale, %dbias = train.layer_norm_grad %x, %x, %s, %mean, %mean {axis = -1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %bx, %bs, %bb = train.batch_norm_grad %x, %x, %s {epsilon = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    return
  }
  func.func @window_grads(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %dy = pp.input %mb {index = 1 : i64} : tensor<2x4x4x4xf32>
    %k = onnx.global_read @k : tensor<4x2x3x3xf32>
    %dx = train.conv_grad_input %dy, %k {dilations = array<i64: 1, 1>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x8x8xf32>
    %dw = train.conv_grad_weight %dy, %dx {dilations = array<i64: 1, 1>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<4x2x3x3xf32>
    %idx = onnx.Constant dense<0> : tensor<2x4x4x4xi64>
    %dp = train.max_pool_grad %dy, %idx : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64>) -> tensor<2x4x8x8xf32>
    %da = train.avg_pool_grad %dy {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>, count_include_pad = 0 : i64} : (tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
    return
  }
  func.func @loss_grad(%mb: tensor<i64>) attributes {pp.stage = 0 : i64, pp.phase = #pp.phase<backward>} {
    %logp = pp.input %mb {index = 0 : i64} : tensor<4x8xf32>
    %l = pp.input %mb {index = 2 : i64} : tensor<4xi64>
    %seed = onnx.Constant dense<1.0> : tensor<f32>
    %ds = train.softmax_cross_entropy_grad %seed, %logp, %l {reduction = "sum"} : (tensor<f32>, tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    return
  }
  onnx.global "trainable" @w : tensor<8xf32> = dense<0.5> : tensor<8xf32>
  onnx.global "state" @w.momentum : tensor<8xf32> = dense<0.0> : tensor<8xf32>
  onnx.global "state" @w.m : tensor<8xf32> = dense<0.0> : tensor<8xf32>
  onnx.global "state" @w.v : tensor<8xf32> = dense<0.0> : tensor<8xf32>
  onnx.global "trainable" @k : tensor<4x2x3x3xf32> = dense<0.1> : tensor<4x2x3x3xf32>
  onnx.global "state" @pp.step : tensor<i64> = dense<0> : tensor<i64>
  pp.schedule {
    pp.device 0 attributes {name = "gpu0"} {
      pp.action backward @grads {stage = 0 : i64, micro_batch = 0 : i64, weight_version = 0 : i64}
      pp.action optimizer_step @sgd {stage = 0 : i64, micro_batch = -1 : i64, weight_version = 0 : i64}
    }
  }
}
