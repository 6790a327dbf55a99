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

/// The reads of each trainable global, in the order the function reads them.
using ParamReads = llvm::MapVector<StringAttr, SmallVector<Value>>;

/// The loss `func` returns, once checked: not differentiated yet, marked
/// pp.loss and a float scalar.
FailureOr<Value> findLoss(func::FuncOp func, StringRef funcName) {
  Block &body = func.getBody().front();
  // Differentiating a training step again would add its gradients twice.
  bool hasGradients =
      llvm::any_of(llvm::seq(func.getNumResults()), [&](unsigned i) {
        return bool(pp::pipeline::getGradOf(func, i));
      });
  if (hasGradients || llvm::any_of(body, [](Operation &op) {
        return isa<train::TrainDialect>(op.getDialect());
      })) {
    func.emitError() << "@" << funcName << " is already differentiated ("
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
  return loss;
}

ParamReads trainableReads(Block &body, SymbolTable &symbols) {
  ParamReads paramReads;
  for (auto read : body.getOps<onnx::GlobalReadOp>()) {
    auto global = symbols.lookup<onnx::GlobalOp>(read.getGlobal());
    if (global && global.getKind() == onnx::kTrainable)
      paramReads[global.getSymNameAttr()].push_back(read.getValue());
  }
  return paramReads;
}

/// Values that depend on a parameter (only those need adjoints).
llvm::DenseSet<Value> activeValues(Block &body, const ParamReads &paramReads) {
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
  return active;
}

/// Builds the adjoints of a step's ops, from the loss back, before its
/// return.
class AdjointBuilder {
public:
  AdjointBuilder(func::ReturnOp ret, llvm::DenseSet<Value> active)
      : b(ret), active(std::move(active)) {}

  /// Seeds the loss's adjoint with one.
  void seedLoss(Value loss);
  /// Differentiates every op of `body` (as it is now) in reverse order.
  LogicalResult differentiate(Block &body);
  /// The adjoint of `value`, null when nothing reaches it.
  Value gradient(Value value) const { return grads.lookup(value); }
  OpBuilder &builder() { return b; }

private:
  /// Adds `grad` to the adjoint of `value`.
  void accumulate(Value value, Value grad, Location loc);
  /// Adds `grad`, one device's part of the adjoint of `operand`, to the sum
  /// `reduce` all-reduces.
  void addPartial(Value operand, Value grad,
                  const train::GradAllReduce &reduce);
  /// All-reduces the parts of the adjoint of `value` into it.
  void finishPartial(Value value);
  LogicalResult differentiateOp(Operation *op);

  OpBuilder b;
  /// The values whose adjoints are built (see activeValues).
  llvm::DenseSet<Value> active;
  llvm::DenseMap<Value, Value> grads;
  StageListener listener;
  /// Per-device parts of the gradients of whole values (tensor
  /// parallelism), with the group to sum them over and the pipeline stage
  /// of the earliest split op that made one.
  struct Partial {
    Value sum;
    train::GradAllReduce reduce;
    std::optional<int64_t> stage;
  };
  llvm::MapVector<Value, Partial> partials;
};

void AdjointBuilder::seedLoss(Value loss) {
  auto one = DenseElementsAttr::get(
      cast<RankedTensorType>(loss.getType()),
      b.getFloatAttr(getElementTypeOrSelf(loss.getType()), 1.0));
  auto seed = onnx::ConstantOp::create(b, loss.getLoc(), one);
  // Marks where the backward begins; the stage splitter scales it by the
  // number of micro-batches.
  pp::pipeline::setLossSeed(seed);
  grads[loss] = seed;
}

void AdjointBuilder::accumulate(Value value, Value grad, Location loc) {
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
}

void AdjointBuilder::addPartial(Value operand, Value grad,
                                const train::GradAllReduce &reduce) {
  auto [it, inserted] =
      partials.try_emplace(operand, Partial{grad, reduce, listener.stage});
  if (!inserted) {
    it->second.sum =
        onnx::AddOp::create(b, grad.getLoc(), it->second.sum, grad);
    it->second.stage = listener.stage;
  }
}

void AdjointBuilder::finishPartial(Value value) {
  auto it = partials.find(value);
  if (it == partials.end())
    return;
  Partial partial = it->second;
  partials.erase(it);
  // The sum runs on the split ops' stage, not the value's: a stage-wise mix
  // may give the value's stage one device, which cannot sum the parts.
  std::optional<int64_t> valueStage = listener.stage;
  listener.stage = partial.stage;
  Value whole = shard::AllReduceOp::create(
      b, partial.sum.getLoc(), partial.sum.getType(),
      partial.reduce.grid.getValue(), partial.reduce.axes, partial.sum);
  accumulate(value, whole, whole.getLoc());
  listener.stage = valueStage;
}

LogicalResult AdjointBuilder::differentiateOp(Operation *op) {
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
    return success();
  auto gradOp = dyn_cast<train::GradientOpInterface>(op);
  if (!gradOp)
    return op->emitError() << "no gradient rule for '" << op->getName()
                           << "', which lies between a parameter and the loss";
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
    if (reduce && llvm::is_contained(reduce->operands, int64_t(index)))
      addPartial(operand, grad, *reduce);
    else
      accumulate(operand, grad, grad.getLoc());
  }
  return success();
}

