//===- Checkpoint.cpp - Checkpoint files of the training driver -----------===//
//
// rank<r>.ckpt: the magic "PPCKPT01", then little-endian fields (strings as
// a u64 length and bytes): model name, stages, devices, globals, rank,
// seed, completed steps, stage count, and per stage its index, a reserved
// u64 (0; it was a Dropout seed counter, read and ignored), global count
// and per global its id, name, dtype, rank, dims, byte count and bytes.
//
// MANIFEST: text lines "pp-checkpoint 2", "model <name>", "identity
// <Job::identity>", "steps <k>", "devices <n>", "stages <n>", "seed <s>",
// "lr-schedule <LRSchedule::str()>", "lr <x | compiled>", with
// --clip-grad-norm "clip-grad-norm <x>", with --data
// "data <Dataset::orderKey()>", one
// "file rank<r>.ckpt <bytes> <crc32c hex>" per rank, and last
// "crc32c <hex>" of every line before it. latest: "step-<k>\n".
//
// A rank's state goes in as it is between steps: the backend copies of its
// stages' globals. Dropout masks and learning rates need nothing more: they
// follow from the seed, the schedule and the step (docs/cli.md), all in the
// manifest.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Job.h"
#include "Util.h"

#include "pp/Runtime/Checksum.h"
#include "pp/Runtime/Memory.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

constexpr char kMagic[8] = {'P', 'P', 'C', 'K', 'P', 'T', '0', '1'};

/// A --clip-grad-norm as notes print it (0: off).
std::string clipText(double clip) {
  char text[64] = "off";
  if (clip > 0)
    std::snprintf(text, sizeof(text), "%.17g", clip);
  return text;
}

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

/// PP_TEST_CRASH_AT (see Checkpoint.h): called before each file operation
/// of a checkpoint.
void crashPoint(int rank, const char *op, const std::string &path) {
  static const std::string spec = [] {
    const char *value = std::getenv("PP_TEST_CRASH_AT");
    return std::string(value ? value : "");
  }();
  if (spec.empty())
    return;
  static std::mutex mutex;
  static std::map<int, int64_t> counts;
  int64_t n;
  {
    std::lock_guard<std::mutex> lock(mutex);
    n = ++counts[rank];
  }
  std::string where = "checkpoint operation " + std::to_string(rank) + ":" +
                      std::to_string(n) + " " + op + " '" + path + "'";
  if (spec == "trace") {
    std::fprintf(stderr, "%s\n", where.c_str());
    return;
  }
  if (spec == std::to_string(rank) + ":" + std::to_string(n)) {
    std::fprintf(stderr, "PP_TEST_CRASH_AT: killed at %s\n", where.c_str());
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
}

bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool syncDirectory(int rank, const std::string &dir, std::string &error) {
  crashPoint(rank, "fsync", dir);
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  bool ok = fd >= 0 && fsync(fd) == 0;
  if (!ok)
    error = withErrno("cannot sync directory '" + dir + "'");
  if (fd >= 0)
    close(fd);
  return ok;
}

/// Writes `bytes` to `dir`/`name` through `name`.tmp (in two halves, so a
/// crash can tear it), fsynced, renamed over `name`, `dir` fsynced.
bool writeDurably(int rank, const std::string &dir, const std::string &name,
                  const std::string &bytes, std::string &error) {
  std::string path = dir + "/" + name, tmp = path + ".tmp";
  crashPoint(rank, "open", tmp);
  // A fresh file, never through a link planted as `tmp` (O_EXCL fails on
  // any existing name, a link too): one left by a crash is removed first
  // (unlink removes a link, not what it names).
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(tmp.c_str(), flags, 0666);
  if (fd < 0 && errno == EEXIST && unlink(tmp.c_str()) == 0)
    fd = open(tmp.c_str(), flags, 0666);
  if (fd < 0) {
    error = withErrno("cannot write '" + tmp + "'");
    return false;
  }
  size_t half = bytes.size() / 2;
  crashPoint(rank, "write", tmp);
  bool ok = writeAll(fd, bytes.data(), half);
  crashPoint(rank, "write", tmp);
  ok = ok && writeAll(fd, bytes.data() + half, bytes.size() - half);
  crashPoint(rank, "fsync", tmp);
  ok = ok && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok) {
    error = withErrno("cannot write '" + tmp + "'");
    unlink(tmp.c_str());
    return false;
  }
  crashPoint(rank, "rename", path);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = withErrno("cannot rename '" + tmp + "' to '" + path + "'");
    return false;
  }
  return syncDirectory(rank, dir, error);
}

