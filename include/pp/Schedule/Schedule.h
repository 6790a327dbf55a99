//===- Schedule.h - Pipeline-parallel training schedules --------*- C++ -*-===//
//
// The per-device action lists of the synchronous pipeline schedules (GPipe,
// 1F1B, interleaved 1F1B, ZB-H1, ZB-H2, ZB-V, DualPipeV) and of the
// weight-versioned ones. Pure C++: no MLIR.
//
// Stages and devices. A schedule has p = numDevices devices and v =
// chunksPerDevice model chunks per device, so numStages() = p * v virtual
// stages; stage s runs on device s % p (Megatron-LM interleaving: device d
// holds stages d, d + p, d + 2p, ...), except under the V-shaped schedules
// (ZB-V, DualPipeV: v = 2), where device d holds stages d and 2p-1-d, so the
// activations run down the devices and back up and device 0 holds both the
// first stage and the loss. m = microBatches micro-batches make one
// mini-batch (one optimizer step).
//
// Dependencies. Every action reads what other actions produce; the simulator
// and validateSchedule derive the dependencies from the actions alone:
//   Forward(s, j)         needs Forward(s-1, j)                   (s > 0)
//   Backward(s, j)        needs Forward(s, j) and the input gradient of
//                         stage s+1, i.e. Backward(s+1, j)         (s < S-1)
//   BackwardInput(s, j)   needs Forward(s, j) and BackwardInput(s+1, j)
//   BackwardWeight(s, j)  needs BackwardInput(s, j)
//   GradReduce(s)         needs every Backward(s, *) (or BackwardWeight(s, *))
//   OptimizerStep(s)      needs every Backward(s, *) (or BackwardWeight(s, *))
//                         and GradReduce(s) when the schedule has one
// A dependency on an action of another device is a message: its producer sends
// it when it ends (asynchronously) and the consumer waits for its delivery.
// Forward(s, j) sends the activations of stage s to stage s+1; Backward(s, j)
// and BackwardInput(s, j) send the input gradient of stage s to stage s-1.
// Schedules of kind ZBH1 split every backward into BackwardInput (B) and
// BackwardWeight (W); the others use Backward.
//
// Orders (stage s on device d = s for v = 1):
//   GPipe:       all m forwards, then all m backwards (micro-batches 0..m-1).
//   1F1B:        min(p-s-1, m) warm-up forwards, then one forward and one
//                backward alternately, then the remaining backwards.
//   Interleaved: Megatron-LM's schedule. The k-th forward of device d runs
//                chunk (k / p) % v of micro-batch (k / (p v)) p + k % p; the
//                k-th backward runs chunk v-1 - (k / p) % v of the same
//                micro-batch. Device d does min((p-d-1) 2 + (v-1) p, m v)
//                warm-up forwards, then alternates, then drains.
//   ZB-H1:       stage s runs, for x = 0, 1, ..., m+p-2, the triple
//                F(x), B(x - (p-1-s)), W(x - (p-1)), skipping indices outside
//                [0, m) (Qi et al., "Zero Bubble Pipeline Parallelism",
//                2023): forwards and B's in 1F1B order, each W deferred by
//                p-1 micro-batches so the W's fill the warm-up and drain
//                bubbles. A stash lives from F until W, so every stage holds
//                min(p, m) of them: the peak of 1F1B (stage 0), now on every
//                stage.
//   ZB-H2:       stage s runs min(2(p-s)-1, m) warm-up forwards, then B and
//                F alternately, with a W before an F whenever 2p-1 stashes
//                are open, then B and W alternately, then the remaining
//                W's (Qi et al.'s ZB-H2): the W's postponed to the tail fill
//                the drain, so a device is never idle between its first and
//                its last action when F = B = W ((p-1)(F+B-2W) otherwise);
//                every stage holds up to 2p-1 stashes.
//   ZB-V:        two chunks per device in a V (Qi et al., "Pipeline
//                Parallelism with Controllable Memory", 2024; the order of
//                torch.distributed.pipelining's ScheduleZBVZeroBubble):
//                device d runs 2(p-d)-1 forwards of stage d, d pairs
//                F(2p-1-d) F(d), p-d triples F B W of stage 2p-1-d, then
//                F(d) B W(d) F(2p-1-d) B W(2p-1-d) groups, then the drain
//                (B's of both chunks, W's last). No idle between a device's
//                first and last action when F = B = W, with 1F1B's peak
//                activation memory (at most 2p half-size stashes).
//   DualPipeV:   DeepSeek's DualPipeV (the "cut-in-half" DualPipe): the V
//                placement of ZB-V and the eight phases of its reference
//                code (dualpipev.py); a forward of one chunk and a whole
//                backward of the other form an overlapped unit
//                (Action::overlapsNext) that starts only when all its
//                inputs arrived, as DualPipe's does; some backwards are
//                split and their W's queued for later phases (zero-bubble),
//                the others run B and W back to back as one unit.
//   ZB-H2, ZB-V and DualPipeV need at least 2p-1, 2p-1 and 2p micro-batches
//   for their full order; with fewer, the order built for that many keeps
//   only the existing micro-batches (a subsequence of a deadlock-free order
//   is deadlock-free: dependencies stay within a micro-batch).
// Weight-versioned schedules (PipeDream, PipeDream-2BW, nF1B and the
// TiMePReSt variants; buildVersionedSchedule) update a stage several times
// per step: the m micro-batches form m / n mini-batches of n, and stage s
// runs OptimizerStep(s, u) (micro-batch field u) once mini-batch u's
// backwards are done. Version v of a stage's weights is the one after its
// first v updates of the step (0: the step's start); each forward and
// backward names the version it reads (weightVersion), and an I-TiMePReSt
// backward also the latest version it blends with (blendVersion). The
// pipeline still drains at the end of each step (the runtime's unit for
// checkpoints and logs), so a step of m / n mini-batches has the fill and
// drain of one pipeline, as 1F1B has.
//   PipeDream:   n = 1, 1F1B order, an update after every backward; the
//                backward reads the version its forward read (weight
//                stashing); with vertical sync every stage's forward of a
//                mini-batch reads the version stage 0's forward read.
//   HetPipe:     a virtual worker's pipeline (ATC'20): n = 1, Nm mini-
//                batches in flight (inFlight), stage s warming up with
//                max(Nm - s - 1, 0) forwards then alternating; mini-batch
//                j reads version max(j - Nm + 1, 0) on every stage, forward
//                and backward (its VW's updates through j - Nm: local
//                staleness Nm - 1). A wave is Nm mini-batches: one step
//                (micro-batches = Nm); under WSP each stage pushes the
//                wave's updates after its last and pulls the other VWs'
//                waves up to c - D - 1 before the forward that starts wave
//                c (the runtime, without a drain for D >= 1).
//   2BW:         1F1B order, an update after every n-th backward; micro-
//                batch k reads version max(floor(k / n) - 1, 0) (the
//                newest version but one: 2 kept).
//   nF1B:        the order of TiMePReSt's example (unit time slots: a
//                micro-batch forward or a mini-batch backward; a ready
//                backward first, else the next forward), the mini-batch's
//                backward as its n micro-batch backwards in a row, then the
//                update; forwards read the version stage 0's forward of the
//                mini-batch read (vertical), backwards the latest.
//   V-TiMePReSt: nF1B's order, every forward and backward the latest.
//   I-TiMePReSt: nF1B's order; a stage keeps two versions, the latest W_l
//                and the one before; forwards read the latest; a backward
//                whose forward read an older version blends the older of
//                the two kept, W_s (its forward's, or the one before the
//                latest when that is gone), with W_l: W_l + exp(-lambda d)
//                (W_s - W_l), d the updates since its forward (staleness),
//                at run time. Our reading of the paper's description.
//
// A stage's optional GradReduce(s) follows its last backward (or weight
// gradient) at once, so the reduction overlaps the device's remaining work.
// Every device then ends with one OptimizerStep(s) for each stage it holds
// (in the order their last backward ran); orderStepActions moves a stage's
// ahead of another's on the same device when its update sends the other's
// update a message.
//
//===----------------------------------------------------------------------===//

