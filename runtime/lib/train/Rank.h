//===- Rank.h - One device's schedule, step after step ----------*- C++ -*-===//
//
// A rank runs one device of the job: a thread under --local, a process
// under mpirun. It holds the device's kernel context, arena and stages,
// runs their actions every step, and agrees with the other ranks on
// failures, the step's outputs and what the run writes out.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_RANK_H
#define PP_RUNTIME_TRAIN_RANK_H

#include "Export.h"
#include "Job.h"
#include "StageState.h"
#include "WaveSync.h"
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

class StepLog;

class Rank {
public:
  Rank(Job &job, int worldRank, Communicator &world)
      : job(job), worldRank(worldRank), slot(worldRank % job.ranksPerReplica),
        rank(job.deviceOfSlot(slot)), replica(worldRank / job.ranksPerReplica),
        tpRank(slot - job.deviceFirstSlot[rank]), world(world) {}
  ~Rank();

  /// Sets up, trains and finishes; the process exit status. `loadError`
  /// is this process's failure to load the job (agreed on with the others).
  int run(const std::string &loadError = {});

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
  /// A grad_reduce bucket in flight: the packed sums, the slots they came
  /// from (in order) and the communicator's request.
  struct Bucket {
    Tensor packed;
    std::vector<Tensor *> slots;
    int request = -1;
  };
  std::map<int64_t, std::vector<Bucket>> reducing; // by stage
  /// --write-profile: per (phase, ONNX node) the time of its ops and how
  /// many ran (StageState::opFinished), over the measured steps.
  using OpTime = train::OpTime;
  std::map<std::pair<int, std::string>, OpTime> opTimes;
  int64_t profiledSteps = 0;
  /// Writes --write-profile's JSON from opTimes.
  bool writeProfile(std::string &error);
  /// --write-profile over several devices: every rank of replica 0 sends its
  /// opTimes to slot 0, which adds them to its own (each node runs on one
  /// device; a tensor-parallel group's members average).
  bool gatherProfile(std::string &error);
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
    /// Top-1 hits of the logits per micro-batch (Job::logitsOutput).
    std::vector<double> hits;
    std::vector<char> hitsSeen;
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
  std::vector<double> totalBusyMs; // per stage
  /// Time each stage waited in receives, left out of its busy time.
  std::vector<double> waitMs;
  /// The step's loss as finishStep reduced it (this VW's under WSP).
  double stepLoss = NAN;
  /// The batch of --eval-data that the running evaluation reads.
  int64_t evalBatch = 0;
  /// Wave Synchronous Parallel across the replicas, when the program asks.
  std::unique_ptr<WaveSync> waveSync;

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

  /// HetPipe's waves inside the stream: pulls before the forward that
  /// starts a wave, pushes after a stage's last update of one.
  bool syncWaveBefore(const ActionInfo &action);
  /// This rank's entry of ProgramInfo::stream: per device, and per replica
  /// too when the replicas place their stages on their own.
  size_t streamIndex() const {
    return static_cast<size_t>(
        job.program.replicaSchedules.empty()
            ? rank
            : replica * static_cast<int64_t>(job.numDevices) + rank);
  }
  bool syncWaveAfter(const ActionInfo &action);
  /// Ends the job on a failed push or pull of `stage`'s wave `wave`;
  /// returns false.
  bool abortWave(int64_t stage, int64_t wave, const std::string &error);

