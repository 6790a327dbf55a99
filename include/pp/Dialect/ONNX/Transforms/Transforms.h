//===- Transforms.h - Model checks and summaries as functions ---*- C++ -*-===//
//
// What each onnx-dialect pass does, as a function that tests and tools can
// call without a pass manager; the passes of Passes.td are thin adapters.
//
//===----------------------------------------------------------------------===//

#ifndef PP_DIALECT_ONNX_TRANSFORMS_TRANSFORMS_H
#define PP_DIALECT_ONNX_TRANSFORMS_TRANSFORMS_H

#include "pp/Dialect/ONNX/Transforms/Passes.h"

namespace pp::onnx {

/// --pp-model-summary: inputs, outputs, parameters and FLOPs per op kind.
mlir::LogicalResult writeModelSummary(mlir::ModuleOp module,
                                      const ModelSummaryPassOptions &options);

/// --pp-verify-static-shapes: an error at the first dynamic type.
mlir::LogicalResult verifyStaticShapes(mlir::Operation *root);

} // namespace pp::onnx

#endif // PP_DIALECT_ONNX_TRANSFORMS_TRANSFORMS_H
