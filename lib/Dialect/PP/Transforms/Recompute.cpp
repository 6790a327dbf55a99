//===- Recompute.cpp - Recompute forward ops in the backward ----*- C++ -*-===//
//
// Activation checkpointing on a training step. The backward of a stage reads
// forward values, which a pipelined step keeps for every micro-batch in
// flight. For a chosen set R of forward ops, this pass clones each op of R
// just before the first backward op of its stage that needs it and lets the
// stage's backward ops use the clone; the forward is left as it is. What the
// stage keeps then is the set of inputs of the recomputed segments.
//
// The kept values of a stage are measured as --pp-split-stages stashes them:
// forward values (not constants, global reads or step inputs, which are
// re-materialised or re-read) used by the stage's backward ops.
//
//===----------------------------------------------------------------------===//

#include "pp/Analysis/CostModel.h"
#include "pp/Cluster/Cluster.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Schedule/Schedule.h"
#include "pp/Support/OptionChecks.h"

#include "pp/Dialect/PP/Transforms/ReportFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

#include <limits>
#include <optional>

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;
namespace pipeline = pp::pipeline;

namespace {

using OpSet = llvm::DenseSet<Operation *>;

/// Whether cloning `op` into the backward is allowed: pure ops with float
/// results only. Dropout (random mask), constants and global reads (nothing
/// to gain) are excluded.
bool isRecomputable(Operation *op) {
  if (isa<onnx::ConstantOp, onnx::GlobalReadOp, onnx::DropoutOp>(op))
    return false;
  if (op->getNumResults() == 0 || op->getNumRegions() != 0 ||
      !isMemoryEffectFree(op))
    return false;
  return llvm::all_of(op->getResultTypes(), [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && isa<FloatType>(tensor.getElementType());
  });
}

int64_t numElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : -1;
}

/// Cheap ops with outputs as large as their inputs (memory-bound): the
/// candidates of the selective policy.
bool isMemoryBound(Operation *op) {
  if (auto facts = dyn_cast<onnx::KernelFactsOpInterface>(op);
      facts && facts.isMemoryBound())
    return true;
  // Elementwise binary ops with a scalar or broadcast operand (scaling,
  // bias): one big input, so recomputing costs one pass over it.
  if (isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::PowOp,
          onnx::ModOp, onnx::MaxOp, onnx::MinOp>(op)) {
    int64_t out = numElements(op->getResult(0).getType());
    return out > 0 && llvm::any_of(op->getOperands(), [&](Value operand) {
             int64_t in = numElements(operand.getType());
             return in >= 0 && in < out;
           });
  }
  return false;
}

/// In-flight micro-batches of `stage` of `numStages` under `schedule`
/// (the schedule library's rule).
int64_t inFlight(pp::schedule::ScheduleKind schedule, int64_t stage,
                 int64_t numStages, int64_t microBatches) {
  return pp::schedule::inFlightMicroBatches(schedule, stage, numStages,
                                            microBatches);
}

std::string formatBytes(int64_t bytes) {
  return llvm::formatv("{0} B ({1:f2} MB)", bytes, bytes / 1e6).str();
}

/// The training step, classified once: forward ops with their stage, and
/// per stage the backward ops whose forward operands the stage keeps.
class StepAnalysis {
public:
  /// Classifies `step`; stages are numbered 0 .. max(minStages, last
  /// pp.stage + 1) - 1.
  LogicalResult init(func::FuncOp step, int64_t minStages);

  /// Bytes the backward of `stage` keeps per micro-batch when the ops of
  /// `recompute` (forward ops of `stage`) are recomputed; `needed` gets the
  /// ops of `recompute` that must actually be cloned.
  int64_t keptBytes(int64_t stage, const OpSet &recompute,
                    OpSet *needed = nullptr) const;

  /// Clones the `needed` ops of `stage` into its backward and switches the
  /// stage's backward uses to the clones. Returns the clones.
  SmallVector<Operation *> rewrite(int64_t stage, const OpSet &needed);

  int64_t numStages = 0;
  /// Forward ops (not constants or global reads) per stage, in order.
  SmallVector<SmallVector<Operation *>> forwardOps;
  /// Stage of every forward op.
  DenseMap<Operation *, int64_t> forwardStage;
  /// Backward ops per stage, in order.
  SmallVector<SmallVector<Operation *>> backwardOps;
  DenseMap<Operation *, unsigned> position;

private:
  /// Per stage, the forward values its backward ops read.
  SmallVector<llvm::SetVector<Value>> roots;
};

