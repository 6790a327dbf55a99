//===- Trainer.cpp - The training driver of generated programs ------------===//
//
// trainMain (Program.h): one rank per device, either threads of this process
// (--local, in-process communicator) or processes under mpirun (MPI, or
// NCCL in the CUDA build). Each rank runs its device's actions in order,
// every step, on one StageContext per stage it holds. The semantics mirror
// the reference interpreter's pipeline mode (lib/Interpreter/
// PipelineRunner.cpp): inputs are sliced along dim 0 into micro-batches,
// outputs combined by mean / sum, stashes keyed by (stage, slot,
// micro-batch) and dropped when unstashed, gradient sums started by a copy
// of the first value, one copy of the globals per stage, and Dropout seeds
// drawn per stage from (seed + stage, counter).
//
// Memory goes through Memory.h and kernels through Kernels.h, so this one
// source builds for the CPU and the CUDA backend; only the communicator
// that mpirun gets differs (createWorldCommunicator).
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "HostTensor.h"
#include "Options.h"
#include "SaveONNX.h"

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Half.h"
#include "pp/Runtime/Memory.h"
#include "pp/Runtime/Program.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

StageContext::~StageContext() = default;

void StageContext::fail(const char *op, const std::string &message) {
  throw StageError(op, message);
}

namespace {

/// The tag of the driver's own messages (gathers of the trained globals);
/// stage messages use the tags below it.
constexpr int kDriverTag = 32767;

double nowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The rank mpirun gives this process, before MPI starts; 0 otherwise.
int environmentRank() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 0;
}

bool launchedByMPI() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
}

/// The node-local rank (which GPU a rank of a multi-GPU node uses).
int localRank(int rank) {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return rank;
}

/// The communicator of a job launched by mpirun: MPI (through host copies
/// on the CUDA backend), else NCCL.
std::unique_ptr<Communicator> createWorldCommunicator(int *argc, char ***argv,
                                                      std::string &error) {
#if defined(PP_TRAIN_HAVE_MPI)
  std::unique_ptr<Communicator> comm = createMPICommunicator(argc, argv);
  // MPI moves host memory; device tensors go through host copies.
  if (comm && std::string(backendName()) != "cpu")
    return stageThroughHost(std::move(comm));
  return comm;
#elif defined(PP_TRAIN_HAVE_NCCL)
  std::unique_ptr<Communicator> comm = createNCCLCommunicator(argc, argv);
  if (!comm)
    error = "cannot start NCCL (see the message above)";
  return comm;
#else
  (void)argc, (void)argv;
  error = "launched by mpirun, but this executable was built without MPI: "
          "run it with --local";
  return nullptr;
#endif
}

