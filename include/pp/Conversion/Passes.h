//===- Passes.h - Conversion passes -----------------------------*- C++ -*-===//
#ifndef PP_CONVERSION_PASSES_H
#define PP_CONVERSION_PASSES_H

#include "pp/Conversion/PPToEmitC/PPToEmitC.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace pp {

#define GEN_PASS_DECL
#include "pp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pp/Conversion/Passes.h.inc"

} // namespace pp

#endif // PP_CONVERSION_PASSES_H
