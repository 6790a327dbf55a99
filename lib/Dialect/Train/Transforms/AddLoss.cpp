//===- AddLoss.cpp - Append a loss to the model output ----------*- C++ -*-===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
namespace onnx = pp::onnx;

namespace {

/// Appends the `labels` argument the loss compares the output with.
Value addLabels(func::FuncOp func, Type type, Location loc) {
  Builder b(func.getContext());
  unsigned index = func.getNumArguments();
  if (failed(func.insertArgument(index, type,
                                 b.getDictionaryAttr(b.getNamedAttr(
                                     "onnx.name", b.getStringAttr("labels"))),
                                 loc)))
    return nullptr;
  return func.getArgument(index);
}

/// The dim `classAxis` names in logits of `rank`: negative counts from the
/// end; 0 takes dim 1 of per-pixel logits [N, C, H, W, ...] (PyTorch's and
/// ONNX's layout), else the last (a classifier's or a language model's).
int64_t resolveClassAxis(int64_t classAxis, int64_t rank) {
  if (classAxis < 0)
    return classAxis + rank;
  if (classAxis > 0)
    return classAxis;
  return rank >= 4 ? 1 : rank - 1;
}

/// A scalar constant of float type `element`.
Value scalarConstant(OpBuilder &b, Location loc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  return onnx::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
}

/// The class weights as a constant of `element` type shaped `shape`
/// ([C], or [C, 1, ...] to broadcast over [N, C, d...]).
Value classWeightsConstant(OpBuilder &b, Location loc, Type element,
                           ArrayRef<double> weights, ArrayRef<int64_t> shape) {
  SmallVector<Attribute> values;
  for (double w : weights)
    values.push_back(b.getFloatAttr(element, w));
  return onnx::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get(shape, element), values));
}

/// PyTorch's label smoothing of `crossEntropy`, the mean cross-entropy of
/// `scores` [N, C, d...] against `labels` [N, d...]: (1 - eps) times it
/// plus eps times -(1/C) sum_c w_c log softmax(scores)_c summed over the
/// labels other than `ignoreIndex`, over the sum of their classes' weights
/// (w = 1 without `weights`: the mean over those labels).
Value smoothLabels(OpBuilder &b, Location loc, Value scores, Value labels,
                   Value crossEntropy, double eps, int64_t ignoreIndex,
                   ArrayRef<double> weights) {
  Type element = getElementTypeOrSelf(crossEntropy.getType());
  auto scoresType = cast<RankedTensorType>(scores.getType());
  Value logProb =
      onnx::LogSoftmaxOp::create(b, loc, scores, b.getI64IntegerAttr(1));
  if (!weights.empty()) {
    SmallVector<int64_t> shape(scoresType.getRank() - 1, 1);
    shape[0] = scoresType.getDimSize(1);
    logProb = onnx::MulOp::create(
        b, loc, logProb, classWeightsConstant(b, loc, element, weights, shape));
  }
  Value classMean = onnx::ReduceMeanOp::create(
      b, loc, logProb, b.getDenseI64ArrayAttr({1}), b.getI64IntegerAttr(0));
  // 1 where a label counts, 0 where it is ignored.
  auto labelType = cast<RankedTensorType>(labels.getType());
  Value ignored = onnx::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          RankedTensorType::get({}, labelType.getElementType()),
          b.getIntegerAttr(labelType.getElementType(), ignoreIndex)));
  Value counts = onnx::NotOp::create(
      b, loc, onnx::EqualOp::create(b, loc, labels, ignored));
  Value weight = onnx::CastOp::create(
      b, loc, counts,
      b.getI64IntegerAttr(onnx::getONNXDataTypeForFloat(element)));
  // Each counted label's class weight (an ignored label gathers class 0's,
  // then counts 0).
  Value labelWeight = weight;
  if (!weights.empty()) {
    Value zero = onnx::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            RankedTensorType::get({}, labelType.getElementType()),
            b.getIntegerAttr(labelType.getElementType(), 0)));
    Value safe = onnx::WhereOp::create(b, loc, counts, labels, zero);
    Value table = classWeightsConstant(b, loc, element, weights,
                                       {static_cast<int64_t>(weights.size())});
    Value gathered =
        onnx::GatherOp::create(b, loc, table, safe, b.getI64IntegerAttr(0));
    labelWeight = onnx::MulOp::create(b, loc, gathered, weight);
  }
  auto meanOf = [&](Value value) {
    return onnx::ReduceMeanOp::create(b, loc, value, DenseI64ArrayAttr(),
                                      b.getI64IntegerAttr(0))
        .getResult();
  };
  // sum(x * counted) / sum(label weights). One op per statement, so the
  // IR's order does not depend on the compiler's order of evaluating
  // arguments.
  Value weighted = meanOf(onnx::MulOp::create(b, loc, classMean, weight));
  Value smooth = onnx::DivOp::create(b, loc, weighted, meanOf(labelWeight));
  Value scaled = onnx::MulOp::create(
      b, loc, crossEntropy, scalarConstant(b, loc, element, 1.0 - eps));
  Value smoothed =
      onnx::MulOp::create(b, loc, smooth, scalarConstant(b, loc, element, eps));
  return onnx::SubOp::create(b, loc, scaled, smoothed);
}

} // namespace

