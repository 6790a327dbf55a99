//===- Schedule.cpp - Pipeline-parallel training schedules ----------------===//
//
// Generation of the GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2, ZB-V and
// DualPipeV action lists,
// their dependencies and their validation. See Schedule.h for the orders.
//
//===----------------------------------------------------------------------===//

#include "pp/Schedule/Schedule.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <string>

using namespace pp::schedule;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

std::optional<ScheduleKind>
pp::schedule::parseScheduleKind(std::string_view name) {
  if (name == "interleaved-1f1b")
    return ScheduleKind::Interleaved1F1B;
  if (name == "zbh1")
    return ScheduleKind::ZBH1;
  return pp::kinds::parseScheduleKind(name);
}

bool pp::schedule::usesSplitBackward(ScheduleKind kind) {
  return kind == ScheduleKind::ZBH1 || kind == ScheduleKind::ZBH2 ||
         kind == ScheduleKind::ZBV || kind == ScheduleKind::DualPipeV;
}

int64_t pp::schedule::inFlightMicroBatches(ScheduleKind kind, int64_t stage,
                                           int64_t numStages,
                                           int64_t microBatches) {
  if (kind == ScheduleKind::GPipe)
    return microBatches;
  if (kind == ScheduleKind::ZBH2 || pp::kinds::isVShaped(kind)) {
    // No closed form per stage for these orders: count them on the order
    // itself.
    int chunks = pp::kinds::isVShaped(kind) ? 2 : 1;
    Schedule built;
    std::string error;
    if (stage >= 0 && stage < numStages && numStages % chunks == 0 &&
        numStages <= 4096 && microBatches <= 4096 &&
        buildSchedule(kind, static_cast<int>(numStages / chunks),
                      static_cast<int>(microBatches), chunks, built, error))
      return std::max<int64_t>(1, peakInFlight(built)[stage]);
  }
  return std::max<int64_t>(1, std::min(numStages - stage, microBatches));
}

std::vector<int64_t> pp::schedule::peakInFlight(const Schedule &schedule) {
  std::vector<int64_t> peak(schedule.numStages(), 0), open(peak.size(), 0);
  std::vector<bool> split(peak.size(), false);
  for (const auto &list : schedule.actions)
    for (const Action &action : list)
      if (action.kind == ActionKind::BackwardWeight)
        split[action.stage] = true;
  for (const auto &list : schedule.actions)
    for (const Action &action : list) {
      if (action.stage < 0 || action.stage >= schedule.numStages())
        continue;
      if (action.kind == ActionKind::Forward)
        peak[action.stage] = std::max(peak[action.stage], ++open[action.stage]);
      else if (action.kind == (split[action.stage] ? ActionKind::BackwardWeight
                                                   : ActionKind::Backward))
        --open[action.stage];
    }
  return peak;
}

