//===- StageState.h - The StageContext of one stage on a rank ---*- C++ -*-===//
//
// What a stage function works on (Program.h's StageContext): the stage's
// copy of the globals, the step's inputs and outputs, messages to other
// stages, stashes, gradient sums and Dropout seeds; and the pool of
// backend buffers that stashes, sums and same-rank messages reuse.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_STAGESTATE_H
#define PP_RUNTIME_TRAIN_STAGESTATE_H

#include "Util.h"

#include "pp/Runtime/Program.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pp::rt::train {

class RankState;

/// The tag of the driver's own messages (gathers of the trained globals);
/// stage messages use the tags below it.
constexpr int kDriverTag = 32767;

/// Buffers of the backend's memory, reused by size (stashes, gradient
/// sums, same-device messages): one cudaMalloc per size, not per step.
class BufferPool : NonCopyable {
public:
  ~BufferPool();

  /// A buffer for (dtype, shape): a released one of the same size, else a
  /// new one. Throws std::runtime_error when out of memory.
  Tensor acquire(DType dtype, const std::vector<int64_t> &shape);
  /// Gives `t`'s buffer back for reuse (freed with the pool).
  void release(const Tensor &t) { free_[t.bytes()].push_back(t.data); }
  /// The bytes of every buffer the pool has allocated.
  int64_t allocatedBytes() const { return allocated_; }

private:
  std::map<int64_t, std::vector<void *>> free_;
  int64_t allocated_ = 0;
};

/// --write-profile: the time of a node's ops in one phase and how many ran.
struct OpTime {
  double seconds = 0;
  int64_t calls = 0;
  /// Update ops: the bytes of trainable weights they updated (the cost
  /// model apportions an update by the weights' size).
  double parameterBytes = 0;
};

/// The StageContext of one stage on its rank.
class StageState final : public StageContext {
public:
  StageState(RankState &rank, int64_t stage, uint64_t seed)
      : rank_(rank), stage(stage), runSeed(seed) {}
  ~StageState() override;

  Context &kernels() override;
  char *arena() override;
  Tensor global(int id) override;
  void writeGlobal(int id, const Tensor &value) override;
  Tensor constant(int id) override;
  void input(int index, int64_t microBatch, Tensor &dst) override;
  /// The host bytes of micro-batch `microBatch` of input `index`: the
  /// step's (--data, or the random batch), or in an evaluation the
  /// evaluated batch's.
  const char *inputSource(int index, int64_t microBatch);
  /// Counts the micro-batch's top-1 hits of the logits (Job::logitsOutput)
  /// against its labels, for the running step's accuracy.
  void countHits(int64_t microBatch, const Tensor &logits);
  void output(int index, int64_t microBatch, const Tensor &value) override;
  void send(int peerStage, int tag, int64_t microBatch,
            const Tensor &value) override;
  void recv(int peerStage, int tag, int64_t microBatch, Tensor &dst) override;
  Tensor recvView(int peerStage, int tag, int64_t microBatch, DType dtype,
                  const std::vector<int64_t> &shape) override;
  /// Posts the receive `r` of a function about to run for the global
  /// micro-batch `microBatch` (replica-local 0 at `base`) into a pool
  /// buffer, unless it is posted already or its sender runs on this rank.
  void postReceive(const ReceiveInfo &r, int64_t microBatch, int64_t base);
  void stash(int slot, int64_t microBatch, const Tensor &value) override;
  void unstash(int slot, int64_t microBatch, Tensor &dst) override;
  void accumulate(int slot, const Tensor &value) override;
  void accumulated(int slot, Tensor &dst) override;
  Tensor stashTarget(int slot, int64_t microBatch,
                     const Tensor &arenaView) override;
  Tensor accumulateTarget(int slot, const Tensor &arenaView) override;
  Tensor unstashView(int slot, int64_t microBatch) override;
  Tensor accumulatedView(int slot) override;
  /// Returns the buffers the running function was lent (unstashView,
  /// accumulatedView), and targets it left unused, to the pool: the
  /// function has returned.
  void releaseLent();
  uint64_t dropoutSeed(uint64_t stream) override;
  double learningRate(double compiled) override;
  int tensorParallelRank() override;
  int tensorParallelSize() override;
  void tensorParallelAllReduce(Tensor &value) override;
  /// --write-profile: the time since the previous op (or the function's
  /// start) goes to the op's node in the running function's phase.
  void opFinished(const char *op) override;
  kinds::Phase timingPhase = kinds::Phase::None;
  double lastOpSeconds = 0;
  /// Where the last op's time went: the function's work after it (its
  /// stashes and sends) joins it when the function returns.
  OpTime *lastOp = nullptr;
  /// Each (phase, op description) seen, to its node's entry in
  /// RankState::opTimes: the generated code passes string literals, so the
  /// pointer names the op and the description is parsed once.
  struct OpKeyHash {
    size_t operator()(const std::pair<int, const char *> &key) const {
      return std::hash<const void *>()(key.second) ^
             static_cast<size_t>(key.first);
    }
  };
  /// An op's node entry, and those of the other nodes a fused kernel
  /// computes ("pp.fused 'a' + 'b'"): they count its calls at 0 s.
  struct OpEntry {
    OpTime *node = nullptr;
    std::vector<OpTime *> fusedNodes;
  };
  std::unordered_map<std::pair<int, const char *>, OpEntry, OpKeyHash>
      opEntries;

