//===- Job.cpp - What every rank of a training process shares -------------===//
//
// Validating the program, opening the data file, loading or drawing the
// step inputs, uploading the constants; and finding this process's place
// under mpirun.
//
//===----------------------------------------------------------------------===//

#include "Job.h"
#include "Util.h"

#include "pp/Runtime/Checksum.h"
#include "pp/Runtime/Half.h"
#include "pp/Runtime/Memory.h"

#include <cstdio>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

/// The dtypes of the scalar outputs that are reported (losses, metrics).
bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

/// pp-interpret's randomTensor: uniform floats in [-1, 1), integers in
/// [0, bound), from one generator over the inputs in order.
void fillRandom(HostTensor &t, int64_t bound, std::mt19937_64 &rng) {
  auto unit = [&] { return double(rng() >> 11) * 0x1.0p-53; };
  if (bound <= 0)
    bound = 10;
  t.bytes.assign(static_cast<size_t>(t.numel() * dtypeSize(t.dtype)), 0);
  char *data = t.bytes.data();
  // Element i of an integer dtype: a draw below `limit` (the one
  // pp-interpret makes), stored in the dtype's width. Values are below the
  // signed types' maximum, so the unsigned bit pattern is the signed value.
  auto integer = [&](int64_t i, uint64_t limit) {
    uint64_t value = rng() % limit;
    switch (dtypeSize(t.dtype)) {
    case 1:
      reinterpret_cast<uint8_t *>(data)[i] = static_cast<uint8_t>(value);
      break;
    case 4:
      reinterpret_cast<uint32_t *>(data)[i] = static_cast<uint32_t>(value);
      break;
    default:
      reinterpret_cast<uint64_t *>(data)[i] = value;
      break;
    }
  };
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
    case DType::I32:
    case DType::U32:
    case DType::U64:
      integer(i, bound);
      break;
    case DType::I8:
      integer(i, std::min<int64_t>(bound, 128));
      break;
    case DType::U8:
      integer(i, std::min<int64_t>(bound, 256));
      break;
    case DType::I16:
      integer(i, std::min<int64_t>(bound, 32768));
      break;
    case DType::U16:
      integer(i, std::min<int64_t>(bound, 65536));
      break;
    }
  }
}

/// The CRC-32C of every field of `p` but the function pointers.
uint32_t tableHash(const ProgramInfo &p) {
  std::string t;
  auto add = [&](auto... values) {
    ((
         t +=
         [](const auto &v) {
           if constexpr (std::is_convertible_v<decltype(v), std::string>)
             return std::string(v);
           else
             return std::to_string(static_cast<int64_t>(v));
         }(values),
         t += '\0'),
     ...);
  };
  auto shape = [&](const std::vector<int64_t> &dims) {
    add(dims.size());
    for (int64_t d : dims)
      add(d);
  };
  add(p.modelName, p.scheduleKind, p.numStages, p.microBatches, p.dataParallel,
      p.codeHash, p.dataFile, p.onnxFile);
  if (p.staleness >= 0)
    add("wsp", p.staleness, p.wave);
  if (p.tensorParallel > 1) {
    add("tp", p.tensorParallel);
    shape(p.stageTensorParallel);
  }
  for (const std::string &name : p.deviceNames)
    add(name);
  for (const std::string &name : p.replicaDeviceNames)
    add(name);
  for (const GlobalInfo &g : p.globals) {
    add(g.name, g.dtype, g.trainable, g.dataOffset, g.ownerStage);
    shape(g.shape);
  }
  for (const ConstantInfo &c : p.constants) {
    add(c.dtype, c.dataOffset);
    shape(c.shape);
  }
  for (const InputInfo &in : p.inputs) {
    add(in.name, in.dtype, in.randomBound);
    shape(in.shape);
  }
  for (const OutputInfo &out : p.outputs) {
    add(out.name, out.combine, out.dtype);
    shape(out.shape);
  }
  for (const FunctionInfo &f : p.functions)
    add(f.name, f.stage, f.phase, f.arenaBytes);
  for (const std::vector<int> &ids : p.stageGlobals) {
    add(ids.size());
    for (int id : ids)
      add(id);
  }
  auto addSchedule = [&](const std::vector<std::vector<ActionInfo>> &list) {
    for (const std::vector<ActionInfo> &actions : list) {
      add(actions.size());
      for (const ActionInfo &a : actions)
        add(a.kind, a.function, a.stage, a.microBatch);
    }
  };
  addSchedule(p.schedule);
  for (const auto &schedule : p.replicaSchedules)
    addSchedule(schedule);
  return crc32c(0, t.data(), t.size());
}

} // namespace

