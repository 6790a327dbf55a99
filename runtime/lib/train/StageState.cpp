//===- StageState.cpp - The StageContext of one stage on a rank -----------===//
//
// The semantics mirror the reference interpreter's pipeline mode (lib/
// Interpreter/PipelineRunner.cpp): stashes keyed by (stage, slot,
// micro-batch) and dropped when unstashed, gradient sums started by a copy
// of the first value, one copy of the globals per stage, and Dropout seeds
// from (run seed, the op's stream, step), whatever the stage.
//
//===----------------------------------------------------------------------===//

#include "StageState.h"
#include "Job.h"
#include "RankState.h"
#include "Util.h"

#include "pp/Runtime/DropoutHash.h"
#include "pp/Runtime/Half.h"
#include "pp/Runtime/Memory.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string_view>

using namespace pp::rt;
using namespace pp::rt::train;

StageContext::~StageContext() = default;

void StageContext::fail(const char *op, const std::string &message) {
  throw StageError(op, message);
}

void StageContext::tensorParallelAllGather(const Tensor &src, int64_t axis,
                                           Tensor &dst) {
  // Each rank puts its part in place in zeros; the sum over the group is
  // the concatenation (x + 0 = x exactly).
  std::vector<int64_t> starts(src.shape.size(), 0), steps(src.shape.size(), 1);
  starts[axis] = tensorParallelRank() * src.shape[axis];
  Status s = sliceGrad(kernels(), src, starts, steps, dst);
  if (!s.ok())
    fail("shard.all_gather", s.message);
  tensorParallelAllReduce(dst);
}

void StageState::opFinished(const char *op) {
  // Kernels may run asynchronously (CUDA): the op's time ends when they do.
  if (Status s = synchronizeKernels(kernels()); !s.ok())
    fail(op, s.message);
  double now = nowSeconds();
  int phase = static_cast<int>(timingPhase);
  OpEntry &entry = opEntries[{phase, op}];
  if (!entry.node) {
    // The node: the quoted name of "dialect.op 'node'". A fused kernel's
    // "op 'node' fused with op 'other', op 'another'" names the other nodes
    // it computes.
    auto nodeOf = [](std::string_view text) {
      size_t open = text.find('\'');
      size_t close = text.rfind('\'');
      return std::string(open != std::string_view::npos && close > open
                             ? text.substr(open + 1, close - open - 1)
                             : text);
    };
    std::string_view text(op);
    constexpr std::string_view fusedWith = " fused with ";
    size_t members = text.find(fusedWith);
    entry.node = &rank_.opTimes[{phase, nodeOf(text.substr(0, members))}];
    if (members != std::string_view::npos) {
      std::string_view rest = text.substr(members + fusedWith.size());
      while (!rest.empty()) {
        size_t comma = rest.find(", ");
        std::string_view member = rest.substr(0, comma);
        if (member.find('\'') != std::string_view::npos)
          entry.fusedNodes.push_back(&rank_.opTimes[{phase, nodeOf(member)}]);
        if (comma == std::string_view::npos)
          break;
        rest.remove_prefix(comma + 2);
      }
    }
  }
  lastOp = entry.node;
  entry.node->seconds += now - lastOpSeconds;
  ++entry.node->calls;
  for (OpTime *fused : entry.fusedNodes)
    ++fused->calls;
  // The next op's time starts after this bookkeeping.
  lastOpSeconds = nowSeconds();
}

int StageState::tensorParallelRank() { return rank_.tpRank; }

int StageState::tensorParallelSize() {
  return rank_.job.deviceTensorParallel[rank_.rank];
}

void StageState::tensorParallelAllReduce(Tensor &value) {
  if (!rank_.tpComm)
    return; // a group of one
  sync("shard.all_reduce");
  Status s = rank_.tpComm->allReduceSum(value);
  if (!s.ok())
    fail("shard.all_reduce", "over the tensor-parallel group of rank " +
                                 std::to_string(rank_.worldRank) + ": " +
                                 s.message);
}

namespace {

/// One element of a float dtype in host memory (0 for other dtypes).
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

} // namespace

BufferPool::~BufferPool() {
  for (auto &[bytes, buffers] : free_)
    for (void *buffer : buffers)
      freeBuffer(buffer);
}