uint32_t crcOf(const std::string &bytes) {
  return crc32c(0, bytes.data(), bytes.size());
}

const char kManifest[] = "MANIFEST";
/// "step-<k>\n", k at most 20 digits.
constexpr int64_t kMaxLatestBytes = 32;

/// Refuses `path` when it is a symbolic link (or anything but a directory,
/// `isDirectory`, or a regular file): the checkpoint directory's files are
/// written, renamed and removed, never through a link planted there.
bool checkNotLink(const std::string &path, const char *what, std::string &error,
                  bool isDirectory = true) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT)
      return true;
    error = withErrno("cannot read '" + path + "'");
    return false;
  }
  if (S_ISLNK(info.st_mode))
    error = "'" + path + "' is a symbolic link, not " + what +
            ": a checkpoint directory must hold no links (remove it)";
  else if (isDirectory ? !S_ISDIR(info.st_mode) : !S_ISREG(info.st_mode))
    error = "'" + path + "' is not " + std::string(what) +
            (isDirectory ? " (not a directory)" : " (not a regular file)") +
            ": remove it";
  else
    return true;
  return false;
}

/// k of a directory entry named "step-<k>"; -1 for any other name.
int64_t stepOfName(const std::string &name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 23 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos)
    return -1;
  return std::atoll(name.c_str() + 5);
}

/// The steps of the step-<k> directories of `dir`, newest first.
bool listSteps(const std::string &dir, std::vector<int64_t> &steps,
               std::string &error) {
  DIR *d = opendir(dir.c_str());
  if (!d) {
    error = withErrno("cannot read directory '" + dir + "'");
    return false;
  }
  while (dirent *entry = readdir(d))
    if (int64_t k = stepOfName(entry->d_name); k >= 0)
      steps.push_back(k);
  closedir(d);
  std::sort(steps.rbegin(), steps.rend());
  return true;
}

/// Removes checkpoint directory `path`: its manifest first, so that a crash
/// midway leaves no directory that looks complete.
bool removeCheckpoint(const std::string &path, std::string &error) {
  // O_NOFOLLOW: a link planted as step-<k> must not have the files of the
  // directory it names removed; entries go by unlinkat in the directory
  // opened, so none is reached through a link swapped in meanwhile.
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return true;
  DIR *d = fd < 0 ? nullptr : fdopendir(fd);
  if (!d) {
    error = withErrno("cannot remove the old checkpoint '" + path + "'") +
            (errno == ELOOP || errno == ENOTDIR
                 ? " (not a directory: a link or a file planted there?)"
                 : "");
    if (fd >= 0)
      close(fd);
    return false;
  }
  std::vector<std::string> names;
  while (dirent *entry = readdir(d))
    if (std::strcmp(entry->d_name, ".") && std::strcmp(entry->d_name, ".."))
      names.push_back(entry->d_name);
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string &n) { return n == kManifest; });
  for (const std::string &name : names) {
    std::string file = path + "/" + name;
    crashPoint(0, "unlink", file);
    if (unlinkat(dirfd(d), name.c_str(), 0) != 0 && errno != ENOENT) {
      error = withErrno("cannot remove the old checkpoint file '" + file + "'");
      closedir(d);
      return false;
    }
  }
  closedir(d);
  crashPoint(0, "rmdir", path);
  if (rmdir(path.c_str()) != 0 && errno != ENOENT) {
    error = withErrno("cannot remove the old checkpoint '" + path + "'");
    return false;
  }
  return true;
}

