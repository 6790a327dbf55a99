//===- TrainOps.h - The train dialect and its operations ------*- C++ -*-===//
#ifndef PP_DIALECT_TRAIN_IR_TRAINOPS_H
#define PP_DIALECT_TRAIN_IR_TRAINOPS_H

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "pp/Dialect/Train/IR/TrainOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pp/Dialect/Train/IR/TrainAttrs.h.inc"

#include "pp/Dialect/Train/IR/TrainInterfaces.h.inc"

#define GET_OP_CLASSES
#include "pp/Dialect/Train/IR/TrainOps.h.inc"

namespace pp::train {

/// Attaches GradientOpInterface models to the onnx ops that have a gradient
/// and to the shard dialect's collectives (a tensor-parallel program).
void registerONNXGradients(mlir::DialectRegistry &registry);

/// Tensor parallelism (Megatron's f): the operands of `op` that are whole on
/// every device of `grid` while its result is split. Each device's gradient
/// of such an operand is only its part's contribution, so --pp-autodiff sums
/// it over the grid's `axes` (a shard.all_reduce). Set by
/// --pp-tensor-parallel as the discardable attribute "train.grad_all_reduce"
/// = {grid = @tp, axes = array<i16: 0>, operands = array<i64: ...>}.
struct GradAllReduce {
  mlir::FlatSymbolRefAttr grid;
  llvm::SmallVector<int16_t> axes;
  llvm::SmallVector<int64_t> operands;
};
constexpr llvm::StringLiteral kGradAllReduceAttrName = "train.grad_all_reduce";
void setGradAllReduce(mlir::Operation *op, const GradAllReduce &value);
std::optional<GradAllReduce> getGradAllReduce(mlir::Operation *op);

} // namespace pp::train

#endif // PP_DIALECT_TRAIN_IR_TRAINOPS_H