Tensor BufferPool::acquire(DType dtype, const std::vector<int64_t> &shape) {
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

void StageState::copyAfterKernels(const char *op, void *dst, const void *src,
                                  int64_t bytes) {
  sync(op);
  copyBuffer(dst, src, bytes);
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
  if (evaluating)
    return; // an evaluation updates no running statistics
  Tensor dst = global(id);
  const GlobalInfo &info = rank_.job.program.globals[id];
  expectLayout("train.global_write", "global '" + info.name + "'", value,
               dst.dtype, dst.shape);
  // Out of place where the old value is kept as a weight version.
  copyAfterKernels("train.global_write", updateTargetOf(kernels(), dst),
                   value.data, dst.bytes());
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
  Job &job = rank_.job;
  if (index < 0 || index >= static_cast<int>(job.program.inputs.size()))
    fail("pp.input", "no input " + std::to_string(index));
  // `microBatch` is global: replica r m + j (Rank::runAction), plus
  // total times the step's place in its window (Rank::placeAction).
  int64_t total = job.microBatches * job.replicas;
  if (microBatch < 0 ||
      microBatch >= total * static_cast<int64_t>(rank_.window.size()))
    fail("pp.input", "no micro-batch " + std::to_string(microBatch) +
                         " of input " + std::to_string(index));
  const InputInfo &info = job.program.inputs[index];
  std::vector<int64_t> shape = info.shape;
  shape[0] /= total;
  expectLayout("pp.input", "a micro-batch of input '" + info.name + "'", dst,
               info.dtype, shape);
  sync("pp.input");
  copyToBuffer(dst.data, inputSource(index, microBatch), dst.bytes());
}

const char *StageState::inputSource(int index, int64_t microBatch) {
  Job &job = rank_.job;
  int64_t total = job.microBatches * job.replicas;
  int64_t samples = job.microBatchSamples();
  int64_t slot = microBatch % total;
  // Every replica and stage takes micro-batch j of a step from the same
  // samples: positions j b .. j b + b - 1 of the step's batch.
  if (evaluating)
    return job.evalDataset.gatherWrapped(
        index, rank_.evalBatch * job.samplesPerStep + slot * samples, samples);
  if (job.dataset.empty())
    return job.inputData[index].bytes.data() +
           slot * (job.inputData[index].bytes.size() / total);
  return job.dataset.gather(index, rank_.step, slot * samples, samples);
}

namespace {

/// The integer label `i` of `labels` (i64 or i32).
int64_t labelAt(DType dtype, const char *labels, int64_t i) {
  if (dtype == DType::I32)
    return reinterpret_cast<const int32_t *>(labels)[i];
  return reinterpret_cast<const int64_t *>(labels)[i];
}

} // namespace

/// The most per-pixel logits of a micro-batch whose hits a training step
/// counts on the host (a 16 MB float copy): larger ones, a segmentation's
/// at full resolution, are counted by evaluations only.
constexpr int64_t kMaxTrainingCountedLogits = int64_t(1) << 22;

void StageState::countHits(int64_t microBatch, const Tensor &logits) {
  const Job &job = rank_.job;
  const OutputInfo &info = job.program.outputs[job.logitsOutput];
  if (logits.dtype != info.dtype || logits.shape != info.shape)
    fail("pp.output", "output '" + info.name + "' is " +
                          describe(info.dtype, info.shape) + ", got " +
                          describe(logits.dtype, logits.shape));
  sync("pp.output");
  std::vector<char> host(static_cast<size_t>(logits.bytes()));
  copyFromBuffer(host.data(), logits.data, logits.bytes());
  const char *labels = inputSource(job.labelsInput, microBatch);
  DType labelType = job.program.inputs[job.labelsInput].dtype;
  // [outer, classes, inner]: the arg max over the class axis (the first
  // largest, as torch.argmax) of each (outer, inner) position.
  int64_t axis = info.classAxis, outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= info.shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < info.shape.size(); ++d)
    inner *= info.shape[d];
  int64_t classes = info.shape[axis], size = dtypeSize(info.dtype);
  int64_t total = job.microBatches * job.replicas;
  RankState::StepRecord &record = rank_.running();
  int64_t slot = microBatch % total;
  // Segmentation: [intersections..., unions...] of each class.
  std::vector<double> &overlaps = record.classOverlaps[slot];
  std::fill(overlaps.begin(), overlaps.end(), 0.0);
  int64_t hits = 0, hitsTop5 = 0, counted = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t label = labelAt(labelType, labels, o * inner + i);
      if (info.hasIgnoreIndex && label == info.ignoreIndex)
        continue;
      auto score = [&](int64_t c) {
        int64_t at = (o * classes + c) * inner + i;
        // f32 read directly: an evaluation of full-resolution masks reads
        // billions of logits.
        if (info.dtype == DType::F32)
          return static_cast<double>(
              reinterpret_cast<const float *>(host.data())[at]);
        return elementAsDouble(info.dtype, host.data() + at * size);
      };
      // The label's rank among the classes, ties to the lower class (a
      // stable descending sort), and the arg max (the first largest, as
      // torch.argmax).
      bool labelled = label >= 0 && label < classes;
      double labelScore = labelled ? score(label) : NAN;
      int64_t best = 0, rank = 0;
      double bestValue = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) {
        double v = score(c);
        if (c == 0 || v > bestValue) {
          best = c;
          bestValue = v;
        }
        rank += v > labelScore || (v == labelScore && c < label);
      }
      hits += label == best;
      hitsTop5 += labelled && rank < 5;
      ++counted;
      if (overlaps.empty())
        continue;
      // The union counts the predicted class, and the labelled one when it
      // differs (a label outside [0, classes) failed the loss already).
      overlaps[static_cast<size_t>(classes + best)] += 1;
      if (label == best)
        overlaps[static_cast<size_t>(best)] += 1;
      else if (labelled)
        overlaps[static_cast<size_t>(classes + label)] += 1;
    }
  record.hits[slot] = static_cast<double>(hits);
  record.hitsTop5[slot] = static_cast<double>(hitsTop5);
  record.labelsCounted[slot] = static_cast<double>(counted);
  record.hitsSeen[slot] = 1;
}

