//===- Checkpoint.cpp - Checkpoint files of the training driver -----------===//
//
// rank<r>.ckpt: the magic "PPCKPT01", then little-endian fields (strings as
// a u64 length and bytes): model name, stages, devices, globals, rank,
// seed, completed steps, stage count, and per stage its index, seed
// counter, global count and per global its id, name, dtype, rank, dims,
// byte count and bytes.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

constexpr char kMagic[8] = {'P', 'P', 'C', 'K', 'P', 'T', '0', '1'};

/// Appends fixed-size fields and strings to a byte string.
struct Writer {
  std::string bytes;
  void raw(const void *data, size_t size) {
    bytes.append(static_cast<const char *>(data), size);
  }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void str(const std::string &s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
};

/// Reads what Writer wrote; `ok` turns false on a short file.
struct Reader {
  const std::string &bytes;
  size_t pos = 0;
  bool ok = true;
  bool raw(void *data, size_t size) {
    if (!ok || bytes.size() - pos < size)
      return ok = false;
    std::memcpy(data, bytes.data() + pos, size);
    pos += size;
    return true;
  }
  uint64_t u64() {
    uint64_t v = 0;
    raw(&v, 8);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    raw(&v, 8);
    return v;
  }
  std::string str() {
    uint64_t size = u64();
    if (!ok || bytes.size() - pos < size) {
      ok = false;
      return {};
    }
    std::string s = bytes.substr(pos, size);
    pos += size;
    return s;
  }
};

/// Writes `bytes` to `path` through `path.tmp`, flushed to disk, then
/// renamed over `path`.
bool writeAtomically(const std::string &path, const std::string &bytes,
                     std::string &error) {
  std::string tmp = path + ".tmp";
  FILE *file = std::fopen(tmp.c_str(), "wb");
  if (!file) {
    error = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  ok = std::fflush(file) == 0 && ok;
  ok = fsync(fileno(file)) == 0 && ok;
  ok = std::fclose(file) == 0 && ok;
  if (!ok) {
    error = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename '" + tmp + "' to '" + path +
            "': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool readWhole(const std::string &path, std::string &bytes,
               std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  bytes = text.str();
  return true;
}

} // namespace

std::string pp::rt::train::rankCheckpointPath(const std::string &dir,
                                              int rank) {
  return dir + "/rank" + std::to_string(rank) + ".ckpt";
}

bool pp::rt::train::makeDirectories(const std::string &path,
                                    std::string &error) {
  std::string prefix;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    prefix = path.substr(0, slash);
    pos = slash == std::string::npos ? path.size() + 1 : slash + 1;
    if (prefix.empty())
      continue;
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      error =
          "cannot create directory '" + prefix + "': " + std::strerror(errno);
      return false;
    }
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    error = "'" + path + "' is not a directory";
    return false;
  }
  return true;
}

bool pp::rt::train::writeRankCheckpoint(const std::string &dir,
                                        const RankCheckpoint &ckpt,
                                        std::string &error) {
  Writer w;
  w.raw(kMagic, sizeof(kMagic));
  w.str(ckpt.modelName);
  w.i64(ckpt.numStages);
  w.i64(ckpt.numDevices);
  w.i64(ckpt.numGlobals);
  w.i64(ckpt.rank);
  w.u64(ckpt.seed);
  w.i64(ckpt.completedSteps);
  w.u64(ckpt.stages.size());
  for (const CheckpointStage &stage : ckpt.stages) {
    w.i64(stage.stage);
    w.u64(stage.seedCounter);
    w.u64(stage.globals.size());
    for (const CheckpointGlobal &global : stage.globals) {
      w.i64(global.id);
      w.str(global.name);
      w.i64(static_cast<int64_t>(global.value.dtype));
      w.u64(global.value.shape.size());
      for (int64_t d : global.value.shape)
        w.i64(d);
      w.u64(global.value.bytes.size());
      w.raw(global.value.bytes.data(), global.value.bytes.size());
    }
  }
  return writeAtomically(rankCheckpointPath(dir, static_cast<int>(ckpt.rank)),
                         w.bytes, error);
}

