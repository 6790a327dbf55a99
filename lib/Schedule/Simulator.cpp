//===- Simulator.cpp - Event-driven simulation of a schedule --------------===//
//
// A discrete-event simulation: a queue of action ends and transfer ends,
// processed in time order; after every instant each idle device starts its
// next action if its dependencies are met. Transfers are timed when they are
// sent, which is FIFO per link because sends happen in time order. A
// grad_reduce is communication, not compute: it runs on its device's
// collective channel (one at a time, in schedule order) while the device
// goes on with its next actions; the stage's optimizer step waits for it.
// Devices of a sharing group run their actions at a rate that changes when
// one of the group starts or ends an action: the remaining work is advanced
// and each running action's end event is posted again (the old one, whose
// sequence number no longer matches, is skipped).
//
//===----------------------------------------------------------------------===//

#include "pp/Schedule/Simulator.h"

#include <map>
#include <set>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>

using namespace pp::schedule;

namespace {

struct Event {
  double time;
  /// Tie-break: the order events were created in, for determinism.
  uint64_t seq;
  enum Kind { ActionEnd, TransferEnd, CollectiveEnd } kind;
  /// Device (ActionEnd), index into SimulationResult::transfers
  /// (TransferEnd) or into SimulationResult::actions (CollectiveEnd).
  int index;

  bool operator>(const Event &other) const {
    if (time != other.time)
      return time > other.time;
    return seq > other.seq;
  }
};

class Simulation {
public:
  Simulation(const Schedule &schedule, const SimulationInput &input,
             SimulationResult &result)
      : schedule(schedule), input(input), result(result) {}

  void run();

private:
  size_t slotOf(const Action &a) const {
    return (static_cast<size_t>(a.kind) * schedule.numStages() + a.stage) *
               (schedule.microBatches + 1) +
           (a.microBatch + 1);
  }
  bool checkInput();
  /// True when `a` may start on `device`; otherwise sets `blocker` to the
  /// first dependency it waits for.
  /// Whether every input of `a` is there; the actions of `assumeDone`
  /// count as done (the earlier members of an overlapped unit).
  bool isReady(int device, const Action &a, Action &blocker,
               const std::vector<Action> &assumeDone = {}) const;
  void tryStart(double now);
  void finishAction(int device, double now);
  /// Sends what `a` produced (activations or an input gradient) and frees
  /// the stashes it ends.
  void handOn(int device, const Action &a, double now);
  void send(int fromDevice, const Action &producer, const Action &consumer,
            double now);
  void push(double time, Event::Kind kind, int index) {
    queue.push({time, nextSeq++, kind, index});
  }
  /// The sharing group of `device`, or -1.
  int groupOf(int device) const {
    const auto &groups = input.sharing.group;
    return static_cast<size_t>(device) < groups.size() ? groups[device] : -1;
  }
  /// Brings the remaining work of group g's running actions to `now`.
  void advanceGroup(int g, double now);
  /// Recomputes group g's rates and posts its running actions' ends.
  void rescheduleGroup(int g, double now);
  double linkBandwidth(int from, int to) const;
  double linkLatency(int from, int to) const;
  void allocate(int device, uint64_t bytes);
  void reportStuck();

  const Schedule &schedule;
  const SimulationInput &input;
  SimulationResult &result;

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue;
  uint64_t nextSeq = 0;
  /// Per device: index of the next action, and the running action's index in
  /// result.actions (-1 when idle).
  std::vector<size_t> next;
  std::vector<int> running;
  /// Per device: the sequence number of its valid ActionEnd event, and
  /// (shared devices) the running action's remaining work at full speed
  /// and its rate.
  std::vector<uint64_t> endSeq;
  std::vector<double> remaining, rate;
  /// Per sharing group: when its remaining work was last advanced.
  std::vector<double> groupTime;
  /// Per device: the indices in result.actions of the members of an
  /// overlapped unit whose outputs wait for its end (SimulationInput::
  /// overlappedPairs).
  std::vector<std::vector<size_t>> unitMembers;
  /// Per slot: the first device scheduling it (-1: never), whether it ended,
  /// and whether its message (if any) arrived.
  std::vector<int> scheduledOn;
  std::vector<char> done, delivered;
  std::vector<char> hasGradReduce;
  /// Per device: when its collective channel (grad_reduce) becomes free.
  std::vector<double> collectiveFree;
  /// Per directed link (from * p + to): when it becomes free.
  std::vector<double> linkFree;
  /// Per transfer: the slot of its producer.
  std::vector<size_t> transferProducer;
  /// Stash bytes held per slot (Forward, BackwardInput) and by which device.
  std::vector<uint64_t> heldBytes;
  std::vector<int> heldOn;
  /// Weight-versioned schedules: (stage, version) -> the slot of the last
  /// action reading it, and the versions held as extra copies now.
  std::map<std::pair<int, int>, size_t> lastReader;
  std::set<std::pair<int, int>> extraVersions;
  std::vector<uint64_t> memory;
};

} // namespace