void StageState::output(int index, int64_t microBatch, const Tensor &value) {
  const Job &job = rank_.job;
  if (index < 0 || index >= static_cast<int>(job.program.outputs.size()))
    fail("pp.output", "no output " + std::to_string(index));
  int64_t total = job.microBatches * job.replicas;
  if (microBatch < 0 ||
      microBatch >= total * static_cast<int64_t>(rank_.window.size()))
    fail("pp.output", "output " + std::to_string(index) +
                          " has no slot for micro-batch " +
                          std::to_string(microBatch));
  if (index == job.logitsOutput) {
    // A language model reports perplexity: its logits stay on the device.
    // So do a segmentation's large per-pixel logits while it trains (a
    // host copy and count per micro-batch); evaluations count them.
    bool small = value.numel() <= kMaxTrainingCountedLogits;
    if (!job.languageModel && (evaluating || job.iouClasses == 0 || small))
      countHits(microBatch, value);
    return;
  }
  auto it = std::find(job.reported.begin(), job.reported.end(), index);
  if (it == job.reported.end())
    return; // only scalar losses and metrics and the logits' hits
  const OutputInfo &info = job.program.outputs[index];
  if (value.dtype != info.dtype || value.numel() != 1)
    fail("pp.output", "output '" + info.name + "' is " +
                          describe(info.dtype, info.shape) + ", got " +
                          describe(value.dtype, value.shape));
  sync("pp.output");
  char bytes[8] = {};
  copyFromBuffer(bytes, value.data, value.bytes());
  size_t k = static_cast<size_t>(it - job.reported.begin());
  RankState::StepRecord &record = rank_.running();
  record.outputParts[k][microBatch % total] =
      elementAsDouble(value.dtype, bytes);
  record.outputSeen[k][microBatch % total] = 1;
  record.outputStage[k] = stage;
}

int StageState::messageTag(int peerStage, int tag, int64_t microBatch,
                           const char *op) {
  return messageTag(peerStage, tag, microBatch, microBatchBase, op);
}

int StageState::messageTag(int peerStage, int tag, int64_t microBatch,
                           int64_t base, const char *op) {
  const Job &job = rank_.job;
  if (peerStage < 0 || peerStage >= job.numStages ||
      job.layout(rank_.replica).stageDevice[peerStage] < 0)
    fail(op, "no stage " + std::to_string(peerStage) + " runs in this program");
  // Messages stay within the replica's pipeline: its own micro-batch
  // index makes the tag.
  int64_t local = microBatch >= 0 ? microBatch - base : microBatch;
  if (tag < 0 || local < -1 || local >= job.microBatches)
    fail(op, "bad tag " + std::to_string(tag) + " or micro-batch " +
                 std::to_string(microBatch));
  bool sending = std::strcmp(op, "pp.send") == 0;
  int64_t from = sending ? stage : peerStage;
  int64_t to = sending ? peerStage : stage;
  // Unique per (from, to, tag, micro-batch); per-step messages use -1.
  int64_t s = job.numStages, m = job.microBatches + 1;
  int64_t mpiTag = ((tag * s + from) * s + to) * m + (local + 1);
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
  int peer = rank_.job.layout(rank_.replica).stageDevice[peerStage];
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
  for (int member : rank_.peersOf(peer)) {
    Status s = rank_.pipeline().send(value, rank_.slotOf(peer, member), mpiTag);
    if (!s.ok())
      fail("pp.send", "to stage " + std::to_string(peerStage) + " on rank " +
                          std::to_string(rank_.worldRankOf(peer, member)) +
                          ": " + s.message);
  }
}

