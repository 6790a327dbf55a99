//===- Util.cpp - Small helpers of the training driver --------------------===//

#include "Util.h"

#include <chrono>
#include <sys/stat.h>

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