LogicalResult pp::train::addLoss(ModuleOp module,
                                 const pp::AddLossPassOptions &options) {
  auto func =
      pp::pipeline::lookupFunction(module, options.funcName, "to train");
  if (!func)
    return failure();
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  // A model that computes its own loss keeps it.
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    if (value.getDefiningOp<onnx::SoftmaxCrossEntropyLossOp>() &&
        cast<RankedTensorType>(value.getType()).getRank() == 0) {
      pp::pipeline::setLossResult(func, i);
      return success();
    }
  }
  if (ret.getNumOperands() == 0) {
    func.emitError() << "the function has no output to put a loss on";
    return failure();
  }
  Value output = ret.getOperand(0);
  auto outputType = cast<RankedTensorType>(output.getType());
  if (!isa<FloatType>(outputType.getElementType()) ||
      outputType.getRank() < 1) {
    func.emitError() << "the loss needs float logits of rank >= 1, got "
                     << outputType;
    return failure();
  }

  if (!(options.labelSmoothing >= 0 && options.labelSmoothing <= 1)) {
    func.emitError() << "label-smoothing must lie in [0, 1], got "
                     << options.labelSmoothing;
    return failure();
  }
  if ((options.labelSmoothing > 0 || !options.classWeights.empty()) &&
      options.kind != pp::LossKind::SoftmaxCrossEntropy) {
    func.emitError() << (options.labelSmoothing > 0 ? "label-smoothing"
                                                    : "class-weights")
                     << " is an option of softmax-cross-entropy, not of "
                        "loss=mse";
    return failure();
  }
  for (double w : options.classWeights)
    if (!(w >= 0 && std::isfinite(w))) {
      func.emitError() << "class-weights must be finite and >= 0, got " << w;
      return failure();
    }
  OpBuilder b(ret);
  Location loc = NameLoc::get(b.getStringAttr("loss"), func.getLoc());
  Value loss;
  // A classifier's logits: the runtime counts its top-1 hits.
  std::optional<int64_t> classAxis;
  switch (options.kind) {
  case pp::LossKind::SoftmaxCrossEntropy: {
    int64_t rank = outputType.getRank();
    if (rank < 2) {
      func.emitError() << "softmax-cross-entropy needs logits with a batch "
                          "and a class dim, got "
                       << outputType << " (loss=mse takes any shape)";
      return failure();
    }
    int64_t axis = resolveClassAxis(options.classAxis, rank);
    if (axis < 1 || axis >= rank) {
      func.emitError() << "class-axis " << options.classAxis
                       << " must name a non-batch dim of the logits "
                       << outputType;
      return failure();
    }
    // ONNX wants the classes in dim 1: [N, C, d1, ...].
    Value scores = output;
    if (axis != 1) {
      SmallVector<int64_t> perm = {0, axis};
      for (int64_t d = 1; d < rank; ++d)
        if (d != axis)
          perm.push_back(d);
      scores = onnx::TransposeOp::create(b, loc, output,
                                         b.getDenseI64ArrayAttr(perm));
    }
    SmallVector<int64_t> labelShape(outputType.getShape());
    labelShape.erase(labelShape.begin() + axis);
    auto labelsType = RankedTensorType::get(labelShape, b.getI64Type());
    Value labels = addLabels(func, labelsType, loc);
    Value classWeights;
    if (!options.classWeights.empty()) {
      int64_t classes = outputType.getDimSize(axis);
      if (static_cast<int64_t>(options.classWeights.size()) != classes) {
        func.emitError() << "class-weights has " << options.classWeights.size()
                         << " weights, the logits " << outputType << " have "
                         << classes << " classes (dim " << axis << ")";
        return failure();
      }
      classWeights = classWeightsConstant(b, loc, outputType.getElementType(),
                                          options.classWeights, {classes});
    }
    loss =
        onnx::SoftmaxCrossEntropyLossOp::create(
            b, loc, scores, labels, classWeights,
            b.getI64IntegerAttr(options.ignoreIndex), b.getStringAttr("mean"))
            .getOutput();
    if (options.labelSmoothing > 0)
      loss = smoothLabels(b, loc, scores, labels, loss, options.labelSmoothing,
                          options.ignoreIndex, options.classWeights);
    classAxis = axis;
    break;
  }
  case pp::LossKind::MSE: {
    Value target = addLabels(func, outputType, loc);
    Value diff = onnx::SubOp::create(b, loc, output, target);
    Value square = onnx::MulOp::create(b, loc, diff, diff);
    loss = onnx::ReduceMeanOp::create(b, loc, square, DenseI64ArrayAttr(),
                                      b.getI64IntegerAttr(0));
    break;
  }
  }

  // The loss becomes result 0; the model's outputs follow.
  SmallVector<Value> results = {loss};
  llvm::append_range(results, ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
      pp::pipeline::getLossResultAttr(module.getContext()))};
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    resultAttrs.push_back(func.getResultAttrDict(i));
  ret->setOperands(results);
  func.setFunctionType(
      b.getFunctionType(func.getArgumentTypes(), ret.getOperandTypes()));
  func.setAllResultAttrs(resultAttrs);
  if (classAxis) {
    MLIRContext *context = module.getContext();
    for (NamedAttribute attr :
         {pp::pipeline::getClassAxisResultAttr(context, *classAxis),
          pp::pipeline::getIgnoreIndexResultAttr(context, options.ignoreIndex)})
      func.setResultAttr(1, attr.getName(), attr.getValue());
  }
  return success();
}