LogicalResult AdjointBuilder::differentiate(Block &body) {
  // Backward ops inherit the pipeline stage of the forward op they
  // differentiate, so a partitioned model stays partitioned.
  b.setListener(&listener);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (failed(differentiateOp(op)))
      return failure();
  // Sums over the reads of a tied weight run where the last read's
  // gradient is made (the earliest stage).
  b.setListener(nullptr);
  while (!partials.empty())
    finishPartial(partials.front().first);
  return success();
}

/// A function's results and their attributes.
struct Results {
  SmallVector<Value> values;
  SmallVector<DictionaryAttr> attrs;
};

/// Appends one gradient per global to `results`: reads of a tied weight
/// sum, and a parameter that does not reach the loss has a zero gradient.
void appendParameterGradients(AdjointBuilder &adjoints,
                              const ParamReads &paramReads, Location zeroLoc,
                              Results &results) {
  OpBuilder &b = adjoints.builder();
  for (auto &[name, reads] : paramReads) {
    Value total;
    for (Value read : reads) {
      Value g = adjoints.gradient(read);
      if (!g)
        continue;
      total = total ? onnx::AddOp::create(b, g.getLoc(), total, g).getC() : g;
    }
    if (!total) {
      auto type = cast<RankedTensorType>(reads.front().getType());
      total = onnx::ConstantOp::create(
          b, zeroLoc,
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 0.0)));
    }
    results.values.push_back(total);
    results.attrs.push_back(b.getDictionaryAttr(
        pp::pipeline::getGradOfResultAttr(FlatSymbolRefAttr::get(name))));
  }
}

/// Training-mode BatchNorm updates its running statistics (state).
void writeBatchNormStatistics(OpBuilder &b, Block &body, SymbolTable &symbols) {
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
}

/// Rules build adjoints of every operand; drops those nothing needs (e.g.
/// the input gradient of the first layer).
void eraseDeadOps(Block &body) {
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op))
      op->erase();
}

} // namespace

LogicalResult pp::train::differentiate(ModuleOp module,
                                       const pp::AutodiffPassOptions &options) {
  auto func = pp::pipeline::lookupFunction(module, options.funcName,
                                           "to differentiate");
  if (!func)
    return failure();
  Block &body = func.getBody().front();
  FailureOr<Value> loss = findLoss(func, options.funcName);
  if (failed(loss))
    return failure();
  // Hand-written steps get Dropout streams here, before split-stages
  // spreads the ops over stage functions.
  onnx::assignDropoutStreams(func);

  SymbolTable symbols(module);
  ParamReads paramReads = trainableReads(body, symbols);
  if (paramReads.empty()) {
    func.emitError() << "the function reads no trainable global";
    return failure();
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  AdjointBuilder adjoints(ret, activeValues(body, paramReads));
  adjoints.seedLoss(*loss);
  if (failed(adjoints.differentiate(body)))
    return failure();

  Results results;
  results.values.assign(ret.getOperands().begin(), ret.getOperands().end());
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    results.attrs.push_back(func.getResultAttrDict(i));
  appendParameterGradients(adjoints, paramReads, loss->getLoc(), results);
  OpBuilder &b = adjoints.builder();
  writeBatchNormStatistics(b, body, symbols);

  ret->setOperands(results.values);
  func.setFunctionType(
      b.getFunctionType(func.getArgumentTypes(), ret.getOperandTypes()));
  func.setAllResultAttrs(results.attrs);
  eraseDeadOps(body);
  return success();
}
