//===- Optimizer.cpp - Gradient results to optimizer updates ----*- C++ -*-===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"
#include "pp/Support/OptionChecks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

#include <cstdio>
#include <map>

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;

namespace {

/// The loss scale and the count of good steps since it last changed.
constexpr llvm::StringLiteral kLossScaleGlobal = "pp.loss_scale";
constexpr llvm::StringLiteral kLossScaleGoodStepsGlobal =
    "pp.loss_scale_good_steps";

/// A state global named `name` holding `initial` (created once; `symbols`
/// is the module's table, kept up to date: module.lookupSymbol scans the
/// module, once per parameter).
FlatSymbolRefAttr stateGlobal(SymbolTable &symbols, OpBuilder &moduleBuilder,
                              StringRef name, RankedTensorType type,
                              Location loc, double initial = 0) {
  MLIRContext *context = moduleBuilder.getContext();
  if (!symbols.lookup(name)) {
    Type element = type.getElementType();
    Attribute value =
        isa<FloatType>(element)
            ? Attribute(moduleBuilder.getFloatAttr(element, initial))
            : Attribute(moduleBuilder.getIntegerAttr(
                  element, static_cast<int64_t>(initial)));
    symbols.insert(onnx::GlobalOp::create(moduleBuilder, loc, name,
                                          onnx::kState, type,
                                          DenseElementsAttr::get(type, value)));
  }
  return FlatSymbolRefAttr::get(context, name);
}

/// A scalar constant of `element` type.
Value scalar(OpBuilder &b, Location loc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  return onnx::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
}

/// `value` as a tensor of element type `element` (cast when it is not).
Value castTo(OpBuilder &b, Location loc, Value value, Type element) {
  if (getElementTypeOrSelf(value.getType()) == element)
    return value;
  return onnx::CastOp::create(
      b, loc, value,
      b.getI64IntegerAttr(onnx::getONNXDataTypeForFloat(element)));
}

/// A global's new value, written once the step is known not to be skipped.
struct PendingWrite {
  FlatSymbolRefAttr global;
  Value updated, old;
  std::optional<int64_t> stage;
  bool isWeight;
};

/// Loss scaling: the seed times the scale, after the loss seed.
LogicalResult scaleLossSeed(func::FuncOp func, FlatSymbolRefAttr scaleSym,
                            RankedTensorType scaleType, Location loc) {
  Operation *seed = nullptr;
  func.walk([&](Operation *op) {
    if (pp::pipeline::isLossSeed(op))
      seed = op;
  });
  if (!seed)
    return func.emitError("loss scaling: no loss gradient seed "
                          "(pp.loss_seed): run --pp-autodiff first");
  OpBuilder b(seed->getContext());
  b.setInsertionPointAfter(seed);
  Value seedValue = seed->getResult(0);
  Value scale =
      castTo(b, loc, onnx::GlobalReadOp::create(b, loc, scaleType, scaleSym),
             getElementTypeOrSelf(seedValue.getType()));
  auto scaled = onnx::MulOp::create(b, loc, seedValue, scale);
  seedValue.replaceAllUsesExcept(scaled, scaled);
  // The backward of the loss's stage.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (pp::pipeline::isLossResult(func, i))
      if (Operation *def = ret.getOperand(i).getDefiningOp())
        if (std::optional<int64_t> stage = pp::pipeline::getStage(def))
          pp::pipeline::setStage(scaled, *stage);
  return success();
}

/// The end of a loss-scaled step: every pending write keeps the old value
/// when an updated weight is not finite (0 * (new - old) sums to NaN), the
/// step counter too, and a dynamic scale halves (or doubles after
/// `interval` good steps). The weights' selects run on their stages; the
/// verdict is made where the flags meet (the lowest stage) and the counter
/// and scale updates on every stage, each on its own copy.
void skipOverflowingSteps(OpBuilder &b, Location loc,
                          ArrayRef<PendingWrite> writes,
                          FlatSymbolRefAttr stepSym, Value previousStep,
                          Value step, FlatSymbolRefAttr scaleSym,
                          bool dynamicScale, int64_t interval,
                          OpBuilder &moduleBuilder, SymbolTable &symbols) {
  Type f32 = b.getF32Type();
  // Summed per stage first: one flag crosses from each stage.
  std::map<std::optional<int64_t>, Value> perStage;
  for (const PendingWrite &w : writes) {
    if (!w.isWeight)
      continue;
    Type element = getElementTypeOrSelf(w.updated.getType());
    Value zeroed = onnx::MulOp::create(
        b, loc, onnx::SubOp::create(b, loc, w.updated, w.old),
        scalar(b, loc, element, 0.0));
    Value sum = castTo(b, loc,
                       onnx::ReduceSumOp::create(b, loc, zeroed, Value(),
                                                 b.getI64IntegerAttr(0),
                                                 b.getI64IntegerAttr(0)),
                       f32);
    Value &stageSum = perStage[w.stage];
    stageSum =
        stageSum ? onnx::AddOp::create(b, loc, stageSum, sum).getResult() : sum;
  }
  Value total;
  for (auto &[stage, sum] : perStage)
    total = total ? onnx::AddOp::create(b, loc, total, sum).getResult() : sum;
  // NaN is the one value not equal to itself.
  Value finite = onnx::EqualOp::create(b, loc, total, total);
  for (const PendingWrite &w : writes) {
    auto select = onnx::WhereOp::create(b, loc, finite, w.updated, w.old);
    if (w.stage)
      pp::pipeline::setStage(select, *w.stage);
    train::GlobalWriteOp::create(b, loc, w.global, select);
  }
  auto everyStage = [&](Value value) {
    pp::pipeline::setEveryStage(value.getDefiningOp());
    return value;
  };
  train::GlobalWriteOp::create(
      b, loc, stepSym,
      everyStage(onnx::WhereOp::create(b, loc, finite, step, previousStep)));
  if (!dynamicScale)
    return;
  auto scaleType = RankedTensorType::get({}, f32);
  FlatSymbolRefAttr goodSym = stateGlobal(
      symbols, moduleBuilder, kLossScaleGoodStepsGlobal, scaleType, loc);
  Value scale = onnx::GlobalReadOp::create(b, loc, scaleType, scaleSym);
  Value good = onnx::AddOp::create(
      b, loc, onnx::GlobalReadOp::create(b, loc, scaleType, goodSym),
      scalar(b, loc, f32, 1.0));
  Value keep = onnx::LessOp::create(
      b, loc, good, scalar(b, loc, f32, static_cast<double>(interval)));
  Value zero = scalar(b, loc, f32, 0.0);
  Value grown = onnx::WhereOp::create(
      b, loc, keep, scale,
      onnx::MulOp::create(b, loc, scale, scalar(b, loc, f32, 2.0)));
  Value newScale = everyStage(onnx::WhereOp::create(
      b, loc, finite, grown,
      onnx::MulOp::create(b, loc, scale, scalar(b, loc, f32, 0.5))));
  Value newGood = everyStage(onnx::WhereOp::create(
      b, loc, finite, onnx::WhereOp::create(b, loc, keep, good, zero), zero));
  train::GlobalWriteOp::create(b, loc, scaleSym, newScale);
  train::GlobalWriteOp::create(b, loc, goodSym, newGood);
}

/// Checks the learning-rate schedule options as train checks its flags and
/// records a schedule other than a constant rate on the module as
/// `pp.lr_schedule`: train's flags without dashes ("cosine warmup-steps=20
/// min-lr=0.001"), which the generated program runs unless its command
/// line gives a schedule.
LogicalResult recordLRSchedule(ModuleOp module,
                               const pp::OptimizerPassOptions &options) {
  using pp::LRSchedule;
  LRSchedule kind = options.lrSchedule;
  auto fail = [&](const Twine &message) {
    module.emitError() << "pp-optimizer: " << message;
    return failure();
  };
  bool decays = kind == LRSchedule::Cosine || kind == LRSchedule::Linear ||
                kind == LRSchedule::Poly;
  bool usesGamma = kind == LRSchedule::Step || kind == LRSchedule::MultiStep ||
                   kind == LRSchedule::Exponential;
  if (options.warmupSteps < 0 || options.stepSize < 0 || options.decaySteps < 0)
    return fail("warmup-steps, step-size and decay-steps must be >= 0");
  if (kind == LRSchedule::Step && options.stepSize == 0)
    return fail("lr-schedule=step needs step-size=N (N > 0)");
  if (kind != LRSchedule::Step && options.stepSize != 0)
    return fail("step-size applies to lr-schedule=step only");
  if (kind == LRSchedule::MultiStep && options.milestones.empty())
    return fail("lr-schedule=multistep needs milestones=N1,N2,...");
  if (kind != LRSchedule::MultiStep && !options.milestones.empty())
    return fail("milestones apply to lr-schedule=multistep only");
  for (size_t i = 0; i < options.milestones.size(); ++i)
    if (options.milestones[i] < 1 ||
        (i > 0 && options.milestones[i] <= options.milestones[i - 1]))
      return fail("milestones must be positive and strictly increasing");
  if (kind == LRSchedule::Exponential && options.gamma == 0.1)
    return fail("lr-schedule=exponential needs gamma=G (the factor per "
                "step, e.g. 0.999)");
  if (!usesGamma && options.gamma != 0.1)
    return fail("gamma applies to lr-schedule=step, multistep or "
                "exponential only");
  if (kind != LRSchedule::Poly && options.power != 1.0)
    return fail("power applies to lr-schedule=poly only");
  if (!decays && (options.minLr != 0 || options.decaySteps != 0))
    return fail("min-lr and decay-steps apply to lr-schedule=cosine, "
                "linear or poly only");
  if (decays && options.decaySteps != 0 &&
      options.decaySteps <= options.warmupSteps)
    return fail("decay-steps must be past warmup-steps");
  std::pair<StringRef, std::pair<double, pp::OptionRange>> checks[] = {
      {"min-lr", {options.minLr, pp::OptionRange::nonNegative()}},
      {"gamma", {options.gamma, pp::OptionRange::positive()}},
      {"power", {options.power, pp::OptionRange::positive()}}};
  for (const auto &[name, check] : checks)
    if (std::optional<std::string> error =
            pp::checkOptionValue(name, check.first, check.second))
      return fail("invalid option " + *error);
  if (kind == LRSchedule::Constant && options.warmupSteps == 0)
    return success();
  auto exact = [](double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return std::string(buffer);
  };
  std::string text = pp::stringifyEnum(kind).str();
  if (options.warmupSteps > 0)
    text += " warmup-steps=" + std::to_string(options.warmupSteps);
  if (kind == LRSchedule::Step)
    text += " step-size=" + std::to_string(options.stepSize);
  if (kind == LRSchedule::MultiStep) {
    text += " milestones=";
    for (size_t i = 0; i < options.milestones.size(); ++i)
      text += (i ? "," : "") + std::to_string(options.milestones[i]);
  }
  if (usesGamma)
    text += " gamma=" + exact(options.gamma);
  if (kind == LRSchedule::Poly)
    text += " power=" + exact(options.power);
  if (decays) {
    text += " min-lr=" + exact(options.minLr);
    if (options.decaySteps > 0)
      text += " decay-steps=" + std::to_string(options.decaySteps);
  }
  module->setAttr("pp.lr_schedule", StringAttr::get(module.getContext(), text));
  return success();
}

/// Checks the optimizer's hyper-parameters.
LogicalResult checkHyperParameters(func::FuncOp func,
                                   const pp::OptimizerPassOptions &options) {
  // PyTorch's ranges (lr > 0 as before); NaN and infinity never.
  using pp::OptionRange;
  std::pair<StringRef, std::pair<float, OptionRange>> checks[] = {
      {"lr", {options.lr, OptionRange::positive()}},
      {"momentum", {options.momentum, OptionRange::nonNegative()}},
      {"dampening", {options.dampening, OptionRange::unit()}},
      {"weight-decay", {options.weightDecay, OptionRange::nonNegative()}},
      {"beta1", {options.beta1, OptionRange::unitOpen()}},
      {"beta2", {options.beta2, OptionRange::unitOpen()}},
      {"epsilon", {options.epsilon, OptionRange::nonNegative()}}};
  for (const auto &[name, check] : checks)
    if (std::optional<std::string> error =
            pp::checkOptionValue(name, check.first, check.second)) {
      func.emitError() << "invalid optimizer option " << *error;
      return failure();
    }
  if (options.weightDecayMinRank < 0) {
    func.emitError() << "invalid optimizer option weight-decay-min-rank: "
                        "expected a rank >= 0, got "
                     << options.weightDecayMinRank;
    return failure();
  }
  if (options.nesterov && (options.momentum == 0 || options.dampening != 0)) {
    func.emitError() << "invalid optimizer options: nesterov needs "
                        "momentum > 0 and dampening=0";
    return failure();
  }
  return success();
}

/// Checks the loss-scale options and that the module's schedule can skip a
/// step.
LogicalResult checkLossScaling(ModuleOp module, func::FuncOp func,
                               const pp::OptimizerPassOptions &options) {
  if (options.lossScale == pp::LossScale::None)
    return success();
  if (std::optional<std::string> error =
          pp::checkOptionValue("loss-scale-value", options.lossScaleValue,
                               pp::OptionRange::positive())) {
    func.emitError() << "invalid optimizer option " << *error;
    return failure();
  }
  if (options.lossScaleInterval < 1) {
    func.emitError() << "invalid optimizer option loss-scale-interval="
                     << options.lossScaleInterval << " (must be >= 1)";
    return failure();
  }
  if (pp::pipeline::PlanAttr plan = pp::pipeline::getPlan(module);
      plan && (plan.isWeightVersioned() || plan.isWaveSynchronous())) {
    func.emitError() << "loss scaling under "
                     << (plan.isWeightVersioned()
                             ? "a weight-versioned schedule"
                             : "wave synchronous parallel")
                     << " is not built (the step's skip would need every "
                        "update of the step to agree)";
    return failure();
  }
  return success();
}

/// Builds the optimizer's updates of a step's gradient results, before its
/// return.
class UpdateBuilder {
public:
  UpdateBuilder(ModuleOp module, func::FuncOp func,
                const pp::OptimizerPassOptions &options)
      : func(func), options(options),
        ret(cast<func::ReturnOp>(func.getBody().front().getTerminator())),
        b(ret), moduleBuilder(OpBuilder::atBlockEnd(module.getBody())),
        symbols(module),
        loc(NameLoc::get(b.getStringAttr("optimizer"), func.getLoc())),
        scaleType(RankedTensorType::get({}, b.getF32Type())),
        scaling(options.lossScale != pp::LossScale::None) {}

