//===- RankState.h - What the parts of a rank share ------------*- C++ -*-===//
//
// The state of one rank that its stages (StageState), its WSP exchange
// (WaveSync) and its step loop (Rank) share: who the rank is in the job,
// its communicators, kernel context, arena and buffers, and the records of
// the running window of steps. The step loop derives from it; the parts
// that run inside a step see only this, not the loop.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_RANKSTATE_H
#define PP_RUNTIME_TRAIN_RANKSTATE_H

#include "Job.h"
#include "StageState.h"
#include "WeightVersions.h"

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Program.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace pp::rt::train {

class RankState {
public:
  RankState(Job &job, int worldRank, Communicator &world)
      : job(job), worldRank(worldRank), slot(worldRank % job.ranksPerReplica),
        rank(job.deviceOfSlot(slot)), replica(worldRank / job.ranksPerReplica),
        tpRank(slot - job.deviceFirstSlot[rank]), world(world),
        bestValue(job.resumedBest), bestStep(job.resumedBestStep) {}
  /// Gives back what a failed step left in the pool, the arena and the
  /// kernel context.
  ~RankState();
  RankState(const RankState &) = delete;
  RankState &operator=(const RankState &) = delete;

  Job &job;
  /// This rank in the job (what mpirun numbers).
  const int worldRank;
  /// Its place among its replica's ranks (its rank in pipeline()).
  const int slot;
  /// The device of the schedule this rank runs, its data-parallel replica
  /// (0 without data parallelism), and its place in the device's
  /// tensor-parallel group (Job::deviceTensorParallel).
  const int rank;
  const int64_t replica;
  const int tpRank;
  /// Every rank of the job: agreement, the step's outputs, checkpoints.
  Communicator &world;
  /// This replica's ranks, ranked by slot: stage messages, gathers.
  Communicator &pipeline() {
    if (orderedPipeline)
      return *orderedPipeline;
    return pipelineComm ? *pipelineComm : world;
  }
  /// The slot in a replica of member `member` of device `device`'s group.
  int slotOf(int device, int member = 0) const {
    return job.deviceFirstSlot[device] + member;
  }
  /// The job's rank of member `member` of device `device` of this replica.
  int worldRankOf(int device, int member = 0) const {
    return static_cast<int>(replica) * job.ranksPerReplica +
           slotOf(device, member);
  }
  /// The members of `device`'s group that exchange stage messages with this
  /// rank: from a group of g to one of h, member t of the g sends to each
  /// t' < h with t' % g == t (the values between stages are whole, or split
  /// alike over groups of one size).
  std::vector<int> peersOf(int device) const;
  /// The member of `device`'s group this rank receives from.
  int senderOf(int device) const {
    return tpRank % job.deviceTensorParallel[device];
  }
  Context kernels;
  bool hasKernelContext = false;
  void *arena = nullptr;
  int64_t arenaBytes = 0;
  int64_t globalBytes = 0;
  const std::vector<void *> *constants = nullptr;
  StageMap stages;
  BufferPool pool;
  /// Weight-versioned schedules: the older weights actions still read.
  WeightVersions weightVersions{job.program, pool, kernels};
  /// Data parallelism only: the pipeline of this replica, and this
  /// device's replicas (grad_reduce), split from the world.
  std::unique_ptr<Communicator> pipelineComm, replicaComm;
  /// Tensor parallelism: the devices of this rank's stages' group.
  std::unique_ptr<Communicator> tpComm;
  /// The pipeline's messages matched by order (NCCL, --p2p-matching): a
  /// view of pipelineComm (or the world) that pipeline() returns.
  std::unique_ptr<Communicator> orderedPipeline;
  /// Replicas that place their stages on their own (heterogeneous virtual
  /// workers): per stage this rank runs, the ranks running that stage in
  /// every replica (its grad_reduce group).
  std::map<int64_t, std::unique_ptr<Communicator>> stageComms;
  /// The communicator that sums `stage`'s gradients over the replicas.
  Communicator &reduceComm(int64_t stage) {
    auto it = stageComms.find(stage);
    return it != stageComms.end() ? *it->second : *replicaComm;
  }
  /// --write-profile: per (phase, ONNX node) the time of its ops and how
  /// many ran (StageState::opFinished), over the measured steps.
  using OpTime = train::OpTime;
  std::map<std::pair<int, std::string>, OpTime> opTimes;
  /// Messages between two stages of this rank: (from, to, tag, mb).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, Tensor> local;

  // The running step, and the window of steps it belongs to: the steps
  // between two drains of the pipeline (one step unless a weight-versioned
  // schedule runs its steps as a stream, ProgramInfo::stream).
  int64_t step = 0;
  int64_t windowStart = 0;
  /// What each step of the window produced: its outputs and busy times,
  /// and when this rank ended its last action of the step.
  struct StepRecord {
    std::vector<std::vector<double>> outputParts; // [reported][mb]
    std::vector<std::vector<char>> outputSeen;
    std::vector<int64_t> outputStage;
    /// Top-1 hits of the logits per micro-batch (Job::logitsOutput), and
    /// the labels they were counted over (not the ignored ones).
    std::vector<double> hits;
    /// The labels among the 5 largest logits (top-5 accuracy).
    std::vector<double> hitsTop5;
    std::vector<double> labelsCounted;
    std::vector<char> hitsSeen;
    /// Segmentation (Job::iouClasses): per micro-batch, each class's
    /// intersection then union of predicted and labelled positions.
    std::vector<std::vector<double>> classOverlaps;
    std::vector<double> busyMs; // per stage
    double endSeconds = 0;
    /// The learning rates the step's optimizer ops read, per stage: the
    /// least, the largest and how many (--log's lr).
    struct Rates {
      double min = INFINITY, max = -INFINITY;
      int64_t reads = 0;
    };
    std::map<int64_t, Rates> rates;
    /// --clip-grad-norm: the norm of the step's whole gradient.
    std::optional<double> gradNorm;
  };
  std::vector<StepRecord> window;
  /// The running step's record.
  StepRecord &running() {
    return window[static_cast<size_t>(step - windowStart)];
  }
  /// Time each stage waited in receives, left out of its busy time.
  std::vector<double> waitMs;
  /// The batch of --eval-data that the running evaluation reads.
  int64_t evalBatch = 0;
  /// --save-best: the best evaluation so far by Job::bestMetric (NaN:
  /// none) and the step index it followed; a resumed run starts from the
  /// checkpoint's.
  double bestValue = NAN;
  int64_t bestStep = -1;
  /// All-reduces `values` over `comm` (default: the world) through a
  /// backend buffer.
  Status allReduce(std::vector<double> &values, Communicator *comm = nullptr);

  /// The device this rank runs (its replica's, under data parallelism).
  const char *deviceName() const {
    if (displayName.empty())
      displayName = job.deviceName(replica, rank);
    return displayName.c_str();
  }

private:
  mutable std::string displayName;
};

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_RANKSTATE_H
