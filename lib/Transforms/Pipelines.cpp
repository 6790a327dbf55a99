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

} // namespace

void pp::registerPipelines() {
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
