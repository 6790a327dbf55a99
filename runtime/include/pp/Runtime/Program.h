//===- Program.h - A generated training program and its driver --*- C++ -*-===//
//
// The contract between the code that pipeline-opt generates (--emit=cpp) and
// the runtime's training driver:
//   - the generated source defines one C++ function per stage function
//     (forward, backward, update, ...), each taking a StageContext and the
//     micro-batch, plus a ProgramInfo table: globals, constants, inputs,
//     outputs, functions and the schedule (the actions of every device);
//   - its main() calls trainMain(program, argc, argv), which parses the
//     command line, loads the initial values, runs the schedule of this
//     rank's device on the chosen communicator (in-process threads, MPI or
//     NCCL), and logs, checkpoints and saves.
// Generated code reaches memory, kernels and messages only through
// StageContext, so the same source builds for the CPU and the CUDA backend.
//
// The table's structs below are the one schema of both sides: the code
// generator fills these very structs (lib/Conversion/PPToEmitC/Program.h)
// and emits every field by name (designated initializers, C++20), so the
// generated program's compiler rejects a name or an order this header does
// not have; and each of its printers names every field of its struct, so
// pipeline-opt stops compiling when a field is added here, removed or
// renamed, until the printer handles it. Keep the structs aggregates.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_PROGRAM_H
#define PP_RUNTIME_PROGRAM_H

#include "pp/Runtime/Kernels.h"
#include "pp/Runtime/Memory.h"
#include "pp/Runtime/ScheduleKinds.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pp::rt {

/// The state a stage function works on: the stage's arena, its copy of the
/// globals, the step's inputs and outputs, stashes, gradient sums and
/// messages. Implemented by the training driver, one per (rank, stage).
/// Every method reports a failure by throwing StageError.
class StageContext {
public:
  virtual ~StageContext();

