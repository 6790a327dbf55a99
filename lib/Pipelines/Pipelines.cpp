//===- Pipelines.cpp - Named pass pipelines of pipeline-opt -----*- C++ -*-===//

#include "pp/Pipelines/Pipelines.h"

#include "pp/Dialect/ONNX/Transforms/Passes.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Passes.h"
#include "pp/Target/Program/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

void pp::buildTrainingStepPipeline(OpPassManager &pm,
                                   const TrainingStepOptions &options) {
  pm.addPass(createAddLossPass(options.addLossOptions(options.funcName)));
  pm.addPass(createMixedPrecisionPass(
      options.mixedPrecisionOptions(options.funcName)));
  if (options.tensorParallel != 1) {
    TensorParallelPassOptions tensorParallel;
    tensorParallel.tp = options.tensorParallel;
    pm.addPass(createTensorParallelPass(tensorParallel));
  }
  AutodiffPassOptions autodiff;
  autodiff.funcName = options.funcName;
  pm.addPass(createAutodiffPass(autodiff));
  pm.addPass(createOptimizerPass(options.optimizerOptions(options.funcName)));
  if (options.foldTransposes)
    pm.addNestedPass<func::FuncOp>(createFoldTransposesPass());
}

/// The options of `options` as --pp-compile text, without `dropped` and
/// without the options whose default depends on the schedule (or the
/// virtual workers) when unset.
static std::string compileOptionsText(const pp::CompileOptions &options,
                                      llvm::ArrayRef<llvm::StringRef> dropped) {
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  llvm::StringRef rest = llvm::StringRef(text).trim();
  rest.consume_front("{");
  rest.consume_back("}");
  std::string kept;
  // key=value tokens; a value may be quoted or braced (with spaces).
  while (!(rest = rest.ltrim()).empty()) {
    size_t end = 0;
    char close = 0;
    for (; end < rest.size(); ++end) {
      char c = rest[end];
      if (close) {
        if (c == close)
          close = 0;
      } else if (c == '"' || c == '\'') {
        close = c;
      } else if (c == '{') {
        close = '}';
      } else if (c == ' ') {
        break;
      }
    }
    llvm::StringRef token = rest.take_front(end);
    rest = rest.drop_front(end);
    llvm::StringRef key = token.split('=').first;
    if (llvm::is_contained(dropped, key) ||
        (key == "chunks" && !options.chunks.hasValue()) ||
        (key == "dp" && !options.dataParallel.hasValue()) ||
        (key == "activation-budget" && !options.activationBudget.hasValue()))
      continue;
    kept += (kept.empty() ? "" : " ") + token.str();
  }
  return kept;
}

/// The degree --pp-tensor-parallel splits over for a `tp=` that runs: N,
/// or a list of Ns and 1s (a stage-wise mix, the 1s left whole); 1 for
/// tp=1 or a list of 1s; std::nullopt for auto or a list of different
/// degrees above 1, which are planned only.
static std::optional<int64_t> runnableTensorParallel(llvm::StringRef text) {
  int64_t degree = 1;
  for (llvm::StringRef item : llvm::split(text, ',')) {
    int64_t value;
    if (item.trim().getAsInteger(10, value) ||
        (value != 1 && degree != 1 && degree != value))
      return std::nullopt;
    degree = std::max(degree, value);
  }
  return degree;
}

namespace {
/// Drops the module's pp.cluster after the last pass that reads it: the
/// compiled module is the one of before, which a later --pp-plan-report
/// may report for another cluster= (measured links).
struct DropClusterPass : PassWrapper<DropClusterPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropClusterPass)
  StringRef getArgument() const override { return "pp-drop-cluster"; }
  void runOnOperation() override {
    getOperation()->removeAttr(
        pp::pipeline::PPDialect::ClusterAttrHelper::getNameStr());
  }
};
} // namespace