//===----------------------------------------------------------------------===//
// This process in the job
//===----------------------------------------------------------------------===//

int pp::rt::train::environmentRank() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 0;
}

bool pp::rt::train::launchedByMPI() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
}

int pp::rt::train::environmentSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 1;
}

int pp::rt::train::localRank(int rank) {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return rank;
}

std::unique_ptr<Communicator> pp::rt::train::createWorldCommunicator(
    int *argc, char ***argv, const std::string &transport, std::string &error) {
#if defined(PP_TRAIN_HAVE_NCCL)
  if (transport != "mpi") {
    // Device tensors between GPUs; Rank matches the messages by order.
    std::unique_ptr<Communicator> comm = createNCCLCommunicator(argc, argv);
    if (!comm)
      error = "cannot start NCCL (see the message above; --transport=mpi "
              "moves the messages through host memory instead)";
    return comm;
  }
#else
  if (transport == "nccl") {
    error = "--transport=nccl: this executable was built without NCCL (it "
            "needs the CUDA build with NCCL found)";
    return nullptr;
  }
#endif
#if defined(PP_TRAIN_HAVE_MPI)
  std::unique_ptr<Communicator> comm = createMPICommunicator(argc, argv);
  // MPI moves host memory; device tensors go through host copies.
  if (comm && std::string(backendName()) != "cpu")
    return stageThroughHost(std::move(comm));
  return comm;
#else
  (void)argc, (void)argv;
  error = "launched by mpirun, but this executable was built without MPI: "
          "run it with --local";
  return nullptr;
#endif
}

