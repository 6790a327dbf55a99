//===- Versioned.cpp - Weight-versioned pipeline schedules ----------------===//
//
// PipeDream, PipeDream-2BW, nF1B and the V- and I-TiMePReSt variants: their
// action lists with the weight version every action reads, and what those
// versions cost (versions held, staleness). See Schedule.h for the rules.
//
//===----------------------------------------------------------------------===//

#include "pp/Schedule/Schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

using namespace pp::schedule;

bool pp::schedule::isWeightVersioned(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::PipeDream:
  case ScheduleKind::PipeDream2BW:
  case ScheduleKind::NF1B:
  case ScheduleKind::VTimePReSt:
  case ScheduleKind::ITimePReSt:
  case ScheduleKind::HetPipe:
    return true;
  default:
    return false;
  }
}

int pp::schedule::timePReStVersionGap(int numStages, int n) {
  return n > 0 ? (numStages + n - 2) / n : 0;
}

namespace {

/// A forward (mini-batch backward: `backward`) of one stage, before the
/// versions are known.
struct Slot {
  bool backward;
  int index; // micro-batch (forward) or mini-batch (backward)
};

/// Per stage, 1F1B's order of forwards and backwards over m micro-batches,
/// without the flush between mini-batches, with `inFlight` micro-batches in
/// flight on stage 0 (p for 1F1B): stage s warms up with inFlight - s - 1
/// forwards (at least 0), so that neighbours differ by one and the steady
/// state has no bubble when inFlight >= p.
std::vector<std::vector<Slot>> oneFOneBOrder(int p, int m, int inFlight) {
  std::vector<std::vector<Slot>> order(p);
  for (int s = 0; s < p; ++s) {
    int warmup = std::min(std::max(inFlight - s - 1, 0), m);
    for (int j = 0; j < warmup; ++j)
      order[s].push_back({false, j});
    for (int j = 0; j < m - warmup; ++j) {
      order[s].push_back({false, warmup + j});
      order[s].push_back({true, j});
    }
    for (int j = m - warmup; j < m; ++j)
      order[s].push_back({true, j});
  }
  return order;
}

/// TiMePReSt's order in unit time slots: each slot a stage runs one
/// micro-batch forward or one mini-batch backward; a ready backward (its
/// forwards done here, the next stage's backward of it done in an earlier
/// slot) goes first, else the next forward whose input arrived in an
/// earlier slot. Backwards here are per mini-batch (index b).
std::vector<std::vector<Slot>> nF1BOrder(int p, int m, int n) {
  int miniBatches = m / n;
  std::vector<std::vector<Slot>> order(p);
  // Slot in which each forward / backward ended (-1: not yet).
  std::vector<std::vector<int>> forwardAt(p, std::vector<int>(m, -1));
  std::vector<std::vector<int>> backwardAt(p,
                                           std::vector<int>(miniBatches, -1));
  std::vector<int> nextForward(p, 0), nextBackward(p, 0);
  int done = 0, total = p * (m + miniBatches);
  // Every slot some stage can move (the last stage's backward needs only
  // its own forwards), so this ends; the bound is a guard.
  for (int t = 0; done < total && t <= 4 * total + 4; ++t) {
    for (int s = 0; s < p; ++s) {
      int b = nextBackward[s];
      bool backwardReady = b < miniBatches && nextForward[s] >= (b + 1) * n &&
                           forwardAt[s][(b + 1) * n - 1] < t &&
                           (s == p - 1 || (backwardAt[s + 1][b] >= 0 &&
                                           backwardAt[s + 1][b] < t));
      if (backwardReady) {
        backwardAt[s][b] = t;
        order[s].push_back({true, b});
        ++nextBackward[s];
        ++done;
        continue;
      }
      int j = nextForward[s];
      if (j < m &&
          (s == 0 || (forwardAt[s - 1][j] >= 0 && forwardAt[s - 1][j] < t))) {
        forwardAt[s][j] = t;
        order[s].push_back({false, j});
        ++nextForward[s];
        ++done;
      }
    }
  }
  return order;
}

} // namespace