  /// Scales the loss seed by @pp.loss_scale (when scaling).
  LogicalResult scaleLoss();
  /// The 1-based step number, kept across calls in @pp.step.
  void countStep();
  /// Updates every global the step returns the gradient of; `gradResults`
  /// gets those results.
  LogicalResult updateParameters(llvm::BitVector &gradResults);
  /// Writes the pending updates (when scaling: unless a weight overflows).
  void finish();

private:
  /// grad / scale, where the gradient is made (per micro-batch).
  Value unscale(Value grad, RankedTensorType type);
  /// The weight decay of a parameter of `type`: none below
  /// weight-decay-min-rank (biases, normalisation scales).
  double weightDecayOf(RankedTensorType type) const {
    return type.getRank() >= options.weightDecayMinRank ? options.weightDecay
                                                        : 0.0;
  }
  /// The new value of parameter `param` (global `name`) after SGD.
  Value updateSGD(StringRef name, RankedTensorType type, Value param,
                  Value grad);
  /// The new value of parameter `param` (global `name`) after Adam(W).
  Value updateAdam(StringRef name, RankedTensorType type, Value param,
                   Value grad);
  /// Writes `updated` to `sym` now or, when scaling, once the step is known
  /// not to be skipped (on the stage that made `grad`).
  void write(FlatSymbolRefAttr sym, Value updated, Value old, Value grad,
             bool isWeight);