LogicalResult StepAnalysis::init(func::FuncOp step, int64_t minStages) {
  Block &body = step.getBody().front();
  Operation *seed = nullptr;
  for (Operation &op : body.without_terminator())
    if (pipeline::isLossSeed(&op)) {
      seed = &op;
      break;
    }
  if (!seed)
    return step.emitError()
           << "no loss gradient seed (pp.loss_seed): run --pp-partition, "
              "--pp-autodiff and --pp-optimizer before --pp-recompute";

  // Forward: everything before the seed.
  unsigned index = 0;
  bool forward = true;
  // The stage of each backward op. The other ops after the seed are the
  // optimizer (with what reads its results) and re-materialised ops
  // (constants, global reads and what only reads them).
  DenseMap<Operation *, int64_t> lateStage;
  OpSet update, rematerialised;
  for (Operation &op : body.without_terminator()) {
    position[&op] = index++;
    if (&op == seed) {
      forward = false;
      continue;
    }
    if (forward) {
      if (isa<onnx::ConstantOp, onnx::GlobalReadOp>(op)) {
        rematerialised.insert(&op);
        continue;
      }
      std::optional<int64_t> stage = pipeline::getStage(&op);
      if (!stage)
        return op.emitError()
               << "forward op has no pp.stage: run --pp-partition before "
                  "--pp-autodiff and --pp-recompute";
      forwardStage[&op] = *stage;
      numStages = std::max(numStages, *stage + 1);
      continue;
    }
    // After the seed, as --pp-split-stages classifies it.
    if (isa<onnx::ConstantOp, onnx::GlobalReadOp>(op)) {
      rematerialised.insert(&op);
      continue;
    }
    if (isa<train::GlobalWriteOp, train::SGDOp, train::AdamOp>(op) ||
        llvm::any_of(op.getOperands(), [&](Value v) {
          return update.contains(v.getDefiningOp());
        })) {
      update.insert(&op);
      continue;
    }
    if (isMemoryEffectFree(&op) && llvm::all_of(op.getOperands(), [&](Value v) {
          return rematerialised.contains(v.getDefiningOp());
        })) {
      rematerialised.insert(&op);
      continue;
    }
    std::optional<int64_t> stage = pipeline::getStage(&op);
    if (!stage) {
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        std::optional<int64_t> s;
        if (auto it = forwardStage.find(def); it != forwardStage.end())
          s = it->second;
        else if (auto it = lateStage.find(def); it != lateStage.end())
          s = it->second;
        if (s)
          stage = stage ? std::min(*stage, *s) : *s;
      }
    }
    if (!stage)
      continue; // Split-stages rejects it; nothing to recompute for it.
    lateStage[&op] = *stage;
    numStages = std::max(numStages, *stage + 1);
  }

  numStages = std::max(numStages, minStages);
  forwardOps.resize(numStages);
  backwardOps.resize(numStages);
  roots.resize(numStages);
  for (Operation &op : body.without_terminator()) {
    if (auto it = forwardStage.find(&op); it != forwardStage.end())
      forwardOps[it->second].push_back(&op);
    auto it = lateStage.find(&op);
    if (it == lateStage.end())
      continue;
    backwardOps[it->second].push_back(&op);
    for (Value v : op.getOperands())
      if (forwardStage.count(v.getDefiningOp()))
        roots[it->second].insert(v);
  }
  return success();
}

