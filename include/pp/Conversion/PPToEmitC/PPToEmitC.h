//===- PPToEmitC.h - Lowering of a scheduled pipeline to EmitC --*- C++ -*-===//
#ifndef PP_CONVERSION_PPTOEMITC_PPTOEMITC_H
#define PP_CONVERSION_PPTOEMITC_PPTOEMITC_H

#include "pp/Runtime/Kernels.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace pp {

struct EmitProgramOptions {
  /// File names the generated program looks for next to its executable.
  std::string dataFileName = "program.data";
  std::string onnxFileName;
  /// Fuse chains of elementwise ops into generated kernels.
  bool fuseElementwise = true;
};

/// A step input of the generated program (the whole mini-batch).
struct ProgramInput {
  std::string name;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  int64_t randomBound = 10;
};

/// A step output, per micro-batch.
struct ProgramOutput {
  std::string name;
  std::string combine;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
};

/// Lowers a scheduled, memory-planned pipeline module to a new module of
/// the EmitC dialect (stage functions, program table, main); the initial
/// values of globals and constants go to `dataBytes`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerPipelineToEmitC(mlir::ModuleOp module, const EmitProgramOptions &options,
                     std::string &dataBytes);

/// Writes `bytes` to `path`; a failure is an error at `anchor` naming the
/// file.
mlir::LogicalResult writeFileBytes(mlir::Operation *anchor,
                                   llvm::StringRef path, llvm::StringRef bytes);

} // namespace pp

#endif // PP_CONVERSION_PPTOEMITC_PPTOEMITC_H