  func::FuncOp func;
  const pp::OptimizerPassOptions &options;
  func::ReturnOp ret;
  OpBuilder b;
  OpBuilder moduleBuilder;
  SymbolTable symbols;
  Location loc;
  RankedTensorType scaleType;
  bool scaling;
  FlatSymbolRefAttr scaleSym, stepSym;
  Value previousStep, step;
  std::vector<PendingWrite> writes;
};

LogicalResult UpdateBuilder::scaleLoss() {
  if (!scaling)
    return success();
  scaleSym = stateGlobal(symbols, moduleBuilder, kLossScaleGlobal, scaleType,
                         loc, options.lossScaleValue);
  return scaleLossSeed(func, scaleSym, scaleType, loc);
}

void UpdateBuilder::countStep() {
  auto stepType = RankedTensorType::get({}, b.getI64Type());
  stepSym = stateGlobal(symbols, moduleBuilder,
                        pp::pipeline::kStepCounterGlobal, stepType, loc);
  previousStep = onnx::GlobalReadOp::create(b, loc, stepType, stepSym);
  step = onnx::AddOp::create(
      b, loc, previousStep,
      onnx::ConstantOp::create(
          b, loc, DenseElementsAttr::get(stepType, b.getI64IntegerAttr(1))));
  if (!scaling)
    train::GlobalWriteOp::create(b, loc, stepSym, step);
}

void UpdateBuilder::write(FlatSymbolRefAttr sym, Value updated, Value old,
                          Value grad, bool isWeight) {
  if (!scaling) {
    train::GlobalWriteOp::create(b, loc, sym, updated);
    return;
  }
  Operation *def = grad.getDefiningOp();
  writes.push_back({sym, updated, old,
                    def ? pp::pipeline::getStage(def) : std::nullopt,
                    isWeight});
}

Value UpdateBuilder::unscale(Value grad, RankedTensorType type) {
  Value inverse =
      castTo(b, loc,
             onnx::DivOp::create(
                 b, loc, scalar(b, loc, b.getF32Type(), 1.0),
                 onnx::GlobalReadOp::create(b, loc, scaleType, scaleSym)),
             type.getElementType());
  Operation *def = grad.getDefiningOp();
  auto unscaled = onnx::MulOp::create(b, loc, grad, inverse);
  if (std::optional<int64_t> stage =
          def ? pp::pipeline::getStage(def) : std::nullopt)
    pp::pipeline::setStage(unscaled, *stage);
  return unscaled;
}

Value UpdateBuilder::updateSGD(StringRef name, RankedTensorType type,
                               Value param, Value grad) {
  Value buffer;
  FlatSymbolRefAttr bufferSym;
  if (options.momentum != 0) {
    bufferSym = stateGlobal(symbols, moduleBuilder, (name + ".momentum").str(),
                            type, loc);
    buffer = onnx::GlobalReadOp::create(b, loc, type, bufferSym);
  }
  auto sgd = train::SGDOp::create(
      b, loc, type, buffer ? Type(type) : Type(), param, grad, step, buffer,
      b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.momentum),
      b.getF64FloatAttr(options.dampening),
      b.getF64FloatAttr(weightDecayOf(type)), b.getBoolAttr(options.nesterov));
  if (buffer)
    write(bufferSym, sgd.getNewMomentumBuffer(), buffer, grad, false);
  return sgd.getNewParam();
}