std::string StageState::describeMessage(int peerStage, int tag,
                                        int64_t microBatch) {
  int peer = rank_.job.layout(rank_.replica).stageDevice[peerStage];
  int member = peer >= 0 ? rank_.senderOf(peer) : 0;
  return "from stage " + std::to_string(peerStage) + " on rank " +
         std::to_string(rank_.worldRankOf(peer, member)) + " (device " +
         rank_.job.deviceName(rank_.replica, peer) + "), tag " +
         std::to_string(tag) + ", micro-batch " + std::to_string(microBatch);
}

void StageState::recv(int peerStage, int tag, int64_t microBatch, Tensor &dst) {
  sync("pp.recv");
  // The driver's buffer, copied into `dst` (hand-written programs receive
  // into their arena; generated ones read the buffer itself).
  Tensor held = recvView(peerStage, tag, microBatch, dst.dtype, dst.shape);
  copyBuffer(dst.data, held.data, dst.bytes());
}

void StageState::postReceive(const ReceiveInfo &r, int64_t microBatch,
                             int64_t base) {
  int64_t named =
      r.microBatch == kFunctionMicroBatch ? microBatch : r.microBatch;
  MessageKey key{r.peerStage, r.tag, named};
  if (posted.count(key) || lentMessages.count(key))
    return;
  int peerStage = static_cast<int>(r.peerStage), tag = static_cast<int>(r.tag);
  int mpiTag = messageTag(peerStage, tag, named, base, "pp.recv");
  int peer = rank_.job.layout(rank_.replica).stageDevice[peerStage];
  if (peer == rank_.rank)
    return; // its send has a copy on this rank (StageState::send)
  PostedReceive &p = posted[key];
  p.buffer = rank_.pool.acquire(r.dtype, r.shape);
  Status s = rank_.pipeline().startRecv(
      p.buffer, rank_.slotOf(peer, rank_.senderOf(peer)), mpiTag, p.request);
  if (!s.ok())
    fail("pp.recv", "posting the receive of the message " +
                        describeMessage(peerStage, tag, named) + ": " +
                        s.message);
}

Tensor StageState::recvView(int peerStage, int tag, int64_t microBatch,
                            DType dtype, const std::vector<int64_t> &shape) {
  MessageKey key{peerStage, tag, microBatch};
  if (auto lent = lentMessages.find(key); lent != lentMessages.end())
    return lent->second.buffer;
  int mpiTag = messageTag(peerStage, tag, microBatch, "pp.recv");
  int peer = rank_.job.layout(rank_.replica).stageDevice[peerStage];
  std::string what = describeMessage(peerStage, tag, microBatch);
  if (peer == rank_.rank) {
    // The sender's copy is the buffer: nothing to copy.
    auto it = rank_.local.find(
        std::make_tuple(int64_t(peerStage), stage, int64_t(tag), microBatch));
    if (it == rank_.local.end())
      fail("pp.recv", "no message " + what +
                          ": its send has not run on this device (the "
                          "schedule runs the receiver first)");
    expectLayout("pp.recv", "the message " + what, it->second, dtype, shape);
    Tensor held = it->second;
    rank_.local.erase(it);
    return lentMessages[key].buffer = held;
  }
  PostedReceive p;
  if (auto it = posted.find(key); it != posted.end()) {
    p = it->second;
    posted.erase(it);
  } else {
    p.buffer = rank_.pool.acquire(dtype, shape);
  }
  // Lent at once, so the pool gets the buffer back whatever happens.
  lentMessages[key].buffer = p.buffer;
  expectLayout("pp.recv", "the message " + what, p.buffer, dtype, shape);
  // Waiting for a peer is not work: busy time leaves it out.
  double start = nowSeconds();
  Status s = rank_.pipeline().waitRecv(
      p.request, p.buffer, rank_.slotOf(peer, rank_.senderOf(peer)), mpiTag);
  double waited = nowSeconds() - start;
  rank_.waitMs[stage] += waited * 1e3;
  // --write-profile: the wait is not the next op's time either.
  lastOpSeconds += waited;
  if (!s.ok())
    fail("pp.recv", "waiting for the message " + what + ": " + s.message);
  return p.buffer;
}

