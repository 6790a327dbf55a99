//===- ONNXOps.h - The onnx dialect and its operations --------*- C++ -*-===//
#ifndef PP_DIALECT_ONNX_IR_ONNXOPS_H
#define PP_DIALECT_ONNX_IR_ONNXOPS_H

#include "pp/Runtime/Kernels.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "pp/Dialect/ONNX/IR/ONNXOpsDialect.h.inc"

namespace pp::onnx {

/// Number of elements of a statically shaped type, 0 otherwise.
int64_t getNumElements(mlir::Type type);

/// Result types agree when element types are equal and shapes compatible.
bool areCompatibleResultTypes(mlir::TypeRange lhs, mlir::TypeRange rhs);

/// Result type: the type of operand `index`.
llvm::LogicalResult inferSameAsOperand(std::optional<mlir::Location> loc,
                                       mlir::ValueRange operands,
                                       unsigned index,
                                       llvm::SmallVectorImpl<mlir::Type> &out);

/// Result type: the numpy broadcast of all operand shapes, with
/// `elementType` or (when null) the element type of operand 0.
llvm::LogicalResult inferBroadcast(std::optional<mlir::Location> loc,
                                   mlir::ValueRange operands,
                                   mlir::Type elementType,
                                   llvm::SmallVectorImpl<mlir::Type> &out);

/// The integer contents of `value` when it is produced by a constant.
std::optional<llvm::SmallVector<int64_t>> getConstantInts(mlir::Value value);

/// Maps an ONNX TensorProto data type code to an MLIR element type; null for
/// types the dialect does not support.
mlir::Type getElementTypeForONNXDataType(mlir::MLIRContext *ctx,
                                         int64_t dataType);
/// The ONNX TensorProto data type code of a float element type (what
/// onnx.Cast's `to` takes): 11 f64, 10 f16, 16 bf16, else 1 (f32).
int64_t getONNXDataTypeForFloat(mlir::Type element);

/// A ConvTranspose's window with its padding made explicit (from auto_pad,
/// output_shape, pads) and its output spatial dims.
struct ConvTransposeGeometry {
  llvm::SmallVector<int64_t> kernel, strides, dilations, pads, outputSpatial;
};

/// Per-dim start, size and step of a Slice with constant operands (every
/// dim of the data, clamped as ONNX specifies).
struct SliceBounds {
  llvm::SmallVector<int64_t> starts, sizes, steps;
};

/// Global kinds (`onnx.global`'s `kind`).
inline constexpr llvm::StringLiteral kTrainable = "trainable";
inline constexpr llvm::StringLiteral kState = "state";
inline constexpr llvm::StringLiteral kConstant = "constant";
/// On an `onnx.global "constant"` that the importer froze although it is
/// shaped like a parameter: why (a string attribute).
inline constexpr llvm::StringLiteral kFrozenReasonAttr = "onnx.frozen";

/// Gives every `onnx.Dropout` under `root` without a `stream` the next free
/// one (after the largest present), in walk order. The importer and
/// --pp-autodiff call it, so streams exist before partitioning and follow
/// the ops through split-stages (docs/cli.md, "Dropout masks").
void assignDropoutStreams(mlir::Operation *root);

} // namespace pp::onnx

namespace pp::onnx::OpTrait {
/// Marker traits of KernelFactsOpInterface (ONNXInterfaces.td).
template <typename ConcreteType>
class Contraction : public mlir::OpTrait::TraitBase<ConcreteType, Contraction> {
};
template <typename ConcreteType>
class MemoryBound : public mlir::OpTrait::TraitBase<ConcreteType, MemoryBound> {
};
template <typename ConcreteType>
class UnaryKernel : public mlir::OpTrait::TraitBase<ConcreteType, UnaryKernel> {
};
template <typename ConcreteType>
class FusibleBinary
    : public mlir::OpTrait::TraitBase<ConcreteType, FusibleBinary> {};
} // namespace pp::onnx::OpTrait

namespace pp::onnx::detail {
template <typename T, typename = void>
struct HasStaticUnaryKind : std::false_type {};
template <typename T>
struct HasStaticUnaryKind<T, std::void_t<decltype(T::kUnaryKind)>>
    : std::true_type {};
/// The kUnaryKind ONNX_UnaryKernel<kind> declares on the op, if any.
template <typename ConcreteOp> std::optional<rt::UnaryKind> staticUnaryKind() {
  if constexpr (HasStaticUnaryKind<ConcreteOp>::value)
    return ConcreteOp::kUnaryKind;
  else
    return std::nullopt;
}
} // namespace pp::onnx::detail

#include "pp/Dialect/ONNX/IR/ONNXInterfaces.h.inc"

#define GET_OP_CLASSES
#include "pp/Dialect/ONNX/IR/ONNXOps.h.inc"

#endif // PP_DIALECT_ONNX_IR_ONNXOPS_H