std::string executableDir(const char *argv0) {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  std::string path = n > 0 ? std::string(buffer, static_cast<size_t>(n))
                           : std::string(argv0 ? argv0 : "");
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string resolveNextTo(const std::string &dir, const std::string &path) {
  if (path.empty() || path[0] == '/')
    return path;
  return dir + "/" + path;
}

bool fileExists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

/// A file name made of a global's name ([A-Za-z0-9_.-] kept), as
/// pp-interpret --dump-globals writes them.
std::string fileStem(const std::string &name) {
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

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

double elementAsDouble(DType dtype, const void *data) {
  switch (dtype) {
  case DType::F32:
    return *static_cast<const float *>(data);
  case DType::F64:
    return *static_cast<const double *>(data);
  case DType::F16:
    return halfToFloat(*static_cast<const uint16_t *>(data));
  case DType::BF16:
    return bfloat16ToFloat(*static_cast<const uint16_t *>(data));
  default:
    return 0;
  }
}

/// The pipeline-runner combination of a scalar: summed in double, divided
/// for "mean", then rounded to the output's dtype.
double roundTo(DType dtype, double value) {
  switch (dtype) {
  case DType::F32:
    return static_cast<float>(value);
  case DType::F16:
    return halfToFloat(doubleToHalf(value));
  case DType::BF16:
    return bfloat16ToFloat(doubleToBFloat16(value));
  default:
    return value;
  }
}

/// pp-interpret's randomTensor: uniform floats in [-1, 1), integers in
/// [0, bound), from one generator over the inputs in order.
void fillRandom(HostTensor &t, int64_t bound, std::mt19937_64 &rng) {
  auto unit = [&] { return double(rng() >> 11) * 0x1.0p-53; };
  if (bound <= 0)
    bound = 10;
  t.bytes.assign(static_cast<size_t>(t.numel() * dtypeSize(t.dtype)), 0);
  char *data = t.bytes.data();
  for (int64_t i = 0, e = t.numel(); i < e; ++i) {
    switch (t.dtype) {
    case DType::F32:
      reinterpret_cast<float *>(data)[i] = static_cast<float>(2 * unit() - 1);
      break;
    case DType::F64:
      reinterpret_cast<double *>(data)[i] = 2 * unit() - 1;
      break;
    case DType::F16:
      reinterpret_cast<uint16_t *>(data)[i] = doubleToHalf(2 * unit() - 1);
      break;
    case DType::BF16:
      reinterpret_cast<uint16_t *>(data)[i] = doubleToBFloat16(2 * unit() - 1);
      break;
    case DType::Bool:
      reinterpret_cast<uint8_t *>(data)[i] = rng() & 1;
      break;
    case DType::I64:
      reinterpret_cast<int64_t *>(data)[i] =
          static_cast<int64_t>(rng() % bound);
      break;
    case DType::I32:
      reinterpret_cast<int32_t *>(data)[i] =
          static_cast<int32_t>(rng() % bound);
      break;
    case DType::I8:
      reinterpret_cast<int8_t *>(data)[i] =
          static_cast<int8_t>(rng() % std::min<int64_t>(bound, 128));
      break;
    case DType::U8:
      reinterpret_cast<uint8_t *>(data)[i] =
          static_cast<uint8_t>(rng() % std::min<int64_t>(bound, 256));
      break;
    case DType::U32:
      reinterpret_cast<uint32_t *>(data)[i] =
          static_cast<uint32_t>(rng() % bound);
      break;
    case DType::U64:
      reinterpret_cast<uint64_t *>(data)[i] = rng() % bound;
      break;
    }
  }
}

std::string formatDuration(double seconds) {
  long total = seconds > 0 && std::isfinite(seconds) ? std::lround(seconds) : 0;
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", total / 3600,
                  total / 60 % 60, total % 60);
  else
    std::snprintf(text, sizeof(text), "%ld:%02ld", total / 60, total % 60);
  return text;
}

/// A finite number for logs (JSON has no NaN).
std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

//===----------------------------------------------------------------------===//
// The job: what every rank of this process shares
//===----------------------------------------------------------------------===//

struct Job {
  Job(const ProgramInfo &program, TrainOptions options)
      : program(program), options(std::move(options)) {}
  ~Job() {
    if (dataFd >= 0)
      close(dataFd);
    for (auto &[device, buffers] : constants)
      for (void *buffer : buffers)
        freeBuffer(buffer);
  }

  const ProgramInfo &program;
  TrainOptions options;
  std::string exeDir;
  int numDevices = 0;
  int64_t numStages = 0;
  int64_t microBatches = 1;
  /// stageDevice[s]: the device whose actions run stage s (-1: none).
  std::vector<int> stageDevice;
  std::vector<std::vector<int64_t>> deviceStages;
  std::vector<int64_t> deviceArena;
  std::vector<std::string> deviceNames;

  // Initial values (pread is safe from every rank's thread).
  std::string dataPath;
  int dataFd = -1;

  // Step inputs in host memory: every batch of each input.
  std::vector<HostTensor> inputData;
  int64_t numBatches = 1;

  /// Scalar float outputs combined by mean or sum: printed and logged.
  std::vector<int> reported;
  int lossIndex = -1; // into `reported`
  int64_t samplesPerStep = 0;

  uint64_t seed = 0;
  bool resuming = false;
  CheckpointMeta resume;

  /// Constants uploaded once per backend device.
  std::mutex constantsMutex;
  std::map<int, std::vector<void *>> constants;

  /// --local: set by the rank that failed first, so the others, woken by
  /// the abort, stop without a second report.
  std::atomic<bool> aborted{false};

  bool validateProgram(std::string &error);
  bool load(std::string &error);
  bool readData(int64_t offset, int64_t bytes, void *dst, std::string &what,
                std::string &error);
  const std::vector<void *> *uploadConstants(int device, std::string &error);
  int64_t firstStep() const { return resuming ? resume.completedSteps : 0; }
};

bool Job::validateProgram(std::string &error) {
  const ProgramInfo &p = program;
  auto fail = [&](const std::string &message) {
    error = "invalid program '" + p.modelName + "': " + message;
    return false;
  };
  numStages = p.numStages;
  microBatches = p.microBatches;
  numDevices = static_cast<int>(p.schedule.size());
  if (numDevices < 1)
    return fail("the schedule has no device");
  if (numStages < 1 || microBatches < 1)
    return fail("numStages and microBatches must be positive");
  if (static_cast<int64_t>(p.stageGlobals.size()) != numStages)
    return fail("stageGlobals has " + std::to_string(p.stageGlobals.size()) +
                " entries for " + std::to_string(numStages) + " stages");
  stageDevice.assign(static_cast<size_t>(numStages), -1);
  deviceStages.assign(static_cast<size_t>(numDevices), {});
  deviceArena.assign(static_cast<size_t>(numDevices), 0);
  for (int d = 0; d < numDevices; ++d) {
    for (const ActionInfo &action : p.schedule[d]) {
      if (action.stage < 0 || action.stage >= numStages)
        return fail("device " + std::to_string(d) + " runs stage " +
                    std::to_string(action.stage));
      int &owner = stageDevice[action.stage];
      if (owner >= 0 && owner != d)
        return fail("stage " + std::to_string(action.stage) +
                    " runs on devices " + std::to_string(owner) + " and " +
                    std::to_string(d));
      if (owner < 0)
        deviceStages[d].push_back(action.stage);
      owner = d;
      if (action.microBatch < -1 || action.microBatch >= microBatches)
        return fail("an action of device " + std::to_string(d) +
                    " has micro-batch " + std::to_string(action.microBatch));
      if (action.function < 0)
        continue;
      if (action.function >= static_cast<int>(p.functions.size()))
        return fail("an action of device " + std::to_string(d) +
                    " calls function " + std::to_string(action.function));
      const FunctionInfo &f = p.functions[action.function];
      if (!f.function)
        return fail("function '" + f.name + "' has no code");
      if (f.stage != action.stage)
        return fail("function '" + f.name + "' belongs to stage " +
                    std::to_string(f.stage) +
                    ", the schedule runs it as stage " +
                    std::to_string(action.stage));
      deviceArena[d] = std::max(deviceArena[d], f.arenaBytes);
    }
  }
  for (int64_t s = 0; s < numStages; ++s)
    for (int id : p.stageGlobals[s])
      if (id < 0 || id >= static_cast<int>(p.globals.size()))
        return fail("stage " + std::to_string(s) + " holds global " +
                    std::to_string(id) + " of " +
                    std::to_string(p.globals.size()));
  for (const InputInfo &input : p.inputs)
    if (input.shape.empty() || input.shape[0] % microBatches != 0)
      return fail("input '" + input.name + "' " +
                  describe(input.dtype, input.shape) + " does not split into " +
                  std::to_string(microBatches) + " micro-batches along dim 0");
  for (int d = 0; d < numDevices; ++d) {
    std::string name =
        d < static_cast<int>(p.deviceNames.size()) && !p.deviceNames[d].empty()
            ? p.deviceNames[d]
            : std::string(backendName()) + std::to_string(d);
    deviceNames.push_back(name);
  }

  // The loss: the output named "loss", else the first reported scalar.
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const OutputInfo &out = p.outputs[i];
    if (numelOf(out.shape) == 1 && isFloat(out.dtype) &&
        (out.combine == "mean" || out.combine == "sum")) {
      if (out.name == "loss" && lossIndex < 0)
        lossIndex = static_cast<int>(reported.size());
      reported.push_back(static_cast<int>(i));
    }
  }
  if (lossIndex < 0 && !reported.empty())
    lossIndex = 0;
  samplesPerStep = p.inputs.empty() ? 0 : p.inputs[0].shape[0];
  return true;
}

bool Job::readData(int64_t offset, int64_t bytes, void *dst, std::string &what,
                   std::string &error) {
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = pread(dataFd, static_cast<char *>(dst) + done,
                      static_cast<size_t>(bytes - done), offset + done);
    if (n <= 0) {
      error = "cannot read " + what + " from the data file '" + dataPath +
              "' (bytes " + std::to_string(offset) + ".." +
              std::to_string(offset + bytes) + ")";
      return false;
    }
    done += n;
  }
  return true;
}

