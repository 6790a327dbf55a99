//===- TrainPatterns.cpp - The train dialect to EmitC -----------*- C++ -*-===//
//
// Gradient ops become one call each of their runtime kernels, optimizer
// steps copies of their functional inputs and an in-place update, and
// train.global_write a StageContext call (named by symbol until the
// program numbers the globals).
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace pp::emitc_lowering;
namespace train = pp::train;
namespace rt = pp::rt;

namespace {

/// A possibly negative axis against `rank`.
int64_t positiveAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The step counter of an optimizer step, read as an i64.
Value readStep(OpEmitter &emit, Value step) {
  CallArgs s = emit.args();
  s.value(step);
  return emit.call("pp::rt::gen::readInt", s, emit.getRewriter().getI64Type());
}

/// Window geometry from a gradient op's attributes.
rt::WindowParams windowOf(Operation *op) {
  rt::WindowParams params;
  auto ints = [&](StringRef name) {
    std::vector<int64_t> v;
    if (auto attr = op->getAttrOfType<DenseI64ArrayAttr>(name))
      v.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
    return v;
  };
  params.kernel = ints("kernel_shape");
  params.strides = ints("strides");
  params.pads = ints("pads");
  params.dilations = ints("dilations");
  if (auto group = op->getAttrOfType<IntegerAttr>("group"))
    params.group = group.getInt();
  return params;
}

class GlobalWriteLowering : public StageOpLowering<train::GlobalWriteOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::GlobalWriteOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    // The optimizer step already updated the global's storage.
    if (pp::pipeline::isInPlaceWrite(op))
      return success();
    CallArgs a = emit.ctxArgs();
    a.attr(op.getGlobalAttr()).value(adaptor.getOperands()[0]);
    emit.call(kWriteGlobalCallee, a);
    return success();
  }
};

/// The IR is functional: an optimizer step copies its inputs into the new
/// values' own buffers and updates those, except where the memory plan
/// computes a new value in the storage of the global it replaces
/// (pp::inPlaceGlobalUpdate): the step then updates the global itself.
FailureOr<Value> updatedValue(OpEmitter &emit, unsigned index, Value operand) {
  DenseI64ArrayAttr offsets = pp::pipeline::getOffsets(emit.getOp());
  if (offsets && index < offsets.size() &&
      offsets[index] == pp::pipeline::kInPlaceOffset) {
    emit.define(index, operand);
    return operand;
  }
  auto buffer = emit.result(index);
  if (failed(buffer))
    return failure();
  emitCopy(emit, operand, *buffer);
  return *buffer;
}

class SGDLowering : public StageOpLowering<train::SGDOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::SGDOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto param = updatedValue(emit, 0, adaptor.getParam());
    if (failed(param))
      return failure();
    Value buffer;
    if (op.getMomentumBuffer()) {
      auto newBuffer = updatedValue(emit, 1, adaptor.getMomentumBuffer());
      if (failed(newBuffer))
        return failure();
      buffer = emit.mutablePointer(*newBuffer);
    }
    Value step = readStep(emit, adaptor.getStep());
    CallArgs a = emit.args();
    a.value(*param).value(adaptor.getGrad());
    if (buffer)
      a.value(buffer);
    else
      a.lit("nullptr");
    a.value(step)
        .value(emit.learningRate(op.getLr().convertToDouble()))
        .f64(op.getMomentum().convertToDouble())
        .f64(op.getDampening().convertToDouble())
        .f64(op.getWeightDecay().convertToDouble())
        .flag(op.getNesterov());
    emit.kernel("pp::rt::sgdStep", a);
    return success();
  }
};

class AdamLowering : public StageOpLowering<train::AdamOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::AdamOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto param = updatedValue(emit, 0, adaptor.getParam());
    if (failed(param))
      return failure();
    auto m = updatedValue(emit, 1, adaptor.getM());
    if (failed(m))
      return failure();
    auto v = updatedValue(emit, 2, adaptor.getV());
    if (failed(v))
      return failure();
    Value step = readStep(emit, adaptor.getStep());
    CallArgs a = emit.args();
    a.value(*param)
        .value(adaptor.getGrad())
        .value(*m)
        .value(*v)
        .value(step)
        .value(emit.learningRate(op.getLr().convertToDouble()))
        .f64(op.getBeta1().convertToDouble())
        .f64(op.getBeta2().convertToDouble())
        .f64(op.getEpsilon().convertToDouble())
        .f64(op.getWeightDecay().convertToDouble())
        .flag(op.getDecoupled());
    emit.kernel("pp::rt::adamStep", a);
    return success();
  }
};

