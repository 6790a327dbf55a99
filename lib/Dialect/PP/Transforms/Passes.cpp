//===- Passes.cpp - Planning passes over Transforms.h -----------*- C++ -*-===//
//
// Each pass hands its options to the function of Transforms.h that does
// the work.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Support/PassAdapter.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

namespace pp {
#define GEN_PASS_DEF_PARTITIONPASS
#define GEN_PASS_DEF_RECOMPUTEPASS
#define GEN_PASS_DEF_SPLITSTAGESPASS
#define GEN_PASS_DEF_MATERIALIZESCHEDULEPASS
#define GEN_PASS_DEF_VERIFYSCHEDULEPASS
#define GEN_PASS_DEF_CHOOSESCHEDULEPASS
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#define GEN_PASS_DEF_MEMORYPLANPASS
#define GEN_PASS_DEF_PLANREPORTPASS
#include "pp/Dialect/PP/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;
using pp::PassAdapter;
namespace pipeline = pp::pipeline;

namespace {

struct PartitionPass : PassAdapter<PartitionPass, pp::impl::PartitionPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::partitionStages(module,
                                     {.funcName = funcName,
                                      .clusterSpec = clusterSpec,
                                      .schedule = schedule,
                                      .updateEvery = updateEvery,
                                      .verticalSync = verticalSync,
                                      .chunks = chunks,
                                      .microBatches = microBatches,
                                      .inflight = inflight,
                                      .optimizer = optimizer,
                                      .profileFile = profileFile,
                                      .recompute = recompute,
                                      .pins = pins,
                                      .splitAfter = splitAfter,
                                      .tryDeviceOrders = tryDeviceOrders,
                                      .dataParallel = dataParallel,
                                      .virtualWorkers = virtualWorkers,
                                      .staleness = staleness,
                                      .wave = wave,
                                      .reportFile = reportFile,
                                      .tensorParallel = tensorParallel,
                                      .planJson = planJson,
                                      .timeline = timeline,
                                      .regroupWorkers = regroupWorkers});
  }
};

struct RecomputePass : PassAdapter<RecomputePass, pp::impl::RecomputePassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::planRecomputation(
        module, {.funcName = funcName,
                 .policy = policy,
                 .clusterSpec = clusterSpec,
                 .schedule = schedule,
                 .microBatches = llvm::to_vector(microBatches),
                 .activationBudget = llvm::to_vector(activationBudget),
                 .reportFile = reportFile});
  }
};

struct SplitStagesPass
    : PassAdapter<SplitStagesPass, pp::impl::SplitStagesPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::splitStages(module,
                                 {.funcName = funcName,
                                  .microBatches = llvm::to_vector(microBatches),
                                  .splitBackward = splitBackward});
  }
};

struct MaterializeSchedulePass
    : PassAdapter<MaterializeSchedulePass,
                  pp::impl::MaterializeSchedulePassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::materializeSchedule(module,
                                         {.kind = kind,
                                          .chunks = llvm::to_vector(chunks),
                                          .blendLambda = blendLambda});
  }
};

struct ChooseSchedulePass
    : PassAdapter<ChooseSchedulePass, pp::impl::ChooseSchedulePassBase> {
  using PassAdapter::PassAdapter;
  pp::ChooseSchedulePassOptions options() const {
    return {.compileOptions = compileOptions,
            .candidates = llvm::to_vector(candidates),
            .reportFile = reportFile,
            .emitDir = emitDir,
            .planDir = planDir};
  }
  // The nested pipelines' dialects must be loaded before they run.
  void getDependentDialects(DialectRegistry &registry) const override {
    PassAdapter::getDependentDialects(registry);
    OpPassManager pm(ModuleOp::getOperationName());
    if (succeeded(pipeline::buildCandidatePipeline(
            options(),
            candidates.empty() ? pp::kinds::ScheduleKind::OneFOneB
                               : candidates[0],
            /*final=*/true, pm, llvm::nulls())))
      pm.getDependentDialects(registry);
  }
  LogicalResult run(ModuleOp module) {
    return pipeline::chooseSchedule(
        module, options(),
        [this](OpPassManager &pm, ModuleOp op) { return runPipeline(pm, op); });
  }
};

struct VerifySchedulePass
    : PassAdapter<VerifySchedulePass, pp::impl::VerifySchedulePassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::verifyScheduleMessageOrder(module);
  }
};

struct FuseElementwisePass
    : PassAdapter<FuseElementwisePass, pp::impl::FuseElementwisePassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(func::FuncOp func) {
    pipeline::fuseElementwise(func, activations);
    return success();
  }
};

struct FoldTransposesPass
    : PassAdapter<FoldTransposesPass, pp::impl::FoldTransposesPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(func::FuncOp func) {
    pipeline::foldTransposes(func);
    return success();
  }
};

struct MemoryPlanPass
    : PassAdapter<MemoryPlanPass, pp::impl::MemoryPlanPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::planStageMemory(module, {.reportFile = reportFile});
  }
};

struct PlanReportPass
    : PassAdapter<PlanReportPass, pp::impl::PlanReportPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return pipeline::writePlanReport(module, {.clusterSpec = clusterSpec,
                                              .profileFile = profileFile,
                                              .summaryFile = summaryFile,
                                              .outputDir = outputDir,
                                              .measuredLog = measuredLog});
  }
};

} // namespace