void pp::buildTrainingPipeline(OpPassManager &pm,
                               const CompileOptions &options) {
  if (!options.schedule.getValue()) {
    ChooseSchedulePassOptions choose;
    choose.compileOptions = compileOptionsText(
        options, {"schedule", "report", "emit-dir", "plan-dir",
                  "auto-schedules", "measured-log"});
    choose.candidates = llvm::to_vector(options.autoSchedules);
    choose.reportFile = options.report;
    choose.emitDir = options.emitDir;
    choose.planDir = options.planDir;
    pm.addPass(createChooseSchedulePass(choose));
    return;
  }
  // The importer names the model's function "main".
  constexpr llvm::StringLiteral func = "main";
  pm.addPass(createAddLossPass(options.addLossOptions(func)));
  pm.addPass(createMixedPrecisionPass(options.mixedPrecisionOptions(func)));
  schedule::ScheduleKind kind = *options.schedule.getValue();
  // An explicit chunks=0 goes on to --pp-partition, which rejects it.
  bool twoChunks = kind == schedule::ScheduleKind::Interleaved1F1B ||
                   pp::kinds::isVShaped(kind);
  unsigned chunks = options.chunks.hasValue() ? options.chunks
                    : twoChunks               ? 2
                                              : 1;
  // Parsed once, by --pp-partition: the passes after it read the module's
  // pp.cluster (dropped after the last of them).
  PartitionPassOptions partition;
  partition.clusterSpec = options.cluster;
  partition.schedule = kind;
  partition.microBatches = options.microBatches;
  partition.inflight = options.inflight;
  // Unset, a virtual-workers policy's worker count stands in for it.
  partition.dataParallel = options.dataParallel.hasValue()
                               ? static_cast<int>(options.dataParallel)
                               : -1;
  partition.virtualWorkers = options.virtualWorkers;
  partition.staleness = options.staleness;
  partition.wave = options.wave;
  partition.updateEvery = options.updateEvery;
  partition.verticalSync = options.verticalSync;
  partition.chunks = chunks;
  // What the partitioner needs of the optimizer: its state per weight.
  partition.optimizer = options.optimizer == OptimizerKind::SGD
                            ? (options.momentum > 0 ? OptimizerState::Momentum
                                                    : OptimizerState::SGD)
                            : OptimizerState::Adam;
  partition.profileFile = options.profile;
  partition.reportFile = options.report;
  partition.recompute = options.recompute;
  partition.tensorParallel = options.tensorParallel;
  std::optional<int64_t> degree =
      runnableTensorParallel(options.tensorParallel);
  bool tensorParallel = llvm::StringRef(options.tensorParallel).trim() != "1";
  partition.regroupWorkers = options.regroupWorkers;
  if (tensorParallel && !options.planDir.empty()) {
    partition.planJson = options.planDir + "/plan-3d.json";
    partition.timeline = options.planDir + "/timeline-3d.json";
  }
  pm.addPass(createPartitionPass(partition));
  // One degree for every stage runs, and so does a mix of it and 1: the
  // stages split over one group each, or stay whole on one device.
  // Different degrees above 1 (or what tp=auto picks) are planned only:
  // the pipeline ends with --pp-partition's plan.
  if (tensorParallel && !degree) {
    pm.addPass(std::make_unique<DropClusterPass>());
    return;
  }
  if (degree && *degree > 1) {
    TensorParallelPassOptions split;
    split.tp = *degree;
    pm.addPass(createTensorParallelPass(split));
  }
  pm.addPass(createAutodiffPass());
  pm.addPass(createOptimizerPass(options.optimizerOptions(func)));
  if (options.foldTransposes)
    pm.addNestedPass<func::FuncOp>(createFoldTransposesPass());
  RecomputePassOptions recompute;
  recompute.policy = options.recompute;
  if (options.activationBudget.hasValue())
    recompute.activationBudget = {options.activationBudget};
  if (options.recompute != RecomputePolicy::None)
    recompute.reportFile = options.report;
  pm.addPass(createRecomputePass(recompute));
  SplitStagesPassOptions split;
  // inflight= sets the micro-batches in the plan.
  if (options.inflight.empty())
    split.microBatches = {static_cast<int64_t>(options.microBatches)};
  split.splitBackward = schedule::usesSplitBackward(kind);
  pm.addPass(createSplitStagesPass(split));
  MaterializeSchedulePassOptions materialize;
  materialize.kind = kind;
  materialize.chunks = {static_cast<int64_t>(chunks)};
  materialize.blendLambda = options.blendLambda;
  pm.addPass(createMaterializeSchedulePass(materialize));
  // Fused kernels first: the memory plan is the one code generation uses.
  if (options.fuseElementwise) {
    FuseElementwisePassOptions fuse;
    fuse.activations = options.fuseActivations;
    pm.addNestedPass<func::FuncOp>(createFuseElementwisePass(fuse));
  }
  pm.addPass(createMemoryPlanPass());
  PlanReportPassOptions plan;
  plan.profileFile = options.profile;
  plan.summaryFile = options.report;
  plan.outputDir = options.planDir;
  plan.measuredLog = options.measuredLog;
  pm.addPass(createPlanReportPass(plan));
  pm.addPass(std::make_unique<DropClusterPass>());
  if (!options.emitDir.empty()) {
    EmitProgramPassOptions emit;
    emit.outputDir = options.emitDir;
    emit.maxFunctionOps = options.emitFunctionOps;
    emit.maxTuBytes = options.emitTuBytes;
    emit.summaryFile = options.report;
    pm.addPass(createEmitProgramPass(emit));
  }
}

