//===- Transforms.h - Training-step construction as functions ---*- C++ -*-===//
//
// What each training-step pass does, as a function over a module that tests
// and tools can call without a pass manager; the passes of Passes.td are
// thin adapters over these. Each reports its errors on the module and
// returns failure.
//
//===----------------------------------------------------------------------===//

#ifndef PP_DIALECT_TRAIN_TRANSFORMS_TRANSFORMS_H
#define PP_DIALECT_TRAIN_TRANSFORMS_TRANSFORMS_H

#include "pp/Dialect/Train/Transforms/Passes.h"

namespace pp::train {

/// --pp-add-loss: the loss as result 0 of the model function.
mlir::LogicalResult addLoss(mlir::ModuleOp module,
                            const AddLossPassOptions &options);

/// --pp-mixed-precision: the forward pass in bf16/fp16 over fp32 weights.
mlir::LogicalResult
applyMixedPrecision(mlir::ModuleOp module,
                    const MixedPrecisionPassOptions &options);

/// --pp-autodiff: gradients of every trainable global, by reverse mode.
mlir::LogicalResult differentiate(mlir::ModuleOp module,
                                  const AutodiffPassOptions &options);

/// --pp-optimizer: the update of every trainable global from its gradient.
mlir::LogicalResult applyOptimizer(mlir::ModuleOp module,
                                   const OptimizerPassOptions &options);

} // namespace pp::train

#endif // PP_DIALECT_TRAIN_TRANSFORMS_TRANSFORMS_H