bool Job::load(std::string &error) {
  const ProgramInfo &p = program;
  // The data file: --data-file as given, else next to the executable.
  dataPath = !options.dataFile.empty() ? options.dataFile
                                       : resolveNextTo(exeDir, p.dataFile);
  bool needsData = !p.globals.empty() || !p.constants.empty();
  if (needsData) {
    if (dataPath.empty()) {
      error = "the program names no data file: pass --data-file PATH";
      return false;
    }
    dataFd = open(dataPath.c_str(), O_RDONLY | O_CLOEXEC);
    if (dataFd < 0) {
      error = "cannot open the data file '" + dataPath +
              "': " + std::strerror(errno);
      return false;
    }
    struct stat info;
    fstat(dataFd, &info);
    int64_t size = info.st_size;
    auto check = [&](const std::string &what, DType dtype,
                     const std::vector<int64_t> &shape, int64_t offset) {
      int64_t bytes = numelOf(shape) * dtypeSize(dtype);
      if (offset < 0 || offset + bytes > size) {
        error = "the data file '" + dataPath + "' (" + std::to_string(size) +
                " bytes) has no room for " + what + " (" +
                describe(dtype, shape) + " at byte " + std::to_string(offset) +
                "): is it the file of this program?";
        return false;
      }
      return true;
    };
    for (const GlobalInfo &g : p.globals)
      if (!check("global '" + g.name + "'", g.dtype, g.shape, g.dataOffset))
        return false;
    for (size_t i = 0; i < p.constants.size(); ++i)
      if (!check("constant " + std::to_string(i), p.constants[i].dtype,
                 p.constants[i].shape, p.constants[i].dataOffset))
        return false;
  }

  // Resume: the seed and step count of the checkpoint.
  seed = options.seed;
  if (!options.resumeDir.empty()) {
    if (!readCheckpointMeta(options.resumeDir, resume, error)) {
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
    if (resume.modelName != p.modelName)
      return mismatch("model", "'" + resume.modelName + "'",
                      "'" + p.modelName + "'");
    if (resume.numDevices != numDevices)
      return mismatch("devices", std::to_string(resume.numDevices),
                      std::to_string(numDevices));
    if (resume.numStages != numStages)
      return mismatch("stages", std::to_string(resume.numStages),
                      std::to_string(numStages));
    if (options.seedGiven && options.seed != resume.seed) {
      error = "--resume: --seed " + std::to_string(options.seed) +
              " differs from the checkpoint's seed " +
              std::to_string(resume.seed) + " (omit --seed to keep it)";
      return false;
    }
    seed = resume.seed;
    resuming = true;
  }

  // Step inputs.
  inputData.assign(p.inputs.size(), HostTensor());
  bool fromFiles = !options.dataFiles.empty() || !options.dataDir.empty();
  if (!fromFiles) {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      inputData[i].dtype = p.inputs[i].dtype;
      inputData[i].shape = p.inputs[i].shape;
      fillRandom(inputData[i], p.inputs[i].randomBound, rng);
    }
    numBatches = 1;
    return true;
  }
  std::vector<std::string> paths(p.inputs.size());
  for (const auto &[name, path] : options.dataFiles) {
    auto it =
        std::find_if(p.inputs.begin(), p.inputs.end(),
                     [&](const InputInfo &in) { return in.name == name; });
    if (it == p.inputs.end()) {
      std::string names;
      for (const InputInfo &in : p.inputs)
        names += (names.empty() ? "'" : ", '") + in.name + "'";
      error = "--data " + name + "=" + path + ": the program has no input '" +
              name + "' (inputs: " + names + ")";
      return false;
    }
    paths[it - p.inputs.begin()] = path;
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (!options.dataDir.empty()) {
      paths[i] = options.dataDir + "/" + p.inputs[i].name + ".npy";
      std::string stemmed =
          options.dataDir + "/" + fileStem(p.inputs[i].name) + ".npy";
      if (!fileExists(paths[i]) && fileExists(stemmed))
        paths[i] = stemmed;
    }
    if (paths[i].empty()) {
      error = "no data for input '" + p.inputs[i].name + "': pass --data " +
              p.inputs[i].name + "=FILE.npy";
      return false;
    }
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const InputInfo &info = p.inputs[i];
    HostTensor &t = inputData[i];
    if (!readNpy(paths[i], t, error)) {
      error = "--data for input '" + info.name + "': " + error;
      return false;
    }
    int64_t batch = info.shape[0];
    bool ok =
        t.dtype == info.dtype && t.shape.size() == info.shape.size() &&
        !t.shape.empty() && t.shape[0] > 0 && t.shape[0] % batch == 0 &&
        std::equal(t.shape.begin() + 1, t.shape.end(), info.shape.begin() + 1);
    if (!ok) {
      std::vector<int64_t> expected = info.shape;
      std::string dims = "[N*" + std::to_string(batch);
      for (size_t d = 1; d < expected.size(); ++d)
        dims += ", " + std::to_string(expected[d]);
      error = "--data '" + paths[i] + "' for input '" + info.name +
              "': expected " + dtypeName(info.dtype) + dims +
              "] (whole batches of " + std::to_string(batch) + "), got " +
              describe(t.dtype, t.shape);
      return false;
    }
    int64_t count = t.shape[0] / batch;
    if (i == 0) {
      numBatches = count;
    } else if (count != numBatches) {
      error = "--data: '" + paths[i] + "' holds " + std::to_string(count) +
              " batches of input '" + info.name + "', '" + paths[0] +
              "' holds " + std::to_string(numBatches) + " of input '" +
              p.inputs[0].name + "'";
      return false;
    }
  }
  return true;
}

const std::vector<void *> *Job::uploadConstants(int device,
                                                std::string &error) {
  std::lock_guard<std::mutex> lock(constantsMutex);
  auto it = constants.find(device);
  if (it != constants.end())
    return &it->second;
  std::vector<void *> buffers;
  auto fail = [&] {
    for (void *buffer : buffers)
      freeBuffer(buffer);
    return nullptr;
  };
  std::vector<char> host;
  for (size_t i = 0; i < program.constants.size(); ++i) {
    const ConstantInfo &c = program.constants[i];
    int64_t bytes = numelOf(c.shape) * dtypeSize(c.dtype);
    void *buffer = allocateBuffer(bytes);
    if (!buffer) {
      error = "out of memory for constant " + std::to_string(i) + " (" +
              std::to_string(bytes) + " bytes)";
      return fail();
    }
    buffers.push_back(buffer);
    host.resize(static_cast<size_t>(bytes));
    std::string what = "constant " + std::to_string(i);
    if (!readData(c.dataOffset, bytes, host.data(), what, error))
      return fail();
    copyToBuffer(buffer, host.data(), bytes);
  }
  return &(constants[device] = std::move(buffers));
}

//===----------------------------------------------------------------------===//
// A rank: one device's schedule
//===----------------------------------------------------------------------===//

class Rank;

/// Buffers of the backend's memory, reused by size (stashes, gradient
/// sums, same-device messages): one cudaMalloc per size, not per step.
class BufferPool {
public:
  ~BufferPool() {
    for (auto &[bytes, buffers] : free_)
      for (void *buffer : buffers)
        freeBuffer(buffer);
  }
  Tensor acquire(DType dtype, const std::vector<int64_t> &shape) {
    int64_t bytes = numelOf(shape) * dtypeSize(dtype);
    std::vector<void *> &list = free_[bytes];
    void *buffer;
    if (!list.empty()) {
      buffer = list.back();
      list.pop_back();
    } else {
      buffer = allocateBuffer(bytes);
      if (!buffer)
        throw std::runtime_error("out of memory allocating " +
                                 std::to_string(bytes) + " bytes");
      allocated_ += bytes;
    }
    return Tensor{buffer, dtype, shape};
  }
  void release(const Tensor &t) { free_[t.bytes()].push_back(t.data); }
  int64_t allocatedBytes() const { return allocated_; }

private:
  std::map<int64_t, std::vector<void *>> free_;
  int64_t allocated_ = 0;
};

/// The StageContext of one stage on its rank.
class StageState final : public StageContext {
public:
  StageState(Rank &rank, int64_t stage, uint64_t seed)
      : rank_(rank), stage(stage), stageSeed(seed) {}
  ~StageState() override;

  Context &kernels() override;
  char *arena() override;
  Tensor global(int id) override;
  void writeGlobal(int id, const Tensor &value) override;
  Tensor constant(int id) override;
  void input(int index, int64_t microBatch, Tensor &dst) override;
  void output(int index, int64_t microBatch, const Tensor &value) override;
  void send(int peerStage, int tag, int64_t microBatch,
            const Tensor &value) override;
  void recv(int peerStage, int tag, int64_t microBatch, Tensor &dst) override;
  void stash(int slot, int64_t microBatch, const Tensor &value) override;
  void unstash(int slot, int64_t microBatch, Tensor &dst) override;
  void accumulate(int slot, const Tensor &value) override;
  void accumulated(int slot, Tensor &dst) override;
  uint64_t nextSeed() override;
  float learningRate(float compiled) override;

