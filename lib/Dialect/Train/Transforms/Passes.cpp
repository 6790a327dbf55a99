//===- Passes.cpp - Training-step passes over Transforms.h ------*- C++ -*-===//
//
// Each pass hands its options to the function of Transforms.h that does
// the work.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/Train/Transforms/Transforms.h"
#include "pp/Support/PassAdapter.h"

namespace pp {
#define GEN_PASS_DEF_ADDLOSSPASS
#define GEN_PASS_DEF_AUTODIFFPASS
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "pp/Dialect/Train/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;
using pp::PassAdapter;
namespace train = pp::train;

namespace {

struct AddLossPass : PassAdapter<AddLossPass, pp::impl::AddLossPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    pp::AddLossPassOptions options{.funcName = funcName,
                                   .kind = kind,
                                   .classAxis = classAxis,
                                   .ignoreIndex = ignoreIndex,
                                   .labelSmoothing = labelSmoothing};
    options.classWeights.assign(classWeights.begin(), classWeights.end());
    return train::addLoss(module, options);
  }
};

struct MixedPrecisionPass
    : PassAdapter<MixedPrecisionPass, pp::impl::MixedPrecisionPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return train::applyMixedPrecision(
        module, {.funcName = funcName, .precision = precision});
  }
};

struct AutodiffPass : PassAdapter<AutodiffPass, pp::impl::AutodiffPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return train::differentiate(module, {.funcName = funcName});
  }
};

struct OptimizerPass : PassAdapter<OptimizerPass, pp::impl::OptimizerPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    return train::applyOptimizer(
        module, {.funcName = funcName,
                 .kind = kind,
                 .lr = lr,
                 .momentum = momentum,
                 .dampening = dampening,
                 .nesterov = nesterov,
                 .weightDecay = weightDecay,
                 .weightDecayMinRank = weightDecayMinRank,
                 .beta1 = beta1,
                 .beta2 = beta2,
                 .epsilon = epsilon,
                 .lossScale = lossScale,
                 .lossScaleValue = lossScaleValue,
                 .lossScaleInterval = lossScaleInterval,
                 .lrSchedule = lrSchedule,
                 .warmupSteps = warmupSteps,
                 .minLr = minLr,
                 .stepSize = stepSize,
                 .milestones = {milestones.begin(), milestones.end()},
                 .gamma = gamma,
                 .power = power,
                 .decaySteps = decaySteps});
  }
};

} // namespace
