//===- Autodiff.cpp - Reverse-mode differentiation of the loss --*- C++ -*-===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;

namespace {

/// Copies `stage` (when set) onto every op the builder creates.
struct StageListener : public OpBuilder::Listener {
  std::optional<int64_t> stage;
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint previous) override {
    if (stage && !pp::pipeline::getStage(op))
      pp::pipeline::setStage(op, *stage);
  }
};

bool isFloat(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

} // namespace

LogicalResult pp::train::differentiate(ModuleOp module,
                                       const pp::AutodiffPassOptions &options) {
  auto func = pp::pipeline::lookupFunction(module, options.funcName,
                                           "to differentiate");
  if (!func)
    return failure();
  Block &body = func.getBody().front();
  // Differentiating a training step again would add its gradients twice.
  bool hasGradients =
      llvm::any_of(llvm::seq(func.getNumResults()), [&](unsigned i) {
        return bool(pp::pipeline::getGradOf(func, i));
      });
  if (hasGradients || llvm::any_of(body, [](Operation &op) {
        return isa<train::TrainDialect>(op.getDialect());
      })) {
    func.emitError() << "@" << options.funcName
                     << " is already differentiated ("
                     << (hasGradients ? "it returns gradients"
                                      : "it holds backward or optimizer ops")
                     << "): run --pp-autodiff once";
    return failure();
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  std::optional<unsigned> lossIndex;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (pp::pipeline::isLossResult(func, i))
      lossIndex = i;
  if (!lossIndex) {
    func.emitError() << "no result is marked pp.loss: run --pp-add-loss "
                        "first";
    return failure();
  }
  Value loss = ret.getOperand(*lossIndex);
  if (cast<RankedTensorType>(loss.getType()).getRank() != 0 || !isFloat(loss)) {
    func.emitError() << "the loss must be a float scalar, got "
                     << loss.getType();
    return failure();
  }
  // Hand-written steps get Dropout streams here, before split-stages
  // spreads the ops over stage functions.
  onnx::assignDropoutStreams(func);

  // Trainable parameters, in the order the function reads them.
  llvm::MapVector<StringAttr, SmallVector<Value>> paramReads;
  SymbolTable symbols(module);
  for (auto read : body.getOps<onnx::GlobalReadOp>()) {
    auto global = symbols.lookup<onnx::GlobalOp>(read.getGlobal());
    if (global && global.getKind() == onnx::kTrainable)
      paramReads[global.getSymNameAttr()].push_back(read.getValue());
  }
  if (paramReads.empty()) {
    func.emitError() << "the function reads no trainable global";
    return failure();
  }

  // Values that depend on a parameter (only those need adjoints).
  llvm::DenseSet<Value> active;
  for (auto &[name, reads] : paramReads)
    active.insert(reads.begin(), reads.end());
  for (Operation &op : body.without_terminator()) {
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value result : op.getResults())
        if (isFloat(result))
          active.insert(result);
  }

  OpBuilder b(ret);
  llvm::DenseMap<Value, Value> grads;
  StageListener listener;
  auto accumulate = [&](Value value, Value grad, Location loc) {
    auto [it, inserted] = grads.try_emplace(value, grad);
    if (inserted)
      return;
    // A partitioned model sums on the earlier stage of the two parts: the
    // sum flows on towards the value's producer, on a stage no later than
    // either, so every backward message goes to an earlier stage.
    std::optional<int64_t> current = listener.stage;
    if (Operation *earlier = it->second.getDefiningOp())
      if (std::optional<int64_t> stage = pp::pipeline::getStage(earlier);
          stage && current && *stage < *current)
        listener.stage = stage;
    it->second = onnx::AddOp::create(b, loc, it->second, grad);
    listener.stage = current;
  };
  Location lossLoc = loss.getLoc();
  auto one = DenseElementsAttr::get(
      cast<RankedTensorType>(loss.getType()),
      b.getFloatAttr(getElementTypeOrSelf(loss.getType()), 1.0));
  auto seed = onnx::ConstantOp::create(b, lossLoc, one);
  // Marks where the backward begins; the stage splitter scales it by the
  // number of micro-batches.
  pp::pipeline::setLossSeed(seed);
  grads[loss] = seed;

  // Backward ops inherit the pipeline stage of the forward op they
  // differentiate, so a partitioned model stays partitioned.
  b.setListener(&listener);

  // Per-device parts of the gradients of whole values (tensor
  // parallelism), with the group to sum them over and the pipeline stage
  // of the earliest split op that made one.
  struct Partial {
    Value sum;
    train::GradAllReduce reduce;
    std::optional<int64_t> stage;
  };
  llvm::MapVector<Value, Partial> partials;
  // The sum runs on the split ops' stage, not the value's: a stage-wise mix
  // may give the value's stage one device, which cannot sum the parts.
  auto finishPartial = [&](Value value) {
    auto it = partials.find(value);
    if (it == partials.end())
      return;
    Partial partial = it->second;
    partials.erase(it);
    std::optional<int64_t> valueStage = listener.stage;
    listener.stage = partial.stage;
    Value whole = shard::AllReduceOp::create(
        b, partial.sum.getLoc(), partial.sum.getType(),
        partial.reduce.grid.getValue(), partial.reduce.axes, partial.sum);
    accumulate(value, whole, whole.getLoc());
    listener.stage = valueStage;
  };

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    listener.stage = pp::pipeline::getStage(op);
    for (Value result : op->getResults())
      finishPartial(result);
    SmallVector<Value> resultGrads;
    bool anyGrad = false;
    for (Value result : op->getResults()) {
      Value g = grads.lookup(result);
      resultGrads.push_back(g);
      anyGrad |= static_cast<bool>(g);
    }
    bool needsGrad = llvm::any_of(op->getOperands(),
                                  [&](Value v) { return active.contains(v); });
    if (!anyGrad || !needsGrad)
      continue;
    auto gradOp = dyn_cast<train::GradientOpInterface>(op);
    if (!gradOp) {
      op->emitError() << "no gradient rule for '" << op->getName()
                      << "', which lies between a parameter and the loss";
      return failure();
    }
    SmallVector<Value> operandGrads;
    listener.stage = pp::pipeline::getStage(op);
    if (failed(gradOp.buildGradient(b, resultGrads, operandGrads)))
      return failure();
    // Tensor parallelism: a whole operand of a split op gets only this
    // device's contribution; those are summed here and over the group once
    // (finishPartial), when every use has contributed.
    std::optional<train::GradAllReduce> reduce = train::getGradAllReduce(op);
    for (auto [index, operand, grad] :
         llvm::enumerate(op->getOperands(), operandGrads)) {
      if (!grad || !active.contains(operand))
        continue;
      if (reduce && llvm::is_contained(reduce->operands, int64_t(index))) {
        auto [it, inserted] = partials.try_emplace(
            operand, Partial{grad, *reduce, listener.stage});
        if (!inserted) {
          it->second.sum =
              onnx::AddOp::create(b, grad.getLoc(), it->second.sum, grad);
          it->second.stage = listener.stage;
        }
        continue;
      }
      accumulate(operand, grad, grad.getLoc());
    }
  }
  // Sums over the reads of a tied weight run where the last read's
  // gradient is made (the earliest stage).
  b.setListener(nullptr);
  while (!partials.empty())
    finishPartial(partials.front().first);

  // One gradient per global: reads of a tied weight sum.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    resultAttrs.push_back(func.getResultAttrDict(i));
  for (auto &[name, reads] : paramReads) {
    Value total;
    for (Value read : reads) {
      Value g = grads.lookup(read);
      if (!g)
        continue;
      total = total ? onnx::AddOp::create(b, g.getLoc(), total, g).getC() : g;
    }
    if (!total) {
      // A parameter that does not reach the loss has a zero gradient.
      auto type = cast<RankedTensorType>(reads.front().getType());
      total = onnx::ConstantOp::create(
          b, lossLoc,
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 0.0)));
    }
    results.push_back(total);
    resultAttrs.push_back(b.getDictionaryAttr(
        pp::pipeline::getGradOfResultAttr(FlatSymbolRefAttr::get(name))));
  }

  // Training-mode BatchNorm updates its running statistics (state).
  for (auto bn : body.getOps<onnx::BatchNormalizationOp>()) {
    if (!bn.getTrainingMode())
      continue;
    for (auto [input, updated] :
         {std::pair<Value, Value>{bn.getInputMean(), bn.getRunningMean()},
          {bn.getInputVar(), bn.getRunningVar()}}) {
      auto read = input.getDefiningOp<onnx::GlobalReadOp>();
      auto global =
          read ? symbols.lookup<onnx::GlobalOp>(read.getGlobal()) : nullptr;
      if (global && global.getKind() == onnx::kState)
        train::GlobalWriteOp::create(b, bn.getLoc(), read.getGlobalAttr(),
                                     updated);
    }
  }

  ret->setOperands(results);
  func.setFunctionType(
      b.getFunctionType(func.getArgumentTypes(), ret.getOperandTypes()));
  func.setAllResultAttrs(resultAttrs);

  // Rules build adjoints of every operand; drop those nothing needs (e.g.
  // the input gradient of the first layer).
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op))
      op->erase();
  return success();
}
