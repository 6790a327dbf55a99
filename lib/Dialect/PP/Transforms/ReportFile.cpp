//===- ReportFile.cpp - Text reports of the passes --------------*- C++ -*-===//

#include "pp/Dialect/PP/Transforms/ReportFile.h"
#include "pp/Support/FileOutput.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"

#include <mutex>

std::unique_ptr<llvm::ToolOutputFile> pp::openReportFile(llvm::StringRef path,
                                                         std::string *error) {
  static std::mutex mutex;
  static llvm::StringSet<> opened;
  bool append;
  {
    std::lock_guard<std::mutex> lock(mutex);
    append = path != "-" && !opened.insert(path).second;
  }
  std::error_code ec;
  auto file = std::make_unique<llvm::ToolOutputFile>(
      path, ec,
      append ? llvm::sys::fs::OF_Append | llvm::sys::fs::OF_Text
             : llvm::sys::fs::OF_Text);
  if (ec) {
    if (error)
      *error = ec.message();
    return nullptr;
  }
  return file;
}

mlir::LogicalResult
pp::writeReportFile(mlir::Operation *anchor, llvm::StringRef path,
                    llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string error;
  auto out = openReportFile(path, &error);
  if (!out)
    return anchor->emitError() << "cannot write report: " << error;
  write(out->os());
  return keepReportFile(anchor, *out, path);
}

mlir::LogicalResult pp::keepReportFile(mlir::Operation *anchor,
                                       llvm::ToolOutputFile &file,
                                       llvm::StringRef path) {
  file.keep();
  if (llvm::Error error = finishWriting(file.os(), path))
    return anchor->emitError() << llvm::toString(std::move(error));
  return mlir::success();
}