std::string pp::schedule::toString(const Action &action) {
  std::string text = toString(action.kind);
  text += "(stage " + std::to_string(action.stage);
  if (!isPerStep(action.kind))
    text += ", mb " + std::to_string(action.microBatch);
  else if (action.microBatch >= 0)
    text += ", update " + std::to_string(action.microBatch);
  if (action.weightVersion != 0)
    text += ", version " + std::to_string(action.weightVersion);
  if (action.blendVersion >= 0)
    text += " blended with " + std::to_string(action.blendVersion) +
            ", staleness " + std::to_string(action.staleness);
  return text + ")";
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

static Action forward(int stage, int mb) {
  return {ActionKind::Forward, stage, mb};
}

static Action backward(int stage, int mb) {
  return {ActionKind::Backward, stage, mb};
}

static Action backwardInput(int stage, int mb) {
  return {ActionKind::BackwardInput, stage, mb};
}

static Action backwardWeight(int stage, int mb) {
  return {ActionKind::BackwardWeight, stage, mb};
}

static void buildGPipe(Schedule &s) {
  for (int d = 0; d < s.numDevices; ++d) {
    std::vector<Action> &list = s.actions[d];
    for (int j = 0; j < s.microBatches; ++j)
      list.push_back(forward(d, j));
    for (int j = 0; j < s.microBatches; ++j)
      list.push_back(backward(d, j));
  }
}

static void buildOneFOneB(Schedule &s) {
  int p = s.numDevices, m = s.microBatches;
  for (int d = 0; d < p; ++d) {
    std::vector<Action> &list = s.actions[d];
    int warmup = std::min(p - d - 1, m);
    for (int j = 0; j < warmup; ++j)
      list.push_back(forward(d, j));
    for (int j = 0; j < m - warmup; ++j) {
      list.push_back(forward(d, warmup + j));
      list.push_back(backward(d, j));
    }
    for (int j = m - warmup; j < m; ++j)
      list.push_back(backward(d, j));
  }
}

static void buildInterleaved(Schedule &s) {
  int p = s.numDevices, m = s.microBatches, v = s.chunksPerDevice;
  int total = m * v;
  // Micro-batches advance in groups of p so that a device's chunks take turns
  // every p actions; backwards visit the chunks in reverse.
  auto microBatchOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forwardAt = [&](int d, int k) -> Action {
    int chunk = (k / p) % v;
    return forward(chunk * p + d, microBatchOf(k));
  };
  auto backwardAt = [&](int d, int k) -> Action {
    int chunk = v - 1 - (k / p) % v;
    return backward(chunk * p + d, microBatchOf(k));
  };
  for (int d = 0; d < p; ++d) {
    std::vector<Action> &list = s.actions[d];
    int warmup = std::min((p - d - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k)
      list.push_back(forwardAt(d, k));
    for (int k = 0; k < total - warmup; ++k) {
      list.push_back(forwardAt(d, warmup + k));
      list.push_back(backwardAt(d, k));
    }
    for (int k = total - warmup; k < total; ++k)
      list.push_back(backwardAt(d, k));
  }
}

static void buildZBH1(Schedule &s) {
  int p = s.numDevices, m = s.microBatches;
  for (int d = 0; d < p; ++d) {
    std::vector<Action> &list = s.actions[d];
    // Index x of the F / B / W triple; B trails F by the 1F1B warm-up and W
    // trails F by p-1 on every stage, which lets the last stages emit their
    // B's at the pace the first stage's forwards allow.
    for (int x = 0; x < m + p - 1; ++x) {
      if (x < m)
        list.push_back(forward(d, x));
      int b = x - (p - 1 - d);
      if (b >= 0 && b < m)
        list.push_back(backwardInput(d, b));
      int w = x - (p - 1);
      if (w >= 0 && w < m)
        list.push_back(backwardWeight(d, w));
    }
  }
}

/// The schedules whose full order needs a minimum number of micro-batches
/// are built for that many; the actions of micro-batches past the real m
/// are then dropped (see Schedule.h).
static void dropMicroBatchesFrom(Schedule &s, int m) {
  for (std::vector<Action> &list : s.actions)
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const Action &a) {
                                return !isPerStep(a.kind) && a.microBatch >= m;
                              }),
               list.end());
}

static void buildZBH2(Schedule &s) {
  int p = s.numDevices, m = s.microBatches;
  int cap = 2 * p - 1;
  for (int d = 0; d < p; ++d) {
    std::vector<Action> &list = s.actions[d];
    int f = 0, b = 0, w = 0;
    for (; f < std::min(2 * (p - d) - 1, m); ++f)
      list.push_back(forward(d, f));
    while (f < m) {
      list.push_back(backwardInput(d, b++));
      // A W only when the stashes would pass 2p-1: the others wait for the
      // tail, where they fill the drain.
      while (f - w >= cap)
        list.push_back(backwardWeight(d, w++));
      list.push_back(forward(d, f++));
    }
    while (b < m) {
      list.push_back(backwardInput(d, b++));
      list.push_back(backwardWeight(d, w++));
    }
    while (w < m)
      list.push_back(backwardWeight(d, w++));
  }
}

