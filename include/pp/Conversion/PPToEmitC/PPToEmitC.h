//===- PPToEmitC.h - Lowering of a scheduled pipeline to EmitC --*- C++ -*-===//
//
// A scheduled, memory-planned pipeline module becomes a C++ training
// program in the EmitC dialect, in two steps that tests and tools can call
// on their own:
//
//   1. Conversion patterns (populatePPToEmitCPatterns, one file per op
//      family) turn every stage function into an emitc.func
//      (`StageContext&`, micro-batch): a tensor is a view of the arena
//      offset --pp-memory-plan gave it (pp.offsets), an op one call of a
//      runtime kernel (pp/Runtime/Kernels.h) and the check of its status, a
//      pp.fused op one generated per-element kernel, a pp op a StageContext
//      call. Globals and constants are named by symbol and by value
//      (`gen::global(ctx, @w)`, `gen::constant(ctx, dense<...>)`) until step
//      2 numbers them.
//   2. The program: the globals and constants of the converted functions
//      are numbered and their initial values packed into the program's
//      data file, and the rest of the module is replaced by the program
//      table (a function filling a pp::rt::ProgramInfo with EmitC member
//      assignments, from what step 1 could not see: the schedule, the
//      plan, the arena sizes) and main().
//
//===----------------------------------------------------------------------===//
#ifndef PP_CONVERSION_PPTOEMITC_PPTOEMITC_H
#define PP_CONVERSION_PPTOEMITC_PPTOEMITC_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Transforms/DialectConversion.h"

#include <string>

namespace pp {

struct EmitProgramOptions {
  /// File names the generated program looks for next to its executable.
  std::string dataFileName = "program.data";
  std::string onnxFileName;
  /// CRC-32C of that file (ProgramInfo::onnxHash).
  uint32_t onnxHash = 0;
};

/// Converts ranked tensors to the runtime's tensor view, `pp::rt::Tensor`
/// (a pointer into the arena, a dtype and a shape); EmitC types stay.
class PPToEmitCTypeConverter : public mlir::TypeConverter {
public:
  explicit PPToEmitCTypeConverter(mlir::MLIRContext *context);
};

/// Adds the patterns that lower stage functions (func.func with pp.stage)
/// and the onnx, train and pp ops in them to EmitC. Every pattern that
/// matches but cannot lower its op emits a diagnostic at the op.
void populatePPToEmitCPatterns(mlir::TypeConverter &typeConverter,
                               mlir::RewritePatternSet &patterns);

/// Step 1 on `module`, in place: its stage functions become emitc.funcs
/// (everything else is left as it is). Fails after a diagnostic at each op
/// that cannot be lowered.
mlir::LogicalResult convertStageFunctionsToEmitC(mlir::ModuleOp module);

/// Both steps on `module`, in place: it becomes the generated program (the
/// stage functions, their fused kernels, the program table and main); the
/// initial values of globals and constants go to `dataBytes`.
mlir::LogicalResult convertPipelineToEmitC(mlir::ModuleOp module,
                                           const EmitProgramOptions &options,
                                           std::string &dataBytes);

/// The same on a copy: `module` is unchanged.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerPipelineToEmitC(mlir::ModuleOp module, const EmitProgramOptions &options,
                     std::string &dataBytes);

/// Cuts every emitc.func of `module` with more than `maxOps` ops (nested
/// ones counted; no results, no specifiers) into functions of about `maxOps` ops each,
/// `<name>_part<N>`, that it calls in order (SplitFunctions.cpp): the C++
/// compiler's time grows faster than the size of a function. Returns the
/// number of functions split; `maxOps` <= 0 splits none.
int64_t splitFunctions(mlir::ModuleOp module, int64_t maxOps);

/// Writes `bytes` to `path`; a failure is an error at `anchor` naming the
/// file.
mlir::LogicalResult writeFileBytes(mlir::Operation *anchor,
                                   llvm::StringRef path, llvm::StringRef bytes);

} // namespace pp

#endif // PP_CONVERSION_PPTOEMITC_PPTOEMITC_H
