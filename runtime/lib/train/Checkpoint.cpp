//===- Checkpoint.cpp - Checkpoint files of the training driver -----------===//
//
// rank<r>.ckpt: the magic "PPCKPT01", then little-endian fields (strings as
// a u64 length and bytes): model name, stages, devices, globals, rank,
// seed, completed steps, stage count, and per stage its index, seed
// counter, global count and per global its id, name, dtype, rank, dims,
// byte count and bytes.
//
// A rank's state goes in as it is between steps: the backend copies of its
// stages' globals and their seed counters (the Dropout masks continue).
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Job.h"

#include "pp/Runtime/Memory.h"

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

//===----------------------------------------------------------------------===//
// A rank's training state in a checkpoint
//===----------------------------------------------------------------------===//

bool pp::rt::train::readResumeMeta(const Job &job, CheckpointMeta &meta,
                                   std::string &error) {
  const ProgramInfo &p = job.program;
  const TrainOptions &options = job.options;
  if (!readCheckpointMeta(options.resumeDir, meta, error)) {
    error = "--resume: " + error;
    return false;
  }
  auto mismatch = [&](const std::string &what, const std::string &theirs,
                      const std::string &ours) {
    error = "--resume: the checkpoint in '" + options.resumeDir +
            "' was written by a program with " + what + " " + theirs +
            ", this one has " + ours;
    return false;
  };
  if (meta.modelName != p.modelName)
    return mismatch("model", "'" + meta.modelName + "'",
                    "'" + p.modelName + "'");
  if (meta.numDevices != job.numDevices)
    return mismatch("devices", std::to_string(meta.numDevices),
                    std::to_string(job.numDevices));
  if (meta.numStages != job.numStages)
    return mismatch("stages", std::to_string(meta.numStages),
                    std::to_string(job.numStages));
  if (options.seedGiven && options.seed != meta.seed) {
    error = "--resume: --seed " + std::to_string(options.seed) +
            " differs from the checkpoint's seed " + std::to_string(meta.seed) +
            " (omit --seed to keep it)";
    return false;
  }
  return true;
}

RankCheckpoint pp::rt::train::captureRankCheckpoint(const Job &job, int rank,
                                                    const StageMap &stages,
                                                    int64_t completedSteps) {
  const ProgramInfo &p = job.program;
  RankCheckpoint ckpt;
  ckpt.modelName = p.modelName;
  ckpt.numStages = job.numStages;
  ckpt.numDevices = job.numDevices;
  ckpt.numGlobals = static_cast<int64_t>(p.globals.size());
  ckpt.rank = rank;
  ckpt.seed = job.seed;
  ckpt.completedSteps = completedSteps;
  for (auto &[s, state] : stages) {
    CheckpointStage &saved = ckpt.stages.emplace_back();
    saved.stage = s;
    saved.seedCounter = state->seedCounter;
    for (auto &[id, t] : state->globals) {
      CheckpointGlobal &g = saved.globals.emplace_back();
      g.id = id;
      g.name = p.globals[id].name;
      g.value.dtype = t.dtype;
      g.value.shape = t.shape;
      g.value.bytes.resize(static_cast<size_t>(t.bytes()));
      copyFromBuffer(g.value.bytes.data(), t.data, t.bytes());
    }
  }
  return ckpt;
}

bool pp::rt::train::restoreRankCheckpoint(const Job &job, int rank,
                                          StageMap &stages,
                                          std::string &error) {
  const ProgramInfo &p = job.program;
  std::string path = rankCheckpointPath(job.options.resumeDir, rank);
  RankCheckpoint ckpt;
  if (!readRankCheckpoint(path, ckpt, error)) {
    error = "--resume: " + error;
    return false;
  }
  auto fail = [&](const std::string &message) {
    error = "--resume: '" + path + "': " + message;
    return false;
  };
  if (ckpt.modelName != p.modelName || ckpt.numStages != job.numStages ||
      ckpt.numDevices != job.numDevices ||
      ckpt.numGlobals != static_cast<int64_t>(p.globals.size()))
    return fail("written by another program ('" + ckpt.modelName + "', " +
                std::to_string(ckpt.numStages) + " stages, " +
                std::to_string(ckpt.numDevices) + " devices, " +
                std::to_string(ckpt.numGlobals) + " globals; this is '" +
                p.modelName + "', " + std::to_string(job.numStages) +
                " stages, " + std::to_string(job.numDevices) + " devices, " +
                std::to_string(p.globals.size()) + " globals)");
  if (ckpt.rank != rank)
    return fail("holds rank " + std::to_string(ckpt.rank));
  if (ckpt.completedSteps != job.resume.completedSteps)
    return fail("is at step " + std::to_string(ckpt.completedSteps) +
                ", the checkpoint's meta at step " +
                std::to_string(job.resume.completedSteps) +
                " (an interrupted checkpoint?)");
  if (ckpt.stages.size() != stages.size())
    return fail("holds " + std::to_string(ckpt.stages.size()) +
                " stages, this rank runs " + std::to_string(stages.size()));
  for (const CheckpointStage &saved : ckpt.stages) {
    auto it = stages.find(saved.stage);
    if (it == stages.end())
      return fail("holds stage " + std::to_string(saved.stage) +
                  ", which this rank does not run");
    StageState &state = *it->second;
    if (saved.globals.size() != state.globals.size())
      return fail("stage " + std::to_string(saved.stage) + " holds " +
                  std::to_string(saved.globals.size()) + " globals, expected " +
                  std::to_string(state.globals.size()));
    for (const CheckpointGlobal &g : saved.globals) {
      auto found = state.globals.find(static_cast<int>(g.id));
      if (found == state.globals.end() || p.globals[g.id].name != g.name)
        return fail("stage " + std::to_string(saved.stage) + " holds global '" +
                    g.name + "', which this program's stage does not have");
      Tensor &t = found->second;
      if (g.value.dtype != t.dtype || g.value.shape != t.shape ||
          static_cast<int64_t>(g.value.bytes.size()) != t.bytes())
        return fail("global '" + g.name + "' is " +
                    describe(g.value.dtype, g.value.shape) +
                    ", the program's is " + describe(t.dtype, t.shape));
      copyToBuffer(t.data, g.value.bytes.data(), t.bytes());
    }
    state.seedCounter = saved.seedCounter;
  }
  return true;
}