static void buildZBV(Schedule &s) {
  int p = s.numDevices, m = std::max(s.microBatches, 2 * p - 1);
  for (int d = 0; d < p; ++d) {
    std::vector<Action> &list = s.actions[d];
    int down = d, up = 2 * p - 1 - d; // the chunks of the V's two legs
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto fbw = [&](int stage, int &b) {
      list.push_back(backwardInput(stage, b));
      list.push_back(backwardWeight(stage, b++));
    };
    for (int i = 0; i < 2 * (p - d) - 1; ++i)
      list.push_back(forward(down, f0++));
    for (int i = 0; i < d; ++i) {
      list.push_back(forward(up, f1++));
      list.push_back(forward(down, f0++));
    }
    for (int i = 0; i < p - d; ++i) {
      list.push_back(forward(up, f1++));
      fbw(up, b1);
    }
    while (f1 < f0 || f0 < m) {
      if (f0 < m)
        list.push_back(forward(down, f0++));
      fbw(down, b0);
      list.push_back(forward(up, f1++));
      fbw(up, b1);
    }
    // Drain: the input gradients first (they are on the critical path),
    // the weight gradients fill the wait.
    int w0 = b0, w1 = b1;
    for (int i = 0; i < d; ++i) {
      list.push_back(backwardInput(down, b0++));
      list.push_back(backwardInput(up, b1++));
    }
    for (int i = 0; i < p - d; ++i) {
      list.push_back(backwardInput(down, b0++));
      list.push_back(backwardWeight(down, w0++));
    }
    while (w1 < b1)
      list.push_back(backwardWeight(up, w1++));
    while (w0 < b0)
      list.push_back(backwardWeight(down, w0++));
  }
  dropMicroBatchesFrom(s, s.microBatches);
}

static void buildDualPipeV(Schedule &s) {
  int p = s.numDevices, m = std::max(s.microBatches, 2 * p);
  for (int d = 0; d < p; ++d) {
    std::vector<Action> &list = s.actions[d];
    // Phase 0 is the V's leg down (stage d), phase 1 the leg up.
    int stage[2] = {d, 2 * p - 1 - d};
    int f[2] = {0, 0}, b[2] = {0, 0};
    std::vector<Action> queuedWeights; // zero-bubble backwards' W's, FIFO
    size_t nextWeight = 0;
    auto F = [&](int phase) {
      list.push_back(forward(stage[phase], f[phase]++));
    };
    auto B = [&](int phase, bool zeroBubble) {
      int j = b[phase]++;
      list.push_back(backwardInput(stage[phase], j));
      if (zeroBubble) {
        queuedWeights.push_back(backwardWeight(stage[phase], j));
      } else {
        // One full backward (B and W in one autograd call there).
        list.back().overlapsNext = true;
        list.push_back(backwardWeight(stage[phase], j));
      }
    };
    auto W = [&]() { list.push_back(queuedWeights[nextWeight++]); };
    // DualPipe's overlapped forward-backward chunk pair: the forward and the
    // whole backward (B and W) form one unit.
    auto FB = [&](int forwardPhase, int backwardPhase) {
      F(forwardPhase);
      list.back().overlapsNext = true;
      B(backwardPhase, false);
    };
    for (int i = 0; i < 2 * (p - d - 1); ++i) // 1: nF0
      F(0);
    for (int i = 0; i < d + 1; ++i) { // 2: nF0F1
      F(0);
      F(1);
    }
    for (int i = 0; i < p - d - 1; ++i) { // 3: nB1W1F1
      B(1, true);
      W();
      F(1);
    }
    for (int i = 0; i < m - 2 * p + d + 1; ++i) { // 4: nF0B1F1B0
      if (i == 0 && d == p - 1) {
        // The reference does not overlap this first pair (a smaller
        // bubble).
        F(0);
        B(1, false);
      } else {
        FB(0, 1);
      }
      FB(1, 0);
    }
    for (int i = 0; i < p - d - 1; ++i) { // 5: nB1F1B0
      B(1, false);
      FB(1, 0);
    }
    bool zeroBubble = false; // 6: nB1B0, the second half zero-bubble
    for (int i = 0; i < d + 1; ++i) {
      if (i == (d + 1) / 2 && d % 2 == 1)
        zeroBubble = true;
      B(1, zeroBubble);
      if (i == (d + 1) / 2 && d % 2 == 0)
        zeroBubble = true;
      B(0, zeroBubble);
    }
    for (int i = 0; i < p - d - 1; ++i) { // 7: nWB0
      W();
      B(0, true);
    }
    while (nextWeight < queuedWeights.size()) // 8: nW
      W();
  }
  // A pair whose second half goes is no pair.
  for (std::vector<Action> &list : s.actions)
    for (size_t i = 0; i + 1 < list.size(); ++i)
      if (list[i + 1].microBatch >= s.microBatches)
        list[i].overlapsNext = false;
  dropMicroBatchesFrom(s, s.microBatches);
}