Tensor StageState::stashTarget(int slot, int64_t microBatch,
                               const Tensor &arenaView) {
  if (evaluating)
    return arenaView;
  auto key = std::make_tuple(int64_t(slot), microBatch,
                             static_cast<const void *>(arenaView.data));
  if (auto given = targets.find(key); given != targets.end())
    return given->second;
  auto [it, inserted] =
      pendingStashes.emplace(std::make_pair(slot, microBatch), Tensor{});
  if (!inserted) // another value for the same stash: the first has it
    return arenaView;
  it->second = rank_.pool.acquire(arenaView.dtype, arenaView.shape);
  return targets[key] = it->second;
}

void StageState::stash(int slot, int64_t microBatch, const Tensor &value) {
  if (evaluating)
    return; // no backward follows an evaluation's forward
  Tensor copy;
  auto pending = pendingStashes.find({slot, microBatch});
  if (pending != pendingStashes.end()) {
    copy = pending->second;
    pendingStashes.erase(pending);
    expectLayout("pp.stash", "slot " + std::to_string(slot), value, copy.dtype,
                 copy.shape);
  } else {
    // A received message is stashed as it is: the stash keeps its buffer.
    for (auto &[key, lent] : lentMessages)
      if (!lent.kept && lent.buffer.data == value.data &&
          lent.buffer.bytes() == value.bytes()) {
        lent.kept = true;
        copy = Tensor{lent.buffer.data, value.dtype, value.shape};
        break;
      }
    if (!copy.data)
      copy = rank_.pool.acquire(value.dtype, value.shape);
  }
  // Most values are computed in their stash buffer: nothing to copy, and no
  // wait for the kernels (on a GPU, a wait per stash left it idle while
  // the host queued the next kernels). Buffers change hands in the stream's
  // order.
  if (copy.data != value.data)
    copyAfterKernels("pp.stash", copy.data, value.data, value.bytes());
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
  takeInto("pp.unstash", "slot " + std::to_string(slot), it->second, dst);
  stashed.erase(it);
}

void StageState::takeInto(const char *op, const std::string &what, Tensor &held,
                          Tensor &dst) {
  expectLayout(op, what, dst, held.dtype, held.shape);
  copyAfterKernels(op, dst.data, held.data, dst.bytes());
  rank_.pool.release(held);
}

Tensor StageState::accumulateTarget(int slot, const Tensor &arenaView) {
  auto key = std::make_tuple(int64_t(slot), int64_t(-1),
                             static_cast<const void *>(arenaView.data));
  if (auto given = targets.find(key); given != targets.end())
    return given->second;
  if (sums.count(slot))
    return targets[key] = arenaView;
  auto [it, inserted] = pendingSums.emplace(slot, Tensor{});
  if (!inserted) // another gradient for the same sum: the first has it
    return targets[key] = arenaView;
  it->second = rank_.pool.acquire(arenaView.dtype, arenaView.shape);
  return targets[key] = it->second;
}