#ifndef PP_SCHEDULE_SCHEDULE_H
#define PP_SCHEDULE_SCHEDULE_H

#include <optional>
#include "pp/Runtime/ScheduleKinds.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pp::schedule {

/// The schedules this library builds, the kinds of their actions and the
/// stage functions those run: one definition (pp/Runtime/ScheduleKinds.def)
/// shared with the pp dialect and the runtime.
using ScheduleKind = pp::kinds::ScheduleKind;
using ActionKind = pp::kinds::ActionKind;
using Phase = pp::kinds::Phase;
using pp::kinds::isPerStep;
using pp::kinds::parseActionKind;
using pp::kinds::phaseOf;
using pp::kinds::toString;

/// Parses "gpipe", "1f1b", "interleaved" (or "interleaved-1f1b"), "zb-h1" (or
/// "zbh1"), "zb-h2", "zb-v", "dualpipev" and the weight-versioned names.
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
/// True when the schedule splits backwards into BackwardInput and
/// BackwardWeight.
bool usesSplitBackward(ScheduleKind kind);
/// True for the weight-versioned (asynchronous) schedules: several updates
/// per step, several versions of a stage's weights.
bool isWeightVersioned(ScheduleKind kind);

/// The micro-batches whose activations `stage` of `numStages` holds at once
/// under `kind`'s order: all m under GPipe; 1F1B, ZB-H1 and interleaved 1F1B
/// warm up with p - s; ZB-H2, ZB-V and DualPipeV as their built order
/// (peakInFlight). The one statement of this rule: the partitioner, the
/// recompute pass and the plan report all ask it.
int64_t inFlightMicroBatches(ScheduleKind kind, int64_t stage,
                             int64_t numStages, int64_t microBatches);

