//===- Program.h - The program table of a generated program -----*- C++ -*-===//
//
// What the generated program's table (pp::rt::ProgramInfo, Program.h of the
// runtime) says about a pipeline module, read from the module before its
// stage functions are converted, and how it becomes EmitC once they are.
//
//===----------------------------------------------------------------------===//
#ifndef LIB_CONVERSION_PPTOEMITC_PROGRAM_H
#define LIB_CONVERSION_PPTOEMITC_PROGRAM_H

#include "pp/Conversion/PPToEmitC/PPToEmitC.h"
#include "pp/Runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace pp::emitc_lowering {

/// The table of a generated program, and its data file: the initial values
/// of the globals (in module order) and of the constants (in the order the
/// converted functions use them), each 256-byte aligned. The table is the
/// runtime's own pp::rt::ProgramInfo (one schema), which buildProgram emits
/// field by field as designated initializers (`.name = value`): each name
/// is checked against the runtime's struct when pipeline-opt builds, and
/// again by the generated program's compiler. collectProgramTable fills
/// what it reads from the module (FunctionInfo::function stays null: the
/// generated table names the function), buildProgram the files, the hashes
/// and the constants.
struct ProgramTable : rt::ProgramInfo {
  /// The id (index into `globals`) of each global by name.
  llvm::StringMap<int> globalIds;
  std::string dataBytes;

  /// Appends `bytes` to the data file; returns their offset.
  int64_t appendData(const void *bytes, int64_t size);
};

/// Reads the table of a scheduled, memory-planned pipeline module (before
/// its stage functions are converted); the globals' initial values go to
/// its data. Fails after a diagnostic naming the pass a missing piece
/// comes from.
mlir::FailureOr<ProgramTable> collectProgramTable(mlir::ModuleOp module);

/// Completes `module`, whose stage functions are converted, into the
/// program: numbers the globals and constants that the converted functions
/// name by symbol and by value (appending the constants to the table's
/// data), replaces everything that is not EmitC by the includes, the
/// function filling the table and main().
mlir::LogicalResult buildProgram(mlir::ModuleOp module, ProgramTable &table,
                                 const EmitProgramOptions &options);

} // namespace pp::emitc_lowering

#endif // LIB_CONVERSION_PPTOEMITC_PROGRAM_H