/// Appends the per-step actions: each stage of the device in the order its
/// last weight gradient is computed, so updates can start early; a stage's
/// grad_reduce goes right after its last weight gradient, so the reduction
/// overlaps the device's remaining backward work (interleaved chunks, the
/// deferred weight gradients of zero-bubble schedules).
static void appendStepActions(Schedule &s,
                              const std::vector<bool> *gradReduceStages) {
  for (int d = 0; d < s.numDevices; ++d) {
    std::vector<Action> &list = s.actions[d];
    std::vector<int> stages;
    for (int stage = 0; stage < s.numStages(); ++stage)
      if (s.deviceOf(stage) == d)
        stages.push_back(stage);
    std::vector<size_t> lastGrad(s.numStages(), 0);
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].kind == ActionKind::Backward ||
          list[i].kind == ActionKind::BackwardWeight)
        lastGrad[list[i].stage] = i;
    std::stable_sort(stages.begin(), stages.end(),
                     [&](int a, int b) { return lastGrad[a] < lastGrad[b]; });
    // From the latest position down, so earlier positions stay valid.
    for (auto it = stages.rbegin(); it != stages.rend(); ++it)
      if (gradReduceStages && (*gradReduceStages)[*it])
        list.insert(list.begin() + lastGrad[*it] + 1,
                    {ActionKind::GradReduce, *it, -1});
    for (int stage : stages)
      list.push_back({ActionKind::OptimizerStep, stage, -1});
  }
}

bool pp::schedule::refineSchedule(const Schedule &coarse,
                                  const std::vector<int> &coarseOf,
                                  const std::vector<bool> *gradReduceStages,
                                  Schedule &out, std::string &error) {
  int numFine = static_cast<int>(coarseOf.size());
  if (gradReduceStages && gradReduceStages->size() != coarseOf.size()) {
    error = "gradReduceStages has " + std::to_string(gradReduceStages->size()) +
            " entries for " + std::to_string(numFine) + " stages";
    return false;
  }
  std::vector<std::vector<int>> fineOf(coarse.numStages());
  for (int f = 0; f < numFine; ++f) {
    int c = coarseOf[f];
    if (c < 0 || c >= coarse.numStages() || (f > 0 && c < coarseOf[f - 1])) {
      error = "fine stage " + std::to_string(f) + " maps to coarse stage " +
              std::to_string(c) + " (stages are not a refinement of 0.." +
              std::to_string(coarse.numStages() - 1) + ")";
      return false;
    }
    fineOf[c].push_back(f);
  }
  for (int c = 0; c < coarse.numStages(); ++c)
    if (fineOf[c].empty()) {
      error = "coarse stage " + std::to_string(c) + " has no fine stage";
      return false;
    }
  Schedule s{coarse.kind,
             coarse.numDevices,
             coarse.chunksPerDevice,
             coarse.microBatches,
             {},
             {}};
  s.microBatchesPerUpdate = coarse.microBatchesPerUpdate;
  s.verticalSync = coarse.verticalSync;
  s.inFlight = coarse.inFlight;
  s.stageDevice.resize(numFine);
  for (int f = 0; f < numFine; ++f)
    s.stageDevice[f] = coarse.deviceOf(coarseOf[f]);
  s.actions.resize(coarse.numDevices);
  for (int d = 0; d < coarse.numDevices; ++d) {
    std::vector<Action> &list = s.actions[d];
    for (const Action &a : coarse.actions[d]) {
      const std::vector<int> &fine = fineOf[a.stage];
      switch (a.kind) {
      case ActionKind::Forward:
        for (int f : fine)
          list.push_back({a.kind, f, a.microBatch, a.weightVersion});
        break;
      case ActionKind::GradReduce:
        // Placed below, after each fine stage's last backward.
        break;
      case ActionKind::OptimizerStep:
        // A weight-versioned schedule's update index stays (-1 otherwise).
        for (int f : fine)
          list.push_back({a.kind, f, a.microBatch, a.weightVersion});
        break;
      default: // the backward kinds run from the last fine stage down
        for (auto it = fine.rbegin(); it != fine.rend(); ++it)
          list.push_back({a.kind, *it, a.microBatch, a.weightVersion});
        break;
      }
    }
    if (!gradReduceStages)
      continue;
    std::vector<std::pair<size_t, int>> lastGrad; // (position, fine stage)
    for (int f = 0; f < numFine; ++f) {
      if (s.stageDevice[f] != d || !(*gradReduceStages)[f])
        continue;
      size_t last = 0;
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i].stage == f && (list[i].kind == ActionKind::Backward ||
                                   list[i].kind == ActionKind::BackwardWeight))
          last = i;
      lastGrad.push_back({last, f});
    }
    // From the latest position down, so earlier positions stay valid.
    std::sort(lastGrad.rbegin(), lastGrad.rend());
    for (auto [position, f] : lastGrad)
      list.insert(list.begin() + position + 1, {ActionKind::GradReduce, f, -1});
  }
  out = std::move(s);
  return true;
}