bool Simulation::checkInput() {
  const Schedule &s = schedule;
  auto fail = [&](std::string message) {
    result.error = std::move(message);
    return false;
  };
  if (s.numDevices < 1 || s.chunksPerDevice < 1 || s.microBatches < 1)
    return fail("the schedule needs at least one device, chunk and "
                "micro-batch");
  if (s.actions.size() != static_cast<size_t>(s.numDevices))
    return fail("the schedule has action lists for " +
                std::to_string(s.actions.size()) + " devices, expected " +
                std::to_string(s.numDevices));
  for (size_t d = 0; d < input.sharing.group.size(); ++d) {
    int g = input.sharing.group[d];
    if (g >= static_cast<int>(input.sharing.processors.size()) ||
        (g >= 0 && !(input.sharing.processors[g] > 0)))
      return fail("device " + std::to_string(d) + "'s sharing group " +
                  std::to_string(g) + " has no processors");
  }
  if (input.stages.size() != static_cast<size_t>(s.numStages()))
    return fail("the input has costs for " +
                std::to_string(input.stages.size()) + " stages, expected " +
                std::to_string(s.numStages()));
  for (int d = 0; d < s.numDevices; ++d) {
    for (const Action &a : s.actions[d]) {
      bool stageOk = a.stage >= 0 && a.stage < s.numStages();
      bool perUpdate =
          isWeightVersioned(s.kind) && (a.kind == ActionKind::OptimizerStep ||
                                        a.kind == ActionKind::GradReduce);
      bool mbOk = perUpdate
                      ? a.microBatch >= 0 && a.microBatch < s.updatesPerStep()
                  : isPerStep(a.kind)
                      ? a.microBatch == -1
                      : a.microBatch >= 0 && a.microBatch < s.microBatches;
      if (!stageOk || !mbOk)
        return fail(toString(a) + " on device " + std::to_string(d) +
                    " is out of range");
    }
  }
  return true;
}

double Simulation::linkBandwidth(int from, int to) const {
  if (static_cast<size_t>(from) < input.bandwidth.size() &&
      static_cast<size_t>(to) < input.bandwidth[from].size() &&
      input.bandwidth[from][to] > 0)
    return input.bandwidth[from][to];
  return std::numeric_limits<double>::infinity();
}

double Simulation::linkLatency(int from, int to) const {
  if (static_cast<size_t>(from) < input.latency.size() &&
      static_cast<size_t>(to) < input.latency[from].size())
    return input.latency[from][to];
  return 0;
}

bool Simulation::isReady(int device, const Action &a, Action &blocker,
                         const std::vector<Action> &assumeDone) const {
  for (const Action &dep :
       dependencies(schedule, a, hasGradReduce[a.stage] != 0)) {
    size_t slot = slotOf(dep);
    if (std::any_of(assumeDone.begin(), assumeDone.end(),
                    [&](const Action &done) { return slotOf(done) == slot; }))
      continue;
    if (!done[slot] || (scheduledOn[slot] != device && !delivered[slot])) {
      blocker = dep;
      return false;
    }
  }
  return true;
}

void Simulation::allocate(int device, uint64_t bytes) {
  memory[device] += bytes;
  result.peakMemory[device] =
      std::max(result.peakMemory[device], memory[device]);
}

