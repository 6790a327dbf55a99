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

/// Attaches GradientOpInterface models to the onnx ops that have a gradient.
void registerONNXGradients(mlir::DialectRegistry &registry);

} // namespace pp::train

#endif // PP_DIALECT_TRAIN_IR_TRAINOPS_H