  RankState &rank_;
  int64_t stage;
  /// The run's --seed (the same on every stage: masks follow the op, not
  /// the stage).
  uint64_t runSeed;
  /// This stage's copy of each global it holds (backend buffers).
  std::map<int, Tensor> globals;
  /// Stashed values by (slot, micro-batch), pool buffers.
  std::map<std::pair<int64_t, int64_t>, Tensor> stashed;
  /// Gradient sums by slot, pool buffers.
  std::map<int64_t, Tensor> sums;
  /// Sums whose first gradient is being computed in them (accumulateTarget),
  /// by slot: they become sums at accumulate.
  std::map<int64_t, Tensor> pendingSums;
  /// Stashes being computed in place (stashTarget), by (slot, micro-batch).
  std::map<std::pair<int64_t, int64_t>, Tensor> pendingStashes;
  /// Held buffers the running function reads in place (unstashView by
  /// (slot, micro-batch), accumulatedView by slot).
  std::map<std::pair<int64_t, int64_t>, Tensor> lentStashes;
  std::map<int64_t, Tensor> lentSums;
  /// A message by (peer stage, tag, micro-batch as the code names it).
  using MessageKey = std::tuple<int64_t, int64_t, int64_t>;
  /// Receives posted before their function asks (postReceive): the pool
  /// buffer and the communicator's request.
  struct PostedReceive {
    Tensor buffer;
    int request = -1;
  };
  std::map<MessageKey, PostedReceive> posted;
  /// Messages lent to the running function (recvView); `kept` once a
  /// pp.stash took the buffer itself.
  struct LentMessage {
    Tensor buffer;
    bool kept = false;
  };
  std::map<MessageKey, LentMessage> lentMessages;
  /// The targets given to the running function, by (slot, micro-batch or
  /// -1 for a sum, arena view): a part of a split function that asks again
  /// for the same value gets the same buffer (SplitFunctions.cpp recomputes
  /// these calls).
  std::map<std::tuple<int64_t, int64_t, const void *>, Tensor> targets;
  /// The global index of the running function's replica-local micro-batch
  /// 0: replica * microBatches for a micro-batch action, 0 for a per-step
  /// one (whose messages name micro-batch 0 or -1 themselves).
  int64_t microBatchBase = 0;

private:
  /// Waits for queued kernels; a failure is reported as `op`'s.
  void sync(const char *op);
  /// copyBuffer after the queued kernels (which may write src) finish.
  void copyAfterKernels(const char *op, void *dst, const void *src,
                        int64_t bytes);
  /// Fails `op` unless `value` is (dtype, shape) with data.
  void expectLayout(const char *op, const std::string &what,
                    const Tensor &value, DType dtype,
                    const std::vector<int64_t> &shape);
  /// Copies what `held` holds (a stash or a sum, checked against `dst`'s
  /// layout) into `dst` and returns its buffer to the pool.
  void takeInto(const char *op, const std::string &what, Tensor &held,
                Tensor &dst);
  /// The transport tag of a message between this stage and `peerStage`.
  int messageTag(int peerStage, int tag, int64_t microBatch, const char *op);
  int messageTag(int peerStage, int tag, int64_t microBatch, int64_t base,
                 const char *op);
  /// "from stage s on rank r (device d), tag t, micro-batch m".
  std::string describeMessage(int peerStage, int tag, int64_t microBatch);
};

/// The stages a rank runs, by stage index.
using StageMap = std::map<int64_t, std::unique_ptr<StageState>>;

/// The first trainable global of `stages` (in stage, then id order) that
/// holds a NaN or an infinity, as "stage S's global 'G' (N of M values)";
/// empty when every one is finite. Copies each to the host once.
std::string findNonFiniteGlobal(const ProgramInfo &program,
                                const StageMap &stages);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_STAGESTATE_H