std::string encodeManifest(const CheckpointManifest &m) {
  std::string text = "pp-checkpoint 2\n";
  text += "model " + m.modelName + "\n";
  text += "identity " + m.identity + "\n";
  text += "steps " + std::to_string(m.completedSteps) + "\n";
  text += "devices " + std::to_string(m.numDevices) + "\n";
  text += "stages " + std::to_string(m.numStages) + "\n";
  text += "seed " + std::to_string(m.seed) + "\n";
  if (m.waveClock >= 0)
    text += "wsp-clock " + std::to_string(m.waveClock) + "\n";
  if (m.lrRecorded) {
    text += "lr-schedule " + m.lrSchedule.value_or(LRSchedule{}).str() + "\n";
    char lr[64] = "compiled";
    if (m.lr)
      std::snprintf(lr, sizeof(lr), "%.17g", *m.lr);
    text += std::string("lr ") + lr + "\n";
  }
  if (m.clipGradNorm) {
    char clip[64];
    std::snprintf(clip, sizeof(clip), "%.17g", *m.clipGradNorm);
    text += std::string("clip-grad-norm ") + clip + "\n";
  }
  if (!m.dataOrder.empty())
    text += "data " + m.dataOrder + "\n";
  if (!m.bestMetric.empty()) {
    char best[64];
    std::snprintf(best, sizeof(best), "%.17g", m.bestValue);
    text += "best " + m.bestMetric + " " + best + " " +
            std::to_string(m.bestStep) + "\n";
  }
  for (const CheckpointFile &f : m.files)
    text += "file " + f.name + " " + std::to_string(f.size) + " " +
            hex32(f.crc) + "\n";
  return text + "crc32c " + hex32(crcOf(text)) + "\n";
}

} // namespace

bool pp::rt::train::parseManifest(const std::string &path,
                                  const std::string &text,
                                  CheckpointManifest &m, std::string &why) {
  size_t last =
      text.size() < 2 ? std::string::npos : text.rfind('\n', text.size() - 2);
  std::string body = text.substr(0, last + 1);
  if (last == std::string::npos || text.back() != '\n' ||
      text.compare(last + 1, std::string::npos,
                   "crc32c " + hex32(crcOf(body)) + "\n") != 0) {
    why = "'" + path + "' fails its CRC-32C check (torn or corrupt)";
    return false;
  }
  std::istringstream in(body);
  std::string line;
  bool versioned = false, hasSteps = false;
  while (std::getline(in, line)) {
    size_t space = line.find(' ');
    std::string key = line.substr(0, space);
    std::string value =
        space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "pp-checkpoint") {
      versioned = value == "2";
    } else if (key == "model") {
      m.modelName = value;
    } else if (key == "identity") {
      m.identity = value;
    } else if (key == "steps") {
      m.completedSteps = std::atoll(value.c_str());
      hasSteps = true;
    } else if (key == "devices") {
      m.numDevices = std::atoll(value.c_str());
    } else if (key == "stages") {
      m.numStages = std::atoll(value.c_str());
    } else if (key == "wsp-clock") {
      m.waveClock = std::atoll(value.c_str());
    } else if (key == "seed") {
      m.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "lr-schedule") {
      LRSchedule schedule;
      if (!LRSchedule::parse(value, schedule)) {
        why = "'" + path + "' names an unknown learning-rate schedule '" +
              value + "'";
        return false;
      }
      m.lrSchedule = schedule;
      m.lrRecorded = true;
    } else if (key == "lr") {
      char *end = nullptr;
      double lr = std::strtod(value.c_str(), &end);
      if (value != "compiled" && (value.empty() || *end || !(lr > 0))) {
        why = "'" + path + "' holds a bad learning rate '" + value + "'";
        return false;
      }
      if (value != "compiled")
        m.lr = lr;
    } else if (key == "clip-grad-norm") {
      char *end = nullptr;
      double clip = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !std::isfinite(clip) || !(clip > 0)) {
        why = "'" + path + "' holds a bad --clip-grad-norm '" + value + "'";
        return false;
      }
      m.clipGradNorm = clip;
    } else if (key == "data") {
      m.dataOrder = value;
    } else if (key == "best") {
      std::istringstream fields(value);
      std::string metric, number;
      long long at = -1;
      fields >> metric >> number >> at;
      char *end = nullptr;
      double best = std::strtod(number.c_str(), &end);
      if (metric.empty() || number.empty() || *end || !std::isfinite(best) ||
          at < 0) {
        why = "'" + path + "' holds a bad best evaluation '" + value + "'";
        return false;
      }
      m.bestMetric = metric;
      m.bestValue = best;
      m.bestStep = at;
    } else if (key == "file") {
      CheckpointFile &f = m.files.emplace_back();
      std::istringstream fields(value);
      std::string crc;
      fields >> f.name >> f.size >> crc;
      f.crc = static_cast<uint32_t>(std::strtoul(crc.c_str(), nullptr, 16));
    }
  }
  if (!versioned || !hasSteps) {
    why = "'" + path + "' is not a checkpoint manifest of this driver";
    return false;
  }
  return true;
}