/// Options that no pass of the pipeline could reject in time.
static LogicalResult
validateOptions(const pp::TrainingStepOptions &,
                function_ref<LogicalResult(const Twine &)>) {
  return success();
}
static LogicalResult
validateOptions(const pp::CompileOptions &options,
                function_ref<LogicalResult(const Twine &)> errorHandler) {
  if (!runnableTensorParallel(options.tensorParallel) &&
      !options.emitDir.empty())
    return errorHandler(
        "pp-compile: tp=" + options.tensorParallel +
        " with emit-dir: different degrees above 1 per stage (a list, or "
        "tp=auto) are planned only; running them is not built (give tp=N, "
        "or a list of N and 1)");
  if (llvm::StringRef(options.tensorParallel).trim() != "1" &&
      !options.schedule.getValue())
    return errorHandler("pp-compile: tp=" + options.tensorParallel +
                        " with schedule=auto is not built (schedule=auto "
                        "compares compiled programs): name a schedule");
  return success();
}

/// Registers a named pipeline of module passes. As PassPipelineRegistration,
/// but nested under anything other than builtin.module (`func.func(...)`),
/// where OpPassManager::addPass would abort on the first module pass, it
/// fails with an error naming the pipeline and where it was nested.
template <typename Options>
static void
registerModulePipeline(llvm::StringLiteral arg, llvm::StringRef description,
                       void (*builder)(OpPassManager &, const Options &)) {
  registerPassPipeline(
      arg, description,
      [arg, builder](OpPassManager &pm, StringRef text,
                     function_ref<LogicalResult(const Twine &)> errorHandler)
          -> LogicalResult {
        std::optional<StringRef> anchor = pm.getOpName();
        if (anchor && *anchor != ModuleOp::getOperationName())
          return errorHandler(Twine("pipeline '") + arg +
                              "' runs on builtin.module, not nested under '" +
                              *anchor + "'");
        Options options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (failed(validateOptions(options, errorHandler)))
          return failure();
        builder(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optionsHandler) {
        optionsHandler(Options());
      });
}

void pp::registerPipelines() {
  registerModulePipeline<CompileOptions>(
      "pp-compile",
      "ONNX model to a scheduled pipeline and its predicted plan: "
      "--pp-add-loss, --pp-partition, --pp-autodiff, --pp-optimizer, "
      "--pp-recompute, --pp-split-stages, --pp-schedule, "
      "--pp-fuse-elementwise, --pp-memory-plan, "
      "--pp-plan-report, then --pp-emit-program with emit-dir",
      buildTrainingPipeline);
  registerModulePipeline<TrainingStepOptions>(
      "pp-training-step",
      "Forward function to training step: --pp-add-loss, --pp-autodiff, "
      "--pp-optimizer",
      buildTrainingStepPipeline);
}