bool pp::rt::train::readRankCheckpoint(const std::string &path,
                                       RankCheckpoint &ckpt,
                                       std::string &error) {
  std::string bytes;
  if (!readWhole(path, bytes, error))
    return false;
  if (bytes.size() < sizeof(kMagic) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    error = "'" + path + "' is not a checkpoint of this driver";
    return false;
  }
  Reader r{bytes, sizeof(kMagic)};
  ckpt.modelName = r.str();
  ckpt.numStages = r.i64();
  ckpt.numDevices = r.i64();
  ckpt.numGlobals = r.i64();
  ckpt.rank = r.i64();
  ckpt.seed = r.u64();
  ckpt.completedSteps = r.i64();
  uint64_t numStages = r.u64();
  ckpt.stages.clear();
  for (uint64_t s = 0; r.ok && s < numStages; ++s) {
    CheckpointStage &stage = ckpt.stages.emplace_back();
    stage.stage = r.i64();
    stage.seedCounter = r.u64();
    uint64_t numGlobals = r.u64();
    for (uint64_t g = 0; r.ok && g < numGlobals; ++g) {
      CheckpointGlobal &global = stage.globals.emplace_back();
      global.id = r.i64();
      global.name = r.str();
      global.value.dtype = static_cast<DType>(r.i64());
      uint64_t rank = r.u64();
      for (uint64_t d = 0; r.ok && d < rank && d < 64; ++d)
        global.value.shape.push_back(r.i64());
      uint64_t size = r.u64();
      if (!r.ok || bytes.size() - r.pos < size) {
        r.ok = false;
        break;
      }
      global.value.bytes.assign(bytes.begin() + r.pos,
                                bytes.begin() + r.pos + size);
      r.pos += size;
    }
  }
  if (!r.ok || r.pos != bytes.size()) {
    error = "'" + path + "' is truncated or corrupt";
    return false;
  }
  return true;
}

bool pp::rt::train::writeCheckpointMeta(const std::string &dir,
                                        const CheckpointMeta &meta,
                                        std::string &error) {
  std::string text = "pp-checkpoint 1\n";
  text += "model " + meta.modelName + "\n";
  text += "steps " + std::to_string(meta.completedSteps) + "\n";
  text += "devices " + std::to_string(meta.numDevices) + "\n";
  text += "stages " + std::to_string(meta.numStages) + "\n";
  text += "seed " + std::to_string(meta.seed) + "\n";
  return writeAtomically(dir + "/meta", text, error);
}

bool pp::rt::train::readCheckpointMeta(const std::string &dir,
                                       CheckpointMeta &meta,
                                       std::string &error) {
  std::string path = dir + "/meta", text;
  if (!readWhole(path, text, error)) {
    error += " (no complete checkpoint in '" + dir + "')";
    return false;
  }
  std::istringstream in(text);
  std::string line;
  bool versioned = false, hasSteps = false;
  while (std::getline(in, line)) {
    size_t space = line.find(' ');
    std::string key = line.substr(0, space);
    std::string value =
        space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "pp-checkpoint")
      versioned = value == "1";
    else if (key == "model")
      meta.modelName = value;
    else if (key == "steps")
      meta.completedSteps = std::atoll(value.c_str()), hasSteps = true;
    else if (key == "devices")
      meta.numDevices = std::atoll(value.c_str());
    else if (key == "stages")
      meta.numStages = std::atoll(value.c_str());
    else if (key == "seed")
      meta.seed = std::strtoull(value.c_str(), nullptr, 10);
  }
  if (!versioned || !hasSteps) {
    error = "'" + path + "' is not a checkpoint description";
    return false;
  }
  return true;
}