namespace {

/// The most bytes a MANIFEST of `job` can have: its fixed lines, the
/// model's name and identity, one line per rank file (generously).
int64_t maxManifestBytes(const Job &job) {
  return 4096 +
         2 * static_cast<int64_t>(job.program.modelName.size() +
                                  job.identity.size()) +
         128 * static_cast<int64_t>(job.checkpointRanks());
}

/// The most bytes a rank<r>.ckpt of `job` can have: its header, and every
/// global of the program in each stage (a rank holds at most all).
int64_t maxRankFileBytes(const Job &job) {
  const ProgramInfo &p = job.program;
  int64_t perStage = 64;
  for (const GlobalInfo &g : p.globals)
    perStage += 64 + static_cast<int64_t>(g.name.size()) +
                8 * static_cast<int64_t>(g.shape.size()) +
                numelOf(g.shape) * dtypeSize(g.dtype);
  return 4096 + static_cast<int64_t>(p.modelName.size()) +
         job.numStages * perStage;
}

/// Reads and checks `path` (a MANIFEST), refusing unread one larger than a
/// manifest of `job` can be; `why` says what is wrong with it.
bool readManifest(const Job &job, const std::string &path,
                  CheckpointManifest &m, std::string &why) {
  std::string text;
  return readRegularFile(path, text, why, maxManifestBytes(job),
                         "a MANIFEST of this program") &&
         parseManifest(path, text, m, why);
}

/// Reads `path` and checks it against its manifest entry `file`; one of
/// another size is refused unread.
bool readCheckedFile(const std::string &path, const CheckpointFile &file,
                     std::string &bytes, std::string &why) {
  int64_t size = 0;
  int fd = openRegularFile(path, size, why);
  if (fd < 0)
    return false;
  close(fd);
  if (size != file.size) {
    why = "'" + path + "' has " + std::to_string(size) +
          " bytes, its manifest says " + std::to_string(file.size) + " (torn)";
    return false;
  }
  if (!readRegularFile(path, bytes, why, file.size, "its manifest lists"))
    return false;
  if (static_cast<int64_t>(bytes.size()) != file.size)
    why = "'" + path + "' has " + std::to_string(bytes.size()) +
          " bytes, its manifest says " + std::to_string(file.size) + " (torn)";
  else if (crcOf(bytes) != file.crc)
    why = "'" + path + "' fails its CRC-32C check (corrupt)";
  else
    return true;
  return false;
}

/// Whether `stepDir` holds a complete checkpoint of this job; `why` says
/// what is wrong with it.
bool verifyCheckpoint(const Job &job, const std::string &stepDir,
                      CheckpointManifest &m, std::string &why) {
  if (!readManifest(job, stepDir + "/" + kManifest, m, why))
    return false;
  if (m.identity != job.identity || m.modelName != job.program.modelName) {
    why = "written by another program ('" + m.modelName + "', identity " +
          m.identity + "; this is '" + job.program.modelName + "', identity " +
          job.identity + ")";
    return false;
  }
  int numFiles = job.checkpointRanks();
  if (m.numDevices != job.numDevices ||
      static_cast<int>(m.files.size()) != numFiles) {
    why = "its manifest lists " + std::to_string(m.files.size()) +
          " rank files, the program runs on " + std::to_string(job.numDevices) +
          " devices" +
          (job.waveSynchronous()
               ? " x " + std::to_string(job.replicas) + " virtual workers"
               : "");
    return false;
  }
  if (job.waveSynchronous() != (m.waveClock >= 0)) {
    why = job.waveSynchronous() ? "it holds no Wave Synchronous Parallel clock"
                                : "it holds a Wave Synchronous Parallel clock";
    return false;
  }
  std::string bytes;
  for (int r = 0; r < numFiles; ++r) {
    if (m.files[r].name != rankCheckpointName(r)) {
      why = "its manifest lists '" + m.files[r].name + "' for rank " +
            std::to_string(r);
      return false;
    }
    if (m.files[r].size < 0 || m.files[r].size > maxRankFileBytes(job)) {
      why = "its manifest lists " + std::to_string(m.files[r].size) +
            " bytes for '" + m.files[r].name +
            "', more than a checkpoint of this program can hold (" +
            std::to_string(maxRankFileBytes(job)) + ")";
      return false;
    }
    if (!readCheckedFile(stepDir + "/" + m.files[r].name, m.files[r], bytes,
                         why))
      return false;
  }
  return true;
}

std::string encodeRankCheckpoint(const RankCheckpoint &ckpt) {
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
    w.u64(0); // reserved
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
  return w.bytes;
}

} // namespace

