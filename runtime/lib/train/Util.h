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

/// `value` for a JSON log with `digits` significant digits; null when it
/// is not finite (JSON has no NaN).
std::string jsonNumber(double value, int digits = 9);

/// The element count of `shape` (1 for a scalar).
int64_t numelOf(const std::vector<int64_t> &shape);

/// Whether `path` names a regular file.
bool fileExists(const std::string &path);

/// The largest file the driver reads (data file, .npy inputs, checkpoint
/// files): 1 TiB.
constexpr int64_t kMaxInputFileBytes = int64_t(1) << 40;

/// Opens `path` for reading, once it is a regular file of at most
/// kMaxInputFileBytes (a FIFO, a device or a directory is refused, so that
/// no read blocks or never ends); sets `size`. -1 with `error` naming the
/// file (as `what` 'path', e.g. "the data file 'x'") and the cause.
int openRegularFile(const std::string &path, int64_t &size, std::string &error,
                    const std::string &what = "");

/// The whole of `path`, opened by openRegularFile. A file of more than
/// `limit` bytes is refused unread, `error` saying "it has N bytes, more
/// than `what` can hold (at most `limit`)".
bool readRegularFile(const std::string &path, std::string &bytes,
                     std::string &error, int64_t limit = kMaxInputFileBytes,
                     const std::string &what = "");

/// Reads `size` bytes at `offset` of `fd` (the file `path`) into `data`.
bool readFully(int fd, const std::string &path, int64_t offset, char *data,
               int64_t size, std::string &error);

/// The memory a process can still allocate, in bytes, as far as known: the
/// system's available memory (/proc/meminfo), the cgroup's limit less its
/// use, and the address-space limit; -1 when none is known.
int64_t availableMemoryBytes();

/// `bytes` in readable units ("65.4 GiB").
std::string byteSize(int64_t bytes);

/// Writes `bytes` to `path`, checking every write and the close: a full disk
/// is an error naming the file. A regular file is replaced (written beside
/// and renamed), so a link at `path` is replaced, not written through.
bool writeWholeFile(const std::string &path, const std::string &bytes,
                    std::string &error);

/// Whether `path` can be written, before training: it is not a directory,
/// and its directory exists and is writable.
bool checkWritablePath(const std::string &path, std::string &error);

/// `value` as 8 hex digits.
std::string hex32(uint32_t value);

/// "<message>: <strerror(errno)>".
std::string withErrno(const std::string &message);

/// `path` taken relative to `dir` (the executable's directory); empty and
/// absolute paths are returned as given.
std::string resolveNextTo(const std::string &dir, const std::string &path);

/// A file name made of a global's name ([A-Za-z0-9_.-] kept), as
/// pp-interpret --dump-globals writes them.
std::string fileStem(const std::string &name);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_UTIL_H
