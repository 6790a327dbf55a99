//===- Util.cpp - Small helpers of the training driver --------------------===//

#include "Util.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace pp::rt::train;

std::string pp::rt::train::jsonNumber(double value, int digits) {
  if (!std::isfinite(value))
    return "null";
  char text[64];
  std::snprintf(text, sizeof(text), "%.*g", digits, value);
  return text;
}

double pp::rt::train::nowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t pp::rt::train::numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool pp::rt::train::fileExists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string pp::rt::train::resolveNextTo(const std::string &dir,
                                         const std::string &path) {
  if (path.empty() || path[0] == '/')
    return path;
  return dir + "/" + path;
}

std::string pp::rt::train::fileStem(const std::string &name) {
  std::string stem;
  for (char c : name) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9');
    stem += alnum || c == '_' || c == '-' || c == '.' ? c : '_';
  }
  if (stem.empty() || stem == "." || stem == "..")
    stem = "output";
  return stem;
}

std::string pp::rt::train::hex32(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

std::string pp::rt::train::withErrno(const std::string &message) {
  return message + ": " + std::strerror(errno);
}

int pp::rt::train::openRegularFile(const std::string &path, int64_t &size,
                                   std::string &error,
                                   const std::string &what) {
  std::string cannot =
      "cannot read " + (what.empty() ? "" : what + " ") + "'" + path + "'";
  // O_NONBLOCK: opening a FIFO without a writer must not wait for one.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = withErrno(cannot);
    return -1;
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) ||
      info.st_size > kMaxInputFileBytes) {
    error = cannot + ": ";
    if (S_ISDIR(info.st_mode))
      error += "it is a directory";
    else if (!S_ISREG(info.st_mode))
      error += "not a regular file (only regular files of at most 1 TiB "
               "are read: no FIFO or device)";
    else
      error += "it has " + std::to_string(info.st_size) +
               " bytes, more than the limit of 1 TiB";
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size = info.st_size;
  return fd;
}

bool pp::rt::train::readFully(int fd, const std::string &path, int64_t offset,
                              char *data, int64_t size, std::string &error) {
  int64_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, data + done, size - done, offset + done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = n < 0 ? withErrno("cannot read '" + path + "'")
                    : "cannot read '" + path + "': it shrank while read";
      return false;
    }
    done += n;
  }
  return true;
}

bool pp::rt::train::readRegularFile(const std::string &path, std::string &bytes,
                                    std::string &error, int64_t limit,
                                    const std::string &what) {
  int64_t size = 0;
  int fd = openRegularFile(path, size, error);
  if (fd < 0)
    return false;
  // Before allocating: a sparse file of 64 GiB must not be read.
  if (size > limit) {
    error = "cannot read '" + path + "': it has " + std::to_string(size) +
            " bytes, more than " + (what.empty() ? "expected" : what) +
            " can hold (at most " + std::to_string(limit) + ")";
    close(fd);
    return false;
  }
  bytes.assign(static_cast<size_t>(size), '\0');
  bool ok = readFully(fd, path, 0, bytes.data(), size, error);
  close(fd);
  return ok;
}

int64_t pp::rt::train::availableMemoryBytes() {
  int64_t available = -1;
  auto lower = [&](int64_t bytes) {
    if (bytes >= 0 && (available < 0 || bytes < available))
      available = bytes;
  };
  if (FILE *file = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kib;
    while (std::fgets(line, sizeof line, file))
      if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
        lower(static_cast<int64_t>(kib) * 1024);
    std::fclose(file);
  }
  // A container's limit (cgroup v2), which /proc/meminfo does not show.
  auto readNumber = [](const char *path, int64_t &value) {
    FILE *file = std::fopen(path, "r");
    long long n = 0;
    bool ok = file && std::fscanf(file, "%lld", &n) == 1;
    if (file)
      std::fclose(file);
    value = n;
    return ok;
  };
  int64_t max = 0, current = 0;
  if (readNumber("/sys/fs/cgroup/memory.max", max) &&
      readNumber("/sys/fs/cgroup/memory.current", current))
    lower(std::max<int64_t>(max - current, 0));
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    lower(static_cast<int64_t>(limit.rlim_cur));
  return available;
}

std::string pp::rt::train::byteSize(int64_t bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, unit ? "%.1f %s" : "%.0f %s", value,
                units[unit]);
  return text;
}

/// `bytes` written to the open `file` and closed; errno names the first
/// failure.
static bool writeAndClose(FILE *file, const std::string &bytes) {
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  ok = std::fflush(file) == 0 && ok;
  return std::fclose(file) == 0 && ok;
}

bool pp::rt::train::writeWholeFile(const std::string &path,
                                   const std::string &bytes,
                                   std::string &error) {
  // A device or pipe (/dev/stdout) is written as it is.
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    FILE *file = std::fopen(path.c_str(), "wb");
    if (!file || !writeAndClose(file, bytes)) {
      error = withErrno("cannot write '" + path + "'");
      return false;
    }
    return true;
  }
  // A file is written beside `path` and renamed over it: never through a
  // link (an emitted program's model.onnx is a hard link to the user's model,
  // which --save-onnx model.onnx must not overwrite), and never half written.
  std::string tmp = path + ".XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) {
    error = withErrno("cannot write '" + path + "'");
    return false;
  }
  mode_t mask = umask(0);
  umask(mask);
  bool ok = fchmod(fd, 0666 & ~mask) == 0;
  FILE *file = fdopen(fd, "wb");
  if (!file)
    close(fd);
  ok = ok && file && writeAndClose(file, bytes);
  if (!ok) {
    error = withErrno("cannot write '" + path + "'");
    unlink(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = withErrno("cannot rename '" + tmp + "' to '" + path + "'");
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool pp::rt::train::checkWritablePath(const std::string &path,
                                      std::string &error) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      error = "cannot write '" + path + "': it is a directory";
      return false;
    }
    if (access(path.c_str(), W_OK) != 0) {
      error = withErrno("cannot write '" + path + "'");
      return false;
    }
    return true;
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  if (stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    error = "cannot write '" + path + "': its directory '" + dir +
            "' does not exist";
    return false;
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    error = withErrno("cannot write '" + path + "': directory '" + dir + "'");
    return false;
  }
  return true;
}