std::string pp::rt::train::executableDir(const char *argv0) {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  std::string path = n > 0 ? std::string(buffer, static_cast<size_t>(n))
                           : std::string(argv0 ? argv0 : "");
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

//===----------------------------------------------------------------------===//
// The job
//===----------------------------------------------------------------------===//

Job::~Job() {
  if (dataFd >= 0)
    close(dataFd);
  for (auto &[device, buffers] : constants)
    for (void *buffer : buffers)
      freeBuffer(buffer);
}

bool Job::beats(double value, double best) const {
  if (std::isnan(value))
    return false;
  if (std::isnan(best))
    return true;
  return bestMetric == "loss" ? value < best : value > best;
}

/// --best-metric, or the model's default; false when the model does not
/// report that measure.
static bool resolveBestMetric(Job &job, std::string &error) {
  if (job.options.saveBest.empty())
    return true;
  bool classifier = job.logitsOutput >= 0 && !job.languageModel;
  std::string metric = job.options.bestMetric;
  if (metric.empty())
    metric = job.iouClasses > 0 ? "miou" : classifier ? "accuracy" : "loss";
  if (metric == "accuracy" && !classifier) {
    error = "--best-metric accuracy: the model's evaluation reports no "
            "accuracy (no classifier's logits and labels)";
    return false;
  }
  if (metric == "miou" && job.iouClasses == 0) {
    error = "--best-metric miou: the model's evaluation reports no mean IoU "
            "(no per-pixel logits)";
    return false;
  }
  job.bestMetric = metric;
  return true;
}

int64_t Job::trainableBytes(int64_t stage) const {
  int64_t bytes = 0;
  for (int id : program.stageGlobals[stage]) {
    const GlobalInfo &info = program.globals[id];
    if (info.trainable)
      bytes += Tensor{nullptr, info.dtype, info.shape}.bytes();
  }
  return bytes;
}

std::string Job::deviceName(int64_t replica, int device) const {
  if (replica == 0)
    return deviceNames[device];
  size_t index = static_cast<size_t>((replica - 1) * numDevices + device);
  if (program.replicaDeviceNames.size() ==
      static_cast<size_t>((replicas - 1) * numDevices))
    return program.replicaDeviceNames[index];
  return deviceNames[device] + " of replica " + std::to_string(replica);
}

namespace {

/// What is wrong with the program's counts (devices, stages, micro-batches,
/// replicas, tensor parallelism, staleness, the per-stage and per-replica
/// tables' sizes), or "".
std::string checkProgramCounts(const ProgramInfo &p) {
  int numDevices = static_cast<int>(p.schedule.size());
  int64_t replicas = p.dataParallel, tensorParallel = p.tensorParallel;
  if (numDevices < 1)
    return "the schedule has no device";
  if (p.numStages < 1 || p.microBatches < 1)
    return "numStages and microBatches must be positive";
  if (replicas < 1 || replicas > 4096)
    return "dataParallel " + std::to_string(replicas) + " is not in [1, 4096]";
  if (tensorParallel < 1 || tensorParallel > 4096)
    return "tensorParallel " + std::to_string(tensorParallel) +
           " is not in [1, 4096]";
  if (tensorParallel > 1 &&
      (p.staleness >= 0 || !p.replicaSchedules.empty() || p.updateEvery > 0))
    return "tensor parallelism runs with synchronous schedules of one "
           "placement for every replica only (not WSP, weight "
           "versions or heterogeneous virtual workers)";
  if (p.staleness < -1 || p.staleness > 1000000 || p.wave < 1 ||
      p.wave > 1000000)
    return "staleness " + std::to_string(p.staleness) + " or wave " +
           std::to_string(p.wave) + " out of range";
  if (p.staleness >= 0 && replicas < 2)
    return "staleness (Wave Synchronous Parallel) needs dataParallel >= 2";
  if (static_cast<int64_t>(p.stageGlobals.size()) != p.numStages)
    return "stageGlobals has " + std::to_string(p.stageGlobals.size()) +
           " entries for " + std::to_string(p.numStages) + " stages";
  if (!p.replicaSchedules.empty() &&
      static_cast<int64_t>(p.replicaSchedules.size()) != replicas - 1)
    return "replicaSchedules has " + std::to_string(p.replicaSchedules.size()) +
           " entries for " + std::to_string(replicas) + " replicas";
  return "";
}

/// What is wrong with `action`, run by device `d` (of the replica that
/// `in` names), or "": its stage owned by `d` alone, its micro-batch and
/// its function those of the program. Records the stage's owner and the
/// device's stages and arena in `layout`.
std::string layOutAction(const Job &job, const ActionInfo &action, int d,
                         const std::string &in, Job::Layout &layout) {
  const ProgramInfo &p = job.program;
  if (action.stage < 0 || action.stage >= job.numStages)
    return "device " + std::to_string(d) + in + " runs stage " +
           std::to_string(action.stage);
  int &owner = layout.stageDevice[action.stage];
  if (owner >= 0 && owner != d)
    return "stage " + std::to_string(action.stage) + " runs on devices " +
           std::to_string(owner) + " and " + std::to_string(d);
  if (owner < 0)
    layout.deviceStages[d].push_back(action.stage);
  owner = d;
  if (action.microBatch < -1 || action.microBatch >= job.microBatches)
    return "an action of device " + std::to_string(d) + in +
           " has micro-batch " + std::to_string(action.microBatch);
  if (action.function < 0)
    return "";
  if (action.function >= static_cast<int>(p.functions.size()))
    return "an action of device " + std::to_string(d) + in +
           " calls function " + std::to_string(action.function);
  const FunctionInfo &f = p.functions[action.function];
  if (!f.function)
    return "function '" + f.name + "' has no code";
  if (f.stage != action.stage)
    return "function '" + f.name + "' belongs to stage " +
           std::to_string(f.stage) + ", the schedule runs it as stage " +
           std::to_string(action.stage);
  layout.deviceArena[d] = std::max(layout.deviceArena[d], f.arenaBytes);
  return "";
}

/// The layout of replica `r`'s schedule (replica 0's: the shared one) in
/// `layout`; what is wrong with the schedule, or "".
std::string layOutReplica(const Job &job, size_t r, Job::Layout &layout) {
  const ProgramInfo &p = job.program;
  const auto &schedule = r == 0 ? p.schedule : p.replicaSchedules[r - 1];
  std::string in = r == 0 ? "" : " of replica " + std::to_string(r);
  if (static_cast<int>(schedule.size()) != job.numDevices)
    return "the schedule" + in + " has " + std::to_string(schedule.size()) +
           " devices, replica 0's " + std::to_string(job.numDevices);
  layout.stageDevice.assign(static_cast<size_t>(job.numStages), -1);
  layout.deviceStages.assign(static_cast<size_t>(job.numDevices), {});
  layout.deviceArena.assign(static_cast<size_t>(job.numDevices), 0);
  for (int d = 0; d < job.numDevices; ++d)
    for (const ActionInfo &action : schedule[d])
      if (std::string problem = layOutAction(job, action, d, in, layout);
          !problem.empty())
        return problem;
  return "";
}

/// The tensor-parallel group size of each device in `deviceTensorParallel`:
/// its stages' (which must agree), else the program's; what is wrong with
/// stageTensorParallel, or "".
std::string groupTensorParallelDevices(const Job &job,
                                       std::vector<int> &deviceTensorParallel) {
  const ProgramInfo &p = job.program;
  if (!p.stageTensorParallel.empty() &&
      static_cast<int64_t>(p.stageTensorParallel.size()) != job.numStages)
    return "stageTensorParallel has " +
           std::to_string(p.stageTensorParallel.size()) + " entries for " +
           std::to_string(job.numStages) + " stages";
  deviceTensorParallel.assign(static_cast<size_t>(job.numDevices),
                              static_cast<int>(job.tensorParallel));
  if (p.stageTensorParallel.empty())
    return "";
  std::vector<int> seenStage(static_cast<size_t>(job.numDevices), -1);
  for (int64_t s = 0; s < job.numStages; ++s) {
    int64_t degree = p.stageTensorParallel[s];
    if (degree < 1 || degree > job.tensorParallel)
      return "stage " + std::to_string(s) + " has tensor-parallel degree " +
             std::to_string(degree) + ", not in [1, " +
             std::to_string(job.tensorParallel) + "]";
    int d = job.layouts[0].stageDevice[s];
    if (d < 0)
      continue;
    if (seenStage[d] >= 0 && deviceTensorParallel[d] != degree)
      return "device " + std::to_string(d) + " runs stage " +
             std::to_string(seenStage[d]) + " on " +
             std::to_string(deviceTensorParallel[d]) +
             " tensor-parallel devices and stage " + std::to_string(s) +
             " on " + std::to_string(degree);
    seenStage[d] = static_cast<int>(s);
    deviceTensorParallel[d] = static_cast<int>(degree);
  }
  return "";
}

/// What is wrong with the globals the stages hold or with the inputs (each
/// must split into the step's micro-batches of every replica), or "".
std::string checkStageGlobalsAndInputs(const Job &job) {
  const ProgramInfo &p = job.program;
  for (int64_t s = 0; s < job.numStages; ++s)
    for (int id : p.stageGlobals[s])
      if (id < 0 || id >= static_cast<int>(p.globals.size()))
        return "stage " + std::to_string(s) + " holds global " +
               std::to_string(id) + " of " + std::to_string(p.globals.size());
  int64_t parts = job.microBatches * job.replicas;
  for (const InputInfo &input : p.inputs)
    if (input.shape.empty() || input.shape[0] % parts != 0)
      return "input '" + input.name + "' " +
             describe(input.dtype, input.shape) + " does not split into " +
             std::to_string(parts) + " micro-batches along dim 0";
  return "";
}

/// The name of each device: the program's, else the backend's and its
/// index.
std::vector<std::string> programDeviceNames(const ProgramInfo &p,
                                            int numDevices) {
  std::vector<std::string> names;
  for (int d = 0; d < numDevices; ++d)
    names.push_back(d < static_cast<int>(p.deviceNames.size()) &&
                            !p.deviceNames[d].empty()
                        ? p.deviceNames[d]
                        : std::string(backendName()) + std::to_string(d));
  return names;
}

/// The scalar float outputs combined by mean or sum, which are reported
/// and logged, in `reported`; the loss among them in `lossIndex`: the
/// output named "loss", else the first reported scalar.
void findReportedOutputs(const ProgramInfo &p, std::vector<int> &reported,
                         int &lossIndex) {
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
}

} // namespace

bool Job::validateProgram(std::string &error) {
  const ProgramInfo &p = program;
  auto fail = [&](const std::string &message) {
    error = "invalid program '" + p.modelName + "': " + message;
    return false;
  };
  numStages = p.numStages;
  microBatches = p.microBatches;
  numDevices = static_cast<int>(p.schedule.size());
  replicas = p.dataParallel;
  tensorParallel = p.tensorParallel;
  if (std::string problem = checkProgramCounts(p); !problem.empty())
    return fail(problem);
  layouts.assign(p.replicaSchedules.empty() ? 1 : replicas, Layout());
  for (size_t r = 0; r < layouts.size(); ++r)
    if (std::string problem = layOutReplica(*this, r, layouts[r]);
        !problem.empty())
      return fail(problem);
  if (std::string problem =
          groupTensorParallelDevices(*this, deviceTensorParallel);
      !problem.empty())
    return fail(problem);
  // Each device's group takes the next slots of a replica.
  deviceFirstSlot.assign(static_cast<size_t>(numDevices), 0);
  ranksPerReplica = 0;
  for (int d = 0; d < numDevices; ++d) {
    deviceFirstSlot[d] = ranksPerReplica;
    ranksPerReplica += deviceTensorParallel[d];
  }
  numRanks = ranksPerReplica * static_cast<int>(replicas);
  if (std::string problem = checkStageGlobalsAndInputs(*this); !problem.empty())
    return fail(problem);
  deviceNames = programDeviceNames(p, numDevices);
  findReportedOutputs(p, reported, lossIndex);
  samplesPerStep = p.inputs.empty() ? 0 : p.inputs[0].shape[0];
  findLogits();
  return true;
}

void Job::findLogits() {
  const ProgramInfo &p = program;
  int64_t parts = microBatches * replicas;
  for (size_t o = 0; o < p.outputs.size() && logitsOutput < 0; ++o) {
    const OutputInfo &out = p.outputs[o];
    int64_t axis = out.classAxis;
    if (axis < 1 || axis >= static_cast<int64_t>(out.shape.size()) ||
        !isFloat(out.dtype))
      continue;
    std::vector<int64_t> expected = out.shape;
    expected.erase(expected.begin() + axis);
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const InputInfo &in = p.inputs[i];
      if (in.name != "labels" ||
          (in.dtype != DType::I64 && in.dtype != DType::I32) ||
          in.shape.empty() || in.shape[0] % parts != 0)
        continue;
      std::vector<int64_t> shape = in.shape;
      shape[0] /= parts;
      if (shape != expected)
        continue;
      logitsOutput = static_cast<int>(o);
      labelsInput = static_cast<int>(i);
      languageModel = out.shape.size() >= 3 &&
                      axis + 1 == static_cast<int64_t>(out.shape.size());
      logitsClasses = out.shape[axis];
      if (!languageModel && shape.size() >= 2)
        iouClasses = logitsClasses;
    }
  }
}

