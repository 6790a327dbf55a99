//===- Passes.h - Training-step passes --------------------------*- C++ -*-===//
#ifndef PP_DIALECT_TRAIN_TRANSFORMS_PASSES_H
#define PP_DIALECT_TRAIN_TRANSFORMS_PASSES_H

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Support/EnumOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace pp {

#define GEN_PASS_DECL
#include "pp/Dialect/Train/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pp/Dialect/Train/Transforms/Passes.h.inc"

} // namespace pp

#endif // PP_DIALECT_TRAIN_TRANSFORMS_PASSES_H
