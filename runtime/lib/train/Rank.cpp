//===- Rank.cpp - One device's schedule, step after step ------------------===//
//
// Every step, a rank runs its device's actions in order on the StageState
// of each stage it holds, then all ranks reduce the step's reported outputs
// (summed in double, divided for "mean", rounded to the output's dtype, as
// the reference interpreter's pipeline mode combines them) and busy times.
// Failures are agreed on, or stop every rank through the communicator's
// abort, so no rank waits forever for a failed peer.
//
//===----------------------------------------------------------------------===//

#include "Rank.h"
#include "Checkpoint.h"
#include "Export.h"
#include "Report.h"
#include "Util.h"

#include "pp/Runtime/Half.h"
#include "pp/Runtime/Memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

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

} // namespace

Rank::~Rank() {
  // What a failed step left behind goes back to the pool, which frees it.
  for (auto &[s, buckets] : reducing)
    for (Bucket &bucket : buckets)
      pool.release(bucket.packed);
}

void Rank::abortJob(const std::string &message) {
  if (job.aborted.exchange(true))
    return; // another rank of this process failed first and said why
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  world.abort("stopping every rank after the error above");
}

void Rank::report(const std::string &message) {
  if (worldRank == 0) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
  }
}

bool Rank::agree(bool ok, const std::string &error) {
  std::vector<double> failed(static_cast<size_t>(world.size()), 0.0);
  failed[worldRank] = ok ? 0.0 : 1.0;
  Status s = allReduce(failed);
  if (!s.ok()) {
    abortJob("error: rank " + std::to_string(worldRank) + " (device " +
             deviceName() + "): " + (ok ? s.message : error));
    return false;
  }
  for (int r = 0; r < world.size(); ++r) {
    if (failed[r] == 0.0)
      continue;
    if (r == worldRank) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      std::fflush(stderr);
    }
    return false;
  }
  return true;
}

bool Rank::splitWorld(std::string &error) {
  if (job.numRanks <= 1)
    return true;
  // Collective on every rank, whether or not it loaded the job.
  std::string splitError;
  pipelineComm = world.split(static_cast<int>(replica), slot, splitError);
  // The replicas of a device (and place in its group) reduce gradients.
  if (pipelineComm && job.replicas > 1)
    replicaComm = world.split(slot, static_cast<int>(replica), splitError);
  if (pipelineComm && job.tensorParallel > 1) {
    tpComm = world.split(worldRankOf(rank), tpRank, splitError);
    if (!tpComm) {
      error = "rank " + std::to_string(worldRank) +
              ": creating the tensor-parallel groups: " + splitError;
      return false;
    }
  }
  if (!pipelineComm || (job.replicas > 1 && !replicaComm)) {
    error = "rank " + std::to_string(worldRank) +
            ": creating the data-parallel groups: " + splitError;
    return false;
  }
  // Replicas with their own placements: a stage's copies live on different
  // devices in each replica, so each stage gets the group of its holders
  // (the other ranks split off alone), every rank splitting for every stage
  // in the same order.
  if (job.layouts.size() > 1)
    for (int64_t s = 0; s < job.numStages; ++s) {
      bool holds = job.layout(replica).stageDevice[s] == rank;
      auto comm = world.split(holds ? 0 : 1 + worldRank,
                              static_cast<int>(replica), splitError);
      if (!comm) {
        error = "rank " + std::to_string(worldRank) +
                ": creating the group of stage " + std::to_string(s) + ": " +
                splitError;
        return false;
      }
      if (holds)
        stageComms[s] = std::move(comm);
    }
  return true;
}

bool Rank::setupMessageMatching(std::string &error) {
  const std::string &mode = job.options.p2pMatching;
  bool untagged = std::string(world.backend()) == "nccl";
  if (mode == "tags" && untagged) {
    error = "--p2p-matching=tags: the NCCL transport has no tags (use auto, "
            "order or headers)";
    return false;
  }
  if (mode == "order" && !job.program.messagesInSendOrder) {
    error = "--p2p-matching=order: the compiler did not prove that this "
            "program's messages arrive in the order they are sent (use "
            "headers)";
    return false;
  }
  if (mode == "tags" || (mode == "auto" && !untagged))
    return true;
  bool headers =
      mode == "headers" || (mode == "auto" && !job.program.messagesInSendOrder);
  Communicator &transport = pipelineComm ? *pipelineComm : world;
  // The slot pairs of this replica that exchange messages (each member of
  // a sending group with its receivers, peersOf), and the first member of
  // every device to slot 0 (the gather of the trained globals).
  std::set<std::pair<int, int>> links;
  const std::vector<int> &stageDevice = job.layout(replica).stageDevice;
  for (auto [from, to] : job.program.stageLinks) {
    if (from < 0 || to < 0 || from >= job.numStages || to >= job.numStages)
      continue;
    int a = stageDevice[from], b = stageDevice[to];
    if (a == b)
      continue;
    int senders = job.deviceTensorParallel[a];
    for (int t = 0; t < job.deviceTensorParallel[b]; ++t)
      links.insert({slotOf(a, t % senders), slotOf(b, t)});
  }
  for (int d = 1; d < job.numDevices; ++d)
    links.insert({slotOf(d), 0});
  if (Status s = transport.connect({links.begin(), links.end()}); !s.ok()) {
    error = "rank " + std::to_string(worldRank) +
            ": connecting the pipeline's ranks: " + s.message;
    return false;
  }
  orderedPipeline = matchMessagesByOrder(transport, headers);
  return true;
}