namespace {
/// A stage with per-step actions: its device and where its first one sits
/// in the device's built list.
struct StepStage {
  int stage, device;
  size_t position;
};

/// A topological order of `stages` by the pairs of `before` among them,
/// taking among the ready stages the one whose update sits earliest in its
/// device's built list (ties: the lower device). With `breakCycles`, when
/// no stage is ready (a cycle), the earliest one whose senders on its own
/// device are placed goes next; else the order stops short.
std::vector<int> earliestFirstOrder(const std::vector<StepStage> &stages,
                                    const std::vector<std::pair<int, int>> &before,
                                    bool breakCycles) {
  auto deviceOf = [&](int stage) {
    auto it = std::find_if(stages.begin(), stages.end(),
                           [&](const StepStage &s) { return s.stage == stage; });
    return it == stages.end() ? -1 : it->device;
  };
  std::vector<int> order;
  std::vector<bool> placed(stages.size(), false);
  // The earliest stage whose senders are placed (only those on its own
  // device with `sameDevice`).
  auto earliest = [&](bool sameDevice) -> std::optional<size_t> {
    std::optional<size_t> next;
    for (size_t i = 0; i < stages.size(); ++i) {
      if (placed[i])
        continue;
      bool ready = std::all_of(
          before.begin(), before.end(), [&](std::pair<int, int> edge) {
            int from = deviceOf(edge.first);
            return edge.second != stages[i].stage ||
                   edge.first == edge.second || from < 0 ||
                   (sameDevice && from != stages[i].device) ||
                   std::find(order.begin(), order.end(), edge.first) !=
                       order.end();
          });
      if (ready &&
          (!next || std::make_pair(stages[i].position, stages[i].device) <
                        std::make_pair(stages[*next].position,
                                       stages[*next].device)))
        next = i;
    }
    return next;
  };
  while (order.size() < stages.size()) {
    std::optional<size_t> next = earliest(/*sameDevice=*/false);
    if (!next && breakCycles)
      next = earliest(/*sameDevice=*/true);
    if (!next)
      break;
    placed[*next] = true;
    order.push_back(stages[*next].stage);
  }
  return order;
}

/// The stages with OptimizerSteps, in one order for every device: senders
/// before their receivers (`before`) whatever their devices, else the built
/// order as far as it goes. Each device runs this order filtered to its
/// stages, so a wait for a message points back in the one order and no
/// devices wait on each other in a circle. A cycle of pairs across devices
/// is broken at the earliest stage: its functions exchange messages both
/// ways (fp16's skip flags meet on stage 0 and return), each sending before
/// it receives. Empty, with `error` naming the stages, when the pairs of
/// one device's stages form a cycle: those cannot both run first.
std::vector<int> stepStageOrder(const pp::schedule::Schedule &schedule,
                                const std::vector<std::pair<int, int>> &before,
                                std::string &error) {
  std::vector<StepStage> stages;
  for (int d = 0; d < schedule.numDevices; ++d) {
    const auto &list = schedule.actions[d];
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].kind == pp::schedule::ActionKind::OptimizerStep &&
          std::none_of(stages.begin(), stages.end(),
                       [&](const StepStage &s) {
                         return s.stage == list[i].stage;
                       }))
        stages.push_back({list[i].stage, d, i});
  }
  for (int d = 0; d < schedule.numDevices; ++d) {
    std::vector<StepStage> mine;
    for (const StepStage &s : stages)
      if (s.device == d)
        mine.push_back(s);
    std::vector<int> order = earliestFirstOrder(mine, before, false);
    if (order.size() == mine.size())
      continue;
    std::string cycle;
    for (const StepStage &s : mine)
      if (std::find(order.begin(), order.end(), s.stage) == order.end())
        cycle += (cycle.empty() ? "" : ", ") + std::to_string(s.stage);
    error = "the per-step actions of stages " + cycle + " on device " +
            std::to_string(d) +
            " wait for each other's messages: no order runs every sender "
            "first";
    return {};
  }
  return earliestFirstOrder(stages, before, true);
}
} // namespace

