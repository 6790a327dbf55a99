//===- Einsum.h - ONNX Einsum as onnx dialect ops ---------------*- C++ -*-===//
//
// The importer's decomposition of an Einsum node into ops the dialect has
// (and differentiates): ReduceSum, Transpose, Reshape, Slice and batched
// MatMul.
//
//===----------------------------------------------------------------------===//

#ifndef PP_LIB_IMPORT_ONNX_EINSUM_H
#define PP_LIB_IMPORT_ONNX_EINSUM_H

#include "mlir/IR/Builders.h"

#include <functional>
#include <string>

namespace pp::onnx {

/// Computes `equation` (ONNX Einsum: explicit `->` or implicit output,
/// `...`) over `operands` with onnx ops created by `builder` at `loc`;
/// `fold` folds or keeps each created op (the importer's foldOrKeep).
/// Operands contract pairwise, left to right, each pair as one batched
/// MatMul; a letter repeated within one operand reads its diagonal, and a
/// letter's dims of 1 broadcast against its larger dims in other operands.
/// Fails with `error` set when the equation does not fit the operands (its
/// terms, their ranks, a letter's dims that differ and are not 1).
mlir::FailureOr<mlir::Value>
buildEinsum(mlir::OpBuilder &builder, mlir::Location loc,
            llvm::StringRef equation, llvm::ArrayRef<mlir::Value> operands,
            const std::function<mlir::Value(mlir::Operation *)> &fold,
            std::string &error);

} // namespace pp::onnx

#endif // PP_LIB_IMPORT_ONNX_EINSUM_H