  Rank &rank_;
  int64_t stage;
  uint64_t stageSeed;
  uint64_t seedCounter = 0;
  /// This stage's copy of each global it holds (backend buffers).
  std::map<int, Tensor> globals;
  std::map<std::pair<int64_t, int64_t>, Tensor> stashed;
  std::map<int64_t, Tensor> sums;

private:
  void sync(const char *op);
  void expectLayout(const char *op, const std::string &what,
                    const Tensor &value, DType dtype,
                    const std::vector<int64_t> &shape);
  int messageTag(int peerStage, int tag, int64_t microBatch, const char *op);
};

class Rank {
public:
  Rank(Job &job, int rank, Communicator &comm)
      : job(job), rank(rank), comm(comm) {}
  ~Rank();

  /// Sets up, trains and finishes; the process exit status. `loadError`
  /// is this process's failure to load the job (agreed on with the others).
  int run(const std::string &loadError = {});

  Job &job;
  const int rank;
  Communicator &comm;
  Context kernels;
  bool hasKernelContext = false;
  void *arena = nullptr;
  int64_t arenaBytes = 0;
  int64_t globalBytes = 0;
  const std::vector<void *> *constants = nullptr;
  std::map<int64_t, std::unique_ptr<StageState>> stages;
  BufferPool pool;
  /// Messages between two stages of this rank: (from, to, tag, mb).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, Tensor> local;

  // The running step.
  int64_t step = 0;
  std::vector<std::vector<double>> outputParts; // [reported][mb]
  std::vector<std::vector<char>> outputSeen;
  std::vector<int64_t> outputStage;
  std::vector<double> busyMs, totalBusyMs; // per stage
  /// Time each stage waited in receives, left out of its busy time.
  std::vector<double> waitMs;

  const char *deviceName() const { return job.deviceNames[rank].c_str(); }

private:
  bool setup(std::string &error);
  bool loadGlobals(std::string &error);
  bool resume(std::string &error);
  bool trainSteps(int64_t &stepsRun, double &seconds);
  bool runAction(const ActionInfo &action);
  bool finishStep(double startSeconds, double loopStart, int64_t stepsDone,
                  FILE *log);
  bool writeCheckpoint();
  bool finish(int64_t stepsRun, double seconds);
  bool gather(bool trainableOnly,
              std::vector<std::pair<std::string, HostTensor>> &values,
              std::string &error);
  /// All-reduces `values` through a backend buffer.
  Status allReduce(std::vector<double> &values);
  /// Agrees on success: every rank learns whether any failed; the lowest
  /// failing rank prints its error.
  bool agree(bool ok, const std::string &error);
  /// Reports a failure on stderr and stops every rank.
  void abortJob(const std::string &message);
  /// A failure that every rank sees alike (no abort needed).
  void report(const std::string &message);
};

StageState::~StageState() {
  for (auto &[id, t] : globals)
    freeBuffer(t.data);
}

Context &StageState::kernels() { return rank_.kernels; }
char *StageState::arena() { return static_cast<char *>(rank_.arena); }

void StageState::sync(const char *op) {
  // Copies and messages read what queued kernels write (CUDA).
  Status s = synchronizeKernels(rank_.kernels);
  if (!s.ok())
    fail(op, s.message);
}

void StageState::expectLayout(const char *op, const std::string &what,
                              const Tensor &value, DType dtype,
                              const std::vector<int64_t> &shape) {
  if (value.dtype != dtype || value.shape != shape)
    fail(op, what + " is " + describe(dtype, shape) + ", got " +
                 describe(value.dtype, value.shape));
  if (!value.data && value.numel() > 0)
    fail(op, what + ": null data pointer");
}

Tensor StageState::global(int id) {
  auto it = globals.find(id);
  if (it == globals.end()) {
    std::string name =
        id >= 0 && id < static_cast<int>(rank_.job.program.globals.size())
            ? " '" + rank_.job.program.globals[id].name + "'"
            : "";
    fail("onnx.global_read", "stage " + std::to_string(stage) +
                                 " holds no copy of global " +
                                 std::to_string(id) + name);
  }
  return it->second;
}

void StageState::writeGlobal(int id, const Tensor &value) {
  Tensor dst = global(id);
  const GlobalInfo &info = rank_.job.program.globals[id];
  expectLayout("train.global_write", "global '" + info.name + "'", value,
               dst.dtype, dst.shape);
  sync("train.global_write");
  copyBuffer(dst.data, value.data, dst.bytes());
}

Tensor StageState::constant(int id) {
  const auto &constants = rank_.job.program.constants;
  if (id < 0 || id >= static_cast<int>(constants.size()))
    fail("constant", "no constant " + std::to_string(id) +
                         " (the program has " +
                         std::to_string(constants.size()) + ")");
  return Tensor{(*rank_.constants)[id], constants[id].dtype,
                constants[id].shape};
}

void StageState::input(int index, int64_t microBatch, Tensor &dst) {
  const Job &job = rank_.job;
  if (index < 0 || index >= static_cast<int>(job.program.inputs.size()))
    fail("pp.input", "no input " + std::to_string(index));
  if (microBatch < 0 || microBatch >= job.microBatches)
    fail("pp.input", "no micro-batch " + std::to_string(microBatch) +
                         " of input " + std::to_string(index));
  const InputInfo &info = job.program.inputs[index];
  std::vector<int64_t> shape = info.shape;
  shape[0] /= job.microBatches;
  expectLayout("pp.input", "a micro-batch of input '" + info.name + "'", dst,
               info.dtype, shape);
  sync("pp.input");
  int64_t chunk = dst.bytes();
  int64_t batch = rank_.step % job.numBatches;
  const char *src = job.inputData[index].bytes.data() +
                    (batch * job.microBatches + microBatch) * chunk;
  copyToBuffer(dst.data, src, chunk);
}

void StageState::output(int index, int64_t microBatch, const Tensor &value) {
  const Job &job = rank_.job;
  if (index < 0 || index >= static_cast<int>(job.program.outputs.size()))
    fail("pp.output", "no output " + std::to_string(index));
  if (microBatch < 0 || microBatch >= job.microBatches)
    fail("pp.output", "output " + std::to_string(index) +
                          " has no slot for micro-batch " +
                          std::to_string(microBatch));
  auto it = std::find(job.reported.begin(), job.reported.end(), index);
  if (it == job.reported.end())
    return; // only scalar losses and metrics are combined
  const OutputInfo &info = job.program.outputs[index];
  if (value.dtype != info.dtype || value.numel() != 1)
    fail("pp.output", "output '" + info.name + "' is " +
                          describe(info.dtype, info.shape) + ", got " +
                          describe(value.dtype, value.shape));
  sync("pp.output");
  char bytes[8] = {};
  copyFromBuffer(bytes, value.data, value.bytes());
  size_t k = static_cast<size_t>(it - job.reported.begin());
  rank_.outputParts[k][microBatch] = elementAsDouble(value.dtype, bytes);
  rank_.outputSeen[k][microBatch] = 1;
  rank_.outputStage[k] = stage;
}