void Simulation::tryStart(double now) {
  for (int d = 0; d < schedule.numDevices; ++d) {
    if (running[d] >= 0 || next[d] >= schedule.actions[d].size())
      continue;
    const Action &a = schedule.actions[d][next[d]];
    Action blocker = a;
    if (!isReady(d, a, blocker))
      continue;
    // An overlapped unit (DualPipeV's forward and backward pair) starts
    // once the inputs of all its members are there.
    const std::vector<Action> &list = schedule.actions[d];
    std::vector<Action> unit = {a};
    bool unitReady = true;
    for (size_t k = next[d];
         unitReady && list[k].overlapsNext && k + 1 < list.size(); ++k) {
      unitReady = isReady(d, list[k + 1], blocker, unit);
      unit.push_back(list[k + 1]);
    }
    if (!unitReady)
      continue;
    const StageCosts &c = input.stages[a.stage];
    if (a.kind == ActionKind::GradReduce) {
      // Off the compute stream: the device takes its next action now.
      double start = std::max(now, collectiveFree[d]);
      double end = start + c.gradReduce;
      collectiveFree[d] = end;
      push(end, Event::CollectiveEnd, static_cast<int>(result.actions.size()));
      result.actions.push_back({d, a, start, end});
      ++next[d];
      --d; // this device again
      continue;
    }
    double duration = 0;
    switch (a.kind) {
    case ActionKind::Forward:
      duration = c.forward;
      if (heldOn[slotOf(a)] < 0) {
        heldBytes[slotOf(a)] = c.stashBytes;
        heldOn[slotOf(a)] = d;
        allocate(d, c.stashBytes);
      }
      break;
    case ActionKind::Backward:
      duration = c.backward;
      break;
    case ActionKind::BackwardInput:
      duration = c.backwardInput;
      if (heldOn[slotOf(a)] < 0) {
        heldBytes[slotOf(a)] = c.inputGradStashBytes;
        heldOn[slotOf(a)] = d;
        allocate(d, c.inputGradStashBytes);
      }
      break;
    case ActionKind::BackwardWeight:
      duration = c.backwardWeight;
      break;
    case ActionKind::GradReduce: // started above
      break;
    case ActionKind::OptimizerStep:
      duration = c.optimizer;
      break;
    }
    running[d] = static_cast<int>(result.actions.size());
    result.actions.push_back({d, a, now, now + duration});
    int g = groupOf(d);
    if (g < 0) {
      result.busy[d] += duration;
      endSeq[d] = nextSeq;
      push(now + duration, Event::ActionEnd, d);
      continue;
    }
    advanceGroup(g, now);
    remaining[d] = duration;
    rescheduleGroup(g, now);
  }
}

void Simulation::advanceGroup(int g, double now) {
  double elapsed = now - groupTime[g];
  groupTime[g] = now;
  if (elapsed <= 0)
    return;
  for (int d = 0; d < schedule.numDevices; ++d)
    if (groupOf(d) == g && running[d] >= 0)
      remaining[d] = std::max(0.0, remaining[d] - rate[d] * elapsed);
}

void Simulation::rescheduleGroup(int g, double now) {
  const auto &demandOf = input.sharing.demand;
  auto demand = [&](int d) {
    return static_cast<size_t>(d) < demandOf.size() && demandOf[d] > 0
               ? demandOf[d]
               : 1.0;
  };
  double total = 0;
  for (int d = 0; d < schedule.numDevices; ++d)
    if (groupOf(d) == g && running[d] >= 0)
      total += demand(d);
  double processors = input.sharing.processors[g];
  double share = total > processors ? processors / total : 1.0;
  for (int d = 0; d < schedule.numDevices; ++d) {
    if (groupOf(d) != g || running[d] < 0)
      continue;
    rate[d] = share;
    endSeq[d] = nextSeq;
    push(now + remaining[d] / share, Event::ActionEnd, d);
  }
}

void Simulation::send(int fromDevice, const Action &producer,
                      const Action &consumer, double now) {
  size_t producerSlot = slotOf(producer);
  int consumerDevice = scheduledOn[slotOf(consumer)];
  if (consumerDevice < 0)
    consumerDevice = schedule.deviceOf(consumer.stage);
  if (consumerDevice == fromDevice) {
    delivered[producerSlot] = 1;
    return;
  }
  bool forward = producer.kind == ActionKind::Forward;
  const StageCosts &c = input.stages[producer.stage];
  uint64_t bytes = forward ? c.activationBytes : c.gradientBytes;
  double &free =
      linkFree[static_cast<size_t>(fromDevice) * schedule.numDevices +
               consumerDevice];
  double start = std::max(now, free);
  double end =
      start + linkLatency(fromDevice, consumerDevice) +
      static_cast<double>(bytes) / linkBandwidth(fromDevice, consumerDevice);
  free = end;
  int index = static_cast<int>(result.transfers.size());
  result.transfers.push_back({fromDevice, consumerDevice, producer.stage,
                              consumer.stage, producer.microBatch, forward,
                              bytes, start, end});
  transferProducer.push_back(producerSlot);
  push(end, Event::TransferEnd, index);
}

