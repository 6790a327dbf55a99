//===- FusedHandler.h - The interpreter's pp.fused handler ------*- C++ -*-===//
#ifndef LIB_INTERPRETER_FUSEDHANDLER_H
#define LIB_INTERPRETER_FUSEDHANDLER_H

#include "pp/Interpreter/Interpreter.h"

#include "mlir/IR/Block.h"

#include <functional>

namespace pp::interp {

/// Runs the ops of a block in the current function's frame (the
/// interpreter's own block loop).
using BlockRunner = std::function<mlir::LogicalResult(mlir::Block &)>;

/// Registers the handlers of pp.fused (its body runs op by op through the
/// handlers of the fused ops, with `runBody`) and of its pp.yield.
void registerFusedHandlers(Interpreter &interp, BlockRunner runBody);

} // namespace pp::interp

#endif // LIB_INTERPRETER_FUSEDHANDLER_H
