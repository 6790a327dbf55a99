//===- Decompose.h - ONNX ops imported as other onnx ops --------*- C++ -*-===//
//
// ONNX ops that the importer builds from ops the dialect has (and
// differentiates), so that they need no kernels or gradient rules of their
// own: variadic Max, Min, Sum and Mean as chains of binary ops, PRelu as a
// Where, LessOrEqual / GreaterOrEqual as an Or of two comparisons, and the
// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp
// reductions through ReduceSum (and ReduceMax), and Resize (nearest or
// linear, any coordinate transformation): a repeat by integer factors as
// Reshape/Expand, any other as one MatMul per resized axis by a constant
// interpolation matrix; Trilu as a Where by a constant mask,
// InstanceNormalization by means over the spatial dims, CastLike as a Cast,
// IsNaN / IsInf / Sign by comparisons, NegativeLogLikelihoodLoss by a
// one-hot mask of the target; GatherElements, ArgMax/ArgMin, Hardmax and
// OneHot by masks against the index range, CumSum by a MatMul with a
// triangular constant, DepthToSpace/SpaceToDepth as Reshape/Transpose, Xor,
// EyeLike, Shrink, and Tan/Sinh/Cosh/Asinh/Acosh/Atanh by their formulas.
//
//===----------------------------------------------------------------------===//

#ifndef PP_LIB_IMPORT_ONNX_DECOMPOSE_H
#define PP_LIB_IMPORT_ONNX_DECOMPOSE_H

#include "mlir/IR/Builders.h"

#include <functional>
#include <optional>
#include <string>

namespace pp::onnx {

/// Whether the importer builds ONNX op `opType` with buildDecomposed.
bool isDecomposedOp(llvm::StringRef opType);

/// The attributes the decomposed ops take (the reductions').
struct DecomposedAttrs {
  /// Reduce*: the axes attribute (opsets before 18), if given.
  std::optional<llvm::SmallVector<int64_t>> axes;
  int64_t keepdims = 1;
  int64_t noopWithEmptyAxes = 0;
  /// PRelu of a model from before opset 7 (upgraded): a 1-D slope as long
  /// as X's dim 1 holds one slope per channel.
  bool channelSlope = false;
  /// Resize.
  /// Resize (default nearest) and DepthToSpace (default DCR).
  std::optional<std::string> mode;
  std::string coordinateMode = "half_pixel";
  std::string nearestMode = "round_prefer_floor";
  std::string keepAspectRatioPolicy = "stretch";
  int64_t antialias = 0;
  int64_t excludeOutside = 0;
  /// Trilu, InstanceNormalization, IsInf.
  int64_t upper = 1;
  double epsilon = 1e-5;
  int64_t detectNegative = 1, detectPositive = 1;
  /// NegativeLogLikelihoodLoss.
  std::string reduction = "mean";
  std::optional<int64_t> ignoreIndex;
  /// GatherElements, ArgMax/ArgMin, Hardmax, OneHot, CumSum (an input),
  /// DepthToSpace/SpaceToDepth, EyeLike, Shrink.
  std::optional<int64_t> axis;
  int64_t selectLastIndex = 0, exclusive = 0, reverse = 0, blocksize = 0;
  std::optional<int64_t> dtype;
  int64_t k = 0;
  double bias = 0.0, lambd = 0.5;
};

/// The names of the attributes `opType` takes (the others are errors).
llvm::ArrayRef<llvm::StringRef> decomposedAttrNames(llvm::StringRef opType);

/// Builds ONNX op `opType` (isDecomposedOp) over `operands` (null for an
/// absent optional input) with onnx ops
/// created by `builder` at `loc`; `fold` folds or keeps each created op (the
/// importer's foldOrKeep). Fails with `error` set when the operands do not
/// fit the op (their count, element types, shapes).
mlir::FailureOr<mlir::Value>
buildDecomposed(mlir::OpBuilder &builder, mlir::Location loc,
                llvm::StringRef opType, llvm::ArrayRef<mlir::Value> operands,
                const DecomposedAttrs &attrs,
                const std::function<mlir::Value(mlir::Operation *)> &fold,
                std::string &error);

} // namespace pp::onnx

#endif // PP_LIB_IMPORT_ONNX_DECOMPOSE_H
