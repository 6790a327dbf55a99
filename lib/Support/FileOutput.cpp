//===- FileOutput.cpp - Writing files that may fail -------------*- C++ -*-===//

#include "pp/Support/FileOutput.h"

#include "llvm/Support/FileSystem.h"

using namespace llvm;

Error pp::finishWriting(raw_fd_ostream &os, StringRef path) {
  // "-" is stdout: flushed, never closed (other streams share it).
  if (path == "-")
    os.flush();
  else
    os.close();
  std::error_code error = os.error();
  os.clear_error();
  if (!error)
    return Error::success();
  return createStringError(error,
                           "cannot write '" + path + "': " + error.message());
}

Error pp::writeFileContents(StringRef path, StringRef bytes) {
  std::error_code error;
  raw_fd_ostream os(path, error, sys::fs::OF_None);
  if (error)
    return createStringError(error,
                             "cannot write '" + path + "': " + error.message());
  os << bytes;
  return finishWriting(os, path);
}
