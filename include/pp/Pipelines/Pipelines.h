//===- Pipelines.h - Named pass pipelines of pipeline-opt -------*- C++ -*-===//
//
// The pipelines behind --pp-training-step and --pp-compile, built by one
// function each so that tools and tests compose the same passes with the
// same options (upstream's SparseTensorPipelines pattern).
//
//===----------------------------------------------------------------------===//
#ifndef PP_PIPELINES_PIPELINES_H
#define PP_PIPELINES_PIPELINES_H

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace pp {

/// Loss and optimizer options shared by every pipeline that builds a
/// training step: each option of --pp-add-loss and --pp-optimizer, under the
/// same name and default.
template <typename Derived>
struct TrainingOptionsBase : public mlir::PassPipelineOptions<Derived> {
  template <typename T> using Option = mlir::detail::PassOptions::Option<T>;
  template <typename T>
  using ListOption = mlir::detail::PassOptions::ListOption<T>;

  Option<LossKind> loss{*this, "loss",
                        llvm::cl::desc("Loss: softmax-cross-entropy or mse"),
                        llvm::cl::init(LossKind::SoftmaxCrossEntropy)};
  Option<int64_t> classAxis{
      *this, "class-axis",
      llvm::cl::desc("Class dim of the logits (negative: from the end); 0: "
                     "dim 1 of logits of rank >= 4, else the last"),
      llvm::cl::init(0)};
  Option<int64_t> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("Label softmax-cross-entropy skips (no loss, no "
                     "gradient, not in the accuracy); PyTorch's default"),
      llvm::cl::init(-100)};
  ListOption<double> classWeights{
      *this, "class-weights",
      llvm::cl::desc("Per-class weights of softmax-cross-entropy (PyTorch's "
                     "weight=), one per class")};
  Option<double> labelSmoothing{
      *this, "label-smoothing",
      llvm::cl::desc("Label smoothing eps in [0, 1] of softmax-cross-entropy "
                     "(PyTorch's label_smoothing)"),
      llvm::cl::init(0.0)};
  Option<OptimizerKind> optimizer{*this, "optimizer",
                                  llvm::cl::desc("sgd, adam or adamw"),
                                  llvm::cl::init(OptimizerKind::SGD)};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<double> dampening{*this, "dampening", llvm::cl::desc("SGD dampening"),
                           llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(0.0)};
  Option<int64_t> weightDecayMinRank{
      *this, "weight-decay-min-rank",
      llvm::cl::desc("Decay only weights of at least this rank (2: not "
                     "biases and normalisation scales)"),
      llvm::cl::init(0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam beta2"),
                       llvm::cl::init(0.999)};
  Option<double> epsilon{*this, "epsilon", llvm::cl::desc("Adam epsilon"),
                         llvm::cl::init(1e-8)};
  Option<bool> foldTransposes{
      *this, "fold-transposes",
      llvm::cl::desc("Fold 2-D transposes into the GEMMs that read or write "
                     "them (--pp-fold-transposes, after --pp-optimizer)"),
      llvm::cl::init(true)};
  /// std::nullopt: auto.
  Option<std::optional<LossScale>> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("Loss scaling: none, static, dynamic, or auto "
                     "(dynamic for fp16, else none)"),
      UnsetName{"auto"}};
  Option<double> lossScaleValue{
      *this, "loss-scale-value",
      llvm::cl::desc("The static scale, or the dynamic scale's initial value"),
      llvm::cl::init(65536.0)};
  Option<int64_t> lossScaleInterval{
      *this, "loss-scale-interval",
      llvm::cl::desc("Dynamic scaling: steps without overflow before the "
                     "scale doubles"),
      llvm::cl::init(2000)};
  Option<LRSchedule> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("The learning-rate schedule the generated program runs "
                     "unless train's command line gives one: constant, "
                     "step, multistep, exponential, cosine, linear or poly "
                     "(--pp-optimizer's)"),
      llvm::cl::init(LRSchedule::Constant)};
  Option<int64_t> warmupSteps{
      *this, "warmup-steps",
      llvm::cl::desc("lr-schedule: linear warm-up steps"), llvm::cl::init(0)};
  Option<double> minLr{
      *this, "min-lr",
      llvm::cl::desc("lr-schedule cosine, linear or poly: the final rate"),
      llvm::cl::init(0.0)};
  Option<int64_t> stepSize{
      *this, "step-size",
      llvm::cl::desc("lr-schedule step: steps between decays"),
      llvm::cl::init(0)};
  ListOption<int64_t> milestones{
      *this, "milestones",
      llvm::cl::desc("lr-schedule multistep: the steps after the warm-up "
                     "at which the rate is multiplied by gamma")};
  Option<double> gamma{
      *this, "gamma",
      llvm::cl::desc("lr-schedule step, multistep or exponential: decay "
                     "factor"),
      llvm::cl::init(0.1)};
  Option<double> power{
      *this, "power",
      llvm::cl::desc("lr-schedule poly: the exponent of the decay"),
      llvm::cl::init(1.0)};
  Option<int64_t> decaySteps{
      *this, "decay-steps",
      llvm::cl::desc("lr-schedule cosine, linear or poly: the step the "
                     "decay ends at (0: the run's last)"),
      llvm::cl::init(0)};
  Option<Precision> precision{
      *this, "precision",
      llvm::cl::desc("Compute precision: fp32, or bf16 / fp16 activations "
                     "over fp32 master weights (--pp-mixed-precision)"),
      llvm::cl::init(Precision::FP32)};

  /// The options of --pp-add-loss for `funcName`.
  AddLossPassOptions addLossOptions(llvm::StringRef funcName) const {
    AddLossPassOptions options;
    options.funcName = funcName.str();
    options.kind = loss;
    options.classAxis = classAxis;
    options.ignoreIndex = ignoreIndex;
    options.labelSmoothing = labelSmoothing;
    options.classWeights.assign(classWeights.begin(), classWeights.end());
    return options;
  }
  /// The options of --pp-mixed-precision for `funcName`.
  MixedPrecisionPassOptions
  mixedPrecisionOptions(llvm::StringRef funcName) const {
    MixedPrecisionPassOptions options;
    options.funcName = funcName.str();
    options.precision = precision;
    return options;
  }
  /// The options of --pp-optimizer for `funcName`.
  OptimizerPassOptions optimizerOptions(llvm::StringRef funcName) const {
    OptimizerPassOptions options;
    options.funcName = funcName.str();
    options.kind = optimizer;
    options.lr = lr;
    options.momentum = momentum;
    options.dampening = dampening;
    options.nesterov = nesterov;
    options.weightDecay = weightDecay;
    options.weightDecayMinRank = weightDecayMinRank;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.epsilon = epsilon;
    options.lossScale = lossScale.getValue().value_or(
        precision == Precision::FP16 ? LossScale::Dynamic : LossScale::None);
    options.lossScaleValue = lossScaleValue;
    options.lossScaleInterval = lossScaleInterval;
    options.lrSchedule = lrSchedule;
    options.warmupSteps = warmupSteps;
    options.minLr = minLr;
    options.stepSize = stepSize;
    options.milestones.assign(milestones.begin(), milestones.end());
    options.gamma = gamma;
    options.power = power;
    options.decaySteps = decaySteps;
    return options;
  }
};