bool Rank::setup(std::string &error) {
  int count = backendDeviceCount();
  if (count < 1) {
    error = std::string("no ") + backendName() + " device";
    return false;
  }
  int device = (job.options.local ? worldRank : localRank(worldRank)) % count;
  kernels.numThreads = job.options.threads;
  kernels.allowTF32 = job.options.tf32;
  if (Status s = createKernelContext(kernels, device); !s.ok()) {
    error = "rank " + std::to_string(worldRank) + ": " + s.message;
    return false;
  }
  hasKernelContext = true;
  if (!checkOutputs(job, rank, error))
    return false;
  arenaBytes = job.layout(replica).deviceArena[rank];
  arena = allocateBuffer(arenaBytes);
  if (!arena) {
    error = "rank " + std::to_string(worldRank) +
            ": out of memory for the arena (" + std::to_string(arenaBytes) +
            " bytes)";
    return false;
  }
  constants = job.uploadConstants(device, error);
  if (!constants)
    return false;
  for (int64_t s : job.layout(replica).deviceStages[rank])
    stages[s] = std::make_unique<StageState>(*this, s, job.seed);
  if (!loadGlobals(error))
    return false;
  // Under WSP every rank has its own checkpoint file.
  bool wsp = job.waveSynchronous();
  if (job.resuming && (wsp || job.layouts.size() == 1 || replica == 0) &&
      !restoreRankCheckpoint(job, wsp ? worldRank : rank, stages, nullptr,
                             error))
    return false;
  // A replica with its own placement: each stage from the file of replica
  // 0's device that runs it.
  if (job.resuming && !wsp && job.layouts.size() > 1 && replica != 0) {
    std::set<int> files;
    for (auto &[s, state] : stages)
      files.insert(job.layout(0).stageDevice[s]);
    std::set<int64_t> restored;
    for (int file : files)
      if (!restoreRankCheckpoint(job, file, stages, &restored, error))
        return false;
    if (restored.size() != stages.size()) {
      error = "--resume: rank " + std::to_string(worldRank) +
              ": the checkpoint lacks some of its stages";
      return false;
    }
  }
  if (wsp) {
    waveSync = std::make_unique<WaveSync>(*this);
    if (!waveSync->begin(job.resuming ? job.resume.waveClock : 0, error))
      return false;
  }
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
        error = "rank " + std::to_string(worldRank) +
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

bool Rank::runAction(const ActionInfo &action) {
  const FunctionInfo &f = job.program.functions[action.function];
  StageState &state = *stages[action.stage];
  // Replica r's micro-batch j is the global micro-batch r m + j: the slice
  // of the inputs it reads and its Dropout masks, as in the interpreter.
  int64_t microBatch = placeAction(action);
  auto where = [&] {
    return "error: rank " + std::to_string(worldRank) + " (device " +
           deviceName() + "), stage " + std::to_string(action.stage) +
           ", micro-batch " + std::to_string(microBatch) + ", " +
           kinds::toString(action.kind) + " " + f.name + ": ";
  };
  std::string stepNote =
      state.evaluating ? " (evaluation after step " + std::to_string(step + 1) +
                             ", batch " + std::to_string(evalBatch + 1) +
                             " of " + std::to_string(job.evalBatches) + ")"
                       : " (step " + std::to_string(step + 1) + ")";
  state.microBatchBase = functionMicroBatch(action).second;
  double start = nowSeconds();
  // Weight-versioned schedules: the stage's trainables point at the
  // version the action reads while it runs.
  std::map<int, Tensor> latest;
  std::vector<Tensor> temporaries;
  auto restore = [&] {
    for (auto &[id, t] : latest)
      state.globals[id] = t;
    for (const Tensor &t : temporaries)
      pool.release(t);
    state.releaseLent();
  };
  try {
    if (job.program.updateEvery > 0 && !kinds::isPerStep(action.kind))
      weightVersions.read(action, state.globals, latest, temporaries);
    if (!job.options.writeProfile.empty()) {
      state.timingOps = true;
      state.timingPhase = f.phase;
      state.lastOpSeconds = nowSeconds();
    }
    f.function(state, microBatch);
    Status s = synchronizeKernels(kernels);
    if (!s.ok())
      throw StageError("kernels", s.message);
    if (state.timingOps && state.lastOp) {
      state.lastOp->seconds += nowSeconds() - state.lastOpSeconds;
      // An update function updates every trainable of its stage.
      if (f.phase == kinds::Phase::Update)
        state.lastOp->parameterBytes +=
            static_cast<double>(job.trainableBytes(f.stage));
      state.lastOp = nullptr;
    }
  } catch (const StageError &e) {
    restore();
    abortJob(where() + "op " + e.op + ": " + e.what() + stepNote);
    return false;
  } catch (const std::exception &e) {
    restore();
    abortJob(where() + e.what() + stepNote);
    return false;
  }
  restore();
  double end = nowSeconds();
  running().busyMs[action.stage] +=
      (end - start) * 1e3 - waitMs[action.stage];
  running().endSeconds = end;
  waitMs[action.stage] = 0;
  return true;
}

std::pair<int64_t, int64_t>
Rank::functionMicroBatch(const ActionInfo &action) const {
  if (action.microBatch < 0)
    return {action.microBatch, 0};
  int64_t m = job.microBatches;
  int64_t base = action.microBatch / m * m * job.replicas + replica * m;
  return {base + action.microBatch % m, base};
}

int64_t Rank::placeAction(const ActionInfo &action) {
  int64_t steps = static_cast<int64_t>(window.size());
  if (action.microBatch >= 0) {
    step = windowStart + action.microBatch / job.microBatches;
  } else if (action.kind == kinds::ActionKind::OptimizerStep &&
             job.program.updateEvery > 0) {
    // The u-th update of the window belongs to step u / U.
    int64_t perStep = job.microBatches / job.program.updateEvery;
    step = windowStart + weightVersions.updates(action.stage) / perStep;
  }
  step = std::min(std::max(step, windowStart), windowStart + steps - 1);
  return functionMicroBatch(action).first;
}

bool Rank::postReceives(const std::vector<ActionInfo> &actions, size_t index) {
  auto post = [&](const ActionInfo &action) {
    const FunctionInfo &f = job.program.functions[action.function];
    auto [microBatch, base] = functionMicroBatch(action);
    StageState &state = *stages[action.stage];
    for (const ReceiveInfo &r : f.receives)
      state.postReceive(r, microBatch, base);
  };
  const ActionInfo *current = &actions[index];
  try {
    post(*current);
    if (!job.options.prefetchReceives)
      return true;
    for (size_t next = index + 1; next < actions.size(); ++next)
      if (actions[next].function >= 0) {
        current = &actions[next];
        post(*current);
        break;
      }
  } catch (const std::exception &e) {
    const StageError *stageError = dynamic_cast<const StageError *>(&e);
    abortJob("error: rank " + std::to_string(worldRank) + " (device " +
             deviceName() + "), stage " + std::to_string(current->stage) +
             ", micro-batch " + std::to_string(current->microBatch) + ", " +
             kinds::toString(current->kind) + ": " +
             (stageError ? "op " + stageError->op + ": " : std::string()) +
             e.what() + " (step " + std::to_string(step + 1) + ")");
    return false;
  }
  return true;
}

bool Rank::gradReduce(const ActionInfo &action) {
  StageState &state = *stages[action.stage];
  std::vector<Bucket> &buckets = reducing[action.stage];
  try {
    // One bucket per dtype, its slots in slot order (the same on every
    // replica).
    std::map<DType, std::vector<Tensor *>> byType;
    for (auto &[slot, sum] : state.sums)
      byType[sum.dtype].push_back(&sum);
    for (auto &[dtype, sums] : byType) {
      int64_t numel = 0;
      for (Tensor *t : sums)
        numel += t->numel();
      Bucket &bucket = buckets.emplace_back();
      bucket.packed = pool.acquire(dtype, {numel});
      bucket.slots = sums;
      copyBucket(bucket, /*toSlots=*/false);
      Status s = reduceComm(action.stage)
                     .startAllReduceSum(bucket.packed, bucket.request);
      if (!s.ok())
        throw std::runtime_error(s.message);
    }
  } catch (const std::exception &e) {
    abortGradReduce(action.stage, e.what());
    return false;
  }
  return true;
}

void Rank::copyBucket(Bucket &bucket, bool toSlots) {
  char *packed = static_cast<char *>(bucket.packed.data);
  for (Tensor *t : bucket.slots) {
    if (toSlots)
      copyBuffer(t->data, packed, t->bytes());
    else
      copyBuffer(packed, t->data, t->bytes());
    packed += t->bytes();
  }
}

void Rank::abortGradReduce(int64_t stage, const std::string &message) {
  abortJob("error: rank " + std::to_string(worldRank) + " (device " +
           deviceName() + "), stage " + std::to_string(stage) +
           ", grad_reduce over " + std::to_string(job.replicas) +
           " replicas: " + message + " (step " + std::to_string(step + 1) +
           ")");
}

bool Rank::finishGradReduce(int64_t stage) {
  auto it = reducing.find(stage);
  if (it == reducing.end())
    return true;
  std::string error;
  for (Bucket &bucket : it->second) {
    if (error.empty()) {
      Status s = reduceComm(stage).waitAllReduce(bucket.request);
      if (s.ok())
        copyBucket(bucket, /*toSlots=*/true);
      else
        error = s.message;
    }
    pool.release(bucket.packed);
  }
  reducing.erase(it);
  if (error.empty())
    return true;
  abortGradReduce(stage, error);
  return false;
}

double Rank::squaredGradientNorm(int64_t &values) {
  std::vector<const Tensor *> sums;
  int64_t largest = 0;
  for (auto &[s, state] : stages)
    for (auto &[slot, sum] : state->sums) {
      sums.push_back(&sum);
      largest = std::max(largest, sum.numel());
    }
  values = 0;
  if (sums.empty())
    return 0;
  // In f64 whatever the sums' dtype (the norm of a large model adds many
  // small squares), one kernel queue and one copy back for all of them.
  Tensor wide = pool.acquire(DType::F64, {largest});
  Tensor totals = pool.acquire(DType::F64, {static_cast<int64_t>(sums.size())});
  Status s;
  for (size_t i = 0; i < sums.size() && s.ok(); ++i) {
    int64_t n = sums[i]->numel();
    values += n;
    Tensor flat{sums[i]->data, sums[i]->dtype, {n}};
    Tensor squares{wide.data, DType::F64, {n}};
    Tensor total{static_cast<double *>(totals.data) + i, DType::F64, {}};
    s = cast(kernels, flat, squares);
    if (s.ok())
      s = binary(kernels, BinaryKind::Mul, squares, squares, squares);
    if (s.ok())
      s = reduce(kernels, ReduceKind::Sum, squares, {0}, total);
  }
  if (s.ok())
    s = synchronizeKernels(kernels);
  std::vector<double> host(sums.size(), 0.0);
  if (s.ok())
    copyFromBuffer(host.data(), totals.data, totals.bytes());
  pool.release(wide);
  pool.release(totals);
  if (!s.ok())
    throw std::runtime_error(s.message);
  double squares = 0;
  for (double v : host)
    squares += v;
  return squares;
}

void Rank::scaleGradients(double factor) {
  // One scalar per dtype: the kernels of one queue run in order.
  std::map<DType, Tensor> factors;
  Status s;
  for (auto &[stage, state] : stages)
    for (auto &[slot, sum] : state->sums) {
      if (!s.ok())
        break;
      auto [it, added] = factors.emplace(sum.dtype, Tensor{});
      if (added) {
        it->second = pool.acquire(sum.dtype, {});
        s = fill(kernels, it->second, factor);
      }
      if (s.ok())
        s = binary(kernels, BinaryKind::Mul, sum, it->second, sum);
    }
  if (s.ok())
    s = synchronizeKernels(kernels);
  for (auto &[dtype, t] : factors)
    pool.release(t);
  if (!s.ok())
    throw std::runtime_error(s.message);
}

bool Rank::clipGradients() {
  // The sums must be whole: every replica's (grad_reduce) on every stage.
  for (auto &[s, state] : stages)
    if (!finishGradReduce(s))
      return false;
  auto fail = [&](const std::string &message) {
    abortJob("error: rank " + std::to_string(worldRank) + " (device " +
             deviceName() + "), step " + std::to_string(step + 1) +
             ": --clip-grad-norm: " + message);
    return false;
  };
  // Each gradient once: replica 0's (the replicas' sums are equal once
  // reduced) and a tensor-parallel group's first member's (the members
  // hold the whole gradient alike). A tied weight's gradient is summed on
  // one stage (the others send it their parts). [squares, values]
  std::vector<double> totals(2, 0.0);
  try {
    if (replica == 0 && tpRank == 0) {
      int64_t values = 0;
      totals[0] = squaredGradientNorm(values);
      totals[1] = static_cast<double>(values);
    }
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  if (Status s = allReduce(totals); !s.ok())
    return fail("the norm over every rank: " + s.message);
  // More values than the trained tensors hold would be a layout of sums
  // this driver does not know, counting a gradient twice (fewer are fine:
  // no gradient may reach a trained tensor). Every rank sees the same.
  double trained = 0;
  for (const GlobalInfo &g : job.program.globals)
    if (g.trainable)
      trained += static_cast<double>(numelOf(g.shape));
  if (totals[1] > trained) {
    report("error: step " + std::to_string(step + 1) +
           ": --clip-grad-norm: the step's gradient sums hold " +
           std::to_string(static_cast<int64_t>(totals[1])) +
           " values, more than the " +
           std::to_string(static_cast<int64_t>(trained)) +
           " of the trained tensors: a gradient would count twice");
    return false;
  }
  double norm = std::sqrt(totals[0]);
  running().gradNorm = norm;
  // PyTorch's coefficient. A non-finite norm leaves the gradients as they
  // are (a loss-scaled step is then skipped as without clipping).
  double coefficient = job.clipGradNorm / (norm + 1e-6);
  if (!std::isfinite(norm) || coefficient >= 1)
    return true;
  try {
    scaleGradients(coefficient);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return true;
}

bool Rank::writeCheckpoint() {
  const std::string &dir = job.options.checkpointDir;
  int64_t completed = step + 1;
  std::string error;
  CheckpointFile file;
  // The replicas hold the same weights and optimizer state: replica 0
  // writes the checkpoint, and every replica resumes from it. Under WSP
  // the weights agree (every wave applied) but the optimizer states and
  // statistics are each VW's own: every rank writes its file.
  // Non-finite weights are never committed: `latest` keeps naming the last
  // sound checkpoint. (A step's loss is checked by finishStep; this catches
  // the update after it.)
  std::string bad = findNonFiniteGlobal(job.program, stages);
  if (!agree(bad.empty(),
             "rank " + std::to_string(worldRank) + " (device " + deviceName() +
                 "): training diverged at step " + std::to_string(completed) +
                 ": " + bad + " not finite after its update; checkpoint '" +
                 checkpointStepDir(dir, completed) +
                 "' is not written (--resume takes the last committed one)"))
    return false;
  bool wsp = job.waveSynchronous();
  int fileIndex = wsp ? worldRank : rank;
  bool ok = ((replica != 0 || tpRank != 0) && !wsp) ||
            writeRankCheckpoint(
                checkpointStepDir(dir, completed),
                captureRankCheckpoint(job, fileIndex, stages, completed), file,
                error);
  if (!agree(ok,
             "--checkpoint: rank " + std::to_string(worldRank) + ": " + error))
    return false;
  // Every rank's file is on disk: rank 0 learns their sizes and CRCs (exact
  // in doubles), writes the manifest and commits.
  int numFiles = job.checkpointRanks();
  std::vector<double> files(2 * static_cast<size_t>(numFiles), 0.0);
  if ((replica == 0 && tpRank == 0) || wsp) {
    files[2 * fileIndex] = static_cast<double>(file.size);
    files[2 * fileIndex + 1] = file.crc;
  }
  if (Status s = allReduce(files); !s.ok()) {
    abortJob("error: rank " + std::to_string(worldRank) +
             ": --checkpoint: " + s.message);
    return false;
  }
  if (worldRank == 0) {
    CheckpointManifest manifest;
    manifest.modelName = job.program.modelName;
    manifest.identity = job.identity;
    manifest.completedSteps = completed;
    manifest.numDevices = job.numDevices;
    manifest.numStages = job.numStages;
    manifest.seed = job.seed;
    manifest.lrSchedule = job.lrSchedule;
    manifest.lr = job.lr;
    manifest.lrRecorded = true;
    if (job.clipGradNorm > 0)
      manifest.clipGradNorm = job.clipGradNorm;
    manifest.dataOrder = job.dataset.orderKey();
    if (!job.bestMetric.empty() && !std::isnan(bestValue)) {
      manifest.bestMetric = job.bestMetric;
      manifest.bestValue = bestValue;
      manifest.bestStep = bestStep;
    }
    if (waveSync)
      manifest.waveClock = waveSync->clock();
    for (int r = 0; r < numFiles; ++r)
      manifest.files.push_back({rankCheckpointName(r),
                                static_cast<int64_t>(files[2 * r]),
                                static_cast<uint32_t>(files[2 * r + 1])});
    ok = commitCheckpoint(dir, manifest, job.options.keepCheckpoints, error);
  }
  return agree(ok, "--checkpoint: " + error);
}

bool Rank::finishStep(double startSeconds, double stepSeconds,
                      double loopStart, int64_t stepsDone, StepLog &log) {
  const StepRecord &record = running();
  const auto &outputParts = record.outputParts;
  const auto &outputSeen = record.outputSeen;
  const auto &outputStage = record.outputStage;
  const auto &busyMs = record.busyMs;
  // A reduction no optimizer step waited for ends with the step.
  while (!reducing.empty())
    if (!finishGradReduce(reducing.begin()->first))
      return false;
  // A value stashed and never unstashed is a schedule error.
  for (auto &[s, state] : stages)
    if (!state->stashed.empty()) {
      abortJob("error: rank " + std::to_string(worldRank) + " (device " +
               deviceName() + "), stage " + std::to_string(s) + ", step " +
               std::to_string(step + 1) + ": the step left " +
               std::to_string(state->stashed.size()) +
               " stashed value(s) that no backward took");
      return false;
    }

  // [partial sum, micro-batches, producing stage + 1] per reported output,
  // then the busy time of every stage. Under WSP each VW has its own step:
  // its outputs and busy times, reduced over its pipeline only, so no step
  // waits for another VW.
  bool wsp = job.waveSynchronous();
  size_t k = job.reported.size();
  int64_t totalMicroBatches = job.microBatches * job.replicas;
  int64_t expectedMicroBatches = wsp ? job.microBatches : totalMicroBatches;
  auto fail = [&](const std::string &message) {
    if (!wsp)
      report(message);
    else if (rank == 0)
      abortJob(message); // the other VWs would wait for this one's pushes
    return false;
  };
  size_t numStages = static_cast<size_t>(job.numStages);
  // ..., then the logits' top-1 hits and the labels counted.
  std::vector<double> stats(3 * k + 4 * numStages + 2, 0.0);
  size_t hitsAt = stats.size() - 2;
  for (int64_t mb = 0; mb < totalMicroBatches && tpRank == 0; ++mb)
    if (record.hitsSeen[mb]) {
      stats[hitsAt] += record.hits[mb];
      stats[hitsAt + 1] += record.labelsCounted[mb];
    }
  // The devices of a tensor-parallel group compute the same outputs: the
  // first of each group reports them.
  for (size_t i = 0; i < k && tpRank == 0; ++i) {
    for (int64_t mb = 0; mb < totalMicroBatches; ++mb)
      if (outputSeen[i][mb]) {
        stats[3 * i] += outputParts[i][mb];
        stats[3 * i + 1] += 1;
      }
    if (stats[3 * i + 1] > 0)
      stats[3 * i + 2] = static_cast<double>(outputStage[i] + 1);
  }
  // Busy time: the mean over the replicas (this VW's under WSP).
  for (int64_t s = 0; s < job.numStages && tpRank == 0; ++s)
    stats[3 * k + s] = busyMs[s] / static_cast<double>(wsp ? 1 : job.replicas);
  // The rates each stage's updates read, from one holder of the stage (the
  // sum then keeps them exact): the least, the largest, how many.
  double *rates = &stats[3 * k + numStages];
  for (const auto &[s, seen] : record.rates)
    if (tpRank == 0 && (wsp || replica == 0) && seen.reads > 0) {
      rates[3 * s] = seen.min;
      rates[3 * s + 1] = seen.max;
      rates[3 * s + 2] = static_cast<double>(seen.reads);
    }
  if (Status s = allReduce(stats, wsp ? &pipeline() : nullptr); !s.ok()) {
    abortJob("error: rank " + std::to_string(worldRank) + " (device " +
             deviceName() + "), step " + std::to_string(step + 1) +
             ": gathering the step's outputs: " + s.message);
    return false;
  }
  if (stepSeconds < 0)
    stepSeconds = nowSeconds() - startSeconds;

  // Every rank sees the same reduced values, so all stop alike.
  std::vector<double> values(k);
  for (size_t i = 0; i < k; ++i) {
    const OutputInfo &info = job.program.outputs[job.reported[i]];
    int64_t stage = static_cast<int64_t>(stats[3 * i + 2]) - 1;
    if (stats[3 * i + 1] != static_cast<double>(expectedMicroBatches))
      return fail("error: step " + std::to_string(step + 1) + ": output '" +
                  info.name + "' was produced for " +
                  std::to_string(static_cast<int64_t>(stats[3 * i + 1])) +
                  " of " + std::to_string(expectedMicroBatches) +
                  " micro-batches");
    double total = stats[3 * i];
    if (info.combine == "mean")
      total /= static_cast<double>(expectedMicroBatches);
    values[i] = roundTo(info.dtype, total);
    if (!std::isfinite(values[i])) {
      // Replica 0's device, or under WSP this VW's.
      int producer =
          stage >= 0 ? job.layout(wsp ? replica : 0).stageDevice[stage] : -1;
      std::string device = producer < 0 ? "?"
                           : wsp        ? job.deviceName(replica, producer)
                                        : job.deviceNames[producer];
      if (wsp && producer >= 0)
        producer = worldRankOf(producer);
      return fail("error: rank " + std::to_string(producer) + " (device " +
                  device + "), stage " + std::to_string(stage) + ", step " +
                  std::to_string(step + 1) + ": output '" + info.name +
                  "' is " + (std::isnan(values[i]) ? "NaN" : "infinite"));
    }
  }
  stepLoss = job.lossIndex >= 0 ? values[job.lossIndex] : NAN;
  for (int64_t s = 0; s < job.numStages; ++s)
    totalBusyMs[s] += stats[3 * k + s];
  if (worldRank != 0)
    return true;

  double samplesPerSecond =
      stepSeconds > 0 ? static_cast<double>(job.samplesPerStep) / stepSeconds
                      : 0;
  double elapsed = nowSeconds() - loopStart;
  double eta = elapsed / static_cast<double>(stepsDone) *
               static_cast<double>(job.options.steps - (step + 1));
  printProgress(job, step, values, samplesPerSecond, eta);
  StepLog::Rates stepRates;
  for (size_t s = 0; s < numStages; ++s)
    if (rates[3 * s + 2] > 0) {
      stepRates.min = std::min(stepRates.min, rates[3 * s]);
      stepRates.max = std::max(stepRates.max, rates[3 * s + 1]);
      stepRates.reads += static_cast<int64_t>(rates[3 * s + 2]);
    }
  std::string error;
  // A classifier's accuracy over the step's batch.
  if (job.logitsOutput >= 0 && !job.languageModel && stats[hitsAt + 1] > 0)
    log.setAccuracy(stats[hitsAt] / stats[hitsAt + 1]);
  if (log.isOpen() &&
      !log.write(step, job.lossIndex >= 0 ? values[job.lossIndex] : NAN,
                 samplesPerSecond, stepSeconds * 1e3, &stats[3 * k], stepRates,
                 record.gradNorm, error)) {
    abortJob("error: " + error);
    return false;
  }
  return true;
}

bool Rank::evaluationDue(int64_t s) const {
  const TrainOptions &options = job.options;
  return options.evaluates() &&
         ((options.evalEvery > 0 && (s + 1) % options.evalEvery == 0) ||
          s + 1 == options.steps);
}

namespace {

/// Where an evaluation's class overlaps start in its sums.
constexpr size_t kOverlapSums = 5;

/// The metrics of an evaluation from its sums over the held-out set: the
/// loss and the micro-batches, the hits and the labels, the top-5 hits,
/// class overlaps.
/// The --best-metric measure of `evaluation`.
double bestMeasure(const Job &job, const StepLog::Evaluation &evaluation) {
  if (job.bestMetric == "loss")
    return evaluation.loss;
  return job.bestMetric == "miou" ? evaluation.meanIoU : evaluation.accuracy;
}

StepLog::Evaluation evaluationOf(const Job &job,
                                 const std::vector<double> &sums) {
  StepLog::Evaluation evaluation;
  evaluation.loss = sums[0] / sums[1];
  if (job.languageModel)
    evaluation.perplexity = std::exp(evaluation.loss);
  else if (job.logitsOutput >= 0 && sums[3] > 0) {
    evaluation.accuracy = sums[2] / sums[3];
    // With 5 classes or fewer every label is in the top 5.
    if (job.logitsClasses > 5)
      evaluation.top5 = sums[4] / sums[3];
  }
  // The mean over the classes that were predicted or labelled (as
  // torchmetrics' and mmsegmentation's mIoU: absent classes are left out).
  double iouSum = 0;
  int64_t present = 0;
  for (int64_t c = 0; c < job.iouClasses; ++c)
    if (double unions = sums[kOverlapSums + job.iouClasses + c]; unions > 0) {
      iouSum += sums[kOverlapSums + c] / unions;
      ++present;
    }
  if (present > 0)
    evaluation.meanIoU = iouSum / static_cast<double>(present);
  return evaluation;
}

} // namespace

bool Rank::saveBest() {
  if (replica != 0 || tpRank != 0)
    return true;
  NamedTensors values;
  std::string error;
  // Every global, as --save-onnx writes (BatchNorm statistics included).
  bool ok = gather(/*trainableOnly=*/false, values, error);
  if (ok && worldRank == 0)
    ok = saveONNX(job, values, job.options.saveBest, "--save-best", error);
  if (!ok)
    abortJob("error: rank " + std::to_string(worldRank) +
             ", evaluation after step " + std::to_string(step + 1) + ": " +
             error);
  return ok;
}

bool Rank::evaluate(StepLog &log) {
  // The forward actions of a drained step, in its order: a subset of every
  // device's order, so each receive still has its send and none waits for
  // a backward. Each reads the newest weights (the window has drained).
  std::vector<ActionInfo> forwards;
  for (const ActionInfo &a : job.actionsOf(replica, rank))
    if (a.kind == kinds::ActionKind::Forward && a.function >= 0) {
      ActionInfo forward = a;
      forward.weightVersion = weightVersions.updates(a.stage);
      forward.blendVersion = -1;
      forwards.push_back(forward);
    }
  int64_t after = step, savedStart = windowStart;
  std::vector<StepRecord> saved = std::move(window);
  int64_t total = job.microBatches * job.replicas;
  int64_t perMicroBatch = job.microBatchSamples();
  int64_t samples = job.evalDataset.samples();
  size_t lossAt = static_cast<size_t>(job.lossIndex);
  // The loss summed over the counted micro-batches and how many, the hits
  // and the labels they were counted over, the top-5 hits, each class's
  // intersection and union (segmentation).
  std::vector<double> sums(kOverlapSums + 2 * job.iouClasses, 0.0);
  for (auto &[s, state] : stages)
    state->evaluating = true;
  bool ok = true;
  for (evalBatch = 0; ok && evalBatch < job.evalBatches; ++evalBatch) {
    window.assign(1, newRecord());
    windowStart = step = after;
    for (size_t i = 0; ok && i < forwards.size(); ++i)
      ok = postReceives(forwards, i) && runAction(forwards[i]);
    const StepRecord &record = window[0];
    // The last batch is completed from the first samples: its micro-batches
    // past the end of the set are not counted (nor a last partial one).
    for (int64_t mb = 0; ok && mb < total && tpRank == 0; ++mb) {
      if (evalBatch * job.samplesPerStep + (mb + 1) * perMicroBatch > samples)
        continue;
      if (record.outputSeen[lossAt][mb]) {
        sums[0] += record.outputParts[lossAt][mb];
        sums[1] += 1;
      }
      if (record.hitsSeen[mb]) {
        sums[2] += record.hits[mb];
        sums[3] += record.labelsCounted[mb];
        sums[4] += record.hitsTop5[mb];
        for (size_t c = 0; c < record.classOverlaps[mb].size(); ++c)
          sums[kOverlapSums + c] += record.classOverlaps[mb][c];
      }
    }
  }
  for (auto &[s, state] : stages)
    state->evaluating = false;
  window = std::move(saved);
  step = after;
  windowStart = savedStart;
  if (!ok)
    return false;
  if (Status s = allReduce(sums); !s.ok()) {
    abortJob("error: rank " + std::to_string(worldRank) + " (device " +
             deviceName() + "), evaluation after step " +
             std::to_string(step + 1) + ": " + s.message);
    return false;
  }
  int64_t counted = samples / perMicroBatch;
  if (sums[1] != static_cast<double>(counted)) {
    report("error: evaluation after step " + std::to_string(step + 1) +
           ": the loss was produced for " +
           std::to_string(static_cast<int64_t>(sums[1])) + " of " +
           std::to_string(counted) + " micro-batches");
    return false;
  }
  StepLog::Evaluation evaluation = evaluationOf(job, sums);
  // Every rank holds the same sums, so all decide alike.
  if (!job.bestMetric.empty() &&
      job.beats(bestMeasure(job, evaluation), bestValue)) {
    bestValue = bestMeasure(job, evaluation);
    bestStep = step;
    evaluation.best = true;
    if (!saveBest())
      return false;
  }
  if (worldRank != 0)
    return true;
  std::printf("%s\n", evaluation.line(step, counted * perMicroBatch).c_str());
  if (evaluation.best)
    std::printf("best %s so far (%.6g after step %lld): saved to %s\n",
                job.bestMetric.c_str(), bestValue,
                static_cast<long long>(step + 1), job.options.saveBest.c_str());
  std::fflush(stdout);
  std::string error;
  if (log.isOpen() && !log.writeEvaluation(step, evaluation, error)) {
    abortJob("error: " + error);
    return false;
  }
  return true;
}

int64_t Rank::windowEnd(int64_t first) const {
  const TrainOptions &options = job.options;
  // A stream runs replicas that all-reduce each update (not WSP); a
  // profile measures drained steps.
  // HetPipe with D >= 1 keeps its stream across waves; D = 0 drains each.
  bool waveDrains = job.waveSynchronous() &&
                    !(job.wavesInStream() && job.program.staleness >= 1);
  if (job.program.stream.size() <= streamIndex() || options.drainEvery == 1 ||
      waveDrains || !options.writeProfile.empty())
    return first + 1;
  // Drains at multiples of each period, counted from step 0, so a resumed
  // run drains where the uninterrupted one did.
  auto nextMultiple = [&](int64_t period) {
    return (first / period + 1) * period;
  };
  int64_t end = std::min(options.steps, nextMultiple(kMaxWindowSteps));
  if (options.checkpointEvery > 0)
    end = std::min(end, nextMultiple(options.checkpointEvery));
  if (options.drainEvery > 0)
    end = std::min(end, nextMultiple(options.drainEvery));
  // An evaluation reads the weights of every update so far.
  if (options.evaluates() && options.evalEvery > 0)
    end = std::min(end, nextMultiple(options.evalEvery));
  // Shorter than the stream's warm-up: drained steps.
  if (end - first < job.program.stream[streamIndex()].minSteps)
    return first + 1;
  return end;
}

std::vector<ActionInfo> Rank::windowActions(int64_t steps) const {
  if (steps == 1)
    return job.actionsOf(replica, rank);
  const StreamInfo &stream = job.program.stream[streamIndex()];
  int64_t m = job.microBatches;
  int64_t updates = m / job.program.updateEvery;
  auto shifted = [&](ActionInfo a, int64_t shift) {
    if (a.kind != kinds::ActionKind::OptimizerStep && a.microBatch >= 0)
      a.microBatch += shift * m;
    if (!kinds::isPerStep(a.kind)) {
      a.weightVersion += shift * updates;
      if (a.blendVersion >= 0)
        a.blendVersion += shift * updates;
    }
    return a;
  };
  std::vector<ActionInfo> list = stream.prologue;
  for (int64_t r = 0; r < steps - stream.minSteps; ++r)
    for (const ActionInfo &a : stream.body)
      list.push_back(shifted(a, r));
  for (const ActionInfo &a : stream.epilogue)
    list.push_back(shifted(a, steps - stream.minSteps - 1));
  return list;
}

Rank::StepRecord Rank::newRecord() const {
  size_t k = job.reported.size();
  // Indexed by global micro-batch (every replica's).
  int64_t totalMicroBatches = job.microBatches * job.replicas;
  StepRecord record;
  record.outputParts.assign(k, std::vector<double>(totalMicroBatches, 0.0));
  record.outputSeen.assign(k, std::vector<char>(totalMicroBatches, 0));
  record.outputStage.assign(k, -1);
  record.hits.assign(totalMicroBatches, 0.0);
  record.hitsTop5.assign(totalMicroBatches, 0.0);
  record.labelsCounted.assign(totalMicroBatches, 0.0);
  record.hitsSeen.assign(totalMicroBatches, 0);
  record.classOverlaps.assign(
      totalMicroBatches,
      std::vector<double>(static_cast<size_t>(2 * job.iouClasses), 0.0));
  record.busyMs.assign(static_cast<size_t>(job.numStages), 0.0);
  return record;
}

bool Rank::runWindow(int64_t steps) {
  const TrainOptions &options = job.options;
  window.assign(static_cast<size_t>(steps), newRecord());
  waitMs.assign(static_cast<size_t>(job.numStages), 0.0);
  // --test-delay: after this rank's last action of each step.
  int64_t delayed = windowStart;
  auto delayThrough = [&](int64_t last) {
    for (; delayed <= last; ++delayed)
      for (const TrainOptions::TestDelay &delay : options.testDelays)
        if (delay.rank == worldRank && delayed % delay.every == delay.at)
          std::this_thread::sleep_for(
              std::chrono::duration<double>(delay.ms / 1e3));
  };
  std::vector<ActionInfo> owned;
  if (steps > 1)
    owned = windowActions(steps);
  const std::vector<ActionInfo> &actions =
      steps > 1 ? owned : job.actionsOf(replica, rank);
  weightVersions.plan(actions);
  step = windowStart;
  // --clip-grad-norm: once a step (its schedules drain every step), before
  // this rank's first update.
  bool clipped = job.clipGradNorm <= 0;
  for (size_t index = 0; index < actions.size(); ++index) {
    const ActionInfo &action = actions[index];
    if (!clipped && action.kind == kinds::ActionKind::OptimizerStep) {
      clipped = true;
      if (!clipGradients())
        return false;
    }
    if (action.kind == kinds::ActionKind::GradReduce) {
      if (job.replicas > 1 && !gradReduce(action))
        return false;
      continue;
    }
    if (action.kind == kinds::ActionKind::OptimizerStep &&
        !finishGradReduce(action.stage))
      return false;
    if (action.function < 0)
      continue; // nothing to run (a reduction with nothing to reduce)
    bool update = action.kind == kinds::ActionKind::OptimizerStep;
    StageState &state = *stages[action.stage];
    if (update)
      weightVersions.beforeUpdate(action.stage, state.globals);
    int64_t before = step;
    if (!syncWaveBefore(action) || !postReceives(actions, index) ||
        !runAction(action))
      return false;
    if (update) {
      try {
        weightVersions.afterUpdate(action.stage, state.globals);
      } catch (const std::exception &e) {
        abortJob("error: rank " + std::to_string(worldRank) + " (device " +
                 deviceName() + "), stage " + std::to_string(action.stage) +
                 ": " + e.what());
        return false;
      }
    }
    if (steps > 1 && step > before)
      delayThrough(step - 1);
    weightVersions.afterAction(action.stage, index);
    if (!syncWaveAfter(action))
      return false;
    if (waveSync)
      waveSync->progress();
  }
  // A rank without updates takes part in the norm all the same.
  if (!clipped && !clipGradients())
    return false;
  delayThrough(windowStart + steps - 1);
  return true;
}

bool Rank::abortWave(int64_t stage, int64_t wave, const std::string &error) {
  abortJob(!waveSync->logError().empty()
               ? "error: " + waveSync->logError()
               : "error: rank " + std::to_string(worldRank) + " (device " +
                     deviceName() + "), virtual worker " +
                     std::to_string(replica) + ", stage " +
                     std::to_string(stage) + ", wave " + std::to_string(wave) +
                     ": Wave Synchronous Parallel: " + error);
  return false;
}

bool Rank::syncWaveBefore(const ActionInfo &action) {
  if (!waveSync || !job.wavesInStream() ||
      action.kind != kinds::ActionKind::Forward)
    return true;
  int64_t m = job.microBatches;
  // Local staleness: the updates of earlier mini-batches of this VW that
  // the version misses (the window starts with every earlier one applied).
  waveSync->noteLocalStaleness(windowStart + action.microBatch / m,
                               action.microBatch - action.weightVersion);
  if (action.microBatch % m != 0)
    return true;
  std::string error;
  int64_t wave = windowStart + action.microBatch / m + 1;
  if (waveSync->pullStage(action.stage, wave, action.weightVersion, error))
    return true;
  return abortWave(action.stage, wave, error);
}

bool Rank::syncWaveAfter(const ActionInfo &action) {
  if (!waveSync || !job.wavesInStream() ||
      action.kind != kinds::ActionKind::OptimizerStep)
    return true;
  // An update per mini-batch: the m-th of a step ends the stage's wave.
  int64_t updates = weightVersions.updates(action.stage);
  if (updates % job.microBatches != 0)
    return true;
  std::string error;
  int64_t wave = windowStart + updates / job.microBatches;
  if (waveSync->pushStage(action.stage, wave, error))
    return true;
  return abortWave(action.stage, wave, error);
}

bool Rank::trainSteps(int64_t &stepsRun, double &seconds) {
  const TrainOptions &options = job.options;
  StepLog log;
  std::string error;
  if (worldRank == 0 && !options.logFile.empty())
    log.open(options.logFile, job.numStages, job.resuming, error);
  if (!agree(error.empty(), error))
    return false;

  double loopStart = nowSeconds();
  bool ok = true;
  for (int64_t first = job.firstStep(); ok && first < options.steps;) {
    int64_t last = windowEnd(first);
    int64_t steps = last - first;
    double start = nowSeconds();
    windowStart = first;
    if (!(ok = runWindow(steps))) {
      ++step; // as after a failed step: the reports name the steps run
      break;
    }
    // The window's steps end in order: each its time from the end of the
    // one before (on rank 0, whose stage-0 backward ends each step in a
    // pipeline); a drained step its whole time.
    double previousEnd = start;
    for (step = first; ok && step < last; ++step) {
      double stepSeconds = -1;
      if (steps > 1) {
        stepSeconds = std::max(running().endSeconds - previousEnd, 0.0);
        previousEnd = std::max(previousEnd, running().endSeconds);
      }
      ok = finishStep(start, stepSeconds, loopStart, ++stepsRun, log);
      // --write-profile: the first step warms up and is not measured.
      if (!options.writeProfile.empty()) {
        if (step == job.firstStep() && step + 1 < options.steps)
          for (auto &[key, time] : opTimes) // kept: the stages point at them
            time = OpTime{};
        else
          ++profiledSteps;
      }
      bool checkpointDue = options.checkpointEvery > 0 &&
                           (step + 1) % options.checkpointEvery == 0;
      // A checkpoint and the last step end a wave, and the checkpoint holds
      // every wave applied.
      if (ok && waveSync) {
        std::string error;
        bool force = checkpointDue || step + 1 == options.steps;
        if (!waveSync->afterStep(step, force, stepLoss, error) ||
            (checkpointDue && !waveSync->drain(error))) {
          abortJob(!waveSync->logError().empty()
                       ? "error: " + waveSync->logError()
                       : "error: rank " + std::to_string(worldRank) +
                             " (device " + deviceName() +
                             "), virtual worker " + std::to_string(replica) +
                             ", step " + std::to_string(step + 1) +
                             ": Wave Synchronous Parallel: " + error);
          ok = false;
        }
      }
      // The evaluation first: the checkpoint then holds the best so far
      // (--save-best) with the step's own evaluation in it.
      if (ok && evaluationDue(step))
        ok = evaluate(log);
      if (ok && checkpointDue)
        ok = writeCheckpoint();
    }
    first = last;
  }
  // Later reports (the summary) name the last step.
  step = std::min(step, options.steps);
  seconds = nowSeconds() - loopStart;
  if (ok && !log.close(error)) {
    abortJob("error: " + error);
    return false;
  }
  return ok;
}

bool Rank::gatherProfile(std::string &error) {
  if (job.ranksPerReplica == 1)
    return true;
  // One entry: "phase calls seconds name-length\n" and the name's bytes.
  auto sendBytes = [&](const std::string &bytes) -> Status {
    int64_t size = static_cast<int64_t>(bytes.size());
    Tensor count{allocateBuffer(sizeof size), DType::I64, {1}};
    copyToBuffer(count.data, &size, sizeof size);
    Status s = pipeline().send(count, 0, kDriverTag);
    freeBuffer(count.data);
    if (!s.ok() || size == 0)
      return s;
    Tensor text{allocateBuffer(size), DType::U8, {size}};
    copyToBuffer(text.data, bytes.data(), size);
    s = pipeline().send(text, 0, kDriverTag);
    freeBuffer(text.data);
    return s;
  };
  auto recvBytes = [&](int from, std::string &bytes) -> Status {
    int64_t size = 0;
    Tensor count{allocateBuffer(sizeof size), DType::I64, {1}};
    Status s = pipeline().recv(count, from, kDriverTag);
    if (s.ok())
      copyFromBuffer(&size, count.data, sizeof size);
    freeBuffer(count.data);
    if (!s.ok() || size == 0)
      return s;
    Tensor text{allocateBuffer(size), DType::U8, {size}};
    s = pipeline().recv(text, from, kDriverTag);
    bytes.resize(static_cast<size_t>(size));
    if (s.ok())
      copyFromBuffer(bytes.data(), text.data, size);
    freeBuffer(text.data);
    return s;
  };
  if (slot != 0) {
    std::string bytes;
    char header[96];
    for (const auto &[key, time] : opTimes) {
      std::snprintf(header, sizeof header, "%d %lld %.17g %.17g %zu\n",
                    key.first, static_cast<long long>(time.calls), time.seconds,
                    time.parameterBytes, key.second.size());
      bytes += header;
      bytes += key.second;
    }
    if (Status s = sendBytes(bytes); !s.ok()) {
      error = "--write-profile: sending the op times to rank 0: " + s.message;
      return false;
    }
    return true;
  }
  for (int from = 1; from < job.ranksPerReplica; ++from) {
    std::string bytes;
    if (Status s = recvBytes(from, bytes); !s.ok()) {
      error = "--write-profile: receiving the op times of rank " +
              std::to_string(from) + ": " + s.message;
      return false;
    }
    size_t at = 0;
    while (at < bytes.size()) {
      int phase = 0;
      long long calls = 0;
      double seconds = 0, parameterBytes = 0;
      size_t length = 0;
      int used = 0;
      size_t end = bytes.find('\n', at);
      if (end == std::string::npos ||
          std::sscanf(bytes.c_str() + at, "%d %lld %lg %lg %zu%n", &phase,
                      &calls, &seconds, &parameterBytes, &length, &used) != 5 ||
          end + 1 + length > bytes.size()) {
        error = "--write-profile: the op times of rank " +
                std::to_string(from) + " are malformed";
        return false;
      }
      OpTime &entry = opTimes[{phase, bytes.substr(end + 1, length)}];
      entry.seconds += seconds;
      entry.calls += calls;
      entry.parameterBytes += parameterBytes;
      at = end + 1 + length;
    }
  }
  return true;
}

bool Rank::writeProfile(std::string &error) {
  if (profiledSteps < 1) {
    error = "--write-profile: no step was measured (--steps must be at "
            "least 1)";
    return false;
  }
  // Per node: its forward ops' time per op, its backward ops' time per
  // forward op (the cost model asks per forward op), an update op's time
  // per op (the optimizer's ops share one name).
  struct Node {
    Rank::OpTime forward, backward, update;
  };
  std::map<std::string, Node> nodes;
  for (const auto &[key, time] : opTimes) {
    Node &node = nodes[key.second];
    auto phase = static_cast<kinds::Phase>(key.first);
    Rank::OpTime &slot = phase == kinds::Phase::Forward  ? node.forward
                         : phase == kinds::Phase::Update ? node.update
                                                         : node.backward;
    slot.seconds += time.seconds;
    slot.calls += time.calls;
    slot.parameterBytes += time.parameterBytes;
  }
  auto quote = [](const std::string &text) {
    std::string out = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\')
        out += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
        out += buffer;
        continue;
      }
      out += c;
    }
    return out + "\"";
  };
  // Replica 0's times (gatherProfile): its micro-batches.
  double microBatches = static_cast<double>(profiledSteps * job.microBatches);
  std::string json = "{\n  " + quote(job.options.profileKind) + ": {";
  bool first = true;
  for (const auto &[name, node] : nodes) {
    std::string fields;
    char buffer[64];
    if (node.forward.calls > 0) {
      std::snprintf(buffer, sizeof buffer, "\"forward_ms\": %.9g",
                    node.forward.seconds * 1e3 / node.forward.calls);
      fields += buffer;
    } else if (node.update.calls > 0) {
      std::snprintf(buffer, sizeof buffer, "\"forward_ms\": %.9g",
                    node.update.seconds * 1e3 / node.update.calls);
      fields += buffer;
      // The rate the cost model scales each update by its weights' bytes.
      if (node.update.parameterBytes > 0 && node.update.seconds > 0) {
        std::snprintf(buffer, sizeof buffer,
                      ", \"parameter_bytes_per_ms\": %.9g",
                      node.update.parameterBytes / (node.update.seconds * 1e3));
        fields += buffer;
      }
    } else if (node.backward.calls > 0) {
      // Its forward ran fused into another node's op (the time is there).
      fields += "\"forward_ms\": 0";
    }
    if (node.backward.calls > 0) {
      double perForwardOp = node.forward.calls > 0
                                ? static_cast<double>(node.forward.calls)
                                : microBatches;
      std::snprintf(buffer, sizeof buffer, "%s\"backward_ms\": %.9g",
                    fields.empty() ? "" : ", ",
                    node.backward.seconds * 1e3 / perForwardOp);
      fields += buffer;
    } else if (node.forward.calls > 0) {
      // No backward op of its own: none needed (an Add's gradient passes
      // through), or it ran fused into another node's.
      fields += ", \"backward_ms\": 0";
    }
    if (fields.empty())
      continue;
    json += std::string(first ? "" : ",") + "\n    " + quote(name) + ": {" +
            fields + "}";
    first = false;
  }
  json += "\n  }\n}\n";
  FILE *file = std::fopen(job.options.writeProfile.c_str(), "w");
  if (!file || std::fwrite(json.data(), 1, json.size(), file) != json.size() ||
      std::fclose(file) != 0) {
    error = "--write-profile: cannot write '" + job.options.writeProfile + "'";
    return false;
  }
  std::printf("profile: %zu nodes of kind '%s', mean of %lld step(s), written "
              "to %s\n",
              nodes.size(), job.options.profileKind.c_str(),
              static_cast<long long>(profiledSteps),
              job.options.writeProfile.c_str());
  return true;
}

bool Rank::gather(bool trainableOnly, NamedTensors &values,
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
    int from = holder >= 0 ? job.layout(replica).stageDevice[holder] : 0;
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
        } else if (Status s = pipeline().send(t, 0, kDriverTag); !s.ok()) {
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
      Status s = pipeline().recv(t, slotOf(from), kDriverTag);
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
  // Every VW applies every wave: their weights agree, replica 0's are the
  // result. The training time includes the wait for the slowest VW.
  if (waveSync) {
    std::string error;
    double drainStart = nowSeconds();
    bool drained = waveSync->drain(error);
    seconds += nowSeconds() - drainStart;
    if (drained && !waveSync->closeLog(error)) {
      abortJob("error: " + error);
      return false;
    }
    if (!drained) {
      abortJob(!waveSync->logError().empty()
                   ? "error: " + waveSync->logError()
                   : "error: rank " + std::to_string(worldRank) + " (device " +
                         deviceName() +
                         "): Wave Synchronous Parallel: " + error);
      return false;
    }
  }
  // Busy time and measured memory of every device, for the summary.
  // Replica 0's (the others run the same work on other micro-batches).
  // Under WSP, then per VW (its device 0): the waves, the ms it waited for
  // other VWs and the largest clock - global clock it started a wave at.
  size_t numTotals = 2 * static_cast<size_t>(job.numDevices);
  std::vector<double> totals(
      numTotals + (waveSync ? 3 * static_cast<size_t>(job.replicas) : 0), 0.0);
  if (replica == 0 && tpRank == 0) {
    for (int64_t s : job.layout(replica).deviceStages[rank])
      totals[rank] += totalBusyMs[s];
    totals[job.numDevices + rank] =
        static_cast<double>(arenaBytes + globalBytes + pool.allocatedBytes());
  }
  if (waveSync && rank == 0) {
    totals[numTotals + 3 * replica] = static_cast<double>(waveSync->clock());
    totals[numTotals + 3 * replica + 1] = waveSync->waitedMs();
    totals[numTotals + 3 * replica + 2] =
        static_cast<double>(waveSync->maxStaleness());
  }
  if (Status s = allReduce(totals); !s.ok()) {
    abortJob("error: rank " + std::to_string(worldRank) + ": " + s.message);
    return false;
  }

  // Non-finite weights are never dumped or exported, and a run that ends
  // with them fails.
  std::string bad = findNonFiniteGlobal(job.program, stages);
  if (!agree(bad.empty(), "rank " + std::to_string(worldRank) + " (device " +
                              deviceName() + "): training diverged at step " +
                              std::to_string(step) + ": " + bad +
                              " not finite after the last update; nothing "
                              "is dumped or exported"))
    return false;

  // Replica 0's globals are the result: the replicas' weights are equal,
  // and (as DDP's broadcast of buffers has it) its running statistics win.
  bool ok = true;
  std::string error;
  if (replica != 0 || tpRank != 0) {
    // Nothing to write.
  } else if (!options.dumpGlobals.empty()) {
    NamedTensors values;
    ok = gather(/*trainableOnly=*/false, values, error);
    if (ok && worldRank == 0)
      ok = dumpGlobals(options.dumpGlobals, values, error);
  }
  if (ok && replica == 0 && !options.writeProfile.empty())
    ok = gatherProfile(error);
  if (ok && worldRank == 0 && !options.writeProfile.empty())
    ok = writeProfile(error);
  if (ok && replica == 0 && tpRank == 0 && !options.saveOnnx.empty()) {
    NamedTensors values;
    // Every global: BatchNorm running statistics belong in the deployed
    // model too; state without an initializer is skipped.
    ok = gather(/*trainableOnly=*/false, values, error);
    if (ok && worldRank == 0)
      ok = saveONNX(job, values, options.saveOnnx, "--save-onnx", error);
  }
  if (!ok) {
    std::string message =
        "error: rank " + std::to_string(worldRank) + ": " + error;
    // Rank 0 may wait for this rank's globals: stop it. The others are done
    // when rank 0 fails.
    if (worldRank != 0) {
      abortJob(message);
    } else {
      std::fprintf(stderr, "%s\n", message.c_str());
      std::fflush(stderr);
    }
    return false;
  }
  if (worldRank == 0) {
    printSummary(job, stepsRun, seconds, totals);
    if (waveSync) {
      std::printf("wave synchronous parallel: staleness bound %lld, waves of "
                  "%lld step(s)\n",
                  static_cast<long long>(job.program.staleness),
                  static_cast<long long>(job.program.wave));
      for (int64_t r = 0; r < job.replicas; ++r) {
        const double *vw = &totals[numTotals + 3 * r];
        std::printf("  virtual worker %lld: %lld waves, waited %.1f ms for "
                    "the others, largest staleness %lld\n",
                    static_cast<long long>(r), static_cast<long long>(vw[0]),
                    vw[1], static_cast<long long>(vw[2]));
      }
      std::fflush(stdout);
    }
  }
  return true;
}

int Rank::run(const std::string &loadError) {
  try {
    world.timeoutSeconds = job.options.timeout;
    std::string error = loadError;
    bool ok = splitWorld(error) && error.empty();
    // Connecting is collective: only once every rank has loaded the job.
    if (!agree(ok, error))
      return 1;
    ok = setupMessageMatching(error) && setup(error);
    if (!agree(ok, error))
      return 1;
    int64_t stepsRun = 0;
    double seconds = 0;
    if (!trainSteps(stepsRun, seconds))
      return 1;
    return finish(stepsRun, seconds) ? 0 : 1;
  } catch (const std::exception &e) {
    abortJob("error: rank " + std::to_string(worldRank) + " (device " +
             deviceName() + "): " + e.what());
    return 1;
  }
}
