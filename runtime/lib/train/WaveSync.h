//===- WaveSync.h - Wave Synchronous Parallel across replicas ---*- C++ -*-===//
//
// HetPipe's WSP on the job's own communicators (../shared/reference/
// pipelines.md): each replica (virtual worker, VW) trains its pipeline on
// its own micro-batches with its own optimizer state. A wave is `wave`
// consecutive steps (also ended early by a checkpoint and by the last step).
// At the end of its wave c a VW pushes the wave's update U_c = W - W_start
// (the change of every trainable global it holds) and advances its clock to
// c. The push is a non-blocking sum all-reduce over the device's replicas,
// so its completion on a rank means every VW has pushed wave c: the global
// clock is the number of waves whose all-reduce completed. Before its next
// wave a VW pulls: it applies every completed wave g it has not applied
// yet, W += R_g - U_g (R_g the sum of all VWs' updates of wave g, U_g its
// own, already in W), which leaves W = w0 + every VW's waves <= g + its own
// later ones. It must have applied the waves up to c - D (D the staleness
// bound), waiting for them; the ranks of a VW agree on how far to go (the
// least any of them has seen complete), so every stage of a VW pulls the
// same waves. Before a checkpoint and after the last step every wave is
// applied: the VWs then hold the same weights (w0 plus every update).
//
// HetPipe's pipelined VWs (schedule hetpipe, D >= 1) keep their pipelines
// full across waves: a wave is one step, and each stage pushes its own part
// of the wave after its last update of the wave (pushStage) and pulls
// before the forward that starts a wave (pullStage), exactly the waves up
// to wave - 1 - D: the mini-batch then reads w0 + its VW's updates through
// j - Nm + every VW's waves <= c - D - 1, the same on every stage (vertical
// sync) without any agreement between the stages. The pull also reaches the
// kept weight versions the wave's mini-batches read.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_WAVESYNC_H
#define PP_RUNTIME_TRAIN_WAVESYNC_H

#include "pp/Runtime/Comm.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace pp::rt::train {

class RankState;

class WaveSync {
public:
  explicit WaveSync(RankState &rank) : rank_(rank) {}
  ~WaveSync();

  /// Collects the trainable globals of the rank's stages, records the wave
  /// start and opens the VW's --wsp-log (device 0 of each VW). `clock`: the
  /// waves already done (a resumed run's checkpoint).
  bool begin(int64_t clock, std::string &error);
  /// After step index `step`: ends the wave when it is due (or `force`d)
  /// and pulls as the bound requires; logs the step's loss. False with
  /// `error` set on a failure.
  bool afterStep(int64_t step, bool force, double loss, std::string &error);
  /// Tests the pushes in flight: MPI moves a non-blocking all-reduce only
  /// inside MPI calls, so the rank calls this between its actions.
  void progress();
  /// Applies every pushed wave (all VWs then agree on the weights).
  bool drain(std::string &error);
  /// HetPipe: `stage` pushes its part of wave `wave` (1-based), after the
  /// wave's last update.
  bool pushStage(int64_t stage, int64_t wave, std::string &error);
  /// HetPipe: before the forward that starts wave `wave` on `stage`, applies
  /// the other VWs' waves through wave - 1 - D (waiting for them) to the
  /// latest weights and to the stage's kept versions >= `version`.
  bool pullStage(int64_t stage, int64_t wave, int64_t version,
                 std::string &error);
  /// HetPipe: step `step`'s largest local staleness (a forward's updates of
  /// its own VW not in the version it read), logged with the step.
  void noteLocalStaleness(int64_t step, int64_t missed) {
    localStaleness_[step] = std::max(localStaleness_[step], missed);
  }
  /// Closes the --wsp-log; false with `error` set if a write failed.
  bool closeLog(std::string &error);
  /// "--wsp-log: cannot write '<file>': <reason>" once a write failed, else
  /// empty: the run reports it as --log's errors are, without the rank.
  const std::string &logError() const { return logError_; }

  int64_t clock() const { return clock_; }
  int64_t globalClock() const { return applied_; }
  /// The largest clock - global clock seen when a wave started.
  int64_t maxStaleness() const { return maxStaleness_; }
  /// Milliseconds spent waiting for other VWs' pushes.
  double waitedMs() const { return waitedMs_; }

private:
  /// A trainable global this rank holds.
  struct Slot {
    Tensor *value;
    int64_t offset; // in elements of its dtype's buffer
    int id;         // the global's
    int64_t stage;  // the stage whose copy it is
  };
  /// All slots of one dtype (F32 or F64), packed in slot order; per stage
  /// when the replicas place their stages on their own (each stage's
  /// holders form its group).
  struct Group {
    DType dtype;
    int64_t stage; // -1: every stage of the rank
    Communicator *comm;
    std::vector<Slot> slots;
    int64_t numel = 0;
    std::vector<char> start; // W at the start of the wave
  };
  /// A pushed wave whose sum this rank has not applied yet.
  struct Pending {
    int64_t wave;
    std::vector<size_t> groups;         // indices into groups_
    std::vector<std::vector<char>> own; // U per group
    std::vector<Tensor> sums;           // backend buffers being reduced
    std::vector<int> requests;
    bool complete = false;
  };
  /// HetPipe: one stage's pushed waves.
  struct StageWaves {
    std::deque<Pending> pending;
    int64_t applied = 0;
  };

  bool push(std::string &error);
  /// Starts the all-reduce of the groups' updates since their start, which
  /// become the new start.
  bool startPush(Pending &wave, std::string &error);
  /// Waits for `wave` and adds the other VWs' part to the groups' weights
  /// and starts (and to the kept versions >= `version` of their stages when
  /// `version` >= 0); releases its buffers.
  bool applyPending(Pending &wave, int64_t version, std::string &error);
  /// Applies the pending waves up to `through`, waiting for them.
  bool applyThrough(int64_t through, double &waitedMs, std::string &error);
  /// How many waves this VW has seen complete (the least over its ranks).
  bool agreeOnComplete(int64_t &complete, std::string &error);
  void readGroup(const Group &group, std::vector<char> &host) const;
  void writeGroup(Group &group, const std::vector<char> &host);
  bool log(const std::string &json, std::string &error);

  RankState &rank_;
  std::vector<Group> groups_;
  std::deque<Pending> pending_;
  std::map<int64_t, StageWaves> stageWaves_;
  std::map<int64_t, int64_t> localStaleness_; // by step
  int64_t clock_ = 0;
  int64_t applied_ = 0;
  int64_t stepsInWave_ = 0;
  int64_t maxStaleness_ = 0;
  double waitedMs_ = 0;
  FILE *log_ = nullptr;
  std::string logPath_;
  std::string logError_;
};

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_WAVESYNC_H