/// One unit of work of one device.
struct Action {
  ActionKind kind;
  /// Virtual stage (model chunk) in [0, Schedule::numStages()).
  int stage;
  /// Micro-batch in [0, microBatches); -1 for per-step actions.
  int microBatch;
  /// Version of the stage's weights the action reads; 0 is this step's (the
  /// only one of synchronous schedules).
  int weightVersion = 0;
  /// I-TiMePReSt's backward: the latest version, which it blends with
  /// weightVersion; -1 otherwise.
  int blendVersion = -1;
  /// With blendVersion: the updates between the version the forward read
  /// and the latest (the degree of staleness that weights the blend).
  int staleness = 0;
  /// DualPipeV's overlapped forward-backward pair: this action and the
  /// device's next one belong to one unit (a chain of such actions), which
  /// starts once the inputs of all its members have arrived.
  bool overlapsNext = false;

  bool operator==(const Action &other) const {
    return kind == other.kind && stage == other.stage &&
           microBatch == other.microBatch &&
           weightVersion == other.weightVersion &&
           blendVersion == other.blendVersion && staleness == other.staleness &&
           overlapsNext == other.overlapsNext;
  }
  bool operator!=(const Action &other) const { return !(*this == other); }
};

/// "forward(stage 1, mb 0)", or "optimizer_step(stage 1)" for per-step
/// actions.
std::string toString(const Action &action);

/// The action lists of all devices for one training step.
struct Schedule {
  ScheduleKind kind;
  int numDevices;
  int chunksPerDevice;
  int microBatches;

  /// Where each stage runs when the stages refine another pipeline's
  /// (heterogeneous virtual workers, see refineSchedule): stageDevice[s] is
  /// the device of stage s. Empty: Megatron's rule below.
  std::vector<int> stageDevice;

  int numStages() const {
    return stageDevice.empty() ? numDevices * chunksPerDevice
                               : static_cast<int>(stageDevice.size());
  }
  /// Megatron interleaving: device d holds chunks d, d+p, ...; the V of
  /// ZB-V and DualPipeV: device d holds stages d and 2p-1-d.
  int deviceOf(int stage) const {
    return stageDevice.empty()
               ? pp::kinds::deviceOfStage(kind, stage, numDevices)
               : stageDevice[static_cast<size_t>(stage)];
  }