Value UpdateBuilder::updateAdam(StringRef name, RankedTensorType type,
                                Value param, Value grad) {
  FlatSymbolRefAttr mSym =
      stateGlobal(symbols, moduleBuilder, (name + ".adam_m").str(), type, loc);
  FlatSymbolRefAttr vSym =
      stateGlobal(symbols, moduleBuilder, (name + ".adam_v").str(), type, loc);
  Value m = onnx::GlobalReadOp::create(b, loc, type, mSym);
  Value v = onnx::GlobalReadOp::create(b, loc, type, vSym);
  auto adam = train::AdamOp::create(
      b, loc, type, type, type, param, grad, m, v, step,
      b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.beta1),
      b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(options.epsilon),
      b.getF64FloatAttr(weightDecayOf(type)),
      b.getBoolAttr(options.kind == pp::OptimizerKind::AdamW));
  write(mSym, adam.getNewM(), m, grad, false);
  write(vSym, adam.getNewV(), v, grad, false);
  return adam.getNewParam();
}

LogicalResult UpdateBuilder::updateParameters(llvm::BitVector &gradResults) {
  gradResults.resize(func.getNumResults());
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto sym = pp::pipeline::getGradOf(func, i);
    if (!sym)
      continue;
    gradResults.set(i);
    auto global = symbols.lookup<onnx::GlobalOp>(sym.getAttr());
    if (!global) {
      func.emitError() << "gradient of unknown global " << sym;
      return failure();
    }
    auto type = cast<RankedTensorType>(global.getType());
    Value grad = ret.getOperand(i);
    if (scaling)
      grad = unscale(grad, type);
    Value param = onnx::GlobalReadOp::create(b, loc, type, sym);
    StringRef name = global.getSymName();
    Value newParam = options.kind == pp::OptimizerKind::SGD
                         ? updateSGD(name, type, param, grad)
                         : updateAdam(name, type, param, grad);
    write(sym, newParam, param, grad, true);
  }
  if (gradResults.none()) {
    func.emitError() << "no result is marked pp.grad_of: run --pp-autodiff "
                        "first";
    return failure();
  }
  return success();
}

void UpdateBuilder::finish() {
  if (scaling)
    skipOverflowingSteps(b, loc, writes, stepSym, previousStep, step, scaleSym,
                         options.lossScale == pp::LossScale::Dynamic,
                         options.lossScaleInterval, moduleBuilder, symbols);
}

} // namespace

LogicalResult
pp::train::applyOptimizer(ModuleOp module,
                          const pp::OptimizerPassOptions &options) {
  auto func = pp::pipeline::lookupFunction(module, options.funcName, "");
  if (!func)
    return failure();
  if (failed(checkHyperParameters(func, options)) ||
      failed(recordLRSchedule(module, options)) ||
      failed(checkLossScaling(module, func, options)))
    return failure();
  UpdateBuilder updates(module, func, options);
  if (failed(updates.scaleLoss()))
    return failure();
  updates.countStep();
  llvm::BitVector gradResults;
  if (failed(updates.updateParameters(gradResults)))
    return failure();
  updates.finish();
  // The gradients are consumed: the step returns the other results.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Value> kept;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    if (!gradResults.test(i))
      kept.push_back(ret.getOperand(i));
  ret->setOperands(kept);
  if (failed(func.eraseResults(gradResults)))
    return failure();
  return success();
}