/// Options of --pp-training-step.
struct TrainingStepOptions : public TrainingOptionsBase<TrainingStepOptions> {
  Option<std::string> funcName{*this, "func",
                               llvm::cl::desc("Function to train"),
                               llvm::cl::init("main")};
  Option<int64_t> tensorParallel{
      *this, "tp",
      llvm::cl::desc("Devices of the tensor-parallel group: "
                     "--pp-tensor-parallel splits the step after the loss "
                     "and mixed precision, before autodiff (1: none)"),
      llvm::cl::init(1)};
};

/// Options of --pp-compile: ONNX model to scheduled pipeline in one go.
struct CompileOptions : public TrainingOptionsBase<CompileOptions> {
  Option<std::string> cluster{
      *this, "cluster",
      llvm::cl::desc("Cluster: a spec like 4xH100 or a .json file")};
  /// std::nullopt: auto (--pp-choose-schedule).
  Option<std::optional<kinds::ScheduleKind>> schedule{
      *this, "schedule",
      llvm::cl::desc("gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or "
                     "dualpipev; weight-versioned: "
                     "pipedream, pipedream-2bw, nf1b, v-timeprest, "
                     "i-timeprest, hetpipe (HetPipe's virtual workers: "
                     "microbatches = Nm in flight, a step = a wave)"),
      UnsetName{"auto"}, llvm::cl::init(kinds::ScheduleKind::OneFOneB)};
  Option<unsigned> updateEvery{
      *this, "update-every",
      llvm::cl::desc("Weight-versioned schedules: micro-batches per update "
                     "(0: the schedule's default, see --pp-partition)"),
      llvm::cl::init(0)};
  Option<bool> verticalSync{
      *this, "vertical-sync",
      llvm::cl::desc("pipedream: every stage's forward of a mini-batch "
                     "reads the version stage 0's read"),
      llvm::cl::init(false)};
  Option<double> blendLambda{
      *this, "lambda",
      llvm::cl::desc("i-timeprest: the blend W_l + exp(-lambda d) (W_s - "
                     "W_l) of a backward d updates stale"),
      llvm::cl::init(1.0)};
  Option<unsigned> microBatches{*this, "microbatches",
                                llvm::cl::desc("Micro-batches per step"),
                                llvm::cl::init(pipeline::kDefaultMicroBatches)};
  Option<std::string> inflight{
      *this, "inflight",
      llvm::cl::desc("schedule=hetpipe: Nm, the mini-batches in flight per "
                     "virtual worker: N or auto, the largest that fits "
                     "(--pp-partition's inflight; replaces microbatches)")};
  Option<unsigned> dataParallel{
      *this, "dp",
      llvm::cl::desc("Replicas of the pipeline in synchronous data parallel "
                     "(--pp-partition's data-parallel); unset, the "
                     "number of workers virtual-workers= forms, else 1"),
      llvm::cl::init(1)};
  Option<std::string> tensorParallel{
      *this, "tp",
      llvm::cl::desc("Tensor-parallel degree per stage: N, a per-stage list "
                     "(4,2,2) or auto (--pp-partition's tp). N, or a list of "
                     "N and 1 (a stage-wise mix), compiles and runs; "
                     "different degrees above 1 and auto stop after the "
                     "plan"),
      llvm::cl::init("1")};
  Option<bool> regroupWorkers{
      *this, "regroup-workers",
      llvm::cl::desc("With tp=auto: also plan fewer, larger virtual workers "
                     "(--pp-partition's regroup-workers)"),
      llvm::cl::init(false)};
  Option<std::string> virtualWorkers{
      *this, "virtual-workers",
      llvm::cl::desc("Virtual workers by HetPipe's policies: np, ed, hd or "
                     "auto (--pp-partition's virtual-workers)")};
  Option<std::string> staleness{
      *this, "staleness",
      llvm::cl::desc("Wave Synchronous Parallel across the replicas: the "
                     "most waves one may run ahead of the slowest, or auto; "
                     "-1 (default): synchronous (--pp-partition's "
                     "staleness)"),
      llvm::cl::init("-1")};
  Option<std::string> wave{
      *this, "wave",
      llvm::cl::desc("With staleness: steps per wave, or auto "
                     "(--pp-partition's wave)"),
      llvm::cl::init("1")};
  /// Unset: 2 for interleaved, zb-v and dualpipev, else 1.
  Option<unsigned> chunks{
      *this, "chunks",
      llvm::cl::desc("Model chunks per device (default: 2 for interleaved, "
                     "zb-v and dualpipev, else 1)")};
  Option<RecomputePolicy> recompute{
      *this, "recompute",
      llvm::cl::desc("Activation recomputation: none, full, selective, auto"),
      llvm::cl::init(RecomputePolicy::None)};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Measured per-op times (JSON) for the cost model "
                     "(pp-interpret --write-profile)")};
  Option<std::string> measuredLog{
      *this, "measured-log",
      llvm::cl::desc("The --log of a run of this program: the report sets "
                     "measured step and busy times against the prediction "
                     "(--pp-plan-report's measured-log)")};
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
                     "what the device's memory leaves)")};
  Option<std::string> emitDir{
      *this, "emit-dir",
      llvm::cl::desc("Write the training program (program.cpp, data, "
                     "CMakeLists.txt) here (--pp-emit-program)")};
  Option<int64_t> emitFunctionOps{
      *this, "emit-function-ops",
      llvm::cl::desc("emit-dir: ops of a generated function before it is "
                     "cut into parts (--pp-emit-program max-function-ops)"),
      llvm::cl::init(400)};
  Option<int64_t> emitTuBytes{
      *this, "emit-tu-bytes",
      llvm::cl::desc("emit-dir: bytes of C++ per translation unit "
                     "(--pp-emit-program max-tu-bytes)"),
      llvm::cl::init(65536)};
  ListOption<kinds::ScheduleKind> autoSchedules{
      *this, "auto-schedules",
      llvm::cl::desc("schedule=auto: the schedules to try, comma-separated "
                     "(the weight-versioned ones only when listed)"),
      llvm::cl::list_init<kinds::ScheduleKind>(
          {kinds::ScheduleKind::OneFOneB, kinds::ScheduleKind::GPipe,
           kinds::ScheduleKind::ZBH1, kinds::ScheduleKind::Interleaved1F1B,
           kinds::ScheduleKind::ZBH2, kinds::ScheduleKind::ZBV,
           kinds::ScheduleKind::DualPipeV})};
  Option<bool> fuseElementwise{
      *this, "fuse-elementwise",
      llvm::cl::desc("Fuse trees of elementwise ops into pp.fused kernels "
                     "(--pp-fuse-elementwise, before the memory plan)"),
      llvm::cl::init(true)};
  Option<bool> fuseActivations{
      *this, "fuse-activations",
      llvm::cl::desc("With fuse-elementwise: fuse Relus into the Conv / "
                     "BatchNormalization / Gemm they follow "
                     "(--pp-fuse-elementwise activations)"),
      llvm::cl::init(true)};
};

/// --pp-add-loss, --pp-autodiff, --pp-optimizer, --pp-fold-transposes (with
/// fold-transposes).
void buildTrainingStepPipeline(mlir::OpPassManager &pm,
                               const TrainingStepOptions &options);

/// --pp-add-loss, --pp-partition, --pp-autodiff, --pp-optimizer,
/// --pp-fold-transposes (with fold-transposes), --pp-recompute,
/// --pp-split-stages, --pp-schedule, --pp-fuse-elementwise
/// (with fuse-elementwise), --pp-memory-plan, --pp-plan-report, and
/// --pp-emit-program when emit-dir is set. With schedule=auto, one
/// --pp-choose-schedule that runs this pipeline for each of auto-schedules.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const CompileOptions &options);

/// Registers --pp-training-step and --pp-compile.
void registerPipelines();

} // namespace pp

#endif // PP_PIPELINES_PIPELINES_H