int StageState::messageTag(int peerStage, int tag, int64_t microBatch,
                           const char *op) {
  const Job &job = rank_.job;
  if (peerStage < 0 || peerStage >= job.numStages ||
      job.stageDevice[peerStage] < 0)
    fail(op, "no stage " + std::to_string(peerStage) + " runs in this program");
  if (tag < 0 || microBatch < -1 || microBatch >= job.microBatches)
    fail(op, "bad tag " + std::to_string(tag) + " or micro-batch " +
                 std::to_string(microBatch));
  bool sending = std::strcmp(op, "pp.send") == 0;
  int64_t from = sending ? stage : peerStage;
  int64_t to = sending ? peerStage : stage;
  // Unique per (from, to, tag, micro-batch); per-step messages use -1.
  int64_t s = job.numStages, m = job.microBatches + 1;
  int64_t mpiTag = ((tag * s + from) * s + to) * m + (microBatch + 1);
  if (mpiTag >= kDriverTag)
    fail(op, "message tag " + std::to_string(tag) + " from stage " +
                 std::to_string(from) + " to stage " + std::to_string(to) +
                 " (micro-batch " + std::to_string(microBatch) +
                 ") needs transport tag " + std::to_string(mpiTag) +
                 ", above the 32766 that MPI guarantees (fewer stages, "
                 "micro-batches or tags)");
  return static_cast<int>(mpiTag);
}

void StageState::send(int peerStage, int tag, int64_t microBatch,
                      const Tensor &value) {
  int mpiTag = messageTag(peerStage, tag, microBatch, "pp.send");
  sync("pp.send");
  int peer = rank_.job.stageDevice[peerStage];
  if (peer == rank_.rank) {
    Tensor copy = rank_.pool.acquire(value.dtype, value.shape);
    copyBuffer(copy.data, value.data, value.bytes());
    auto key =
        std::make_tuple(stage, int64_t(peerStage), int64_t(tag), microBatch);
    auto it = rank_.local.find(key);
    if (it != rank_.local.end()) {
      rank_.pool.release(it->second);
      it->second = copy;
    } else {
      rank_.local.emplace(key, copy);
    }
    return;
  }
  Status s = rank_.comm.send(value, peer, mpiTag);
  if (!s.ok())
    fail("pp.send", "to stage " + std::to_string(peerStage) + " on rank " +
                        std::to_string(peer) + ": " + s.message);
}

void StageState::recv(int peerStage, int tag, int64_t microBatch, Tensor &dst) {
  int mpiTag = messageTag(peerStage, tag, microBatch, "pp.recv");
  sync("pp.recv");
  int peer = rank_.job.stageDevice[peerStage];
  std::string what = "from stage " + std::to_string(peerStage) + " on rank " +
                     std::to_string(peer) + " (device " +
                     rank_.job.deviceNames[peer] + "), tag " +
                     std::to_string(tag) + ", micro-batch " +
                     std::to_string(microBatch);
  if (peer == rank_.rank) {
    auto key =
        std::make_tuple(int64_t(peerStage), stage, int64_t(tag), microBatch);
    auto it = rank_.local.find(key);
    if (it == rank_.local.end())
      fail("pp.recv", "no message " + what +
                          ": its send has not run on this device (the "
                          "schedule runs the receiver first)");
    expectLayout("pp.recv", "the message " + what, it->second, dst.dtype,
                 dst.shape);
    copyBuffer(dst.data, it->second.data, dst.bytes());
    rank_.pool.release(it->second);
    rank_.local.erase(it);
    return;
  }
  // Waiting for a peer is not work: busy time leaves it out.
  double start = nowSeconds();
  Status s = rank_.comm.recv(dst, peer, mpiTag);
  rank_.waitMs[stage] += (nowSeconds() - start) * 1e3;
  if (!s.ok())
    fail("pp.recv", "waiting for the message " + what + ": " + s.message);
}

void StageState::stash(int slot, int64_t microBatch, const Tensor &value) {
  sync("pp.stash");
  Tensor copy = rank_.pool.acquire(value.dtype, value.shape);
  copyBuffer(copy.data, value.data, value.bytes());
  auto [it, inserted] = stashed.emplace(std::make_pair(slot, microBatch), copy);
  if (!inserted) {
    rank_.pool.release(it->second);
    it->second = copy;
  }
}

void StageState::unstash(int slot, int64_t microBatch, Tensor &dst) {
  auto it = stashed.find({slot, microBatch});
  if (it == stashed.end())
    fail("pp.unstash", "nothing is stashed in slot " + std::to_string(slot) +
                           " for micro-batch " + std::to_string(microBatch) +
                           " (its forward has not run on this device)");
  expectLayout("pp.unstash", "slot " + std::to_string(slot), dst,
               it->second.dtype, it->second.shape);
  sync("pp.unstash");
  copyBuffer(dst.data, it->second.data, dst.bytes());
  rank_.pool.release(it->second);
  stashed.erase(it);
}

void StageState::accumulate(int slot, const Tensor &value) {
  sync("pp.accumulate");
  auto it = sums.find(slot);
  if (it == sums.end()) {
    Tensor copy = rank_.pool.acquire(value.dtype, value.shape);
    copyBuffer(copy.data, value.data, value.bytes());
    sums.emplace(slot, copy);
    return;
  }
  Tensor &sum = it->second;
  if (value.dtype != DType::F32 && value.dtype != DType::F64)
    fail("pp.accumulate", "accumulates only f32 and f64 gradients, got " +
                              describe(value.dtype, value.shape));
  expectLayout("pp.accumulate", "the sum in slot " + std::to_string(slot),
               value, sum.dtype, sum.shape);
  Status s = binary(rank_.kernels, BinaryKind::Add, sum, value, sum);
  if (!s.ok())
    fail("pp.accumulate", s.message);
}

void StageState::accumulated(int slot, Tensor &dst) {
  auto it = sums.find(slot);
  if (it == sums.end())
    fail("pp.accumulated", "no gradient was accumulated in slot " +
                               std::to_string(slot) + " this step");
  expectLayout("pp.accumulated", "the sum in slot " + std::to_string(slot), dst,
               it->second.dtype, it->second.shape);
  sync("pp.accumulated");
  copyBuffer(dst.data, it->second.data, dst.bytes());
  rank_.pool.release(it->second);
  sums.erase(it);
}

uint64_t StageState::nextSeed() {
  // Interpreter::nextSeed: splitmix64 of (seed, counter); the counter runs
  // on across steps.
  uint64_t z = stageSeed + 0x9e3779b97f4a7c15ULL * ++seedCounter;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

float StageState::learningRate(float compiled) {
  const auto &lr = rank_.job.options.lr;
  return lr ? static_cast<float>(*lr) : compiled;
}

Rank::~Rank() {
  // What a failed step left behind goes back to the pool, which frees it.
  for (auto &[s, state] : stages) {
    for (auto &[key, t] : state->stashed)
      pool.release(t);
    for (auto &[slot, t] : state->sums)
      pool.release(t);
  }
  stages.clear();
  for (auto &[key, t] : local)
    pool.release(t);
  if (arena)
    freeBuffer(arena);
  if (hasKernelContext)
    destroyKernelContext(kernels);
}

void Rank::abortJob(const std::string &message) {
  if (job.aborted.exchange(true))
    return; // another rank of this process failed first and said why
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  comm.abort("stopping every rank after the error above");
}

void Rank::report(const std::string &message) {
  if (rank == 0) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
  }
}

Status Rank::allReduce(std::vector<double> &values) {
  Tensor t{allocateBuffer(static_cast<int64_t>(values.size() * 8)),
           DType::F64,
           {static_cast<int64_t>(values.size())}};
  if (!t.data)
    return Status::error("out of memory for an all-reduce");
  Status s;
  try {
    copyToBuffer(t.data, values.data(), t.bytes());
    s = comm.allReduceSum(t);
    if (s.ok())
      copyFromBuffer(values.data(), t.data, t.bytes());
  } catch (const std::exception &e) {
    s = Status::error(e.what());
  }
  freeBuffer(t.data);
  return s;
}

