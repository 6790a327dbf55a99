//===- PPOps.h - The pp dialect and its operations ------------*- C++ -*-===//
#ifndef PP_DIALECT_PP_IR_PPOPS_H
#define PP_DIALECT_PP_IR_PPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "pp/Dialect/PP/IR/PPOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "pp/Dialect/PP/IR/PPOps.h.inc"

namespace pp::pipeline {

/// The one pp.schedule of `module`; otherwise null after an error at the
/// module that says `user` needs one.
ScheduleOp lookupSchedule(mlir::ModuleOp module, llvm::StringRef user);

} // namespace pp::pipeline

#endif // PP_DIALECT_PP_IR_PPOPS_H
