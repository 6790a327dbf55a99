//===- Util.h - Small helpers of the training driver ------------*- C++ -*-===//
//
// Clock, shape and path helpers that several parts of the driver share.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_UTIL_H
#define PP_RUNTIME_TRAIN_UTIL_H

#include <cstdint>
#include <string>
#include <vector>

namespace pp::rt::train {

/// Base of the driver's owners of files and buffers: never copied.
class NonCopyable {
protected:
  NonCopyable() = default;
  NonCopyable(const NonCopyable &) = delete;
  NonCopyable &operator=(const NonCopyable &) = delete;
};

/// Seconds on the steady clock (differences only).
double nowSeconds();

/// The element count of `shape` (1 for a scalar).
int64_t numelOf(const std::vector<int64_t> &shape);

/// Whether `path` names a regular file.
bool fileExists(const std::string &path);

/// `path` taken relative to `dir` (the executable's directory); empty and
/// absolute paths are returned as given.
std::string resolveNextTo(const std::string &dir, const std::string &path);

/// A file name made of a global's name ([A-Za-z0-9_.-] kept), as
/// pp-interpret --dump-globals writes them.
std::string fileStem(const std::string &name);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_UTIL_H