bool pp::schedule::orderStepActions(
    Schedule &schedule, const std::vector<std::pair<int, int>> &before,
    std::string &error) {
  std::vector<int> order = stepStageOrder(schedule, before, error);
  if (order.empty())
    return std::none_of(schedule.actions.begin(), schedule.actions.end(),
                        [](const std::vector<Action> &list) {
                          return std::any_of(
                              list.begin(), list.end(), [](const Action &a) {
                                return a.kind == ActionKind::OptimizerStep;
                              });
                        });
  for (std::vector<Action> &list : schedule.actions) {
    // grad_reduce stays after its stage's last weight gradient.
    std::vector<size_t> positions;
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].kind == ActionKind::OptimizerStep)
        positions.push_back(i);
    // Within each update (a weight-versioned schedule's u-th of every
    // stage, microBatch u; a synchronous schedule's one, -1): the stages'
    // updates take that update's positions in `order`.
    std::vector<int> updates;
    for (size_t i : positions)
      if (std::find(updates.begin(), updates.end(), list[i].microBatch) ==
          updates.end())
        updates.push_back(list[i].microBatch);
    for (int u : updates) {
      std::vector<size_t> mine;
      for (size_t i : positions)
        if (list[i].microBatch == u)
          mine.push_back(i);
      std::vector<Action> reordered;
      for (int stage : order)
        for (size_t i : mine)
          if (list[i].stage == stage)
            reordered.push_back(list[i]);
      for (size_t k = 0; k < mine.size(); ++k)
        list[mine[k]] = reordered[k];
    }
  }
  return true;
}

bool pp::schedule::buildSchedule(ScheduleKind kind, int numDevices,
                                 int microBatches, int chunksPerDevice,
                                 Schedule &out, std::string &error,
                                 const std::vector<bool> *gradReduceStages) {
  auto fail = [&](std::string message) {
    error = std::move(message);
    return false;
  };
  if (numDevices < 1)
    return fail("numDevices must be at least 1, got " +
                std::to_string(numDevices));
  if (microBatches < 1)
    return fail("microBatches must be at least 1, got " +
                std::to_string(microBatches));
  if (kind == ScheduleKind::Interleaved1F1B) {
    if (chunksPerDevice < 2)
      return fail("chunksPerDevice must be at least 2 for the interleaved "
                  "schedule, got " +
                  std::to_string(chunksPerDevice));
    if (microBatches % numDevices != 0)
      return fail("microBatches (" + std::to_string(microBatches) +
                  ") must be a multiple of numDevices (" +
                  std::to_string(numDevices) +
                  ") for the interleaved schedule");
  } else if (pp::kinds::isVShaped(kind)) {
    if (chunksPerDevice != 2)
      return fail(std::string("chunksPerDevice must be 2 for the ") +
                  toString(kind) +
                  " schedule (a V of two chunks per "
                  "device), got " +
                  std::to_string(chunksPerDevice));
  } else if (chunksPerDevice != 1) {
    return fail(std::string("chunksPerDevice must be 1 for the ") +
                toString(kind) + " schedule, got " +
                std::to_string(chunksPerDevice));
  }
  if (gradReduceStages && gradReduceStages->size() !=
                              static_cast<size_t>(numDevices) * chunksPerDevice)
    return fail("gradReduceStages has " +
                std::to_string(gradReduceStages->size()) +
                " entries, expected one per stage (" +
                std::to_string(numDevices * chunksPerDevice) + ")");

  Schedule s{kind, numDevices, chunksPerDevice, microBatches, {}, {}};
  s.actions.resize(numDevices);
  switch (kind) {
  case ScheduleKind::GPipe:
    buildGPipe(s);
    break;
  case ScheduleKind::OneFOneB:
    buildOneFOneB(s);
    break;
  case ScheduleKind::Interleaved1F1B:
    buildInterleaved(s);
    break;
  case ScheduleKind::ZBH1:
    buildZBH1(s);
    break;
  case ScheduleKind::ZBH2:
    buildZBH2(s);
    break;
  case ScheduleKind::ZBV:
    buildZBV(s);
    break;
  case ScheduleKind::DualPipeV:
    buildDualPipeV(s);
    break;
  default:
    return fail(std::string(toString(kind)) +
                " is weight-versioned: buildVersionedSchedule builds it");
  }
  appendStepActions(s, gradReduceStages);
  out = std::move(s);
  return true;
}

