//===- TensorParallelGroups.h - What tensor parallelism splits --*- C++ -*-===//
//
// A read-only query of --pp-tensor-parallel's grouping, for planners: the
// Megatron groups (column-parallel contractions feeding a row-parallel one
// through ops that carry the split) that the pass would split over a
// degree, without changing the IR.
//
//===----------------------------------------------------------------------===//

#ifndef PP_DIALECT_ONNX_TRANSFORMS_TENSORPARALLELGROUPS_H
#define PP_DIALECT_ONNX_TRANSFORMS_TENSORPARALLELGROUPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace pp::onnx {

/// One group the pass splits over the degree.
struct TensorParallelGroup {
  /// The row-parallel contraction (its weight split by input features).
  mlir::Operation *row = nullptr;
  /// The column-parallel contractions (weights split by output features).
  llvm::SmallVector<mlir::Operation *> columns;
  /// Every op whose work the degree divides: the columns, the ops carrying
  /// the split between them and the row, and the row.
  llvm::SmallVector<mlir::Operation *> splitOps;
  /// The weight operands split (the columns' weights and output-feature
  /// biases, the row's weight), as the ops read them.
  llvm::SmallVector<mlir::Value> splitWeights;
  /// All-reduced in the forward: the row's result (partial sums).
  mlir::Value forwardReduced;
  /// Whose gradients are all-reduced in the backward: the columns' inputs.
  llvm::SmallVector<mlir::Value> backwardReduced;
};

/// The groups --pp-tensor-parallel (without pins) splits in `func` over
/// `tp` devices, in op order; a pair whose features `tp` does not divide
/// stays whole and is left out (its row op is listed in `wholeRows` when
/// given). Empty for tp <= 1.
std::vector<TensorParallelGroup> findTensorParallelGroups(
    mlir::func::FuncOp func, int64_t tp,
    llvm::SmallVectorImpl<mlir::Operation *> *wholeRows = nullptr);

} // namespace pp::onnx

#endif // PP_DIALECT_ONNX_TRANSFORMS_TENSORPARALLELGROUPS_H
