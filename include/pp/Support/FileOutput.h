//===- FileOutput.h - Writing files that may fail ---------------*- C++ -*-===//
//
// A write that fails (a full disk, a removed directory) must end in an error
// that names the file, not in raw_fd_ostream's destructor aborting the tool
// with "IO failure on output stream". These helpers close the stream, read
// its error and clear it.
//
//===----------------------------------------------------------------------===//

#ifndef PP_SUPPORT_FILEOUTPUT_H
#define PP_SUPPORT_FILEOUTPUT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace pp {

/// Flushes `os` (and closes it, unless `path` is "-": stdout) and returns
/// "cannot write '<path>': <reason>" if any write to it failed. The stream's
/// error is cleared either way, so destroying it never aborts.
llvm::Error finishWriting(llvm::raw_fd_ostream &os, llvm::StringRef path);

/// Writes `bytes` to the file `path`, replacing it.
llvm::Error writeFileContents(llvm::StringRef path, llvm::StringRef bytes);

} // namespace pp

#endif // PP_SUPPORT_FILEOUTPUT_H