int64_t StepAnalysis::keptBytes(int64_t stage, const OpSet &recompute,
                                OpSet *needed) const {
  llvm::SetVector<Value> kept;
  OpSet cloned;
  SmallVector<Value> worklist(roots[stage].begin(), roots[stage].end());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    Operation *def = value.getDefiningOp();
    // Step inputs, constants and global reads are not stashed.
    if (!forwardStage.count(def))
      continue;
    if (!recompute.contains(def)) {
      kept.insert(value);
      continue;
    }
    if (cloned.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  int64_t bytes = 0;
  for (Value value : kept)
    bytes += pp::getTensorBytes(value.getType());
  if (needed)
    *needed = std::move(cloned);
  return bytes;
}

SmallVector<Operation *> StepAnalysis::rewrite(int64_t stage,
                                               const OpSet &needed) {
  if (needed.empty())
    return {};
  SmallVector<Operation *> ops(needed.begin(), needed.end());
  llvm::sort(ops, [&](Operation *a, Operation *b) {
    return position.lookup(a) < position.lookup(b);
  });
  OpSet backward(backwardOps[stage].begin(), backwardOps[stage].end());

  // Each clone goes before the first backward op that reads it, directly
  // or through the clones of its users (which come later in the forward).
  DenseMap<Operation *, Operation *> insertBefore;
  for (Operation *op : llvm::reverse(ops)) {
    Operation *first = nullptr;
    auto consider = [&](Operation *candidate) {
      if (candidate &&
          (!first || position.lookup(candidate) < position.lookup(first)))
        first = candidate;
    };
    for (Operation *user : op->getUsers()) {
      if (backward.contains(user))
        consider(user);
      else if (needed.contains(user))
        consider(insertBefore.lookup(user));
    }
    insertBefore[op] = first;
  }

  // Clone in forward order, so that a clone's operands are defined before
  // it (clones sharing an insertion point stay in forward order).
  IRMapping mapping;
  SmallVector<Operation *> clones;
  OpBuilder builder(ops.front()->getContext());
  for (Operation *op : ops) {
    Operation *before = insertBefore.lookup(op);
    if (!before)
      continue; // Not read by the backward (cannot happen for needed ops).
    builder.setInsertionPoint(before);
    Operation *clone = builder.clone(*op, mapping);
    pipeline::setRecomputed(clone);
    clones.push_back(clone);
    for (auto [original, copy] :
         llvm::zip(op->getResults(), clone->getResults()))
      original.replaceUsesWithIf(copy, [&](OpOperand &use) {
        return backward.contains(use.getOwner());
      });
  }
  return clones;
}

/// Greedily grows `recompute` from `candidates` (forward ops of `stage`):
/// each step adds the move (one candidate, or it with the candidates that
/// feed it) with the best score (bytes saved, or bytes saved per added
/// forward second when `time` is set) until `done` holds or no move saves
/// bytes. Then drops the ops whose removal does not raise the kept bytes.
void grow(const StepAnalysis &step, int64_t stage,
          ArrayRef<Operation *> candidates, OpSet &recompute,
          llvm::function_ref<double(Operation *)> time,
          llvm::function_ref<bool(int64_t)> done) {
  OpSet candidateSet(candidates.begin(), candidates.end());
  auto addedTime = [&](const OpSet &needed) {
    double total = 0;
    for (Operation *op : needed)
      total += time(op);
    return total;
  };
  OpSet needed;
  int64_t current = step.keptBytes(stage, recompute, &needed);
  double currentTime = time ? addedTime(needed) : 0;
  while (!done(current)) {
    std::optional<OpSet> bestMove;
    int64_t bestBytes = current;
    double bestScore = 0;
    for (Operation *candidate : candidates) {
      if (recompute.contains(candidate))
        continue;
      // The candidate alone, and with the candidates that feed it: a chain
      // of same-size ops (reshape -> softmax) only saves bytes as a whole.
      OpSet single = {candidate}, chain = {candidate};
      SmallVector<Operation *> worklist = {candidate};
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        for (Value operand : op->getOperands()) {
          Operation *def = operand.getDefiningOp();
          if (def && candidateSet.contains(def) && !recompute.contains(def) &&
              chain.insert(def).second)
            worklist.push_back(def);
        }
      }
      for (OpSet *move : {&single, &chain}) {
        if (move == &chain && chain.size() == 1)
          continue;
        OpSet trial = recompute;
        trial.insert(move->begin(), move->end());
        OpSet trialNeeded;
        int64_t bytes = step.keptBytes(stage, trial, &trialNeeded);
        int64_t saved = current - bytes;
        if (saved <= 0)
          continue;
        double score = saved;
        if (time) {
          double extra = addedTime(trialNeeded) - currentTime;
          score = extra > 0 ? saved / extra
                            : std::numeric_limits<double>::infinity();
        }
        // Ties: fewer kept bytes, then the smaller move.
        if (!bestMove || score > bestScore ||
            (score == bestScore &&
             (bytes < bestBytes ||
              (bytes == bestBytes && move->size() < bestMove->size())))) {
          bestMove = *move;
          bestScore = score;
          bestBytes = bytes;
        }
      }
    }
    if (!bestMove)
      break;
    recompute.insert(bestMove->begin(), bestMove->end());
    current = step.keptBytes(stage, recompute, &needed);
    currentTime = time ? addedTime(needed) : 0;
  }

  // Keep only what pays: an op whose removal does not raise the kept bytes
  // would only add time.
  SmallVector<Operation *> chosen(recompute.begin(), recompute.end());
  llvm::sort(chosen, [&](Operation *a, Operation *b) {
    return step.position.lookup(a) > step.position.lookup(b);
  });
  for (Operation *op : chosen) {
    OpSet without = recompute;
    without.erase(op);
    int64_t bytes = step.keptBytes(stage, without);
    if (bytes <= current) {
      recompute = std::move(without);
      current = bytes;
    }
  }
}

