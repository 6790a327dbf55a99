//===- ReportFile.h - Text reports of the passes ----------------*- C++ -*-===//
//
// Several passes of one pipeline (--pp-compile) may write their summaries to
// the same file: the first to open a path in this process truncates it, the
// later ones append. "-" is stdout.
//
//===----------------------------------------------------------------------===//
#ifndef PP_DIALECT_PP_TRANSFORMS_REPORTFILE_H
#define PP_DIALECT_PP_TRANSFORMS_REPORTFILE_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ToolOutputFile.h"

#include <memory>
#include <string>

namespace pp {

/// Opens `path` for a report (see above); null with `error` set on failure.
/// Finish it with keepReportFile once written.
std::unique_ptr<llvm::ToolOutputFile> openReportFile(llvm::StringRef path,
                                                     std::string *error);

/// Keeps a report opened by openReportFile and flushes it; a write that
/// failed (a full disk) emits "cannot write '<path>': ..." at `anchor`.
mlir::LogicalResult keepReportFile(mlir::Operation *anchor,
                                   llvm::ToolOutputFile &file,
                                   llvm::StringRef path);

/// Writes a report to `path` with `write`; on a file that cannot be
/// opened, emits "cannot write report: ..." at `anchor` and fails.
mlir::LogicalResult
writeReportFile(mlir::Operation *anchor, llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace pp

#endif // PP_DIALECT_PP_TRANSFORMS_REPORTFILE_H
