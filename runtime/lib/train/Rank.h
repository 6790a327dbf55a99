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
#include "RankState.h"
#include "WaveSync.h"

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

class Rank : public RankState {
public:
  Rank(Job &job, int worldRank, Communicator &world)
      : RankState(job, worldRank, world) {}
  ~Rank();

  /// Sets up, trains and finishes; the process exit status. `loadError`
  /// is this process's failure to load the job (agreed on with the others).
  int run(const std::string &loadError = {});

private:
  /// A grad_reduce bucket in flight: the packed sums, the slots they came
  /// from (in order) and the communicator's request.
  struct Bucket {
    Tensor packed;
    std::vector<Tensor *> slots;
    int request = -1;
  };
  std::map<int64_t, std::vector<Bucket>> reducing; // by stage
  int64_t profiledSteps = 0;
  /// Writes --write-profile's JSON from opTimes.
  bool writeProfile(std::string &error);
  /// --write-profile over several devices: every rank of replica 0 sends its
  /// opTimes to slot 0, which adds them to its own (each node runs on one
  /// device; a tensor-parallel group's members average).
  bool gatherProfile(std::string &error);
  std::vector<double> totalBusyMs; // per stage
  /// The step's loss as finishStep reduced it (this VW's under WSP).
  double stepLoss = NAN;
  /// Wave Synchronous Parallel across the replicas, when the program asks.
  std::unique_ptr<WaveSync> waveSync;

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
  /// --save-best: writes the weights now (after an evaluation that beat
  /// the best so far); false after aborting the job.
  bool saveBest();
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
