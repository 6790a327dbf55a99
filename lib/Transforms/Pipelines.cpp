//===- Pipelines.cpp - Named pass pipelines of pipeline-opt -----*- C++ -*-===//

#include "pp/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

/// Options of --pp-training-step: the loss and optimizer settings in one
/// place.
struct TrainingStepOptions : public PassPipelineOptions<TrainingStepOptions> {
  Option<std::string> funcName{*this, "func",
                               llvm::cl::desc("Function to train"),
                               llvm::cl::init("main")};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("Loss: softmax-cross-entropy or mse"),
                           llvm::cl::init("softmax-cross-entropy")};
  Option<int64_t> classAxis{*this, "class-axis",
                            llvm::cl::desc("Class dim of the logits"),
                            llvm::cl::init(-1)};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam or adamw"),
                                llvm::cl::init("sgd")};
  Option<float> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                   llvm::cl::init(0.01f)};
  Option<float> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                         llvm::cl::init(0.0f)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<float> weightDecay{*this, "weight-decay",
                            llvm::cl::desc("Weight decay"),
                            llvm::cl::init(0.0f)};
};

/// Options of --pp-compile: ONNX model to scheduled pipeline in one go.
struct CompileOptions : public PassPipelineOptions<CompileOptions> {
  Option<std::string> cluster{
      *this, "cluster",
      llvm::cl::desc("Cluster: a spec like 4xH100 or a .json file")};
  Option<std::string> schedule{
      *this, "schedule", llvm::cl::desc("gpipe, 1f1b, interleaved or zb-h1"),
      llvm::cl::init("1f1b")};
  Option<unsigned> microBatches{*this, "microbatches",
                                llvm::cl::desc("Micro-batches per step"),
                                llvm::cl::init(8)};
  Option<unsigned> chunks{
      *this, "chunks",
      llvm::cl::desc("Model chunks per device (interleaved; default 2)"),
      llvm::cl::init(0)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Activation recomputation: none, full, selective, auto"),
      llvm::cl::init("none")};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("Loss to add (see --pp-add-loss)"),
                           llvm::cl::init("softmax-cross-entropy")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam or adamw"),
                                llvm::cl::init("sgd")};
  Option<float> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                   llvm::cl::init(0.01f)};
  Option<float> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                         llvm::cl::init(0.0f)};
  Option<float> weightDecay{*this, "weight-decay",
                            llvm::cl::desc("Weight decay"),
                            llvm::cl::init(0.0f)};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Measured per-op times (JSON) for the cost model")};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("Text summaries of the partition, recomputation and "
                     "predicted step ('-' for stdout, '' for none)"),
      llvm::cl::init("-")};
  Option<std::string> planDir{
      *this, "plan-dir",
      llvm::cl::desc("Write plan.json, timeline.json (Chrome trace) and "
                     "timeline.svg here")};
  Option<int64_t> activationBudget{
      *this, "activation-budget",
      llvm::cl::desc("recompute=auto: activation bytes per device (default: "
                     "what the device's memory leaves)"),
      llvm::cl::init(-1)};
  Option<std::string> emitDir{
      *this, "emit-dir",
      llvm::cl::desc("Write the training program (program.cpp, data, "
                     "CMakeLists.txt) here (--pp-emit-program)")};
};

} // namespace

void pp::registerPipelines() {
  PassPipelineRegistration<CompileOptions>(
      "pp-compile",
      "ONNX model to a scheduled pipeline and its predicted plan: "
      "--pp-add-loss, --pp-partition, --pp-autodiff, --pp-optimizer, "
      "--pp-recompute, --pp-split-stages, --pp-schedule, --pp-memory-plan, "
      "--pp-plan-report, then --pp-emit-program with emit-dir",
      [](OpPassManager &pm, const CompileOptions &options) {
        AddLossPassOptions loss;
        loss.kind = options.loss;
        pm.addPass(createAddLossPass(loss));
        unsigned chunks = options.chunks;
        if (chunks == 0)
          chunks = options.schedule == "interleaved" ? 2 : 1;
        PartitionPassOptions partition;
        partition.clusterSpec = options.cluster;
        partition.schedule = options.schedule;
        partition.microBatches = options.microBatches;
        partition.chunks = chunks;
        partition.optimizer = options.optimizer == "sgd"
                                  ? (options.momentum > 0 ? "momentum" : "sgd")
                                  : "adam";
        partition.profileFile = options.profile;
        partition.reportFile = options.report;
        partition.recompute = options.recompute;
        pm.addPass(createPartitionPass(partition));
        pm.addPass(createAutodiffPass());
        OptimizerPassOptions optimizer;
        optimizer.kind = options.optimizer;
        optimizer.lr = options.lr;
        optimizer.momentum = options.momentum;
        optimizer.weightDecay = options.weightDecay;
        pm.addPass(createOptimizerPass(optimizer));
        RecomputePassOptions recompute;
        recompute.policy = options.recompute;
        recompute.clusterSpec = options.cluster;
        recompute.activationBudget = options.activationBudget;
        if (options.recompute != "none")
          recompute.reportFile = options.report;
        pm.addPass(createRecomputePass(recompute));
        SplitStagesPassOptions split;
        split.microBatches = options.microBatches;
        split.splitBackward = options.schedule == "zb-h1";
        pm.addPass(createSplitStagesPass(split));
        MaterializeSchedulePassOptions schedule;
        schedule.kind = options.schedule;
        schedule.chunks = chunks;
        pm.addPass(createMaterializeSchedulePass(schedule));
        pm.addPass(createMemoryPlanPass());
        PlanReportPassOptions plan;
        plan.clusterSpec = options.cluster;
        plan.profileFile = options.profile;
        plan.summaryFile = options.report;
        plan.outputDir = options.planDir;
        pm.addPass(createPlanReportPass(plan));
        if (!options.emitDir.empty()) {
          EmitProgramPassOptions emit;
          emit.outputDir = options.emitDir;
          pm.addPass(createEmitProgramPass(emit));
        }
      });
  PassPipelineRegistration<TrainingStepOptions>(
      "pp-training-step",
      "Forward function to training step: --pp-add-loss, --pp-autodiff, "
      "--pp-optimizer",
      [](OpPassManager &pm, const TrainingStepOptions &options) {
        AddLossPassOptions loss;
        loss.funcName = options.funcName;
        loss.kind = options.loss;
        loss.classAxis = options.classAxis;
        pm.addPass(createAddLossPass(loss));
        AutodiffPassOptions autodiff;
        autodiff.funcName = options.funcName;
        pm.addPass(createAutodiffPass(autodiff));
        OptimizerPassOptions optimizer;
        optimizer.funcName = options.funcName;
        optimizer.kind = options.optimizer;
        optimizer.lr = options.lr;
        optimizer.momentum = options.momentum;
        optimizer.nesterov = options.nesterov;
        optimizer.weightDecay = options.weightDecay;
        pm.addPass(createOptimizerPass(optimizer));
      });
}