  /// Kernel settings (threads; stream and library handles on CUDA).
  virtual Context &kernels() = 0;
  /// Per-op timing (train --write-profile): while set, the generated code
  /// calls opFinished after each op with its description ("onnx.MatMul
  /// 'node name'").
  bool timingOps = false;
  virtual void opFinished(const char *op) {}
  /// Set while the driver evaluates (train --eval-data): the forward
  /// functions run with BatchNormalization on its running statistics and
  /// Dropout as the identity (gen::training), and the driver keeps no stash
  /// and writes no global.
  bool evaluating = false;
  /// The planned arena of the running function (pp.arena_bytes).
  virtual char *arena() = 0;
  /// This stage's copy of global `id` (ProgramInfo::globals).
  virtual Tensor global(int id) = 0;
  /// Replaces the value of this stage's copy of global `id`.
  virtual void writeGlobal(int id, const Tensor &value) = 0;
  /// Read-only constant `id` (ProgramInfo::constants).
  virtual Tensor constant(int id) = 0;
  /// Micro-batch `microBatch` of step input `index`, copied into `dst`.
  virtual void input(int index, int64_t microBatch, Tensor &dst) = 0;
  /// Micro-batch `microBatch` of step output `index`.
  virtual void output(int index, int64_t microBatch, const Tensor &value) = 0;
  /// Sends to / receives from the stage `peerStage` (pp.send / pp.recv).
  virtual void send(int peerStage, int tag, int64_t microBatch,
                    const Tensor &value) = 0;
  virtual void recv(int peerStage, int tag, int64_t microBatch,
                    Tensor &dst) = 0;
  /// pp.recv without a copy: a buffer of the driver holding the message
  /// (received ahead where the driver prefetches), valid until the running
  /// stage function returns; asked again while it runs, the same buffer.
  virtual Tensor recvView(int peerStage, int tag, int64_t microBatch,
                          DType dtype, const std::vector<int64_t> &shape) = 0;
  /// Keeps a value of a micro-batch for its backward (pp.stash / unstash).
  virtual void stash(int slot, int64_t microBatch, const Tensor &value) = 0;
  virtual void unstash(int slot, int64_t microBatch, Tensor &dst) = 0;
  /// Sums gradients over the step's micro-batches (pp.accumulate /
  /// pp.accumulated; the sum restarts after it is read).
  virtual void accumulate(int slot, const Tensor &value) = 0;
  virtual void accumulated(int slot, Tensor &dst) = 0;
  /// The buffer to compute a value in that goes to pp.stash (slot,
  /// micro-batch): the stash's own (stash then has nothing to copy).
  virtual Tensor stashTarget(int slot, int64_t microBatch,
                             const Tensor &arenaView) {
    return arenaView;
  }
  /// The buffer to compute a value in that goes to pp.accumulate `slot`:
  /// the slot's sum itself when the value is the step's first (accumulate
  /// then has nothing to copy), else `arenaView`.
  virtual Tensor accumulateTarget(int slot, const Tensor &arenaView) {
    return arenaView;
  }
  /// pp.unstash and pp.accumulated without a copy: the held buffer itself,
  /// valid until the running stage function returns. Asked again for the
  /// same value while the function runs, these four give the same buffer
  /// (the parts of a split function recompute them).
  virtual Tensor unstashView(int slot, int64_t microBatch) = 0;
  virtual Tensor accumulatedView(int slot) = 0;
  /// The learning rate an optimizer step uses: the one compiled in, unless
  /// the run overrides it (--lr).
  virtual double learningRate(double compiled) { return compiled; }
  /// The mask seed of Dropout stream `stream` (the op's `stream` attribute)
  /// at the running step: dropouthash::streamSeed(run seed, stream, step),
  /// the same on every stage and rank, as the reference interpreter has it.
  virtual uint64_t dropoutSeed(uint64_t stream) = 0;
  /// Tensor parallelism (shard.grid of the program): this rank's place in
  /// its stage's group, and the group's size.
  virtual int tensorParallelRank() { return 0; }
  virtual int tensorParallelSize() { return 1; }
  /// value := the sum of `value` over the group (shard.all_reduce).
  virtual void tensorParallelAllReduce(Tensor &value) {
    if (tensorParallelSize() > 1)
      fail("shard.all_reduce", "this driver has no tensor-parallel group");
  }
  /// dst := the group's `src` concatenated along `axis` in rank order
  /// (shard.all_gather).
  virtual void tensorParallelAllGather(const Tensor &src, int64_t axis,
                                       Tensor &dst);
  /// Throws StageError naming the op (and the driver adds rank, stage and
  /// micro-batch).
  [[noreturn]] virtual void fail(const char *op, const std::string &message);
  /// Temporary buffer `part` (0 or 1) of at least `bytes`, for kernel
  /// temporaries that are not op results (batch-norm statistics); valid
  /// until the next call for the same part.
  virtual char *scratch(int part, int64_t bytes) {
    ScratchBuffer &buffer = scratch_[part & 1];
    if (buffer.bytes < bytes) {
      buffer.data.reset(static_cast<char *>(allocateBuffer(bytes)));
      buffer.bytes = buffer.data ? bytes : 0;
      if (!buffer.data)
        fail("scratch", "cannot allocate " + std::to_string(bytes) +
                            " bytes of scratch memory");
    }
    return buffer.data.get();
  }

private:
  struct FreeBuffer {
    void operator()(char *p) const { freeBuffer(p); }
  };
  struct ScratchBuffer {
    std::unique_ptr<char, FreeBuffer> data;
    int64_t bytes = 0;
  };
  ScratchBuffer scratch_[2];
};

/// A failure inside a stage function.
class StageError : public std::runtime_error {
public:
  StageError(std::string op, const std::string &message)
      : std::runtime_error(message), op(std::move(op)) {}
  std::string op;
};

using StageFunction = void (*)(StageContext &ctx, int64_t microBatch);

/// A model global: trainable weight or state (running statistics, step
/// counter, optimizer moments).
struct GlobalInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  bool trainable;
  /// Byte offset of the initial value in the program's data file.
  int64_t dataOffset;
  /// The stage whose copy is the result (the first stage that writes it,
  /// else the first that reads it): saved, checkpointed and dumped.
  int64_t ownerStage;
};

/// A constant tensor of the stage functions, stored in the data file.
struct ConstantInfo {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t dataOffset;
};