void StageState::accumulate(int slot, const Tensor &value) {
  // As in stash: a wait for the kernels only before a copy (the sum itself
  // is a kernel, queued after those that computed `value`).
  auto pending = pendingSums.find(slot);
  if (pending != pendingSums.end()) {
    Tensor sum = pending->second;
    pendingSums.erase(pending);
    expectLayout("pp.accumulate", "the sum in slot " + std::to_string(slot),
                 value, sum.dtype, sum.shape);
    if (sum.data != value.data) // computed elsewhere after all
      copyAfterKernels("pp.accumulate", sum.data, value.data, value.bytes());
    sums.emplace(slot, sum);
    return;
  }
  auto it = sums.find(slot);
  if (it == sums.end()) {
    Tensor copy = rank_.pool.acquire(value.dtype, value.shape);
    copyAfterKernels("pp.accumulate", copy.data, value.data, value.bytes());
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
  takeInto("pp.accumulated", "the sum in slot " + std::to_string(slot),
           it->second, dst);
  sums.erase(it);
}

Tensor StageState::unstashView(int slot, int64_t microBatch) {
  auto key = std::make_pair(int64_t(slot), microBatch);
  if (auto lent = lentStashes.find(key); lent != lentStashes.end())
    return lent->second;
  auto it = stashed.find(key);
  if (it == stashed.end())
    fail("pp.unstash", "nothing is stashed in slot " + std::to_string(slot) +
                           " for micro-batch " + std::to_string(microBatch) +
                           " (its forward has not run on this device)");
  Tensor held = it->second;
  stashed.erase(it);
  return lentStashes[key] = held;
}

Tensor StageState::accumulatedView(int slot) {
  if (auto lent = lentSums.find(slot); lent != lentSums.end())
    return lent->second;
  auto it = sums.find(slot);
  if (it == sums.end())
    fail("pp.accumulated", "no gradient was accumulated in slot " +
                               std::to_string(slot) + " this step");
  Tensor held = it->second;
  sums.erase(it);
  return lentSums[slot] = held;
}

void StageState::releaseLent() {
  for (auto &[key, t] : lentStashes)
    rank_.pool.release(t);
  lentStashes.clear();
  for (auto &[slot, t] : lentSums)
    rank_.pool.release(t);
  lentSums.clear();
  for (auto &[key, lent] : lentMessages)
    if (!lent.kept)
      rank_.pool.release(lent.buffer);
  lentMessages.clear();
  // Targets a failed function left without their stash or accumulate.
  for (auto &[slot, t] : pendingSums)
    rank_.pool.release(t);
  pendingSums.clear();
  for (auto &[key, t] : pendingStashes)
    rank_.pool.release(t);
  pendingStashes.clear();
  targets.clear();
}

uint64_t StageState::dropoutSeed(uint64_t stream) {
  // RankState::step counts from 0 and goes on after --resume, so resumed runs
  // draw the masks of uninterrupted ones.
  return dropouthash::streamSeed(runSeed, stream,
                                 static_cast<uint64_t>(rank_.step));
}

double StageState::learningRate(double compiled) {
  // Rank::placeAction set the step to the one the update belongs to (a
  // weight-versioned schedule's u-th update of a window: step u / U), so
  // every update of a step gets that step's rate.
  const Job &job = rank_.job;
  double rate = job.lrSchedule.rate(job.lr.value_or(compiled), rank_.step);
  RankState::StepRecord::Rates &seen = rank_.running().rates[stage];
  seen.min = std::min(seen.min, rate);
  seen.max = std::max(seen.max, rate);
  ++seen.reads;
  return rate;
}

namespace {

/// The non-finite elements of `count` floats of `Bits`, whose exponent is
/// all ones under `mask` (an integer test: exact whatever the float mode).
template <typename Bits>
int64_t countNonFinite(const char *data, int64_t count, Bits mask) {
  int64_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    Bits bits;
    std::memcpy(&bits, data + i * sizeof(Bits), sizeof(Bits));
    bad += (bits & mask) == mask;
  }
  return bad;
}

} // namespace

std::string pp::rt::train::findNonFiniteGlobal(const ProgramInfo &program,
                                               const StageMap &stages) {
  std::vector<char> host;
  for (const auto &[s, state] : stages) {
    for (const auto &[id, t] : state->globals) {
      if (!program.globals[id].trainable)
        continue;
      int64_t count = numelOf(t.shape), bad = 0;
      host.resize(static_cast<size_t>(t.bytes()));
      switch (t.dtype) {
      case DType::F32:
        copyFromBuffer(host.data(), t.data, t.bytes());
        bad = countNonFinite<uint32_t>(host.data(), count, 0x7f800000u);
        break;
      case DType::F64:
        copyFromBuffer(host.data(), t.data, t.bytes());
        bad =
            countNonFinite<uint64_t>(host.data(), count, 0x7ff0000000000000ull);
        break;
      case DType::F16:
        copyFromBuffer(host.data(), t.data, t.bytes());
        bad = countNonFinite<uint16_t>(host.data(), count, 0x7c00);
        break;
      case DType::BF16:
        copyFromBuffer(host.data(), t.data, t.bytes());
        bad = countNonFinite<uint16_t>(host.data(), count, 0x7f80);
        break;
      default:
        break;
      }
      if (bad > 0)
        return "stage " + std::to_string(s) + "'s global '" +
               program.globals[id].name + "' (" + std::to_string(bad) + " of " +
               std::to_string(count) + " values)";
    }
  }
  return "";
}
