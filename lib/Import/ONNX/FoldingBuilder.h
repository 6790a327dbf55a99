//===- FoldingBuilder.h - Creating onnx ops at import -----------*- C++ -*-===//
//
// What the importer's decompositions (Einsum.cpp, Decompose.cpp) share: a
// builder at the node's location whose every created op goes through the
// importer's fold-or-keep, and the shape helpers they use.
//
//===----------------------------------------------------------------------===//

#ifndef PP_LIB_IMPORT_ONNX_FOLDINGBUILDER_H
#define PP_LIB_IMPORT_ONNX_FOLDINGBUILDER_H

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <functional>

namespace pp::onnx {

struct FoldingBuilder {
  FoldingBuilder(mlir::OpBuilder &b, mlir::Location loc,
                 const std::function<mlir::Value(mlir::Operation *)> &fold)
      : b(b), loc(loc), fold(fold) {}

  static llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
    return mlir::cast<mlir::ShapedType>(v.getType()).getShape();
  }
  static mlir::Type elementType(mlir::Value v) {
    return mlir::cast<mlir::ShapedType>(v.getType()).getElementType();
  }
  /// `values` rounded (to nearest even) to `element`'s semantics.
  static llvm::SmallVector<llvm::APFloat>
  toFloats(llvm::ArrayRef<double> values, mlir::FloatType element) {
    llvm::SmallVector<llvm::APFloat> result;
    for (double v : values) {
      llvm::APFloat f(v);
      bool lost;
      f.convert(element.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
      result.push_back(f);
    }
    return result;
  }
  /// A 1-D i64 constant.
  mlir::Value i64s(llvm::ArrayRef<int64_t> values) {
    auto type =
        mlir::RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
    return fold(ConstantOp::create(
        b, loc, mlir::DenseIntElementsAttr::get(type, values)));
  }
  /// x itself when it already has `shape`, else its Reshape.
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return fold(
        ReshapeOp::create(b, loc, x, i64s(shape), b.getI64IntegerAttr(0)));
  }

  mlir::OpBuilder &b;
  mlir::Location loc;
  const std::function<mlir::Value(mlir::Operation *)> &fold;
};

} // namespace pp::onnx

#endif // PP_LIB_IMPORT_ONNX_FOLDINGBUILDER_H