  /// Weight-versioned schedules: micro-batches per mini-batch (n), one
  /// update each; 0 for the synchronous ones (one update per step).
  int microBatchesPerUpdate = 0;
  /// PipeDream: every stage's forward of a mini-batch reads the version
  /// stage 0's read.
  bool verticalSync = false;
  /// HetPipe: the mini-batches in flight in the virtual worker (Nm); 0
  /// otherwise.
  int inFlight = 0;

  /// Updates of each stage per step.
  int updatesPerStep() const {
    return microBatchesPerUpdate > 0 ? microBatches / microBatchesPerUpdate : 1;
  }

  /// Per device, in execution order.
  std::vector<std::vector<Action>> actions;
};

/// Builds the schedule of `kind` for `numDevices` devices, `microBatches`
/// micro-batches and `chunksPerDevice` chunks per device (1 except for
/// interleaved, which needs chunksPerDevice >= 2 and microBatches a multiple
/// of numDevices, and for ZB-V and DualPipeV, which need 2). When
/// `gradReduceStages` is given (numStages() entries), stage s gets a GradReduce
/// after its last backward iff it is true. On invalid arguments returns false
/// and sets `error`, naming the parameter.
bool buildSchedule(ScheduleKind kind, int numDevices, int microBatches,
                   int chunksPerDevice, Schedule &out, std::string &error,
                   const std::vector<bool> *gradReduceStages = nullptr);

/// Builds a weight-versioned schedule (see the file comment) of `kind` for
/// `numDevices` stages (one per device), `microBatches` micro-batches per
/// step in mini-batches of `microBatchesPerUpdate` (PipeDream: 1; a divisor
/// of microBatches), with `verticalSync` (PipeDream only). Fails with
/// `error` naming the parameter.
/// With `gradReduceStages` (data parallelism), stage s runs
/// GradReduce(s, u) right before each OptimizerStep(s, u) when true: the
/// replicas' gradient sums of mini-batch u, all-reduced. `inFlight` is
/// HetPipe's Nm (ignored by the other kinds).
bool buildVersionedSchedule(ScheduleKind kind, int numDevices, int microBatches,
                            int microBatchesPerUpdate, bool verticalSync,
                            Schedule &out, std::string &error,
                            const std::vector<bool> *gradReduceStages = nullptr,
                            int inFlight = 0);

/// Per stage, the most versions of its weights held at once in its
/// device's order: the latest, and every older one an action will still
/// read. 1 for synchronous schedules.
std::vector<int64_t> peakWeightVersions(const Schedule &schedule);

/// Per stage and update u, the staleness of the gradient it applies: u (the
/// version it updates) minus the oldest version a forward of mini-batch u
/// read on the stage. Synchronous schedules: one update of staleness 0.
std::vector<std::vector<int>> updateStaleness(const Schedule &schedule);

/// TiMePReSt's version gap for `numStages` stages and mini-batches of `n`:
/// floor((numStages + n - 2) / n); 1 iff numStages <= n + 1.
int timePReStVersionGap(int numStages, int n);

/// Refines `coarse` into a schedule over finer stages: fine stage f is a
/// consecutive part of coarse stage coarseOf[f] (coarseOf is non-decreasing,
/// so fine stages keep the coarse order). Each coarse forward runs its fine
/// stages in ascending order, each backward (or B / W half) in descending
/// order, one after another on the coarse stage's device; a coarse
/// GradReduce becomes one per fine stage with `gradReduceStages[f]` (after
/// the fine stage's last backward), and a coarse OptimizerStep one per fine
/// stage. Heterogeneous virtual workers cut the model differently; the
/// common refinement of their cuts gives every worker the same stage
/// functions, each worker running them in its own coarse schedule. Returns
/// false and sets `error` on a malformed map.
bool refineSchedule(const Schedule &coarse, const std::vector<int> &coarseOf,
                    const std::vector<bool> *gradReduceStages, Schedule &out,
                    std::string &error);