/// planRecomputation's options, checked and resolved.
struct RecomputeSettings {
  pp::schedule::ScheduleKind kind = pp::schedule::ScheduleKind::OneFOneB;
  int64_t microBatches = 0;
  /// Activation bytes per device; unset means what the device's memory
  /// leaves.
  std::optional<int64_t> budget;
  std::optional<pp::cluster::Cluster> cluster;
};

/// The activation-budget option: unset, or one value >= 0.
FailureOr<std::optional<int64_t>>
parseActivationBudget(ModuleOp module,
                      const pp::RecomputePassOptions &options) {
  if (options.activationBudget.empty())
    return std::optional<int64_t>();
  std::optional<std::string> error =
      options.activationBudget.size() > 1
          ? std::optional<std::string>(
                "activation-budget: one value, got " +
                std::to_string(options.activationBudget.size()))
          : pp::checkOptionValue("activation-budget",
                                 options.activationBudget[0],
                                 pp::OptionRange::nonNegative());
  if (error) {
    module.emitError() << "pp-recompute: " << *error;
    return failure();
  }
  return std::optional<int64_t>(options.activationBudget[0]);
}

/// The cluster's devices (the module's, or cluster='s); policy=auto needs
/// them.
FailureOr<std::optional<pp::cluster::Cluster>>
loadCluster(ModuleOp module, const pp::RecomputePassOptions &options) {
  FailureOr<std::optional<pp::cluster::Cluster>> cluster =
      pipeline::resolveCluster(module, options.clusterSpec, "pp-recompute",
                               [&] { return module.emitError(); });
  if (failed(cluster))
    return failure();
  if (!*cluster) {
    if (options.policy == pp::RecomputePolicy::Auto) {
      module.emitError() << "pp-recompute policy=auto needs cluster=<spec or "
                            ".json> (the devices' memory and speed)";
      return failure();
    }
    return cluster;
  }
  if ((*cluster)->devices.empty()) {
    module.emitError() << "cluster: no devices";
    return failure();
  }
  return cluster;
}

FailureOr<RecomputeSettings>
resolveSettings(ModuleOp module, pipeline::PlanAttr plan,
                const pp::RecomputePassOptions &options) {
  RecomputeSettings settings;
  if (plan)
    settings.kind = plan.getSchedule();
  if (options.schedule)
    settings.kind = *options.schedule;
  FailureOr<int64_t> resolved = pipeline::resolveMicroBatches(
      module, options.microBatches, "pp-recompute");
  if (failed(resolved))
    return failure();
  settings.microBatches = *resolved;
  FailureOr<std::optional<int64_t>> budget =
      parseActivationBudget(module, options);
  if (failed(budget))
    return failure();
  settings.budget = *budget;
  FailureOr<std::optional<pp::cluster::Cluster>> cluster =
      loadCluster(module, options);
  if (failed(cluster))
    return failure();
  settings.cluster = std::move(*cluster);
  return settings;
}

/// The optimizer's state per weight, in weights: 1 for SGD with momentum,
/// 2 for Adam, else 0.
double optimizerStateFactor(func::FuncOp func) {
  double stateFactor = 0;
  func.walk([&](Operation *op) {
    if (auto sgd = dyn_cast<train::SGDOp>(op); sgd && sgd.getMomentumBuffer())
      stateFactor = std::max(stateFactor, 1.0);
    else if (isa<train::AdamOp>(op))
      stateFactor = std::max(stateFactor, 2.0);
  });
  return stateFactor;
}

/// What the report says of one stage.
struct StageReport {
  int64_t before = 0, after = 0, inFlight = 0, budget = -1;
  unsigned recomputed = 0;
  double addedTime = 0;
};