bool Rank::agree(bool ok, const std::string &error) {
  std::vector<double> failed(static_cast<size_t>(comm.size()), 0.0);
  failed[rank] = ok ? 0.0 : 1.0;
  Status s = allReduce(failed);
  if (!s.ok()) {
    abortJob("error: rank " + std::to_string(rank) + " (device " +
             deviceName() + "): " + (ok ? s.message : error));
    return false;
  }
  for (int r = 0; r < comm.size(); ++r) {
    if (failed[r] == 0.0)
      continue;
    if (r == rank) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      std::fflush(stderr);
    }
    return false;
  }
  return true;
}

bool Rank::setup(std::string &error) {
  int count = backendDeviceCount();
  if (count < 1) {
    error = std::string("no ") + backendName() + " device";
    return false;
  }
  int device = (job.options.local ? rank : localRank(rank)) % count;
  kernels.numThreads = job.options.threads;
  if (Status s = createKernelContext(kernels, device); !s.ok()) {
    error = "rank " + std::to_string(rank) + ": " + s.message;
    return false;
  }
  hasKernelContext = true;
  arenaBytes = job.deviceArena[rank];
  arena = allocateBuffer(arenaBytes);
  if (!arena) {
    error = "rank " + std::to_string(rank) + ": out of memory for the arena (" +
            std::to_string(arenaBytes) + " bytes)";
    return false;
  }
  constants = job.uploadConstants(device, error);
  if (!constants)
    return false;
  for (int64_t s : job.deviceStages[rank])
    stages[s] = std::make_unique<StageState>(*this, s, job.seed + s);
  if (!loadGlobals(error))
    return false;
  if (job.resuming && !resume(error))
    return false;
  totalBusyMs.assign(static_cast<size_t>(job.numStages), 0.0);
  return true;
}

bool Rank::loadGlobals(std::string &error) {
  const ProgramInfo &p = job.program;
  std::vector<char> host;
  for (auto &[s, state] : stages) {
    for (int id : p.stageGlobals[s]) {
      const GlobalInfo &g = p.globals[id];
      Tensor t{nullptr, g.dtype, g.shape};
      t.data = allocateBuffer(t.bytes());
      if (!t.data) {
        error = "rank " + std::to_string(rank) +
                ": out of memory for global '" + g.name + "'";
        return false;
      }
      state->globals[id] = t;
      globalBytes += t.bytes();
      host.resize(static_cast<size_t>(t.bytes()));
      std::string what = "global '" + g.name + "'";
      if (!job.readData(g.dataOffset, t.bytes(), host.data(), what, error))
        return false;
      copyToBuffer(t.data, host.data(), t.bytes());
    }
  }
  return true;
}

bool Rank::resume(std::string &error) {
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

bool Rank::runAction(const ActionInfo &action) {
  const FunctionInfo &f = job.program.functions[action.function];
  StageState &state = *stages[action.stage];
  auto where = [&] {
    return "error: rank " + std::to_string(rank) + " (device " + deviceName() +
           "), stage " + std::to_string(action.stage) + ", micro-batch " +
           std::to_string(action.microBatch) + ", " + action.kind + " " +
           f.name + ": ";
  };
  std::string stepNote = " (step " + std::to_string(step + 1) + ")";
  double start = nowSeconds();
  try {
    f.function(state, action.microBatch);
    Status s = synchronizeKernels(kernels);
    if (!s.ok())
      throw StageError("kernels", s.message);
  } catch (const StageError &e) {
    abortJob(where() + "op " + e.op + ": " + e.what() + stepNote);
    return false;
  } catch (const std::exception &e) {
    abortJob(where() + e.what() + stepNote);
    return false;
  }
  busyMs[action.stage] += (nowSeconds() - start) * 1e3 - waitMs[action.stage];
  waitMs[action.stage] = 0;
  return true;
}

bool Rank::writeCheckpoint() {
  const ProgramInfo &p = job.program;
  const std::string &dir = job.options.checkpointDir;
  std::string error;
  bool ok = makeDirectories(dir, error);
  if (ok) {
    RankCheckpoint ckpt;
    ckpt.modelName = p.modelName;
    ckpt.numStages = job.numStages;
    ckpt.numDevices = job.numDevices;
    ckpt.numGlobals = static_cast<int64_t>(p.globals.size());
    ckpt.rank = rank;
    ckpt.seed = job.seed;
    ckpt.completedSteps = step + 1;
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
    ok = writeRankCheckpoint(dir, ckpt, error);
  }
  // Rank 0 describes the checkpoint once every rank has written its part.
  if (!agree(ok, "--checkpoint: rank " + std::to_string(rank) + ": " + error))
    return false;
  if (rank == 0) {
    CheckpointMeta meta{p.modelName, step + 1, job.numDevices, job.numStages,
                        job.seed};
    if (!writeCheckpointMeta(dir, meta, error)) {
      report("error: --checkpoint: " + error);
      return false;
    }
  }
  return true;
}

bool Rank::finishStep(double startSeconds, double loopStart, int64_t stepsDone,
                      FILE *log) {
  // A value stashed and never unstashed is a schedule error.
  for (auto &[s, state] : stages)
    if (!state->stashed.empty()) {
      abortJob("error: rank " + std::to_string(rank) + " (device " +
               deviceName() + "), stage " + std::to_string(s) + ", step " +
               std::to_string(step + 1) + ": the step left " +
               std::to_string(state->stashed.size()) +
               " stashed value(s) that no backward took");
      return false;
    }

  // [partial sum, micro-batches, producing stage + 1] per reported output,
  // then the busy time of every stage.
  size_t k = job.reported.size();
  std::vector<double> stats(3 * k + static_cast<size_t>(job.numStages), 0.0);
  for (size_t i = 0; i < k; ++i) {
    for (int64_t mb = 0; mb < job.microBatches; ++mb)
      if (outputSeen[i][mb]) {
        stats[3 * i] += outputParts[i][mb];
        stats[3 * i + 1] += 1;
      }
    if (stats[3 * i + 1] > 0)
      stats[3 * i + 2] = static_cast<double>(outputStage[i] + 1);
  }
  for (int64_t s = 0; s < job.numStages; ++s)
    stats[3 * k + s] = busyMs[s];
  if (Status s = allReduce(stats); !s.ok()) {
    abortJob("error: rank " + std::to_string(rank) + " (device " +
             deviceName() + "), step " + std::to_string(step + 1) +
             ": gathering the step's outputs: " + s.message);
    return false;
  }
  double stepSeconds = nowSeconds() - startSeconds;

  // Every rank sees the same reduced values, so all stop alike.
  std::vector<double> values(k);
  for (size_t i = 0; i < k; ++i) {
    const OutputInfo &info = job.program.outputs[job.reported[i]];
    int64_t stage = static_cast<int64_t>(stats[3 * i + 2]) - 1;
    if (stats[3 * i + 1] != static_cast<double>(job.microBatches)) {
      report("error: step " + std::to_string(step + 1) + ": output '" +
             info.name + "' was produced for " +
             std::to_string(static_cast<int64_t>(stats[3 * i + 1])) + " of " +
             std::to_string(job.microBatches) + " micro-batches");
      return false;
    }
    double total = stats[3 * i];
    if (info.combine == "mean")
      total /= static_cast<double>(job.microBatches);
    values[i] = roundTo(info.dtype, total);
    if (!std::isfinite(values[i])) {
      int producer = stage >= 0 ? job.stageDevice[stage] : -1;
      report("error: rank " + std::to_string(producer) + " (device " +
             (producer >= 0 ? job.deviceNames[producer] : "?") + "), stage " +
             std::to_string(stage) + ", step " + std::to_string(step + 1) +
             ": output '" + info.name + "' is " +
             (std::isnan(values[i]) ? "NaN" : "infinite"));
      return false;
    }
  }
  for (int64_t s = 0; s < job.numStages; ++s)
    totalBusyMs[s] += stats[3 * k + s];
  if (rank != 0)
    return true;

  double samplesPerSecond =
      stepSeconds > 0 ? static_cast<double>(job.samplesPerStep) / stepSeconds
                      : 0;
  int64_t total = job.options.steps;
  double elapsed = nowSeconds() - loopStart;
  double eta = elapsed / static_cast<double>(stepsDone) *
               static_cast<double>(total - (step + 1));
  std::string line =
      "step " + std::to_string(step + 1) + "/" + std::to_string(total);
  char text[128];
  if (job.lossIndex >= 0) {
    std::snprintf(text, sizeof(text), "  loss %.6f", values[job.lossIndex]);
    line += text;
  }
  for (size_t i = 0; i < k; ++i) {
    if (static_cast<int>(i) == job.lossIndex)
      continue;
    std::snprintf(text, sizeof(text), "  %s %.6f",
                  job.program.outputs[job.reported[i]].name.c_str(), values[i]);
    line += text;
  }
  std::snprintf(text, sizeof(text), "  %.1f samples/s  ETA %s",
                samplesPerSecond, formatDuration(eta).c_str());
  line += text;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);

  if (log) {
    double loss = job.lossIndex >= 0 ? values[job.lossIndex] : NAN;
    bool csv = job.options.logFile.size() >= 4 &&
               job.options.logFile.compare(job.options.logFile.size() - 4, 4,
                                           ".csv") == 0;
    std::string row;
    if (csv) {
      row = std::to_string(step + 1) + "," + jsonNumber(loss) + "," +
            jsonNumber(samplesPerSecond) + "," + jsonNumber(stepSeconds * 1e3);
      for (int64_t s = 0; s < job.numStages; ++s)
        row += "," + jsonNumber(stats[3 * k + s]);
    } else {
      row = "{\"step\":" + std::to_string(step + 1) +
            ",\"loss\":" + jsonNumber(loss) +
            ",\"samples_per_s\":" + jsonNumber(samplesPerSecond) +
            ",\"step_ms\":" + jsonNumber(stepSeconds * 1e3) + ",\"busy_ms\":[";
      for (int64_t s = 0; s < job.numStages; ++s)
        row += (s ? "," : "") + jsonNumber(stats[3 * k + s]);
      row += "]}";
    }
    std::fprintf(log, "%s\n", row.c_str());
    std::fflush(log);
  }
  return true;
}