/// Reorders the OptimizerSteps of every device by one order of all stages,
/// a topological order of `before` (stage a's before stage b's for each pair
/// (a, b), whatever their devices) that otherwise keeps the built order as
/// far as it can; the actions keep their positions in the list, only which
/// stage's action sits there changes. A pair says that stage a's per-step
/// function sends stage b's a message: the new value of a weight both read,
/// from the stage that updates it. One order for every device means every
/// wait points back in it, so no devices wait on each other in a circle.
/// A cycle of pairs across devices (functions that exchange messages both
/// ways, each sending first: fp16's skip flags) is broken at the earliest
/// stage. Returns false, leaving the order as built, and names the stages
/// in `error` when the pairs among one device's stages form a cycle.
bool orderStepActions(Schedule &schedule,
                      const std::vector<std::pair<int, int>> &before,
                      std::string &error);

/// Per stage, the most micro-batches whose stash it holds at once in its
/// device's order: a forward opens one, the backward that ends it (the
/// weight half when the stage's backward is split) closes it. The
/// order-exact counterpart of inFlightMicroBatches, for a built schedule.
std::vector<int64_t> peakInFlight(const Schedule &schedule);

/// The actions `action` depends on (see the file comment), whether scheduled
/// or not. `hasGradReduce` says whether the schedule has a GradReduce for the
/// stage of an OptimizerStep.
std::vector<Action> dependencies(const Schedule &schedule, const Action &action,
                                 bool hasGradReduce);

/// Checks that every action the schedule needs (a forward and a backward, or
/// B and W, per stage and micro-batch, one OptimizerStep per stage) appears
/// exactly once, on the device of its stage, that GradReduce appears at most
/// once per stage and that every field is in range. Order is not checked (the
/// simulator reports deadlocks). On failure returns false and describes the
/// first problem in `error`.
bool validateSchedule(const Schedule &schedule, std::string &error);

/// A weight-versioned schedule run as one stream of steps that drains only
/// at the end of a window of steps (before a checkpoint, an evaluation, the
/// end of the run or every --drain-every steps): the next mini-batches'
/// forwards start while earlier ones' backwards run, across step
/// boundaries, as the schedule's steady state allows.
///
/// A window of K >= minSteps steps runs, on each device, the action list
/// the schedule's builder gives for K m micro-batches (one step of K m,
/// versions counted from the window's start). That list is periodic: on
/// device d it is
///   prologue[d], body[d] shifted by 0, 1, ..., K - minSteps - 1,
///   epilogue[d] shifted by K - minSteps - 1
/// where shifting by r adds r m to an action's micro-batch and r U to the
/// version it reads (U = updatesPerStep; an optimizer step's micro-batch
/// field counts updates and moves by r U too). prologue holds the warm-up
/// and first steps, body one steady-state step, epilogue the last steps and
/// the cool-down (the parts as in the window of minSteps + 1 steps). A
/// shorter window runs its steps one by one, each drained (minSteps > 2
/// only when the warm-up is longer than a step: m small against p).
struct StreamSchedule {
  int microBatches = 0;
  int updatesPerStep = 0;
  int minSteps = 2;
  std::vector<std::vector<Action>> prologue, body, epilogue;
};

/// Builds the schedule of a window of `steps` steps (steps m micro-batches,
/// one step to the builder): what buildStream decomposes.
using WindowBuilder =
    std::function<bool(int steps, Schedule &out, std::string &error)>;

/// Decomposes the windows `buildWindow` gives into a StreamSchedule (from
/// the windows of minSteps and minSteps + 1 steps, minSteps the smallest
/// from 2 that works) and checks that expanding it gives the builder's
/// windows of minSteps + 2 and + 3 steps exactly. Fails with `error` naming
/// the device whose order is not periodic.
bool buildStream(const WindowBuilder &buildWindow, int microBatches,
                 int updatesPerStep, StreamSchedule &out, std::string &error);

/// `action` moved `shift` steps later (see StreamSchedule).
Action shiftAction(const Action &action, int shift, int microBatches,
                   int updatesPerStep);

/// The action list of device `device` for a window of `steps` >=
/// stream.minSteps steps.
std::vector<Action> expandStream(const StreamSchedule &stream, int device,
                                 int steps);

} // namespace pp::schedule

#endif // PP_SCHEDULE_SCHEDULE_H