bool Job::checkLabels(Dataset &set, const std::string &flag,
                      std::string &error) const {
  if (logitsOutput < 0 || labelsInput < 0)
    return true;
  const OutputInfo &logits = program.outputs[static_cast<size_t>(logitsOutput)];
  if (set.checkLabels(labelsInput, logitsClasses, logits.hasIgnoreIndex,
                      logits.ignoreIndex, error))
    return true;
  error = flag + " " + error;
  return false;
}

bool Job::checkIndices(Dataset &set, const std::string &flag,
                       std::string &error) const {
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const InputInfo &input = program.inputs[i];
    if (input.gatherBound > 0 &&
        !set.checkIndices(static_cast<int>(i), input.gatherBound,
                          input.gatherNode, error)) {
      error = flag + " " + error;
      return false;
    }
  }
  return true;
}

bool Job::loadEvalData(std::string &error) {
  if (!options.evaluates())
    return true;
  if (waveSynchronous()) {
    error = "--eval-data: evaluation is not built for Wave Synchronous "
            "Parallel programs (staleness >= 0)";
    return false;
  }
  if (lossIndex < 0) {
    error = "--eval-data: the program reports no loss to evaluate";
    return false;
  }
  if (!evalDataset.open(program, options.evalDataFiles, options.evalDataDir,
                        "--eval-data", microBatchSamples(), error) ||
      !checkLabels(evalDataset, "--eval-data", error) ||
      !checkIndices(evalDataset, "--eval-data", error))
    return false;
  evalBatches = (evalDataset.samples() + samplesPerStep - 1) / samplesPerStep;
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
  if (!openDataFile(error))
    return false;

  // Resume: the seed and step count of the checkpoint (read first: random
  // inputs are drawn from the seed).
  seed = options.seed;
  lrSchedule = options.lrSchedule.value_or(LRSchedule{});
  lr = options.lr;
  if (!options.resumeDir.empty()) {
    if (!selectResumeCheckpoint(*this, error))
      return false;
    seed = resume.seed;
    resuming = true;
    // The rate is a function of the step: the checkpoint's schedule goes on
    // unless the command line sets another.
    if (!options.lrSchedule && resume.lrSchedule)
      lrSchedule = *resume.lrSchedule;
    if (!options.lr && resume.lrRecorded)
      lr = resume.lr;
  }
  if (!resolveBestMetric(*this, error))
    return false;
  // The best so far goes on from the checkpoint when it was measured alike.
  if (resuming && !bestMetric.empty() && resume.bestMetric == bestMetric) {
    resumedBest = resume.bestValue;
    resumedBestStep = resume.bestStep;
  } else if (resuming && !bestMetric.empty() && !resume.bestMetric.empty() &&
             environmentRank() == 0) {
    std::fprintf(stderr,
                 "note: --resume: --best-metric %s starts anew (the "
                 "checkpoint's best is by %s)\n",
                 bestMetric.c_str(), resume.bestMetric.c_str());
  }
  clipGradNorm = options.clipGradNorm.value_or(
      resuming ? resume.clipGradNorm.value_or(0) : 0);
  return checkClipping(error) && loadInputs(error) && loadEvalData(error);
}