/// A step input: the whole mini-batch (micro-batches are slices of dim 0).
struct InputInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// Exclusive bound of synthetic integer values (class labels, gather
  /// indices), as pp-interpret --random-inputs draws them.
  int64_t randomBound;
  /// The size of the dim a Gather indexes with this input (the smallest
  /// where several do; 0: none) and that Gather's node: step data must
  /// hold indices in [-size, size), ONNX's range.
  int64_t gatherBound = 0;
  std::string gatherNode = "";
};

/// A step output, per micro-batch; `combine` is "mean", "sum" or "concat".
struct OutputInfo {
  std::string name;
  std::string combine;
  DType dtype;
  std::vector<int64_t> shape;
  /// A classifier's logits (pp.output's class_axis): the dim whose arg max
  /// is the predicted class of the `labels` input; -1 for other outputs.
  int64_t classAxis = -1;
  /// The label the loss skips (pp.output's ignore_index), left out of the
  /// accuracy; meaningful where hasIgnoreIndex.
  bool hasIgnoreIndex = false;
  int64_t ignoreIndex = 0;
};

/// ReceiveInfo::microBatch of a receive of the function's own micro-batch.
constexpr int64_t kFunctionMicroBatch = -2;

/// A message a stage function receives (its pp.recv), so that the driver
/// can post the receive before the function runs (receive prefetch).
struct ReceiveInfo {
  int64_t peerStage;
  int64_t tag;
  /// kFunctionMicroBatch, or the constant micro-batch the receive names
  /// (-1: a per-step message).
  int64_t microBatch;
  DType dtype;
  std::vector<int64_t> shape;
};

struct FunctionInfo {
  std::string name;
  StageFunction function;
  int64_t stage;
  /// Which part of its stage's step the function holds.
  kinds::Phase phase;
  int64_t arenaBytes;
  /// Its receives, in the order it makes them.
  std::vector<ReceiveInfo> receives = {};
};

/// One action of a device's schedule, in order.
struct ActionInfo {
  kinds::ActionKind kind;
  /// Index into ProgramInfo::functions; -1 for an action with no code.
  int function;
  int64_t stage;
  /// -1 for per-step actions (optimizer_step).
  int64_t microBatch;
  /// Weight-versioned schedules (ProgramInfo::updateEvery > 0): the
  /// version of the stage's weights the action reads, k = after the
  /// stage's first k optimizer_step actions of the step; with
  /// blendVersion >= 0 (I-TiMePReSt) it reads W_blend + blendFactor
  /// (W_weightVersion - W_blend).
  int64_t weightVersion = 0;
  int64_t blendVersion = -1;
  double blendFactor = 0;
};

/// A weight-versioned schedule's steps as one stream (pp.stream): a window
/// of K >= minSteps steps that drains only at its end runs the prologue,
/// the body K - minSteps times (the r-th moved r steps later: r
/// microBatches added to micro-batches, r U to the versions read, U the
/// updates per step) and the epilogue moved K - minSteps - 1 steps;
/// micro-batches and versions count from the window's start. A shorter
/// window runs its steps drained.
struct StreamInfo {
  std::vector<ActionInfo> prologue, body, epilogue;
  int64_t minSteps = 2;
};

