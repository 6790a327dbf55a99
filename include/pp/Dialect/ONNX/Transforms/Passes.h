//===- Passes.h - Passes over imported onnx models --------------*- C++ -*-===//
#ifndef PP_DIALECT_ONNX_TRANSFORMS_PASSES_H
#define PP_DIALECT_ONNX_TRANSFORMS_PASSES_H

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace pp {

#define GEN_PASS_DECL
#include "pp/Dialect/ONNX/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pp/Dialect/ONNX/Transforms/Passes.h.inc"

} // namespace pp

#endif // PP_DIALECT_ONNX_TRANSFORMS_PASSES_H
