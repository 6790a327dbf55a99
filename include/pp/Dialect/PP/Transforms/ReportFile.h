//===- ReportFile.h - Text reports of the passes ----------------*- C++ -*-===//
//
// Several passes of one pipeline (--pp-compile) may write their summaries to
// the same file: the first to open a path in this process truncates it, the
// later ones append. "-" is stdout.
//
//===----------------------------------------------------------------------===//
#ifndef PP_DIALECT_PP_TRANSFORMS_REPORTFILE_H
#define PP_DIALECT_PP_TRANSFORMS_REPORTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ToolOutputFile.h"

#include <memory>
#include <string>

namespace pp {

/// Opens `path` for a report (see above); null with `error` set on failure.
/// Call keep() on the result once written.
std::unique_ptr<llvm::ToolOutputFile> openReportFile(llvm::StringRef path,
                                                     std::string *error);

} // namespace pp

#endif // PP_DIALECT_PP_TRANSFORMS_REPORTFILE_H