//===----------------------------------------------------------------------===//
// Dependencies and validation
//===----------------------------------------------------------------------===//

std::vector<Action> pp::schedule::dependencies(const Schedule &schedule,
                                               const Action &action,
                                               bool hasGradReduce) {
  bool split = usesSplitBackward(schedule.kind);
  ActionKind inputGrad =
      split ? ActionKind::BackwardInput : ActionKind::Backward;
  ActionKind weightGrad =
      split ? ActionKind::BackwardWeight : ActionKind::Backward;
  int s = action.stage, j = action.microBatch, v = action.weightVersion;
  std::vector<Action> deps;
  if (isWeightVersioned(schedule.kind)) {
    // Versions do not name the producers here: a stage's forwards read
    // whatever version of the other stages' weights they were made with.
    int n = schedule.microBatchesPerUpdate;
    switch (action.kind) {
    case ActionKind::Forward:
      if (s > 0)
        deps.push_back({ActionKind::Forward, s - 1, j});
      break;
    case ActionKind::Backward:
      deps.push_back({ActionKind::Forward, s, j});
      if (s + 1 < schedule.numStages())
        deps.push_back({ActionKind::Backward, s + 1, j});
      break;
    case ActionKind::GradReduce:
    case ActionKind::OptimizerStep:
      for (int mb = j * n; mb < (j + 1) * n; ++mb)
        deps.push_back({ActionKind::Backward, s, mb});
      if (action.kind == ActionKind::OptimizerStep && hasGradReduce)
        deps.push_back({ActionKind::GradReduce, s, j});
      break;
    default:
      break;
    }
    // The update that made each version read.
    for (int version : {isPerStep(action.kind) ? 0 : v,
                        action.blendVersion})
      if (version > 0)
        deps.push_back({ActionKind::OptimizerStep, s, version - 1});
    return deps;
  }
  switch (action.kind) {
  case ActionKind::Forward:
    if (s > 0)
      deps.push_back({ActionKind::Forward, s - 1, j, v});
    break;
  case ActionKind::Backward:
  case ActionKind::BackwardInput:
    deps.push_back({ActionKind::Forward, s, j, v});
    if (s + 1 < schedule.numStages())
      deps.push_back({inputGrad, s + 1, j, v});
    break;
  case ActionKind::BackwardWeight:
    deps.push_back({ActionKind::BackwardInput, s, j, v});
    break;
  case ActionKind::GradReduce:
  case ActionKind::OptimizerStep:
    for (int mb = 0; mb < schedule.microBatches; ++mb)
      deps.push_back({weightGrad, s, mb, v});
    if (action.kind == ActionKind::OptimizerStep && hasGradReduce)
      deps.push_back({ActionKind::GradReduce, s, -1, v});
    break;
  }
  return deps;
}