bool Job::checkClipping(std::string &error) const {
  if (clipGradNorm <= 0)
    return true;
  const ProgramInfo &p = program;
  std::string schedule = kinds::toString(p.scheduleKind);
  auto refuse = [&](const std::string &why) {
    error = "--clip-grad-norm: " + why +
            ", so no norm over the whole model's gradient of a step exists; "
            "clipping by the global norm runs with the synchronous schedules "
            "(gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, dualpipev; any "
            "dp and tp)";
    return false;
  };
  if (p.staleness >= 0)
    return refuse("schedule " + schedule +
                  " runs its virtual workers under Wave Synchronous Parallel "
                  "(staleness " +
                  std::to_string(p.staleness) +
                  "), each updating at its own time");
  if (p.updateEvery > 0)
    return refuse("schedule " + schedule +
                  " keeps weight versions: each stage updates " +
                  std::to_string(microBatches / p.updateEvery) +
                  " times a step, each stage at its own time");
  // Every rank takes part in the norm before its first update: the actions
  // after it must not wait for another rank's.
  for (int64_t r = 0; r < static_cast<int64_t>(layouts.size()); ++r)
    for (int d = 0; d < numDevices; ++d) {
      bool updated = false;
      for (const ActionInfo &a : actionsOf(r, d)) {
        bool update = a.kind == kinds::ActionKind::OptimizerStep;
        if (updated && !update)
          return refuse("device " + std::to_string(d) + " of schedule " +
                        schedule + " runs " + kinds::toString(a.kind) +
                        " of stage " + std::to_string(a.stage) +
                        " after an update of the step");
        updated |= update;
      }
    }
  return true;
}

