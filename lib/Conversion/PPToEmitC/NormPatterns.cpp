//===- NormPatterns.cpp - Normalisation, softmax, losses --------*- C++ -*-===//
//
// BatchNormalization, LayerNormalization, Softmax / LogSoftmax and
// SoftmaxCrossEntropyLoss become one call each of their runtime kernels.
//
//===----------------------------------------------------------------------===//

#include "PPToEmitCCommon.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"

using namespace mlir;
using namespace pp::emitc_lowering;
namespace onnx = pp::onnx;
namespace rt = pp::rt;

namespace {

class BatchNormLowering : public StageOpLowering<onnx::BatchNormalizationOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::BatchNormalizationOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    bool training = op.getTrainingMode() != 0;
    auto dtype = dtypeOf(op, op.getX().getType());
    SmallVector<Value> out;
    if (failed(dtype) || failed(emit.results(out)))
      return failure();
    ArrayRef<int64_t> x = shapeOf(op.getX());
    int64_t channels = x.size() > 1 ? x[1] : 0;
    CallArgs a = emit.args();
    a.value(adaptor.getX())
        .value(adaptor.getScale())
        .value(adaptor.getB())
        .value(adaptor.getInputMean())
        .value(adaptor.getInputVar())
        .f32(op.getEpsilon().convertToDouble())
        .f32(op.getMomentum().convertToDouble());
    emit.trainingFlag(a, training);
    a.value(out[0]).value(out[1]).value(out[2]);
    if (training) {
      // The batch statistics only feed the gradient, which recomputes
      // them: scratch here.
      a.value(emit.mutablePointer(emit.scratch(*dtype, {channels}, 0)))
          .value(emit.mutablePointer(emit.scratch(*dtype, {channels}, 1)));
    } else {
      a.lit("nullptr").lit("nullptr");
    }
    a.flag(op.getUnbiasedRunningVar());
    appendActivation(a, op);
    emit.kernel("pp::rt::batchNorm", a);
    return success();
  }
};

class LayerNormLowering : public StageOpLowering<onnx::LayerNormalizationOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::LayerNormalizationOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    // The kernel writes the statistics in their own float type (stash_type).
    auto axis = pp::onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()),
                                        shapeOf(op.getX()).size());
    SmallVector<Value> out;
    if (failed(axis) || failed(emit.results(out)))
      return failure();
    CallArgs a = emit.args();
    a.value(adaptor.getX()).value(adaptor.getScale());
    emit.optionalPointer(a, adaptor.getB());
    a.integer(*axis)
        .f32(op.getEpsilon().convertToDouble())
        .value(out[0])
        .value(out[1])
        .value(out[2]);
    emit.kernel("pp::rt::layerNorm", a);
    return success();
  }
};

/// Softmax and LogSoftmax: one kernel with a `log` flag.
template <typename OpTy, bool Log>
class SoftmaxLowering : public StageOpLowering<OpTy> {
public:
  using StageOpLowering<OpTy>::StageOpLowering;
  using Adaptor = typename OpTy::Adaptor;
  LogicalResult lower(OpTy op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    Value x = op->getOperand(0);
    auto axisAttr = op->template getAttrOfType<IntegerAttr>("axis");
    auto axisOut = axisAndResult(emit, axisAttr ? axisAttr.getInt() : -1,
                                 shapeOf(x).size());
    if (failed(axisOut))
      return failure();
    auto [axis, out] = *axisOut;
    CallArgs a = emit.args();
    a.value(adaptor.getOperands()[0]).integer(axis).flag(Log).value(out);
    emit.kernel("pp::rt::softmax", a);
    return success();
  }
};

class SoftmaxCrossEntropyLowering
    : public StageOpLowering<onnx::SoftmaxCrossEntropyLossOp> {
public:
  using StageOpLowering::StageOpLowering;
  LogicalResult lower(onnx::SoftmaxCrossEntropyLossOp op, Adaptor adaptor,
                      OpEmitter &emit) const override {
    SmallVector<Value> out;
    if (failed(emit.results(out)))
      return failure();
    std::optional<uint64_t> ignore = op.getIgnoreIndex();
    CallArgs a = emit.args();
    a.value(adaptor.getScores()).value(adaptor.getLabels());
    emit.optionalPointer(a, adaptor.getWeights());
    a.flag(ignore.has_value())
        .integer(ignore ? static_cast<int64_t>(*ignore) : 0)
        .lit(quote(op.getReduction()))
        .value(out[0])
        .value(out[1]);
    emit.kernel("pp::rt::softmaxCrossEntropy", a);
    return success();
  }
};

} // namespace

void pp::emitc_lowering::populateNormPatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  patterns.add<BatchNormLowering, LayerNormLowering,
               SoftmaxLowering<onnx::SoftmaxOp, false>,
               SoftmaxLowering<onnx::LogSoftmaxOp, true>,
               SoftmaxCrossEntropyLowering>(typeConverter,
                                            patterns.getContext());
}