bool pp::schedule::validateSchedule(const Schedule &schedule,
                                    std::string &error) {
  auto fail = [&](std::string message) {
    error = std::move(message);
    return false;
  };
  const Schedule &s = schedule;
  if (s.numDevices < 1 || s.chunksPerDevice < 1 || s.microBatches < 1)
    return fail("numDevices, chunksPerDevice and microBatches must be "
                "positive, got " +
                std::to_string(s.numDevices) + ", " +
                std::to_string(s.chunksPerDevice) + ", " +
                std::to_string(s.microBatches));
  if (s.actions.size() != static_cast<size_t>(s.numDevices))
    return fail("the schedule has action lists for " +
                std::to_string(s.actions.size()) + " devices, expected " +
                std::to_string(s.numDevices));

  bool split = usesSplitBackward(s.kind);
  bool versioned = isWeightVersioned(s.kind);
  if (versioned && (s.microBatchesPerUpdate < 1 ||
                    s.microBatches % s.microBatchesPerUpdate != 0))
    return fail("a weight-versioned schedule needs microBatchesPerUpdate "
                "dividing microBatches, got " +
                std::to_string(s.microBatchesPerUpdate));
  int numStages = s.numStages(), m = s.microBatches;
  size_t numKinds = pp::kinds::kNumActionKinds;
  // Slot of (kind, stage, micro-batch); per-step actions use micro-batch -1.
  auto slot = [&](const Action &a) {
    return (static_cast<size_t>(a.kind) * numStages + a.stage) * (m + 1) +
           (a.microBatch + 1);
  };
  // Where each action was seen first: device and position.
  std::vector<std::pair<int, size_t>> seen(numKinds * numStages * (m + 1),
                                           {-1, 0});
  for (int d = 0; d < s.numDevices; ++d) {
    for (size_t i = 0; i < s.actions[d].size(); ++i) {
      const Action &a = s.actions[d][i];
      std::string where = "on device " + std::to_string(d) + " (position " +
                          std::to_string(i) + ")";
      if (a.stage < 0 || a.stage >= numStages)
        return fail(std::string(toString(a.kind)) + " " + where +
                    " has stage " + std::to_string(a.stage) + ", outside [0, " +
                    std::to_string(numStages) + ")");
      bool perUpdate = versioned && (a.kind == ActionKind::OptimizerStep ||
                                     a.kind == ActionKind::GradReduce);
      if (perUpdate ? a.microBatch < 0 || a.microBatch >= s.updatesPerStep()
          : isPerStep(a.kind) ? a.microBatch != -1
                              : a.microBatch < 0 || a.microBatch >= m)
        return fail(
            toString(a) + " " + where +
            (perUpdate ? ": update outside [0, " +
                             std::to_string(s.updatesPerStep()) + ")"
             : isPerStep(a.kind)
                 ? std::string(" must have micro-batch -1")
                 : ": micro-batch outside [0, " + std::to_string(m) + ")"));
      if (a.weightVersion < 0)
        return fail(toString(a) + " " + where +
                    " has a negative weight version");
      bool wrongKind = split ? a.kind == ActionKind::Backward
                             : a.kind == ActionKind::BackwardInput ||
                                   a.kind == ActionKind::BackwardWeight;
      if (wrongKind)
        return fail(toString(a) + " " + where + " does not belong in a " +
                    toString(s.kind) + " schedule");
      if (s.deviceOf(a.stage) != d)
        return fail(toString(a) + " is misplaced " + where + ": stage " +
                    std::to_string(a.stage) + " belongs to device " +
                    std::to_string(s.deviceOf(a.stage)));
      std::pair<int, size_t> &first = seen[slot(a)];
      if (first.first >= 0)
        return fail(toString(a) + " appears twice: on device " +
                    std::to_string(first.first) + " (position " +
                    std::to_string(first.second) + ") and " + where);
      first = {d, i};
    }
  }

  auto require = [&](const Action &a) {
    if (seen[slot(a)].first < 0)
      return fail(toString(a) + " is missing (device " +
                  std::to_string(s.deviceOf(a.stage)) + ")");
    return true;
  };
  for (int stage = 0; stage < numStages; ++stage) {
    for (int j = 0; j < m; ++j) {
      if (!require({ActionKind::Forward, stage, j}))
        return false;
      if (split) {
        if (!require({ActionKind::BackwardInput, stage, j}) ||
            !require({ActionKind::BackwardWeight, stage, j}))
          return false;
      } else if (!require({ActionKind::Backward, stage, j})) {
        return false;
      }
    }
    if (versioned) {
      for (int u = 0; u < s.updatesPerStep(); ++u)
        if (!require({ActionKind::OptimizerStep, stage, u}))
          return false;
    } else if (!require({ActionKind::OptimizerStep, stage, -1})) {
      return false;
    }
  }
  error.clear();
  return true;
}