struct ProgramInfo {
  std::string modelName;
  kinds::ScheduleKind scheduleKind;
  int64_t numStages;
  /// Micro-batches per step of each data-parallel replica.
  int64_t microBatches;
  /// Planned bytes per device (pp.planned_peak_bytes), 0 when unknown.
  std::vector<int64_t> plannedPeakBytes;
  /// Planned compute time per device in a drained step, in nanoseconds
  /// (pp.planned_busy_ns; empty when unknown): train warns when the busy
  /// times it measures are spread otherwise.
  std::vector<int64_t> plannedBusyNanos;
  std::vector<std::string> deviceNames;
  std::vector<GlobalInfo> globals;
  std::vector<ConstantInfo> constants;
  std::vector<InputInfo> inputs;
  std::vector<OutputInfo> outputs;
  std::vector<FunctionInfo> functions;
  /// stageGlobals[s]: the globals stage s reads or writes (it holds a copy).
  std::vector<std::vector<int>> stageGlobals;
  /// schedule[d]: the actions of device d (= rank d).
  std::vector<std::vector<ActionInfo>> schedule;
  /// Initial values of globals and constants, next to the executable unless
  /// an absolute path.
  std::string dataFile;
  /// The source model, for --save-onnx (empty when it was not ONNX).
  std::string onnxFile;
  /// CRC-32C (Checksum.h) of the data file the program was generated with,
  /// checked when the driver opens it; 0: not checked.
  uint32_t dataHash = 0;
  /// CRC-32C of the generated stage code (0: unknown); with the table and
  /// the data file it makes the identity that checkpoints record.
  uint32_t codeHash = 0;
  /// CRC-32C of the source model (0: not checked): --save-onnx refuses a
  /// model file that changed since (the program directory's model.onnx may
  /// be a hard link to the file the user exported).
  uint32_t onnxHash = 0;
  /// Replicas of the pipeline trained in data parallel: rank r runs device
  /// r % D of the schedule (D devices) in replica r / D, on the global
  /// micro-batches replica * microBatches + j, and grad_reduce actions
  /// sum each stage's gradients over the replicas.
  int64_t dataParallel = 1;
  /// Wave Synchronous Parallel across the replicas (HetPipe), when
  /// staleness >= 0: no grad_reduce; every `wave` steps a replica pushes the
  /// summed update of the wave and may start the next only while at most
  /// `staleness` waves ahead of the slowest. -1: synchronous.
  int64_t staleness = -1;
  int64_t wave = 1;
  /// Tensor parallelism: the devices of each stage's group (the program's
  /// shard.grid), the largest when stages differ.
  int64_t tensorParallel = 1;
  /// A stage-wise mix of degrees: each stage's group size (1 for a stage
  /// the compiler left whole); empty: every stage's is tensorParallel. The
  /// devices of one stage share a degree. A replica has sum-over-devices of
  /// their degree ranks, device by device (rank w is member w - first(d) of
  /// device d's group); a message from a group of g senders to one of h
  /// receivers goes from sender t to each receiver t' with t' % g == t.
  std::vector<int64_t> stageTensorParallel;
  /// Weight-versioned schedules: micro-batches per update (each stage
  /// updates microBatches / updateEvery times a step and keeps the older
  /// versions its actions still read). 0: one update a step.
  int64_t updateEvery = 0;
  /// The device names of replicas 1 .. dataParallel-1, numDevices each in
  /// device order (replica 0's are deviceNames); empty: unnamed.
  std::vector<std::string> replicaDeviceNames;
  /// Heterogeneous virtual workers (replicas whose partitions differ): the
  /// schedules of replicas 1 .. dataParallel-1, each placing the shared
  /// stages on its own devices (`schedule` is replica 0's). Empty: every
  /// replica runs `schedule`. plannedPeakBytes then holds every replica's
  /// devices, replica-major.
  std::vector<std::vector<std::vector<ActionInfo>>> replicaSchedules;
  /// Per device: its actions when steps run as one stream (weight-versioned
  /// schedules; empty: every step drains); replica-major (numDevices each)
  /// when replicaSchedules is not empty.
  std::vector<StreamInfo> stream;
  /// (sender stage, receiver stage) of every message the stage code sends.
  std::vector<std::pair<int64_t, int64_t>> stageLinks;
  /// Whether, in every replica, each device pair's messages are received in
  /// the order they are sent (checked by the compiler): a transport that
  /// matches messages by order alone (NCCL) then sends no headers.
  bool messagesInSendOrder = false;
  /// The learning-rate schedule compiled in (--pp-compile lr-schedule=...),
  /// as train's flags without dashes ("cosine warmup-steps=20 min-lr=0"):
  /// run unless the command line gives any --lr-schedule flag. Empty: a
  /// constant rate.
  std::string lrSchedule;
};

/// The training executable's main: see docs/cli.md for the options.
int trainMain(const ProgramInfo &program, int argc, char **argv);

} // namespace pp::rt

#endif // PP_RUNTIME_PROGRAM_H
