//===- Util.cpp - Small helpers of the training driver --------------------===//

#include "Util.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
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

bool pp::rt::train::readRegularFile(const std::string &path, std::string &bytes,
                                    std::string &error) {
  int64_t size = 0;
  int fd = openRegularFile(path, size, error);
  if (fd < 0)
    return false;
  bytes.assign(static_cast<size_t>(size), '\0');
  int64_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, bytes.data() + done, size - done, done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = n < 0 ? withErrno("cannot read '" + path + "'")
                    : "cannot read '" + path + "': it shrank while read";
      close(fd);
      return false;
    }
    done += n;
  }
  close(fd);
  return true;
}

bool pp::rt::train::writeWholeFile(const std::string &path,
                                   const std::string &bytes,
                                   std::string &error) {
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file) {
    error = withErrno("cannot write '" + path + "'");
    return false;
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  ok = std::fflush(file) == 0 && ok;
  ok = std::fclose(file) == 0 && ok; // errno: the first failure's, or close's
  if (!ok)
    error = withErrno("cannot write '" + path + "'");
  return ok;
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