/// Chooses, rewrites and reports the recomputed ops of every stage of
/// `step` under the policy of `options`.
class Recomputation {
public:
  Recomputation(ModuleOp module, func::FuncOp func,
                const pp::RecomputePassOptions &options,
                const RecomputeSettings &settings, pipeline::PlanAttr plan,
                StepAnalysis &step)
      : func(func), options(options), settings(settings), step(step),
        numStages(step.numStages), symbols(module), reports(numStages),
        chosen(numStages) {
    placeStages(plan);
    stateFactor = optimizerStateFactor(func);
  }

  /// Chooses the ops of every stage; fails, after a diagnostic for each,
  /// when some stage does not fit even with full recomputation.
  LogicalResult choose();
  /// Clones the chosen ops into the backward (what they need of them).
  void rewrite();
  void writeReport(llvm::raw_ostream &os) const;

private:
  /// Devices: the plan's device of each stage by name, else the cluster's
  /// order.
  void placeStages(pipeline::PlanAttr plan);
  /// Weights, gradients and optimizer state of `stage` (auto's budget).
  int64_t weightBytes(int64_t stage);
  double forwardTime(int64_t stage, Operation *op) {
    return costModel.getForwardTime(op,
                                    settings.cluster->devices[deviceOf[stage]]);
  }
  /// policy=selective: the memory-bound ops that save bytes.
  void chooseSelective(int64_t stage, ArrayRef<Operation *> recomputable);
  /// policy=auto: the cheapest ops that fit the stage's budget.
  LogicalResult chooseAuto(int64_t stage, ArrayRef<Operation *> recomputable);

  func::FuncOp func;
  const pp::RecomputePassOptions &options;
  const RecomputeSettings &settings;
  StepAnalysis &step;
  int64_t numStages;
  SmallVector<int> deviceOf;
  DenseMap<int, int64_t> stagesOnDevice;
  pp::AnalyticCostModel costModel;
  double stateFactor = 0;
  SymbolTable symbols;
  SmallVector<StageReport> reports;
  SmallVector<OpSet> chosen;
};

void Recomputation::placeStages(pipeline::PlanAttr plan) {
  deviceOf.assign(numStages, -1);
  if (!settings.cluster)
    return;
  const pp::cluster::Cluster &cluster = *settings.cluster;
  for (int64_t s = 0; s < numStages; ++s) {
    int index = -1;
    if (plan)
      if (std::optional<StringRef> name = plan.getStageDeviceName(s))
        index = cluster.findDevice(*name);
    if (index < 0)
      index = static_cast<int>(s % cluster.numDevices());
    deviceOf[s] = index;
    ++stagesOnDevice[index];
  }
}

int64_t Recomputation::weightBytes(int64_t stage) {
  llvm::SetVector<StringAttr> globals;
  int64_t bytes = 0;
  for (Operation *op : step.forwardOps[stage])
    for (Value operand : op->getOperands())
      if (auto read = operand.getDefiningOp<onnx::GlobalReadOp>()) {
        auto global =
            symbols.lookup<onnx::GlobalOp>(read.getGlobalAttr().getAttr());
        if (global && global.getKind() == onnx::kTrainable &&
            globals.insert(global.getSymNameAttr()))
          bytes += pp::getTensorBytes(global.getType());
      }
  return static_cast<int64_t>(bytes * (2.0 + stateFactor));
}

void Recomputation::chooseSelective(int64_t stage,
                                    ArrayRef<Operation *> recomputable) {
  SmallVector<Operation *> candidates;
  for (Operation *op : recomputable)
    if (isMemoryBound(op))
      candidates.push_back(op);
  grow(step, stage, candidates, chosen[stage], nullptr,
       [](int64_t) { return false; });
}