bool Job::openDataFile(std::string &error) {
  const ProgramInfo &p = program;
  uint32_t dataCrc = 0;
  // The data file: --data-file as given, else next to the executable.
  dataPath = !options.dataFile.empty() ? options.dataFile
                                       : resolveNextTo(exeDir, p.dataFile);
  bool needsData = !p.globals.empty() || !p.constants.empty();
  if (needsData) {
    if (dataPath.empty()) {
      error = "the program names no data file: pass --data-file PATH";
      return false;
    }
    int64_t size = 0;
    dataFd = openRegularFile(dataPath, size, error, "the data file");
    if (dataFd < 0)
      return false;
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
    std::vector<char> chunk(1 << 20);
    for (int64_t at = 0; at < size;) {
      int64_t n = std::min<int64_t>(size - at, chunk.size());
      std::string what = "its CRC-32C";
      if (!readData(at, n, chunk.data(), what, error))
        return false;
      dataCrc = crc32c(dataCrc, chunk.data(), static_cast<size_t>(n));
      at += n;
    }
    if (p.dataHash != 0 && dataCrc != p.dataHash) {
      error = "the data file '" + dataPath + "' is not the one of program '" +
              p.modelName + "' (its CRC-32C is " + hex32(dataCrc) +
              ", the program's data file has " + hex32(p.dataHash) +
              "): a data file of another program?";
      return false;
    }
  }
  identity = hex32(tableHash(p)) + " " + hex32(dataCrc);
  return true;
}