bool Rank::trainSteps(int64_t &stepsRun, double &seconds) {
  const TrainOptions &options = job.options;
  FILE *log = nullptr;
  std::string error;
  if (rank == 0 && !options.logFile.empty()) {
    bool csv =
        options.logFile.size() >= 4 &&
        options.logFile.compare(options.logFile.size() - 4, 4, ".csv") == 0;
    // A resumed run continues the log of the run it resumes.
    bool append = job.resuming && fileExists(options.logFile);
    log = std::fopen(options.logFile.c_str(), append ? "a" : "w");
    if (!log)
      error = "--log: cannot write '" + options.logFile +
              "': " + std::strerror(errno);
    else if (csv && !append) {
      std::fprintf(log, "step,loss,samples_per_s,step_ms");
      for (int64_t s = 0; s < job.numStages; ++s)
        std::fprintf(log, ",busy_ms_stage%lld", static_cast<long long>(s));
      std::fprintf(log, "\n");
    }
  }
  if (!agree(error.empty(), error)) {
    if (log)
      std::fclose(log);
    return false;
  }

  size_t k = job.reported.size();
  double loopStart = nowSeconds();
  bool ok = true;
  for (step = job.firstStep(); ok && step < options.steps; ++step) {
    double start = nowSeconds();
    outputParts.assign(k, std::vector<double>(job.microBatches, 0.0));
    outputSeen.assign(k, std::vector<char>(job.microBatches, 0));
    outputStage.assign(k, -1);
    busyMs.assign(static_cast<size_t>(job.numStages), 0.0);
    waitMs.assign(static_cast<size_t>(job.numStages), 0.0);
    for (const ActionInfo &action : job.program.schedule[rank]) {
      if (action.function < 0)
        continue; // nothing to run (a reduction with nothing to reduce)
      if (!(ok = runAction(action)))
        break;
    }
    ok = ok && finishStep(start, loopStart, ++stepsRun, log);
    if (ok && options.checkpointEvery > 0 &&
        (step + 1) % options.checkpointEvery == 0)
      ok = writeCheckpoint();
  }
  seconds = nowSeconds() - loopStart;
  if (log)
    std::fclose(log);
  return ok;
}

bool Rank::gather(bool trainableOnly,
                  std::vector<std::pair<std::string, HostTensor>> &values,
                  std::string &error) {
  const ProgramInfo &p = job.program;
  bool ok = true;
  for (size_t id = 0; id < p.globals.size(); ++id) {
    const GlobalInfo &g = p.globals[id];
    if (trainableOnly && !g.trainable)
      continue;
    // The owner's copy; a global its owner does not hold comes from the
    // first stage holding it, one no stage holds is its initial value.
    int64_t holder = -1;
    auto holds = [&](int64_t s) {
      return s >= 0 && s < job.numStages &&
             std::count(p.stageGlobals[s].begin(), p.stageGlobals[s].end(),
                        static_cast<int>(id));
    };
    if (holds(g.ownerStage))
      holder = g.ownerStage;
    for (int64_t s = 0; holder < 0 && s < job.numStages; ++s)
      if (holds(s))
        holder = s;
    int from = holder >= 0 ? job.stageDevice[holder] : 0;
    HostTensor host{g.dtype, g.shape, {}};
    host.bytes.resize(
        static_cast<size_t>(numelOf(g.shape) * dtypeSize(g.dtype)));
    int64_t bytes = static_cast<int64_t>(host.bytes.size());
    if (from == rank) {
      if (holder < 0) {
        std::string what = "global '" + g.name + "'";
        ok = ok &&
             job.readData(g.dataOffset, bytes, host.bytes.data(), what, error);
      } else {
        const Tensor &t = stages[holder]->globals[static_cast<int>(id)];
        if (rank == 0) {
          copyFromBuffer(host.bytes.data(), t.data, bytes);
        } else if (Status s = comm.send(t, 0, kDriverTag); !s.ok()) {
          error = "sending global '" + g.name + "' to rank 0: " + s.message;
          return false;
        }
      }
    } else if (rank == 0) {
      Tensor t{allocateBuffer(bytes), g.dtype, g.shape};
      if (!t.data) {
        error = "out of memory receiving global '" + g.name + "'";
        return false;
      }
      Status s = comm.recv(t, from, kDriverTag);
      if (s.ok())
        copyFromBuffer(host.bytes.data(), t.data, bytes);
      freeBuffer(t.data);
      if (!s.ok()) {
        error = "receiving global '" + g.name + "' from rank " +
                std::to_string(from) + ": " + s.message;
        return false;
      }
    }
    if (rank == 0)
      values.emplace_back(g.name, std::move(host));
  }
  return ok;
}