LogicalResult Recomputation::chooseAuto(int64_t stage,
                                        ArrayRef<Operation *> recomputable) {
  StageReport &report = reports[stage];
  OpSet &recompute = chosen[stage];
  const auto &device = settings.cluster->devices[deviceOf[stage]];
  // A device's memory (or activation budget) is shared equally by the
  // stages it runs (interleaved chunks).
  int64_t sharing = stagesOnDevice[deviceOf[stage]];
  int64_t budget = settings.budget
                       ? *settings.budget / sharing
                       : device.memoryBytes / sharing - weightBytes(stage);
  report.budget = budget;
  auto fits = [&](int64_t kept) { return kept * report.inFlight <= budget; };
  if (fits(report.before))
    return success();
  OpSet all(recomputable.begin(), recomputable.end());
  int64_t least = step.keptBytes(stage, all);
  if (!fits(least)) {
    func.emitError() << llvm::formatv(
        "pp-recompute: stage {0} on {1} does not fit even with full "
        "recomputation: {2} micro-batches in flight x {3} kept bytes = "
        "{4} bytes for an activation budget of {5} bytes, {6} bytes "
        "short",
        stage, device.name, report.inFlight, least, least * report.inFlight,
        budget, least * report.inFlight - budget);
    return failure();
  }
  grow(
      step, stage, recomputable, recompute,
      [&](Operation *op) { return forwardTime(stage, op); }, fits);
  // The greedy moves can stall where only a larger segment saves
  // bytes; full recomputation is known to fit.
  if (!fits(step.keptBytes(stage, recompute)))
    recompute = std::move(all);
  return success();
}

LogicalResult Recomputation::choose() {
  bool failedStage = false;
  for (int64_t s = 0; s < numStages; ++s) {
    StageReport &report = reports[s];
    SmallVector<Operation *> recomputable;
    for (Operation *op : step.forwardOps[s])
      if (isRecomputable(op))
        recomputable.push_back(op);
    report.before = step.keptBytes(s, {});
    report.inFlight =
        inFlight(settings.kind, s, numStages, settings.microBatches);
    if (options.policy == pp::RecomputePolicy::Full)
      chosen[s].insert(recomputable.begin(), recomputable.end());
    else if (options.policy == pp::RecomputePolicy::Selective)
      chooseSelective(s, recomputable);
    else if (options.policy == pp::RecomputePolicy::Auto &&
             failed(chooseAuto(s, recomputable)))
      failedStage = true;
  }
  return failure(failedStage);
}

void Recomputation::rewrite() {
  for (int64_t s = 0; s < numStages; ++s) {
    StageReport &report = reports[s];
    OpSet needed;
    report.after = step.keptBytes(s, chosen[s], &needed);
    if (settings.cluster)
      for (Operation *op : needed)
        report.addedTime += forwardTime(s, op);
    report.recomputed = step.rewrite(s, needed).size();
  }
}

void Recomputation::writeReport(llvm::raw_ostream &os) const {
  os << llvm::formatv("== recompute: policy {0}, schedule {1}, {2} "
                      "micro-batches, {3} stages ==\n",
                      pp::stringifyEnum(options.policy),
                      pp::schedule::toString(settings.kind),
                      settings.microBatches, numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    const StageReport &report = reports[s];
    os << "stage " << s;
    if (settings.cluster)
      os << " (" << settings.cluster->devices[deviceOf[s]].name << ")";
    os << ": kept per micro-batch " << formatBytes(report.before) << " -> "
       << formatBytes(report.after) << "; " << report.recomputed
       << " ops recomputed; added forward ";
    if (settings.cluster)
      os << llvm::formatv("{0:f3} us", report.addedTime * 1e6);
    else
      os << "time n/a (no cluster)";
    if (options.policy == pp::RecomputePolicy::Auto)
      os << llvm::formatv("; {0} in flight x kept {1} B vs budget {2} B",
                          report.inFlight, report.after, report.budget);
    os << "\n";
  }
}

} // namespace

LogicalResult
pp::pipeline::planRecomputation(ModuleOp module,
                                const pp::RecomputePassOptions &options) {
  auto func =
      pipeline::lookupFunction(module, options.funcName, "to recompute in");
  if (!func)
    return failure();
  pipeline::PlanAttr plan = pipeline::getPlan(module);
  FailureOr<RecomputeSettings> settings =
      resolveSettings(module, plan, options);
  if (failed(settings))
    return failure();
  StepAnalysis step;
  if (failed(step.init(func, plan ? plan.getNumStages() : 0)))
    return failure();
  Recomputation recomputation(module, func, options, *settings, plan, step);
  if (failed(recomputation.choose()))
    return failure();
  // Rewrite, then report.
  recomputation.rewrite();
  if (options.reportFile.empty())
    return success();
  return pp::writeReportFile(
      module, options.reportFile,
      [&](llvm::raw_ostream &os) { recomputation.writeReport(os); });
}