bool pp::rt::train::decodeRankCheckpoint(const std::string &path,
                                         const std::string &bytes,
                                         RankCheckpoint &ckpt,
                                         std::string &error) {
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
    (void)r.u64(); // reserved
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

bool pp::rt::train::checkCheckpointDirectory(const std::string &dir,
                                             std::string &error) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *entry = readdir(d))
      names.push_back(entry->d_name);
    closedir(d);
  }
  for (const std::string &name : names) {
    std::string path = dir + "/" + name;
    if (stepOfName(name) >= 0 &&
        !checkNotLink(path, "a checkpoint directory", error))
      return false;
    if ((name == "latest" || name == "latest.tmp") &&
        !checkNotLink(path, "a 'latest' file", error, /*isDirectory=*/false))
      return false;
  }
  return true;
}

std::string pp::rt::train::rankCheckpointName(int64_t rank) {
  return "rank" + std::to_string(rank) + ".ckpt";
}

std::string pp::rt::train::checkpointStepDir(const std::string &dir,
                                             int64_t step) {
  return dir + "/step-" + std::to_string(step);
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

//===----------------------------------------------------------------------===//
// Writing and choosing checkpoints
//===----------------------------------------------------------------------===//

bool pp::rt::train::writeRankCheckpoint(const std::string &stepDir,
                                        const RankCheckpoint &ckpt,
                                        CheckpointFile &file,
                                        std::string &error) {
  int rank = static_cast<int>(ckpt.rank);
  std::string bytes = encodeRankCheckpoint(ckpt);
  file = {rankCheckpointName(rank), static_cast<int64_t>(bytes.size()),
          crcOf(bytes)};
  crashPoint(rank, "mkdir", stepDir);
  if (!makeDirectories(stepDir, error) ||
      !checkNotLink(stepDir, "a checkpoint directory", error))
    return false;
  // A manifest left in `stepDir` by an interrupted run describes other files.
  std::string stale = stepDir + "/" + kManifest;
  if (rank == 0 && unlink(stale.c_str()) != 0 && errno != ENOENT) {
    error = withErrno("cannot remove '" + stale + "'");
    return false;
  }
  return writeDurably(rank, stepDir, file.name, bytes, error);
}

bool pp::rt::train::commitCheckpoint(const std::string &dir,
                                     const CheckpointManifest &manifest,
                                     int64_t keep, std::string &error) {
  int64_t step = manifest.completedSteps;
  std::string stepDir = checkpointStepDir(dir, step);
  std::vector<int64_t> steps;
  if (!writeDurably(0, stepDir, kManifest, encodeManifest(manifest), error) ||
      !writeDurably(0, dir, "latest", "step-" + std::to_string(step) + "\n",
                    error) ||
      !listSteps(dir, steps, error))
    return false;
  int64_t kept = 0;
  for (int64_t k : steps) {
    if (k <= step && kept < keep) {
      ++kept;
      continue;
    }
    if (!removeCheckpoint(checkpointStepDir(dir, k), error))
      return false;
  }
  return true;
}

bool pp::rt::train::selectResumeCheckpoint(Job &job, std::string &error) {
  const std::string &dir = job.options.resumeDir;
  bool printer = environmentRank() == 0;
  auto skip = [&](const std::string &message) {
    if (printer)
      std::fprintf(stderr, "warning: --resume: %s\n", message.c_str());
  };
  // DIR itself, when it is one checkpoint; else its step-<k>, newest first.
  std::vector<std::string> candidates;
  if (fileExists(dir + "/" + kManifest)) {
    candidates.push_back(dir);
  } else {
    std::vector<int64_t> steps;
    if (!listSteps(dir, steps, error)) {
      error = "--resume: " + error;
      return false;
    }
    std::string latest = dir + "/latest", text, why;
    int64_t committed = -1;
    if (steps.empty()) {
      // Nothing to choose from (the error below).
    } else if (!readRegularFile(latest, text, why, kMaxLatestBytes,
                                "a 'latest' file")) {
      skip("no committed checkpoint (" + why + "): trying every step-<k>");
    } else if ((committed = stepOfName(text.substr(0, text.find('\n')))) < 0) {
      skip("'" + latest + "' is corrupt: trying every step-<k>");
    }
    for (int64_t k : steps) {
      std::string stepDir = checkpointStepDir(dir, k);
      if (committed >= 0 && k > committed)
        skip("skipping checkpoint '" + stepDir + "': not committed ('" +
             latest + "' names step-" + std::to_string(committed) + ")");
      else
        candidates.push_back(stepDir);
    }
  }
  for (const std::string &stepDir : candidates) {
    CheckpointManifest manifest;
    std::string why;
    if (!verifyCheckpoint(job, stepDir, manifest, why)) {
      skip("skipping checkpoint '" + stepDir + "': " + why);
      continue;
    }
    const TrainOptions &options = job.options;
    if (options.seedGiven && options.seed != manifest.seed) {
      error = "--resume: --seed " + std::to_string(options.seed) +
              " differs from the checkpoint's seed " +
              std::to_string(manifest.seed) + " (omit --seed to keep it)";
      return false;
    }
    // The command line may change the schedule (a run continued with
    // another), which the rates then follow from the checkpoint's step on.
    if (printer && manifest.lrRecorded) {
      LRSchedule recorded = manifest.lrSchedule.value_or(LRSchedule{});
      if (options.lrSchedule && *options.lrSchedule != recorded)
        std::fprintf(stderr,
                     "note: --resume: --lr-schedule '%s' replaces the "
                     "checkpoint's '%s'\n",
                     options.lrSchedule->str().c_str(), recorded.str().c_str());
      if (options.lr && options.lr != manifest.lr)
        std::fprintf(stderr,
                     "note: --resume: --lr %.17g replaces the checkpoint's "
                     "%.17g (0: the compiled rate)\n",
                     *options.lr, manifest.lr.value_or(0.0));
    }
    // Clipping is a setting of the run, kept like the schedule.
    double recordedClip = manifest.clipGradNorm.value_or(0);
    if (printer && options.clipGradNorm &&
        *options.clipGradNorm != recordedClip)
      std::fprintf(stderr,
                   "note: --resume: --clip-grad-norm %s replaces the "
                   "checkpoint's %s\n",
                   clipText(*options.clipGradNorm).c_str(),
                   clipText(recordedClip).c_str());
    if (printer) {
      std::printf("resuming from checkpoint '%s' (step %lld)\n",
                  stepDir.c_str(),
                  static_cast<long long>(manifest.completedSteps));
      std::fflush(stdout);
    }
    job.resume = std::move(manifest);
    job.resumeDir = stepDir;
    return true;
  }
  error = "--resume: no complete checkpoint in '" + dir + "'" +
          (candidates.empty() ? " (no step-<k> directory)"
                              : " (each one is skipped above)");
  return false;
}

//===----------------------------------------------------------------------===//
// A rank's training state in a checkpoint
//===----------------------------------------------------------------------===//

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
                                          std::set<int64_t> *restored,
                                          std::string &error) {
  const ProgramInfo &p = job.program;
  const CheckpointFile &file = job.resume.files[rank];
  std::string path = job.resumeDir + "/" + file.name, bytes;
  RankCheckpoint ckpt;
  if (!readCheckedFile(path, file, bytes, error) ||
      !decodeRankCheckpoint(path, bytes, ckpt, error)) {
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
                ", its manifest at step " +
                std::to_string(job.resume.completedSteps) +
                " (an interrupted checkpoint?)");
  if (!restored && ckpt.stages.size() != stages.size())
    return fail("holds " + std::to_string(ckpt.stages.size()) +
                " stages, this rank runs " + std::to_string(stages.size()));
  for (const CheckpointStage &saved : ckpt.stages) {
    auto it = stages.find(saved.stage);
    if (it == stages.end() && restored)
      continue;
    if (it == stages.end())
      return fail("holds stage " + std::to_string(saved.stage) +
                  ", which this rank does not run");
    if (restored)
      restored->insert(saved.stage);
    StageState &state = *it->second;
    if (saved.globals.size() != state.globals.size())
      return fail("stage " + std::to_string(saved.stage) + " holds " +
                  std::to_string(saved.globals.size()) + " globals, expected " +
                  std::to_string(state.globals.size()));
    for (const CheckpointGlobal &g : saved.globals) {
      // The id indexes the program's globals only once it is in range (an
      // id of 2^32 + k must not find global k).
      bool known = g.id >= 0 && g.id < static_cast<int64_t>(p.globals.size());
      auto found = known ? state.globals.find(static_cast<int>(g.id))
                         : state.globals.end();
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
  }
  return true;
}