class UnaryGradLowering : public StageOpLowering<train::UnaryGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::UnaryGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.lit(enumLiteral("UnaryKind", static_cast<int>(op.getKind())))
        .value(adaptor.getX())
        .value(adaptor.getY())
        .value(adaptor.getDy())
        .value(*out)
        .f32(op.getAlpha().convertToDouble());
    if (op.getBeta().convertToDouble() != 0)
      a.f32(op.getBeta().convertToDouble());
    emit.kernel("pp::rt::unaryGrad", a);
    return success();
  }
};

class SoftmaxGradLowering : public StageOpLowering<train::SoftmaxGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::SoftmaxGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    int64_t axis = positiveAxis(static_cast<int64_t>(op.getAxis()),
                                shapeOf(op->getOperand(0)).size());
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getOperands()[0])
        .value(adaptor.getOperands()[1])
        .integer(axis)
        .flag(op.getLog())
        .value(*out);
    emit.kernel("pp::rt::softmaxGrad", a);
    return success();
  }
};

class LayerNormGradLowering : public StageOpLowering<train::LayerNormGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::LayerNormGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    int64_t axis = positiveAxis(static_cast<int64_t>(op.getAxis()),
                                shapeOf(op->getOperand(1)).size());
    SmallVector<Value> out;
    if (failed(emit.results(out)))
      return failure();
    Value dbias = emit.mutablePointer(out[2]);
    ValueRange in = adaptor.getOperands();
    CallArgs a = emit.args();
    a.value(in[0])
        .value(in[1])
        .value(in[2])
        .value(in[3])
        .value(in[4])
        .integer(axis)
        .value(out[0])
        .value(out[1])
        .value(dbias);
    emit.kernel("pp::rt::layerNormGrad", a);
    return success();
  }
};

class BatchNormGradLowering : public StageOpLowering<train::BatchNormGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::BatchNormGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    Value x = op->getOperand(1);
    ArrayRef<int64_t> shape = shapeOf(x);
    if (shape.size() < 2)
      return op.emitError() << "batch_norm_grad needs an input of rank >= 2";
    auto dtype = dtypeOf(op, x.getType());
    SmallVector<Value> out;
    if (failed(dtype) || failed(emit.results(out)))
      return failure();
    ValueRange in = adaptor.getOperands();
    Value mean = emit.scratch(*dtype, {shape[1]}, 0);
    Value invStd = emit.scratch(*dtype, {shape[1]}, 1);
    CallArgs stats = emit.args();
    stats.value(in[1])
        .lit(floatLiteral(op.getEpsilon().convertToDouble(), true))
        .value(mean)
        .value(invStd);
    emit.kernel("pp::rt::batchNormStatistics", stats);
    CallArgs a = emit.args();
    a.value(in[0])
        .value(in[1])
        .value(in[2])
        .value(mean)
        .value(invStd)
        .value(out[0])
        .value(out[1])
        .value(out[2]);
    emit.kernel("pp::rt::batchNormGrad", a);
    return success();
  }
};

/// conv_grad_input / conv_grad_weight: (dy, x or w) and the window.
template <typename OpTy> class ConvGradLowering : public StageOpLowering<OpTy> {
public:
  ConvGradLowering(const TypeConverter &typeConverter, MLIRContext *context,
                   StringRef callee)
      : StageOpLowering<OpTy>(typeConverter, context), callee(callee) {}
  using Adaptor = typename OpTy::Adaptor;
  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    rt::WindowParams params = windowOf(op);
    auto out = emit.result();
    if (failed(out))
      return failure();
    ValueRange in = adaptor.getOperands();
    CallArgs a = emit.args();
    a.value(in[0]).value(in[1]).lit(windowLiteral(params)).value(*out);
    emit.kernel(callee, a);
    return success();
  }

private:
  std::string callee;
};

class AvgPoolGradLowering : public StageOpLowering<train::AvgPoolGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::AvgPoolGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    rt::WindowParams params;
    params.kernel.assign(op.getKernelShape().begin(),
                         op.getKernelShape().end());
    params.strides.assign(op.getStrides().begin(), op.getStrides().end());
    params.pads.assign(op.getPads().begin(), op.getPads().end());
    params.dilations.assign(params.kernel.size(), 1);
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getOperands()[0])
        .lit(windowLiteral(params))
        .flag(op.getCountIncludePad() != 0)
        .value(*out);
    emit.kernel("pp::rt::avgPoolGrad", a);
    return success();
  }
};