void Simulation::finishAction(int device, double now) {
  size_t index = static_cast<size_t>(running[device]);
  const Action &a = result.actions[index].action;
  int g = groupOf(device);
  if (g >= 0) {
    // Shared: the action took what the rates made of it.
    result.actions[index].end = now;
    result.busy[device] += now - result.actions[index].start;
    advanceGroup(g, now);
  }
  running[device] = -1;
  if (g >= 0)
    rescheduleGroup(g, now);
  ++next[device];
  done[slotOf(a)] = 1;
  if (!lastReader.empty()) {
    uint64_t bytes = input.stages[a.stage].versionBytes;
    if (a.kind == ActionKind::OptimizerStep) {
      // The version this update supersedes stays while a reader is left.
      auto reader = lastReader.find({a.stage, a.microBatch});
      if (reader != lastReader.end() && !done[reader->second] &&
          extraVersions.insert({a.stage, a.microBatch}).second)
        allocate(device, bytes);
    } else {
      for (int version : {a.weightVersion, a.blendVersion}) {
        auto reader = lastReader.find({a.stage, version});
        if (version >= 0 && reader != lastReader.end() &&
            reader->second == slotOf(a) &&
            extraVersions.erase({a.stage, version}))
          memory[device] -= bytes;
      }
    }
  }

  // The members of an overlapped unit hand their outputs on together, at
  // its end.
  if (input.overlappedPairs && a.overlapsNext) {
    unitMembers[device].push_back(index);
    return;
  }
  for (size_t member : unitMembers[device])
    handOn(device, result.actions[member].action, now);
  unitMembers[device].clear();
  handOn(device, a, now);
}

void Simulation::handOn(int device, const Action &a, double now) {
  auto release = [&](const Action &holder) {
    size_t slot = slotOf(holder);
    if (heldOn[slot] >= 0) {
      memory[heldOn[slot]] -= heldBytes[slot];
      heldBytes[slot] = 0;
    }
  };
  int s = a.stage, j = a.microBatch;
  switch (a.kind) {
  case ActionKind::Forward:
    if (s + 1 < schedule.numStages())
      send(device, a, {ActionKind::Forward, s + 1, j}, now);
    break;
  case ActionKind::Backward:
  case ActionKind::BackwardInput:
    if (a.kind == ActionKind::Backward)
      release({ActionKind::Forward, s, j});
    if (s > 0)
      send(device, a, {a.kind, s - 1, j}, now);
    break;
  case ActionKind::BackwardWeight:
    release({ActionKind::Forward, s, j});
    release({ActionKind::BackwardInput, s, j});
    break;
  case ActionKind::GradReduce:
  case ActionKind::OptimizerStep:
    break;
  }
}

void Simulation::reportStuck() {
  for (int d = 0; d < schedule.numDevices; ++d) {
    if (next[d] >= schedule.actions[d].size())
      continue;
    const Action &a = schedule.actions[d][next[d]];
    Action blocker = a;
    std::string line = "device " + std::to_string(d) + ": " + toString(a);
    if (isReady(d, a, blocker)) {
      line += " is ready but never started";
    } else {
      size_t slot = slotOf(blocker);
      line += " waits for " + toString(blocker);
      if (scheduledOn[slot] < 0)
        line += ", which is never scheduled";
      else if (!done[slot])
        line += " on device " + std::to_string(scheduledOn[slot]);
      else
        line += "'s transfer from device " + std::to_string(scheduledOn[slot]);
    }
    result.stuck.push_back(std::move(line));
  }
}