bool Job::loadInputs(std::string &error) {
  const ProgramInfo &p = program;
  inputData.assign(p.inputs.size(), HostTensor());
  bool fromFiles = !options.dataFiles.empty() || !options.dataDir.empty();
  if (!fromFiles) {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      inputData[i].dtype = p.inputs[i].dtype;
      inputData[i].shape = p.inputs[i].shape;
      fillRandom(inputData[i], p.inputs[i].randomBound, rng);
    }
    return true;
  }
  if (!dataset.open(p, options, error) ||
      !checkLabels(dataset, "--data", error) ||
      !checkIndices(dataset, "--data", error))
    return false;
  // The order goes on from a checkpoint: its seed (above) and its
  // --shuffle, which a resumed command line need not repeat.
  bool shuffle = options.shuffle;
  if (resuming && resume.dataOrder.find("shuffle 1") != std::string::npos)
    shuffle = true;
  if (!dataset.setOrder(shuffle, seed, error))
    return false;
  dataset.startPrefetch(options.dataPrefetch);
  if (resuming && !resume.dataOrder.empty() &&
      resume.dataOrder != dataset.orderKey() && environmentRank() == 0)
    std::fprintf(stderr,
                 "note: --resume: the data order (%s) is not the "
                 "checkpoint's (%s): the resumed steps read other samples "
                 "than the uninterrupted run would\n",
                 dataset.orderKey().c_str(), resume.dataOrder.c_str());
  if (options.epochs > 0) {
    options.steps = options.epochs * dataset.stepsPerEpoch();
    if (lrSchedule.decays() && lrSchedule.decaySteps == 0) {
      lrSchedule.decaySteps = options.steps;
      if (lrSchedule.decaySteps <= lrSchedule.warmupSteps) {
        error = "--epochs " + std::to_string(options.epochs) + " (" +
                std::to_string(options.steps) + " steps) leaves no " +
                "learning-rate decay after --warmup-steps " +
                std::to_string(lrSchedule.warmupSteps) +
                " (the decay ends at --decay-steps, default the run's steps)";
        return false;
      }
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