class PadGradLowering : public StageOpLowering<train::PadGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::PadGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto mode = op.getPadMode();
    auto out = emit.result();
    if (failed(mode) || failed(out))
      return failure();
    static constexpr const char *kModes[] = {"pp::rt::PadMode::Constant",
                                             "pp::rt::PadMode::Reflect",
                                             "pp::rt::PadMode::Edge"};
    CallArgs a = emit.args();
    a.value(adaptor.getOperands()[0])
        .lit(intVector(op.getPads()))
        .lit(kModes[static_cast<int>(*mode)])
        .value(*out);
    emit.kernel("pp::rt::padGrad", a);
    return success();
  }
};

class SliceGradLowering : public StageOpLowering<train::SliceGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::SliceGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getOperands()[0])
        .lit(intVector(op.getStarts()))
        .lit(intVector(op.getSteps()))
        .value(*out);
    emit.kernel("pp::rt::sliceGrad", a);
    return success();
  }
};

class GatherGradLowering : public StageOpLowering<train::GatherGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::GatherGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    int64_t axis = positiveAxis(static_cast<int64_t>(op.getAxis()),
                                shapeOf(op.getDdata()).size());
    auto out = emit.result();
    if (failed(out))
      return failure();
    ValueRange in = adaptor.getOperands();
    CallArgs a = emit.args();
    a.value(in[0]).value(in[1]).integer(axis).value(*out);
    emit.kernel("pp::rt::gatherGrad", a);
    return success();
  }
};

class DropoutGradLowering : public StageOpLowering<train::DropoutGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::DropoutGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    ValueRange in = adaptor.getOperands();
    CallArgs a = emit.args();
    a.value(in[0])
        .value(in[1])
        .f32(op.getRatio().convertToDouble())
        .value(*out);
    emit.kernel("pp::rt::dropoutGrad", a);
    return success();
  }
};

/// `matmul(a, b, y, transA, transB)`: the GEMMs read the operands in place.
class MatMulLowering : public StageOpLowering<train::MatMulOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::MatMulOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getA())
        .value(adaptor.getB())
        .value(*out)
        .flag(op.getTransA())
        .flag(op.getTransB());
    emit.kernel("pp::rt::matmul", a);
    return success();
  }
};

class SoftmaxCrossEntropyGradLowering
    : public StageOpLowering<train::SoftmaxCrossEntropyGradOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(train::SoftmaxCrossEntropyGradOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    auto out = emit.result();
    if (failed(out))
      return failure();
    std::optional<uint64_t> ignore = op.getIgnoreIndex();
    CallArgs a = emit.args();
    a.value(adaptor.getDloss())
        .value(adaptor.getLogProb())
        .value(adaptor.getLabels());
    emit.optionalPointer(a, adaptor.getWeights());
    a.flag(ignore.has_value())
        .integer(ignore ? static_cast<int64_t>(*ignore) : 0)
        .lit(quote(op.getReduction()))
        .value(*out);
    emit.kernel("pp::rt::softmaxCrossEntropyGrad", a);
    return success();
  }
};

} // namespace

void pp::emitc_lowering::populateTrainPatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<GlobalWriteLowering, SGDLowering, AdamLowering,
               UnaryGradLowering, SoftmaxGradLowering, LayerNormGradLowering,
               BatchNormGradLowering, AvgPoolGradLowering, SliceGradLowering,
               PadGradLowering, GatherGradLowering, DropoutGradLowering,
               MatMulLowering, SoftmaxCrossEntropyGradLowering>(typeConverter,
                                                                context);
  patterns.add<KernelCallLowering<train::ReduceSumToOp>>(
      typeConverter, context, "pp::rt::reduceSumTo", 1);
  patterns.add<KernelCallLowering<train::MaxPoolGradOp>>(
      typeConverter, context, "pp::rt::maxPoolGrad", 2);
  patterns.add<ConvGradLowering<train::ConvGradInputOp>>(
      typeConverter, context, "pp::rt::convGradInput");
  patterns.add<ConvGradLowering<train::ConvGradWeightOp>>(
      typeConverter, context, "pp::rt::convGradWeight");
}
