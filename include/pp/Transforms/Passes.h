//===- Passes.h - Passes of pipeline-opt ----------------------*- C++ -*-===//
#ifndef PP_TRANSFORMS_PASSES_H
#define PP_TRANSFORMS_PASSES_H

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace pp {

#define GEN_PASS_DECL
#include "pp/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pp/Transforms/Passes.h.inc"

/// Registers the named pipelines (--pp-training-step).
void registerPipelines();

} // namespace pp

#endif // PP_TRANSFORMS_PASSES_H
