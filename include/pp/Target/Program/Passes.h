//===- Passes.h - Writing a generated training program ----------*- C++ -*-===//
#ifndef PP_TARGET_PROGRAM_PASSES_H
#define PP_TARGET_PROGRAM_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace pp {

#define GEN_PASS_DECL
#include "pp/Target/Program/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pp/Target/Program/Passes.h.inc"

} // namespace pp

#endif // PP_TARGET_PROGRAM_PASSES_H
