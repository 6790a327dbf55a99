//===- InputLimits.cpp - Bounded reading of the tools' inputs ---*- C++ -*-===//

#include "pp/Support/InputLimits.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"

using namespace llvm;

Expected<std::unique_ptr<MemoryBuffer>>
pp::limits::readRegularFile(StringRef path, uint64_t maxBytes, StringRef what,
                            bool isText) {
  auto fail = [&](const Twine &why) -> Error {
    return createStringError(inconvertibleErrorCode(),
                             "cannot read " + what + " '" + path + "': " + why);
  };
  auto check = [&](const sys::fs::file_status &status) -> Error {
    if (status.type() != sys::fs::file_type::regular_file)
      return fail("not a regular file");
    if (status.getSize() > maxBytes)
      return fail(Twine(status.getSize()) + " bytes exceed the limit of " +
                  Twine(maxBytes) + " bytes");
    return Error::success();
  };
  // Before opening it: opening a FIFO blocks until a writer comes.
  sys::fs::file_status status;
  if (std::error_code ec = sys::fs::status(path, status))
    return fail(ec.message());
  if (Error error = check(status))
    return error;
  Expected<sys::fs::file_t> file = sys::fs::openNativeFileForRead(path);
  if (!file)
    return fail(toString(file.takeError()));
  llvm::scope_exit close([&] { sys::fs::closeFile(*file); });
  // And what was opened, in case the path changed in between.
  if (std::error_code ec = sys::fs::status(*file, status))
    return fail(ec.message());
  if (Error error = check(status))
    return error;
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer = MemoryBuffer::getOpenFile(
      *file, path, status.getSize(), /*RequiresNullTerminator=*/isText);
  if (!buffer)
    return fail(buffer.getError().message());
  return std::move(*buffer);
}

Expected<json::Value> pp::limits::parseBoundedJSON(StringRef text,
                                                   unsigned maxDepth) {
  unsigned depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth) {
        // Where, as llvm::json reports its errors.
        StringRef before = text.take_front(i);
        size_t line = before.count('\n') + 1;
        size_t column = i - (before.rfind('\n') + 1) + 1;
        return createStringError(inconvertibleErrorCode(),
                                 "[" + Twine(line) + ":" + Twine(column) +
                                     ", byte=" + Twine(i) +
                                     "]: arrays and objects nest deeper "
                                     "than the limit of " +
                                     Twine(maxDepth));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return json::parse(text);
}