bool Rank::finish(int64_t stepsRun, double seconds) {
  const TrainOptions &options = job.options;
  const ProgramInfo &p = job.program;
  // Busy time and measured memory of every device, for the summary.
  std::vector<double> totals(2 * static_cast<size_t>(job.numDevices), 0.0);
  for (int64_t s : job.deviceStages[rank])
    totals[rank] += totalBusyMs[s];
  totals[job.numDevices + rank] =
      static_cast<double>(arenaBytes + globalBytes + pool.allocatedBytes());
  if (Status s = allReduce(totals); !s.ok()) {
    abortJob("error: rank " + std::to_string(rank) + ": " + s.message);
    return false;
  }

  bool ok = true;
  std::string error;
  if (!options.dumpGlobals.empty()) {
    std::vector<std::pair<std::string, HostTensor>> values;
    ok = gather(/*trainableOnly=*/false, values, error);
    if (ok && rank == 0) {
      // pp-interpret --dump-globals: DIR/<stem>.npy and globals.txt.
      ok = makeDirectories(options.dumpGlobals, error);
      std::string index;
      std::set<std::string> stems;
      for (size_t i = 0; ok && i < values.size(); ++i) {
        std::string stem = fileStem(values[i].first);
        while (!stems.insert(stem).second)
          stem += "_";
        const HostTensor &t = values[i].second;
        ok = writeNpy(options.dumpGlobals + "/" + stem + ".npy", t.dtype,
                      t.shape, t.bytes.data(), error);
        index += values[i].first + "\t" + stem + ".npy\n";
      }
      if (ok) {
        std::string path = options.dumpGlobals + "/globals.txt";
        FILE *file = std::fopen(path.c_str(), "w");
        ok = file &&
             std::fwrite(index.data(), 1, index.size(), file) == index.size();
        if (file)
          ok = std::fclose(file) == 0 && ok;
        if (!ok)
          error = "cannot write '" + path + "'";
      }
      if (!ok)
        error = "--dump-globals: " + error;
    }
  }
  if (ok && !options.saveOnnx.empty()) {
    std::vector<std::pair<std::string, HostTensor>> values;
    // Every global: BatchNorm running statistics belong in the deployed
    // model too; state without an initializer is skipped.
    ok = gather(/*trainableOnly=*/false, values, error);
    std::vector<bool> required;
    for (const auto &[name, value] : values) {
      bool trainable = false;
      for (const GlobalInfo &g : p.globals)
        if (g.name == name)
          trainable = g.trainable;
      required.push_back(trainable);
    }
    if (ok && rank == 0) {
      std::string source = resolveNextTo(job.exeDir, p.onnxFile);
      if (p.onnxFile.empty()) {
        error = "--save-onnx: the program was not compiled from an ONNX model";
        ok = false;
      } else if (!fileExists(source)) {
        error = "--save-onnx: the source model '" + source + "' is missing";
        ok = false;
      } else {
        ok = saveTrainedONNX(source, options.saveOnnx, values, required, error);
      }
    }
  }
  if (!ok) {
    std::string message = "error: rank " + std::to_string(rank) + ": " + error;
    // Rank 0 may wait for this rank's globals: stop it. The others are done
    // when rank 0 fails.
    if (rank != 0) {
      abortJob(message);
    } else {
      std::fprintf(stderr, "%s\n", message.c_str());
      std::fflush(stderr);
    }
    return false;
  }
  if (rank != 0)
    return true;

  double samples = static_cast<double>(stepsRun * job.samplesPerStep);
  std::printf("trained %lld steps in %.3f s (%.1f samples/s)\n",
              static_cast<long long>(stepsRun), seconds,
              seconds > 0 ? samples / seconds : 0.0);
  for (int d = 0; d < job.numDevices; ++d) {
    double planned = d < static_cast<int>(p.plannedPeakBytes.size())
                         ? static_cast<double>(p.plannedPeakBytes[d])
                         : 0.0;
    std::printf("device %d (%s): busy %.1f ms, planned peak %.2f MB, "
                "measured arena+globals+stash %.2f MB\n",
                d, job.deviceNames[d].c_str(), totals[d], planned / 1e6,
                totals[job.numDevices + d] / 1e6);
  }
  std::fflush(stdout);
  return true;
}

int Rank::run(const std::string &loadError) {
  try {
    comm.timeoutSeconds = job.options.timeout;
    std::string error = loadError;
    bool ok = error.empty() && setup(error);
    if (!agree(ok, error))
      return 1;
    int64_t stepsRun = 0;
    double seconds = 0;
    if (!trainSteps(stepsRun, seconds))
      return 1;
    return finish(stepsRun, seconds) ? 0 : 1;
  } catch (const std::exception &e) {
    abortJob("error: rank " + std::to_string(rank) + " (device " +
             deviceName() + "): " + e.what());
    return 1;
  }
}

} // namespace

int pp::rt::trainMain(const ProgramInfo &program, int argc, char **argv) {
  bool printer = environmentRank() == 0;
  std::string programName = argc > 0 && argv[0] ? argv[0] : "train";
  if (size_t slash = programName.rfind('/'); slash != std::string::npos)
    programName = programName.substr(slash + 1);

  TrainOptions options;
  std::string error;
  if (!parseTrainOptions(argc, argv, options, error)) {
    if (printer)
      std::fprintf(stderr, "%s: error: %s\n", programName.c_str(),
                   error.c_str());
    return 2;
  }
  if (options.help) {
    if (printer)
      std::printf("%s", trainUsage(programName).c_str());
    return 0;
  }

  Job job(program, options);
  job.exeDir = executableDir(argc > 0 ? argv[0] : nullptr);
  if (!job.validateProgram(error)) {
    if (printer)
      std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  if (!options.local && !launchedByMPI())
    job.options.local = options.local = true;

  if (options.local) {
    if (!job.load(error)) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return 1;
    }
    auto group = createInProcessGroup(job.numDevices);
    std::vector<int> status(static_cast<size_t>(job.numDevices), 0);
    auto runRank = [&](int r) {
      Rank rank(job, r, *group[r]);
      status[r] = rank.run();
    };
    std::vector<std::thread> threads;
    for (int r = 1; r < job.numDevices; ++r)
      threads.emplace_back(runRank, r);
    runRank(0);
    for (std::thread &thread : threads)
      thread.join();
    return *std::max_element(status.begin(), status.end());
  }

  std::unique_ptr<Communicator> comm =
      createWorldCommunicator(&argc, &argv, error);
  if (!comm) {
    if (printer)
      std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  if (comm->size() != job.numDevices) {
    if (comm->rank() == 0)
      std::fprintf(stderr,
                   "error: the program runs on %d devices: launch it with "
                   "mpirun -np %d (this job has %d ranks), or run --local\n",
                   job.numDevices, job.numDevices, comm->size());
    return 1;
  }
  // Every rank loads the files; Rank::run agrees on the outcome, so one
  // failing rank stops all.
  if (job.load(error))
    error.clear();
  else if (error.empty())
    error = "cannot load the job";
  Rank rank(job, comm->rank(), *comm);
  return rank.run(error);
}
