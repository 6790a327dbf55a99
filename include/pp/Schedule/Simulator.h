//===- Simulator.h - Event-driven simulation of a schedule ------*- C++ -*-===//
//
// Runs a Schedule on a model of the devices and links and reports when every
// action and transfer ran, the makespan, the bubble and the peak memory.
//
// Semantics:
//  - Each device runs its action list strictly in order, one action at a
//    time. An action starts as soon as the device is free and all its
//    dependencies (Schedule.h) are done; one produced on another device must
//    also have been delivered.
//  - When Forward(s, j) ends it sends activationBytes of stage s to the device
//    of Forward(s+1, j); when Backward(s, j) or BackwardInput(s, j) ends it
//    sends gradientBytes of stage s to the device of stage s-1. Nothing is
//    sent between stages of one device. Sends are asynchronous: the sender
//    goes on at once.
//  - Transfers on one directed device pair are serialised in the order they
//    were sent (link contention): each occupies the link for
//    latency + bytes / bandwidth, starting when it is sent or when the link
//    becomes free, whichever is later.
//  - Devices may share processors (SimulationInput::sharing: ranks on the
//    cores of one CPU, or on one GPU): while the running actions of a group
//    ask for more processors than it has, each progresses at
//    processors / demand of its own speed (processor sharing), so an action
//    lasts longer than its cost when it overlaps others of its group.
//  - Memory of a device = staticBytes of its stages + the stashes alive:
//    stashBytes from the start of Forward(s, j) to the end of Backward(s, j)
//    (or BackwardWeight(s, j)), inputGradStashBytes from the start of
//    BackwardInput(s, j) to the end of BackwardWeight(s, j); under a
//    weight-versioned schedule also versionBytes for every older version of
//    a stage's weights, from the update that supersedes it until the end of
//    its last reader.
//  - Deadlock: no device can start its next action, nothing is running or in
//    flight, and actions remain. Every blocked device then gets a line naming
//    its next action and the first dependency it waits for, including one
//    that is never scheduled.
//
//===----------------------------------------------------------------------===//

#ifndef PP_SCHEDULE_SIMULATOR_H
#define PP_SCHEDULE_SIMULATOR_H

#include "pp/Schedule/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pp::schedule {

/// Costs of one virtual stage, in seconds and bytes per micro-batch.
struct StageCosts {
  double forward = 0, backward = 0, backwardInput = 0, backwardWeight = 0,
         gradReduce = 0, optimizer = 0;
  /// Sent from stage s to s+1 per micro-batch (forward).
  uint64_t activationBytes = 0;
  /// Sent from stage s to s-1 per micro-batch (backward).
  uint64_t gradientBytes = 0;
  /// Kept from Forward(s, j) until its Backward / BackwardWeight ends.
  uint64_t stashBytes = 0;
  /// Split backwards only: kept from BackwardInput(s, j) until
  /// BackwardWeight(s, j) ends.
  uint64_t inputGradStashBytes = 0;
  /// Weights + gradients + optimizer state, held all the time.
  uint64_t staticBytes = 0;
  /// Weight-versioned schedules: one more copy of the stage's weights, held
  /// for each older version while an action will still read it.
  uint64_t versionBytes = 0;
};

struct SimulationInput {
  /// One entry per virtual stage (Schedule::numStages()).
  std::vector<StageCosts> stages;
  /// [from][to] bytes/s between devices; 0 or missing means infinite.
  std::vector<std::vector<double>> bandwidth;
  /// [from][to] seconds per transfer; missing means 0.
  std::vector<std::vector<double>> latency;
  /// DualPipe's overlapped forward-backward units (Action::overlapsNext):
  /// true, the outputs of all members leave when the unit ends, as one
  /// overlapped kernel's do (the model of DeepSeek's closed form); false
  /// (our runtime, which runs the members one after the other), each
  /// member's leave when it ends.
  bool overlappedPairs = false;
  /// Processor sharing: group[d] is device d's group (-1 or missing: it has
  /// its processors to itself), processors[g] what group g has, demand[d]
  /// what an action of device d uses (missing: 1). Empty: nothing shared.
  struct Sharing {
    std::vector<int> group;
    std::vector<double> processors;
    std::vector<double> demand;
  } sharing;
};

/// When one action ran.
struct ActionTiming {
  int device;
  Action action;
  double start, end;
};

/// When one message crossed a link.
struct TransferTiming {
  int fromDevice, toDevice;
  int fromStage, toStage;
  int microBatch;
  /// Activations (true) or gradients (false).
  bool forward;
  uint64_t bytes;
  double start, end;
};

struct SimulationResult {
  /// Set when the input does not fit the schedule (nothing is simulated).
  std::string error;
  bool deadlock = false;
  /// One line per blocked device, e.g. "device 1: backward(stage 1, mb 0)
  /// waits for forward(stage 1, mb 0) on device 1".
  std::vector<std::string> stuck;
  /// Makespan: the end of the last action.
  double iterationTime = 0;
  /// Per device: seconds computing, and iterationTime minus that.
  std::vector<double> busy, idle;
  /// sum_d idle_d / (numDevices * iterationTime).
  double bubbleFraction = 0;
  /// Per device: idle seconds between the start of its first action and
  /// the end of its last one. The bubble of steps that follow each other
  /// without a global synchronisation (the fill of one step overlaps the
  /// drain of the one before): what the zero-bubble and DualPipe papers'
  /// closed forms count.
  std::vector<double> spanIdle;
  /// The largest spanIdle_d / (device d's span, first start to last end).
  double steadyBubbleFraction = 0;
  /// Per device, bytes.
  std::vector<uint64_t> peakMemory;
  /// In the order they started (ties by device).
  std::vector<ActionTiming> actions;
  /// In the order they were sent.
  std::vector<TransferTiming> transfers;
};

/// Simulates `schedule` (see the file comment). Actions need not form a
/// valid schedule: missing or misordered ones end in a reported deadlock.
SimulationResult simulate(const Schedule &schedule,
                          const SimulationInput &input);

/// Virtual workers (VWs) under Wave Synchronous Parallel (HetPipe): VW k
/// computes each wave in waveSeconds[k]; the push of wave c completes
/// pushSeconds after the last VW ends it (an all-reduce needs every VW) and
/// after the push of wave c - 1 (they share the links);
/// a VW starts wave c + 1 once it ended wave c and wave c - D completed.
struct WaveSyncInput {
  std::vector<double> waveSeconds;
  double pushSeconds = 0;
  int64_t staleness = 0;
  int64_t waves = 1;
};

struct WaveSyncResult {
  /// Until every VW has applied every wave.
  double seconds = 0;
  /// Per VW: seconds not computing, and the largest clock - global clock
  /// (waves ended minus waves completed) it started a wave at.
  std::vector<double> idleSeconds;
  std::vector<int64_t> maxStaleness;
};

WaveSyncResult simulateWaveSync(const WaveSyncInput &input);

} // namespace pp::schedule

#endif // PP_SCHEDULE_SIMULATOR_H