void Simulation::run() {
  if (!checkInput())
    return;
  int p = schedule.numDevices;
  size_t numKinds = static_cast<size_t>(ActionKind::OptimizerStep) + 1;
  size_t numSlots =
      numKinds * schedule.numStages() * (schedule.microBatches + 1);
  next.assign(p, 0);
  running.assign(p, -1);
  endSeq.assign(p, 0);
  remaining.assign(p, 0);
  rate.assign(p, 1);
  groupTime.assign(input.sharing.processors.size(), 0);
  unitMembers.assign(p, {});
  scheduledOn.assign(numSlots, -1);
  done.assign(numSlots, 0);
  delivered.assign(numSlots, 0);
  heldBytes.assign(numSlots, 0);
  heldOn.assign(numSlots, -1);
  hasGradReduce.assign(schedule.numStages(), 0);
  collectiveFree.assign(p, 0);
  linkFree.assign(static_cast<size_t>(p) * p, 0);
  memory.assign(p, 0);
  result.busy.assign(p, 0);

  for (int d = 0; d < p; ++d) {
    for (const Action &a : schedule.actions[d]) {
      int &on = scheduledOn[slotOf(a)];
      if (on < 0)
        on = d;
      if (a.kind == ActionKind::GradReduce)
        hasGradReduce[a.stage] = 1;
    }
  }
  for (int stage = 0; stage < schedule.numStages(); ++stage)
    memory[schedule.deviceOf(stage)] += input.stages[stage].staticBytes;
  result.peakMemory = memory;
  if (isWeightVersioned(schedule.kind))
    for (int d = 0; d < p; ++d)
      for (const Action &a : schedule.actions[d]) {
        if (isPerStep(a.kind))
          continue;
        lastReader[{a.stage, a.weightVersion}] = slotOf(a);
        if (a.blendVersion >= 0)
          lastReader[{a.stage, a.blendVersion}] = slotOf(a);
      }

  tryStart(0);
  while (!queue.empty()) {
    double now = queue.top().time;
    // Everything that ends at this instant, including zero-time transfers it
    // sends, before any device picks its next action.
    while (!queue.empty() && queue.top().time == now) {
      Event event = queue.top();
      queue.pop();
      if (event.kind == Event::ActionEnd) {
        // Superseded by a later end of the same action (processor sharing).
        if (event.seq != endSeq[event.index] || running[event.index] < 0)
          continue;
        finishAction(event.index, now);
      } else if (event.kind == Event::CollectiveEnd)
        done[slotOf(result.actions[event.index].action)] = 1;
      else
        delivered[transferProducer[event.index]] = 1;
    }
    tryStart(now);
  }

  for (const ActionTiming &timing : result.actions)
    result.iterationTime = std::max(result.iterationTime, timing.end);
  result.idle.resize(p);
  double idleSum = 0;
  for (int d = 0; d < p; ++d) {
    result.idle[d] = result.iterationTime - result.busy[d];
    idleSum += result.idle[d];
  }
  if (result.iterationTime > 0)
    result.bubbleFraction = idleSum / (p * result.iterationTime);
  std::vector<double> first(p, std::numeric_limits<double>::infinity()),
      last(p, 0);
  for (const ActionTiming &timing : result.actions)
    if (timing.action.kind != ActionKind::GradReduce) { // off the stream
      first[timing.device] = std::min(first[timing.device], timing.start);
      last[timing.device] = std::max(last[timing.device], timing.end);
    }
  result.spanIdle.assign(p, 0);
  for (int d = 0; d < p; ++d)
    if (last[d] > first[d]) {
      result.spanIdle[d] = last[d] - first[d] - result.busy[d];
      result.steadyBubbleFraction =
          std::max(result.steadyBubbleFraction,
                   result.spanIdle[d] / (last[d] - first[d]));
    }

  for (int d = 0; d < p; ++d)
    if (next[d] < schedule.actions[d].size())
      result.deadlock = true;
  if (result.deadlock)
    reportStuck();
}

SimulationResult pp::schedule::simulate(const Schedule &schedule,
                                        const SimulationInput &input) {
  SimulationResult result;
  Simulation(schedule, input, result).run();
  return result;
}

WaveSyncResult pp::schedule::simulateWaveSync(const WaveSyncInput &input) {
  size_t n = input.waveSeconds.size();
  WaveSyncResult result;
  result.idleSeconds.assign(n, 0);
  result.maxStaleness.assign(n, 0);
  if (n == 0 || input.waves < 1)
    return result;
  // done[c]: when wave c (1-based) has completed; done[0] = 0.
  std::vector<double> done(static_cast<size_t>(input.waves) + 1, 0.0);
  std::vector<double> start(n, 0.0), end(n, 0.0);
  for (int64_t c = 1; c <= input.waves; ++c) {
    double last = 0;
    for (size_t k = 0; k < n; ++k) {
      if (c > 1) {
        // Wave c starts after wave c - 1 ended and wave c - 1 - D completed.
        int64_t needed = c - 1 - input.staleness;
        start[k] = std::max(end[k], needed >= 1 ? done[needed] : 0.0);
        int64_t completed = 0;
        while (completed + 1 < c && done[completed + 1] <= start[k])
          ++completed;
        result.maxStaleness[k] =
            std::max(result.maxStaleness[k], (c - 1) - completed);
      }
      end[k] = start[k] + input.waveSeconds[k];
      last = std::max(last, end[k]);
    }
    // Pushes share the links: wave c's starts after wave c - 1's is done.
    done[c] = std::max(last, done[c - 1]) + input.pushSeconds;
  }
  result.seconds = done[input.waves];
  for (size_t k = 0; k < n; ++k)
    result.idleSeconds[k] = result.seconds - static_cast<double>(input.waves) *
                                                 input.waveSeconds[k];
  return result;
}