bool pp::schedule::buildVersionedSchedule(
    ScheduleKind kind, int numDevices, int microBatches,
    int microBatchesPerUpdate, bool verticalSync, Schedule &out,
    std::string &error, const std::vector<bool> *gradReduceStages,
    int inFlight) {
  auto fail = [&](std::string message) {
    error = std::move(message);
    return false;
  };
  int p = numDevices, m = microBatches, n = microBatchesPerUpdate;
  if (!isWeightVersioned(kind))
    return fail(std::string(toString(kind)) +
                " is not a weight-versioned schedule (buildSchedule builds "
                "it)");
  if (p < 1)
    return fail("numDevices must be at least 1, got " + std::to_string(p));
  if (m < 1)
    return fail("microBatches must be at least 1, got " + std::to_string(m));
  bool everyMicroBatch =
      kind == ScheduleKind::PipeDream || kind == ScheduleKind::HetPipe;
  if (everyMicroBatch && n != 1)
    return fail(
        std::string(kind == ScheduleKind::HetPipe ? "HetPipe" : "PipeDream") +
        " updates after every micro-batch: "
        "microBatchesPerUpdate must be 1, got " +
        std::to_string(n));
  if (kind == ScheduleKind::HetPipe && inFlight < 1)
    return fail("HetPipe keeps Nm mini-batches in flight: inFlight must be "
                "at least 1, got " +
                std::to_string(inFlight));
  if (n < 1 || m % n != 0)
    return fail("microBatchesPerUpdate (" + std::to_string(n) +
                ") must divide microBatches (" + std::to_string(m) + ")");
  if (kind == ScheduleKind::PipeDream2BW && n < p)
    return fail("PipeDream-2BW accumulates over at least as many "
                "micro-batches as stages: microBatchesPerUpdate (" +
                std::to_string(n) + ") must be >= numDevices (" +
                std::to_string(p) + ")");
  if (verticalSync && kind != ScheduleKind::PipeDream)
    return fail(std::string("vertical sync is an option of pipedream, not ") +
                toString(kind));

  Schedule s{kind, p, 1, m, {}, {}};
  s.microBatchesPerUpdate = n;
  s.verticalSync = verticalSync;
  s.inFlight = kind == ScheduleKind::HetPipe ? inFlight : 0;
  s.actions.resize(p);
  bool oneFOneB = everyMicroBatch || kind == ScheduleKind::PipeDream2BW;
  std::vector<std::vector<Slot>> order =
      oneFOneB ? oneFOneBOrder(p, m, s.inFlight > 0 ? s.inFlight : p)
               : nF1BOrder(p, m, n);

  // The version each stage's forward of micro-batch j read, in stage order
  // (stage 0 first: vertical rules read its versions).
  std::vector<std::vector<int>> forwardVersion(p, std::vector<int>(m, 0));
  for (int st = 0; st < p; ++st) {
    std::vector<Action> &list = s.actions[st];
    int updates = 0; // applied so far on this stage: the latest version
    for (const Slot &slot : order[st]) {
      if (!slot.backward) {
        int j = slot.index, version = updates;
        switch (kind) {
        case ScheduleKind::PipeDream:
          version = verticalSync && st > 0 ? forwardVersion[0][j] : updates;
          break;
        case ScheduleKind::PipeDream2BW:
          version = std::max(j / n - 1, 0);
          break;
        case ScheduleKind::HetPipe:
          // Local staleness Nm - 1 on every stage (vertical sync).
          version = std::max(j - inFlight + 1, 0);
          break;
        case ScheduleKind::NF1B:
          // Vertical: the version stage 0 read for the mini-batch's first
          // micro-batch (on stage 0, the latest at that forward).
          if (st > 0 || j % n != 0)
            version = forwardVersion[0][j / n * n];
          break;
        default: // V- and I-TiMePReSt: the latest
          break;
        }
        if (version > updates)
          return fail(toString(Action{ActionKind::Forward, st, j, version}) +
                      " reads a version its stage has not made yet (" +
                      std::to_string(updates) + " updates)");
        forwardVersion[st][j] = version;
        list.push_back({ActionKind::Forward, st, j, version});
        continue;
      }
      // A backward: PipeDream's and 2BW's per micro-batch, then the update
      // when it ends a mini-batch; TiMePReSt's per mini-batch.
      int first = oneFOneB ? slot.index : slot.index * n;
      int last = oneFOneB ? slot.index : first + n - 1;
      for (int j = first; j <= last; ++j) {
        Action b{ActionKind::Backward, st, j, updates};
        if (oneFOneB)
          b.weightVersion = forwardVersion[st][j]; // stashed
        else if (kind == ScheduleKind::ITimePReSt &&
                 forwardVersion[st][j] != updates) {
          // Two versions kept: the latest and the one before it.
          b.weightVersion = std::max(forwardVersion[st][j], updates - 1);
          b.blendVersion = updates;
          b.staleness = updates - forwardVersion[st][j];
        }
        list.push_back(b);
      }
      if ((last + 1) % n == 0) {
        // Data parallelism: the replicas' sums of the mini-batch, all-reduced
        // before each update (synchronous within the update).
        if (gradReduceStages && (*gradReduceStages)[st])
          list.push_back({ActionKind::GradReduce, st, last / n});
        list.push_back({ActionKind::OptimizerStep, st, last / n});
        ++updates;
      }
    }
  }
  out = std::move(s);
  return true;
}

std::vector<int64_t>
pp::schedule::peakWeightVersions(const Schedule &schedule) {
  std::vector<int64_t> peak(schedule.numStages(), 1);
  if (!isWeightVersioned(schedule.kind))
    return peak;
  for (const std::vector<Action> &list : schedule.actions) {
    // Per stage: the last position reading each version.
    std::map<int, std::map<int, size_t>> lastRead;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action &a = list[i];
      if (a.kind == ActionKind::OptimizerStep)
        continue;
      lastRead[a.stage][a.weightVersion] = i;
      if (a.blendVersion >= 0)
        lastRead[a.stage][a.blendVersion] = i;
    }
    std::map<int, int> latest;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action &a = list[i];
      if (a.kind == ActionKind::OptimizerStep)
        ++latest[a.stage];
      // Held now: the latest, and the older versions read at or after i.
      int64_t held = 1;
      for (auto [version, position] : lastRead[a.stage])
        if (version < latest[a.stage] && position >= i)
          ++held;
      peak[a.stage] = std::max(peak[a.stage], held);
    }
  }
  return peak;
}

std::vector<std::vector<int>>
pp::schedule::updateStaleness(const Schedule &schedule) {
  std::vector<std::vector<int>> staleness(schedule.numStages());
  if (!isWeightVersioned(schedule.kind)) {
    for (auto &list : staleness)
      list.assign(1, 0);
    return staleness;
  }
  int n = schedule.microBatchesPerUpdate;
  for (const std::vector<Action> &list : schedule.actions)
    for (const Action &a : list) {
      if (a.kind != ActionKind::Forward)
        continue;
      std::vector<int> &mine = staleness[a.stage];
      int u = a.microBatch / n;
      if (static_cast<int>(mine.size()) <= u)
        mine.resize(u + 1, -1);
      int stale = u - a.weightVersion;
      mine[u] = std::max(mine[u], stale);
    }
  return staleness;
}