  /// The kernel context, arena, constants and stages of this rank, with
  /// their globals (initial or resumed).
  bool setup(std::string &error);
  /// Copies the initial value of every global of this rank's stages from
  /// the data file to the backend.
  bool loadGlobals(std::string &error);
  /// Runs the steps from Job::firstStep, logging and checkpointing.
  bool trainSteps(int64_t &stepsRun, double &seconds);
  /// The step after the last of the window that starts at `first`: the
  /// next drain (a checkpoint, --drain-every, the end of the run, or at
  /// most kMaxWindowSteps steps); first + 1 when every step drains.
  int64_t windowEnd(int64_t first) const;
  /// The longest window: its expanded action list is held in memory.
  static constexpr int64_t kMaxWindowSteps = 4096;
  /// This rank's actions for the window of `steps` steps.
  std::vector<ActionInfo> windowActions(int64_t steps) const;
  /// Runs the actions of the window [windowStart, windowStart + steps);
  /// false after aborting the job.
  bool runWindow(int64_t steps);
  /// Sets `step` to the step `action` of the window belongs to (an update
  /// by its stage's count of updates so far) and returns the micro-batch
  /// its function takes: (window step offset) R m + replica m + j for
  /// micro-batch j of the step, R the replicas.
  int64_t placeAction(const ActionInfo &action);
  /// The micro-batch the function of `action` takes and its base (the
  /// index of its step's micro-batch 0 in this replica); -1, 0 for a
  /// per-step action.
  std::pair<int64_t, int64_t> functionMicroBatch(const ActionInfo &action) const;
  /// Splits the world into the pipelines and replica groups.
  bool splitWorld(std::string &error);
  /// Chooses how the pipeline's receives find their messages
  /// (--p2p-matching) and connects the ranks that exchange them; collective
  /// over the pipeline.
  bool setupMessageMatching(std::string &error);
  /// Runs one action of the schedule; false after aborting the job.
  bool runAction(const ActionInfo &action);
  /// Posts the receives of actions[index] not posted yet and, with
  /// --prefetch-receives, those of the next action that runs code in the
  /// step, so its messages arrive while this one computes. Receives are
  /// posted in schedule order (what a transport matching by order needs).
  /// False after aborting the job.
  bool postReceives(const std::vector<ActionInfo> &actions, size_t index);

  /// grad_reduce of `stage`: starts summing its accumulated gradients over
  /// the replicas, one all-reduce per dtype (a bucket), which overlaps the
  /// device's next actions; false after aborting.
  bool gradReduce(const ActionInfo &action);
  /// Waits for the reductions of `stage` started by gradReduce and puts
  /// the sums back in its gradient slots (before its optimizer step).
  bool finishGradReduce(int64_t stage);
  /// Copies a bucket's slots into its packed buffer, or back (`toSlots`).
  void copyBucket(Bucket &bucket, bool toSlots);
  /// Stops the job for a failed grad_reduce of `stage`.
  void abortGradReduce(int64_t stage, const std::string &message);
  /// --clip-grad-norm, before this rank's first update of the step (every
  /// rank of the job, once a step): the norm of the model's gradient over
  /// every rank, into the step's record, and every gradient sum of this
  /// rank scaled by min(1, X / (norm + 1e-6)); false after aborting.
  bool clipGradients();
  /// The sum of the squares of every gradient sum of this rank's stages,
  /// and in `values` how many values they hold. Throws on a kernel error.
  double squaredGradientNorm(int64_t &values);
  /// Multiplies every gradient sum of this rank's stages by `factor`.
  /// Throws on a kernel error.
  void scaleGradients(double factor);
  /// Checks and reduces the step's outputs, then reports them (rank 0).
  /// The step took `stepSeconds`, or until now from `startSeconds` when
  /// that is negative.
  bool finishStep(double startSeconds, double stepSeconds, double loopStart,
                  int64_t stepsDone, StepLog &log);
  /// Writes this rank's checkpoint file, and the meta once all have.
  bool writeCheckpoint();
  /// Whether an evaluation follows step index `step` (--eval-every, and
  /// the run's last step).
  bool evaluationDue(int64_t step) const;
  /// Evaluates the weights after step index `step` on --eval-data: the
  /// forward actions of a drained step (the pipeline is drained) for each
  /// batch, in inference mode, then rank 0 prints and logs the mean loss,
  /// and the accuracy or perplexity; false after aborting.
  bool evaluate(StepLog &log);
  /// A fresh record for a window's step.
  StepRecord newRecord() const;
  /// Writes --dump-globals / --save-onnx and prints the summary.
  bool finish(int64_t stepsRun, double seconds);
  /// Gathers the globals on rank 0 (in `values` there), each from the
  /// stage that owns it.
  bool gather(bool trainableOnly, NamedTensors &values, std::string &error);
  /// Agrees on success: every rank learns whether any failed; the lowest
  /// failing rank prints its error.
  bool agree(bool ok, const std::string &error);
  /// Reports a failure on stderr and stops every rank.
  void abortJob(const std::string &message);
  /// A failure that every rank sees alike (no abort needed).
  void report(const std::string &message);
};

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_RANK_H
