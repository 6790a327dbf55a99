//===- ScheduleTest.cpp - Schedules, simulator and timelines ----*- C++ -*-===//
//
// Every built schedule is valid and runs without deadlock, with each action
// starting exactly when its device and dependencies allow; simulated bubbles
// and stash counts match the closed forms of GPipe, 1F1B, interleaved 1F1B and
// ZB-H1; links serialise; broken schedules are reported as deadlocks; and the
// Chrome trace and SVG writers emit one event / <rect> per action.
//
//===----------------------------------------------------------------------===//

#include "pp/Schedule/Schedule.h"
#include "pp/Schedule/Simulator.h"
#include "pp/Schedule/Timeline.h"

#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

using namespace pp::schedule;

namespace {

constexpr ScheduleKind kKinds[] = {ScheduleKind::GPipe,
                                   ScheduleKind::OneFOneB,
                                   ScheduleKind::Interleaved1F1B,
                                   ScheduleKind::ZBH1,
                                   ScheduleKind::ZBH2,
                                   ScheduleKind::ZBV,
                                   ScheduleKind::DualPipeV};

Schedule build(ScheduleKind kind, int p, int m, int v = 1,
               const std::vector<bool> *gradReduce = nullptr) {
  Schedule s;
  std::string error;
  EXPECT_TRUE(buildSchedule(kind, p, m, v, s, error, gradReduce)) << error;
  return s;
}

/// Every (p, m, v) the tests sweep: p in 1..6, m in 1..12, interleaved with v
/// in 2..3 and m a multiple of p, the V-shaped schedules with v = 2.
template <typename Fn> void forEachSchedule(Fn fn) {
  for (ScheduleKind kind : kKinds)
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 12; ++m) {
        if (pp::kinds::isVShaped(kind)) {
          fn(kind, p, m, 2);
          continue;
        }
        if (kind != ScheduleKind::Interleaved1F1B) {
          fn(kind, p, m, 1);
          continue;
        }
        if (m % p == 0)
          for (int v = 2; v <= 3; ++v)
            fn(kind, p, m, v);
      }
}

/// Uniform stages: F per forward, B + W per whole backward, split into B and
/// W for ZB-H1; one stash per micro-batch; no communication cost.
SimulationInput uniform(int numStages, double f, double b, double w = 0) {
  SimulationInput input;
  input.stages.resize(numStages);
  for (StageCosts &c : input.stages) {
    c.forward = f;
    c.backward = b + w;
    c.backwardInput = b;
    c.backwardWeight = w;
    c.stashBytes = 1;
  }
  return input;
}

/// Compact form of an action list: "F2.1" is forward(stage 2, mb 1), "W0.3"
/// backward_weight, "R1" / "O1" grad_reduce / optimizer_step of stage 1.
std::string compact(const std::vector<Action> &list) {
  std::string text;
  for (const Action &a : list) {
    static const char letters[] = {'F', 'B', 'I', 'W', 'R', 'O'};
    text += text.empty() ? "" : " ";
    text += letters[static_cast<int>(a.kind)];
    text += std::to_string(a.stage);
    if (!isPerStep(a.kind))
      text += "." + std::to_string(a.microBatch);
  }
  return text;
}

void expectRelNear(double actual, double expected, const std::string &what) {
  double tolerance = expected == 0 ? 1e-12 : 1e-9 * std::abs(expected);
  EXPECT_NEAR(actual, expected, tolerance) << what;
}

std::string caseName(ScheduleKind kind, int p, int m, int v) {
  return std::string(toString(kind)) + " p=" + std::to_string(p) +
         " m=" + std::to_string(m) + " v=" + std::to_string(v);
}

/// Checks a deadlock-free result against the semantics independently of the
/// simulator's event loop: devices run their lists in order without overlap,
/// every dependency (and its transfer) ends before its consumer starts,
/// links carry one transfer at a time in FIFO order, and every action starts
/// at the earliest moment these allow.
void checkTimings(const Schedule &s, const SimulationInput &input,
                  const SimulationResult &r, const std::string &name) {
  ASSERT_FALSE(r.deadlock) << name;
  ASSERT_TRUE(r.stuck.empty()) << name;
  size_t total = 0;
  for (const std::vector<Action> &list : s.actions)
    total += list.size();
  ASSERT_EQ(r.actions.size(), total) << name;

  auto key = [](const Action &a) {
    return std::make_tuple(static_cast<int>(a.kind), a.stage, a.microBatch);
  };
  std::map<std::tuple<int, int, int>, const ActionTiming *> timing;
  std::vector<std::vector<const ActionTiming *>> perDevice(s.numDevices);
  for (const ActionTiming &t : r.actions) {
    timing[key(t.action)] = &t;
    perDevice[t.device].push_back(&t);
  }
  // Transfers by (forward, fromStage, microBatch).
  std::map<std::tuple<bool, int, int>, const TransferTiming *> transfers;
  std::map<std::pair<int, int>, std::vector<const TransferTiming *>> links;
  for (const TransferTiming &t : r.transfers) {
    transfers[{t.forward, t.fromStage, t.microBatch}] = &t;
    links[{t.fromDevice, t.toDevice}].push_back(&t);
    const ActionTiming *producer = timing[key(
        {t.forward ? ActionKind::Forward
                   : (usesSplitBackward(s.kind) ? ActionKind::BackwardInput
                                                : ActionKind::Backward),
         t.fromStage, t.microBatch})];
    ASSERT_NE(producer, nullptr) << name;
    EXPECT_GE(t.start, producer->end) << name;
    double bandwidth =
        input.bandwidth.empty() ? 0 : input.bandwidth[t.fromDevice][t.toDevice];
    double latency =
        input.latency.empty() ? 0 : input.latency[t.fromDevice][t.toDevice];
    double duration =
        latency +
        (bandwidth > 0 ? static_cast<double>(t.bytes) / bandwidth : 0);
    EXPECT_NEAR(t.end - t.start, duration, 1e-9 * (1 + duration)) << name;
  }
  for (const auto &[link, list] : links)
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_GE(list[i]->start, list[i - 1]->end - 1e-12) << name;
      // FIFO: sent in order of the producers' ends.
      EXPECT_GE(list[i]->start, list[i - 1]->start) << name;
    }

  std::vector<bool> hasReduce(s.numStages(), false);
  for (const std::vector<Action> &list : s.actions)
    for (const Action &a : list)
      if (a.kind == ActionKind::GradReduce)
        hasReduce[a.stage] = true;

  for (int d = 0; d < s.numDevices; ++d) {
    ASSERT_EQ(perDevice[d].size(), s.actions[d].size()) << name;
    // Compute actions run one at a time; a grad_reduce runs on the device's
    // collective channel, one at a time, and holds up no compute.
    double free = 0, collectiveFree = 0;
    for (size_t i = 0; i < perDevice[d].size(); ++i) {
      const ActionTiming &t = *perDevice[d][i];
      EXPECT_EQ(t.action, s.actions[d][i]) << name;
      bool collective = t.action.kind == ActionKind::GradReduce;
      double ready = collective ? std::max(free, collectiveFree) : free;
      // The inputs of the action, and of the ones after it in an overlapped
      // unit when it starts one (a unit waits for all its inputs).
      std::vector<Action> unit = {t.action};
      bool startsUnit = i == 0 || !s.actions[d][i - 1].overlapsNext;
      for (size_t k = i; startsUnit && s.actions[d][k].overlapsNext &&
                         k + 1 < s.actions[d].size();
           ++k)
        unit.push_back(s.actions[d][k + 1]);
      auto inUnit = [&](const Action &a) {
        return std::any_of(unit.begin(), unit.end(),
                           [&](const Action &u) { return key(u) == key(a); });
      };
      for (const Action &consumer : unit)
        for (const Action &dep :
             dependencies(s, consumer, hasReduce[consumer.stage])) {
          if (inUnit(dep))
            continue;
          const ActionTiming *producer = timing[key(dep)];
          ASSERT_NE(producer, nullptr) << name << ": " << toString(dep);
          double arrival = producer->end;
          if (producer->device != d) {
            const TransferTiming *transfer = transfers[{
                dep.kind == ActionKind::Forward, dep.stage, dep.microBatch}];
            ASSERT_NE(transfer, nullptr) << name << ": " << toString(dep);
            EXPECT_EQ(transfer->toDevice, d) << name;
            arrival = transfer->end;
          }
          EXPECT_GE(t.start, arrival) << name << ": " << toString(t.action);
          ready = std::max(ready, arrival);
        }
      EXPECT_NEAR(t.start, ready, 1e-9 * (1 + ready))
          << name << ": " << toString(t.action) << " started late";
      if (collective) {
        // Reached once the compute before it has ended.
        collectiveFree = t.end;
        EXPECT_NEAR(t.end - t.start, input.stages[t.action.stage].gradReduce,
                    1e-9)
            << name;
      } else {
        free = t.end;
      }
    }
  }
  EXPECT_GE(r.bubbleFraction, 0) << name;
  EXPECT_LT(r.bubbleFraction, 1) << name;
}

} // namespace

//===----------------------------------------------------------------------===//
// Names and arguments
//===----------------------------------------------------------------------===//

TEST(ScheduleNames, RoundTrip) {
  for (ScheduleKind kind : kKinds)
    EXPECT_EQ(parseScheduleKind(toString(kind)), kind);
  EXPECT_EQ(parseScheduleKind("interleaved-1f1b"),
            ScheduleKind::Interleaved1F1B);
  EXPECT_EQ(parseScheduleKind("zbh1"), ScheduleKind::ZBH1);
  EXPECT_STREQ(toString(ScheduleKind::ZBH1), "zb-h1");
  EXPECT_EQ(parseScheduleKind("zb-h2"), ScheduleKind::ZBH2);
  EXPECT_EQ(parseScheduleKind("zb-v"), ScheduleKind::ZBV);
  EXPECT_EQ(parseScheduleKind("dualpipev"), ScheduleKind::DualPipeV);
  EXPECT_EQ(parseScheduleKind("pipedream"), ScheduleKind::PipeDream);
  EXPECT_EQ(parseScheduleKind("pipedream-2bw"), ScheduleKind::PipeDream2BW);
  EXPECT_EQ(parseScheduleKind("nf1b"), ScheduleKind::NF1B);
  EXPECT_EQ(parseScheduleKind("v-timeprest"), ScheduleKind::VTimePReSt);
  EXPECT_EQ(parseScheduleKind("i-timeprest"), ScheduleKind::ITimePReSt);
  EXPECT_FALSE(parseScheduleKind("pipedream2").has_value());
  EXPECT_FALSE(parseScheduleKind("").has_value());

  const char *names[] = {"forward",         "backward",    "backward_input",
                         "backward_weight", "grad_reduce", "optimizer_step"};
  for (const char *name : names) {
    std::optional<ActionKind> kind = parseActionKind(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_STREQ(toString(*kind), name);
  }
  EXPECT_FALSE(parseActionKind("Forward").has_value());
  EXPECT_EQ(toString(Action{ActionKind::Backward, 1, 0}),
            "backward(stage 1, mb 0)");
  EXPECT_EQ(toString(Action{ActionKind::OptimizerStep, 2, -1}),
            "optimizer_step(stage 2)");
}

TEST(BuildSchedule, RejectsInvalidArguments) {
  Schedule s;
  std::string error;
  auto rejects = [&](ScheduleKind kind, int p, int m, int v,
                     const char *parameter,
                     const std::vector<bool> *reduce = nullptr) {
    error.clear();
    EXPECT_FALSE(buildSchedule(kind, p, m, v, s, error, reduce));
    EXPECT_NE(error.find(parameter), std::string::npos) << error;
  };
  rejects(ScheduleKind::OneFOneB, 0, 4, 1, "numDevices");
  rejects(ScheduleKind::GPipe, 2, 0, 1, "microBatches");
  rejects(ScheduleKind::OneFOneB, 2, 4, 2, "chunksPerDevice");
  rejects(ScheduleKind::ZBH1, 2, 4, 0, "chunksPerDevice");
  rejects(ScheduleKind::ZBV, 2, 4, 1, "chunksPerDevice");
  rejects(ScheduleKind::DualPipeV, 2, 4, 3, "chunksPerDevice");
  rejects(ScheduleKind::ZBH2, 2, 4, 2, "chunksPerDevice");
  rejects(ScheduleKind::Interleaved1F1B, 2, 4, 1, "chunksPerDevice");
  rejects(ScheduleKind::Interleaved1F1B, 2, 5, 2, "microBatches");
  std::vector<bool> wrongSize(3, true);
  rejects(ScheduleKind::Interleaved1F1B, 2, 4, 2, "gradReduceStages",
          &wrongSize);
}

//===----------------------------------------------------------------------===//
// Orders
//===----------------------------------------------------------------------===//

TEST(BuildSchedule, OneFOneBOrder) {
  Schedule s = build(ScheduleKind::OneFOneB, 4, 6);
  EXPECT_EQ(compact(s.actions[0]),
            "F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 B0.3 B0.4 B0.5 O0");
  EXPECT_EQ(compact(s.actions[1]),
            "F1.0 F1.1 F1.2 B1.0 F1.3 B1.1 F1.4 B1.2 F1.5 B1.3 B1.4 B1.5 O1");
  EXPECT_EQ(compact(s.actions[3]),
            "F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 F3.3 B3.3 F3.4 B3.4 F3.5 B3.5 O3");
  // Fewer micro-batches than warm-up slots: all forwards first.
  Schedule few = build(ScheduleKind::OneFOneB, 4, 2);
  EXPECT_EQ(compact(few.actions[0]), "F0.0 F0.1 B0.0 B0.1 O0");
}

TEST(BuildSchedule, GPipeOrder) {
  Schedule s = build(ScheduleKind::GPipe, 2, 3);
  EXPECT_EQ(compact(s.actions[1]), "F1.0 F1.1 F1.2 B1.0 B1.1 B1.2 O1");
}

TEST(BuildSchedule, InterleavedOrderIsMegatrons) {
  // p = 2, v = 2, m = 4: device 0 warms up with (2-0-1)*2 + (2-1)*2 = 4
  // forwards; micro-batches go in groups of p = 2 through chunks 0, 1.
  Schedule s = build(ScheduleKind::Interleaved1F1B, 2, 4, 2);
  EXPECT_EQ(compact(s.actions[0]), "F0.0 F0.1 F2.0 F2.1 "
                                   "F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 "
                                   "B2.2 B2.3 B0.2 B0.3 O2 O0");
  // Device 1 warms up with 2 forwards; stage 3 is the last stage.
  EXPECT_EQ(compact(s.actions[1]),
            "F1.0 F1.1 "
            "F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 "
            "B1.2 B1.3 O3 O1");
}

TEST(BuildSchedule, ZBH1Order) {
  // Stage s runs F(x), B(x - (p-1-s)), W(x - (p-1)) for x = 0..m+p-2.
  Schedule s = build(ScheduleKind::ZBH1, 3, 4);
  EXPECT_EQ(compact(s.actions[0]),
            "F0.0 F0.1 F0.2 I0.0 W0.0 F0.3 I0.1 W0.1 I0.2 W0.2 I0.3 W0.3 O0");
  EXPECT_EQ(compact(s.actions[1]),
            "F1.0 F1.1 I1.0 F1.2 I1.1 W1.0 F1.3 I1.2 W1.1 I1.3 W1.2 W1.3 O1");
  EXPECT_EQ(compact(s.actions[2]),
            "F2.0 I2.0 F2.1 I2.1 F2.2 I2.2 W2.0 F2.3 I2.3 W2.1 W2.2 W2.3 O2");
}

TEST(BuildSchedule, GradReduceAfterLastBackward) {
  std::vector<bool> reduce = {true, false, false, true};
  Schedule s = build(ScheduleKind::Interleaved1F1B, 2, 2, 2, &reduce);
  std::string error;
  EXPECT_TRUE(validateSchedule(s, error)) << error;
  // Device 1 holds stages 1 and 3: stage 3's reduction starts after its
  // last backward, beside stage 1's remaining backwards.
  EXPECT_EQ(compact(s.actions[1]),
            "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 R3 B1.0 B1.1 O3 O1");
  EXPECT_EQ(compact(s.actions[0]),
            "F0.0 F0.1 F2.0 F2.1 B2.0 B2.1 B0.0 B0.1 R0 O2 O0");

  // The optimizer step waits for the reduction, which takes its time.
  SimulationInput input = uniform(4, 1, 2);
  for (StageCosts &c : input.stages) {
    c.gradReduce = 5;
    c.optimizer = 0.5;
  }
  SimulationResult r = simulate(s, input);
  checkTimings(s, input, r, "grad reduce");
  const ActionTiming &last = r.actions.back();
  EXPECT_EQ(last.action.kind, ActionKind::OptimizerStep);
  double reduceEnd = 0;
  for (const ActionTiming &t : r.actions)
    if (t.action.kind == ActionKind::GradReduce && t.action.stage == 0)
      reduceEnd = t.end;
  bool found = false;
  for (const ActionTiming &t : r.actions)
    if (t.action == Action{ActionKind::OptimizerStep, 0, -1}) {
      found = true;
      EXPECT_DOUBLE_EQ(t.start, reduceEnd);
    }
  EXPECT_TRUE(found);
  // Stage 3's reduction overlaps stage 1's backwards on device 1, so the
  // step ends before a blocking reduction would let it.
  const ActionTiming *r3 = nullptr, *b10 = nullptr;
  for (const ActionTiming &t : r.actions) {
    if (t.action == Action{ActionKind::GradReduce, 3, -1})
      r3 = &t;
    if (t.action == Action{ActionKind::Backward, 1, 0})
      b10 = &t;
  }
  ASSERT_TRUE(r3 && b10);
  EXPECT_LT(r3->start, b10->end);
  EXPECT_LT(b10->start, r3->end);
  EXPECT_LT(r.busy[1], r.iterationTime);
}

TEST(RefineSchedule, FineStagesRunInsideTheirCoarseActions) {
  // Two virtual workers cut 2 devices' worth of model differently; the
  // common refinement has 3 stages. Worker 0 runs stages 0 and 1 on device 0,
  // worker 1 runs stage 0 alone there.
  Schedule coarse = build(ScheduleKind::OneFOneB, 2, 2, 1,
                          /*gradReduce=*/nullptr);
  std::vector<bool> reduce = {true, false, true};
  std::string error;
  Schedule first, second;
  ASSERT_TRUE(refineSchedule(coarse, {0, 0, 1}, &reduce, first, error))
      << error;
  ASSERT_TRUE(refineSchedule(coarse, {0, 1, 1}, &reduce, second, error))
      << error;
  EXPECT_EQ(first.numStages(), 3);
  EXPECT_EQ(first.deviceOf(1), 0);
  EXPECT_EQ(second.deviceOf(1), 1);
  EXPECT_TRUE(validateSchedule(first, error)) << error;
  EXPECT_TRUE(validateSchedule(second, error)) << error;
  // Forwards in stage order, backwards in reverse, each stage's reduction
  // after its last backward, an optimizer step per stage.
  EXPECT_EQ(compact(first.actions[0]),
            "F0.0 F1.0 F0.1 F1.1 B1.0 B0.0 B1.1 B0.1 R0 O0 O1");
  EXPECT_EQ(compact(second.actions[1]),
            "F1.0 F2.0 B2.0 B1.0 F1.1 F2.1 B2.1 R2 B1.1 O1 O2");
  // Both run to the end in the simulator, and the refined step of equal
  // total work per device takes as long as the coarse one.
  for (const Schedule *s : {&first, &second}) {
    SimulationInput input = uniform(3, 1, 2);
    SimulationResult r = simulate(*s, input);
    EXPECT_FALSE(r.deadlock);
    checkTimings(*s, input, r, "refined");
  }
  // Malformed maps are refused by name.
  Schedule out;
  EXPECT_FALSE(refineSchedule(coarse, {1, 0, 1}, nullptr, out, error));
  EXPECT_NE(error.find("not a refinement"), std::string::npos) << error;
  EXPECT_FALSE(refineSchedule(coarse, {0, 0, 0}, nullptr, out, error));
  EXPECT_NE(error.find("coarse stage 1 has no fine stage"), std::string::npos)
      << error;
}

TEST(OrderStepActions, SenderFirstOnItsDevice) {
  std::vector<bool> reduce = {true, false, false, true};
  Schedule s = build(ScheduleKind::Interleaved1F1B, 2, 2, 2, &reduce);
  std::string error;
  // Stage 0 sends stage 2 a new weight (both on device 0); stage 1 sends
  // stage 0 one (another device: no order needed).
  ASSERT_TRUE(orderStepActions(s, {{0, 2}, {1, 0}}, error)) << error;
  std::vector<Action> tail0(s.actions[0].end() - 3, s.actions[0].end());
  EXPECT_EQ(compact(tail0), "R0 O0 O2");
  std::vector<Action> tail1(s.actions[1].end() - 5, s.actions[1].end());
  EXPECT_EQ(compact(tail1), "R3 B1.0 B1.1 O3 O1");
  EXPECT_TRUE(validateSchedule(s, error)) << error;
  // A cycle on one device has no order: reported, the order left as built.
  Schedule cyclic = build(ScheduleKind::Interleaved1F1B, 2, 2, 2);
  EXPECT_FALSE(orderStepActions(cyclic, {{0, 2}, {2, 0}}, error));
  EXPECT_EQ(error, "the per-step actions of stages 2, 0 on device 0 wait for "
                   "each other's messages: no order runs every sender first");
  std::vector<Action> kept(cyclic.actions[0].end() - 2,
                           cyclic.actions[0].end());
  EXPECT_EQ(compact(kept), "O2 O0");
}

TEST(OrderStepActions, NoCircleAcrossDevices) {
  // Interleaved, 2 devices x 2 chunks: device 0 holds stages 0 and 2,
  // device 1 stages 1 and 3, each updating its later chunk first as built.
  // Stage 0 sends stage 3 a weight and stage 1 sends stage 2 one: ordering
  // each device on its own would leave device 0 waiting in O2 for stage 1
  // while device 1 waits in O3 for stage 0.
  Schedule s = build(ScheduleKind::Interleaved1F1B, 2, 2, 2);
  std::vector<Action> built0(s.actions[0].end() - 2, s.actions[0].end());
  std::vector<Action> built1(s.actions[1].end() - 2, s.actions[1].end());
  EXPECT_EQ(compact(built0) + " | " + compact(built1), "O2 O0 | O3 O1");
  std::string error;
  ASSERT_TRUE(orderStepActions(s, {{0, 3}, {1, 2}}, error)) << error;
  std::vector<Action> tail0(s.actions[0].end() - 2, s.actions[0].end());
  std::vector<Action> tail1(s.actions[1].end() - 2, s.actions[1].end());
  EXPECT_EQ(compact(tail0) + " | " + compact(tail1), "O0 O2 | O3 O1");
  EXPECT_TRUE(validateSchedule(s, error)) << error;
  // A circle of pairs through both devices (functions that exchange
  // messages both ways, each sending first) is broken at the earliest stage.
  Schedule both = build(ScheduleKind::OneFOneB, 2, 2);
  ASSERT_TRUE(orderStepActions(both, {{0, 1}, {1, 0}}, error)) << error;
  EXPECT_TRUE(validateSchedule(both, error)) << error;
}

//===----------------------------------------------------------------------===//
// Validation and simulation of every schedule
//===----------------------------------------------------------------------===//

TEST(ValidateSchedule, AcceptsEveryBuiltSchedule) {
  int count = 0;
  forEachSchedule([&](ScheduleKind kind, int p, int m, int v) {
    Schedule s = build(kind, p, m, v);
    std::string error;
    EXPECT_TRUE(validateSchedule(s, error))
        << caseName(kind, p, m, v) << ": " << error;
    std::vector<bool> reduce(p * v);
    for (int i = 0; i < p * v; i += 2)
      reduce[i] = true;
    Schedule withReduce = build(kind, p, m, v, &reduce);
    EXPECT_TRUE(validateSchedule(withReduce, error))
        << caseName(kind, p, m, v) << " with reductions: " << error;
    ++count;
  });
  EXPECT_EQ(count, 6 * 72 + 2 * (12 + 6 + 4 + 3 + 2 + 2));
}

TEST(ValidateSchedule, ReportsTheFirstProblem) {
  std::string error;
  Schedule missing = build(ScheduleKind::GPipe, 3, 4);
  missing.actions[1].erase(missing.actions[1].begin() + 2);
  EXPECT_FALSE(validateSchedule(missing, error));
  EXPECT_EQ(error, "forward(stage 1, mb 2) is missing (device 1)");

  Schedule twice = build(ScheduleKind::OneFOneB, 3, 4);
  twice.actions[2].push_back({ActionKind::Backward, 2, 3});
  EXPECT_FALSE(validateSchedule(twice, error));
  EXPECT_NE(error.find("backward(stage 2, mb 3) appears twice"),
            std::string::npos)
      << error;

  Schedule misplaced = build(ScheduleKind::Interleaved1F1B, 2, 2, 2);
  std::swap(misplaced.actions[0][0], misplaced.actions[1][0]);
  EXPECT_FALSE(validateSchedule(misplaced, error));
  EXPECT_NE(error.find("forward(stage 1, mb 0) is misplaced on device 0"),
            std::string::npos)
      << error;

  Schedule wrongKind = build(ScheduleKind::ZBH1, 2, 2);
  wrongKind.actions[0][3].kind = ActionKind::Backward;
  EXPECT_FALSE(validateSchedule(wrongKind, error));
  EXPECT_NE(error.find("does not belong in a zb-h1 schedule"),
            std::string::npos)
      << error;

  Schedule noStep = build(ScheduleKind::OneFOneB, 2, 2);
  noStep.actions[0].pop_back();
  EXPECT_FALSE(validateSchedule(noStep, error));
  EXPECT_EQ(error, "optimizer_step(stage 0) is missing (device 0)");

  Schedule badMicroBatch = build(ScheduleKind::GPipe, 2, 2);
  badMicroBatch.actions[1][0].microBatch = 2;
  EXPECT_FALSE(validateSchedule(badMicroBatch, error));
  EXPECT_NE(error.find("micro-batch outside [0, 2)"), std::string::npos)
      << error;
}

TEST(Simulate, EveryScheduleRunsAsSoonAsPossible) {
  // Heterogeneous stages and links, so that nothing lines up by accident.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  forEachSchedule([&](ScheduleKind kind, int p, int m, int v) {
    std::vector<bool> reduce(p * v);
    for (int i = 1; i < p * v; i += 2)
      reduce[i] = true;
    Schedule s = build(kind, p, m, v, &reduce);
    SimulationInput input;
    input.stages.resize(p * v);
    for (StageCosts &c : input.stages) {
      c.forward = time(rng);
      c.backward = 2 * time(rng);
      c.backwardInput = time(rng);
      c.backwardWeight = time(rng);
      c.gradReduce = time(rng);
      c.optimizer = 0.1 * time(rng);
      c.activationBytes = 1000 + rng() % 1000;
      c.gradientBytes = 1000 + rng() % 1000;
    }
    input.bandwidth.assign(p, std::vector<double>(p, 0));
    input.latency.assign(p, std::vector<double>(p, 0));
    for (int a = 0; a < p; ++a)
      for (int b = 0; b < p; ++b) {
        input.bandwidth[a][b] = 1000 * time(rng);
        input.latency[a][b] = 0.1 * time(rng);
      }
    SimulationResult r = simulate(s, input);
    EXPECT_TRUE(r.error.empty()) << r.error;
    checkTimings(s, input, r, caseName(kind, p, m, v));
  });
}

//===----------------------------------------------------------------------===//
// Closed forms
//===----------------------------------------------------------------------===//

TEST(Bubble, GPipeAndOneFOneBMatchClosedForm) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int p : {1, 2, 3, 4, 6})
      for (int m : {1, 2, 3, 4, 7, 12})
        for (auto [f, b] : {std::pair{1.0, 2.0}, {1.5, 1.0}, {0.3, 0.9}}) {
          Schedule s = build(kind, p, m);
          SimulationResult r = simulate(s, uniform(p, f, b));
          std::string name = caseName(kind, p, m, 1) +
                             " F=" + std::to_string(f) +
                             " B=" + std::to_string(b);
          ASSERT_FALSE(r.deadlock) << name;
          expectRelNear(r.iterationTime, (m + p - 1) * (f + b), name);
          expectRelNear(r.bubbleFraction, double(p - 1) / (m + p - 1), name);
          for (int d = 0; d < p; ++d)
            expectRelNear(r.idle[d], (p - 1) * (f + b), name);
        }
}

TEST(Bubble, InterleavedMatchesClosedForm) {
  for (int p : {1, 2, 3, 4, 6})
    for (int v : {2, 3, 4})
      for (int m : {p, 2 * p, 3 * p})
        for (auto [f, b] : {std::pair{1.0, 2.0}, {1.5, 1.0}}) {
          Schedule s = build(ScheduleKind::Interleaved1F1B, p, m, v);
          SimulationResult r = simulate(s, uniform(p * v, f / v, b / v));
          std::string name = caseName(ScheduleKind::Interleaved1F1B, p, m, v);
          ASSERT_FALSE(r.deadlock) << name;
          expectRelNear(r.bubbleFraction, double(p - 1) / (v * m + p - 1),
                        name);
          expectRelNear(r.iterationTime, (f + b) * (m + double(p - 1) / v),
                        name);
        }
}

// ZB-H1 with m >= p: the zero-bubble paper's (p-1)(F+B-W) of idle time on
// every device when W <= min(F, B). Two lower bounds hold for any costs: the
// last stage starts after (p-1) F, and stage 0, after its p forwards, waits
// (p-1) B for its first B to come back; with W <= min(F, B) the deferred W's
// fill everything else but the (p-1) F+B-W forced by the critical path of B's.
// Our schedule attains the larger of the three exactly.
TEST(Bubble, ZBH1MatchesClosedForm) {
  struct Costs {
    double f, b, w;
  };
  for (int p : {2, 3, 4, 6})
    for (int m : {p, p + 1, 2 * p, 12}) {
      for (Costs c : {Costs{1, 1, 1}, Costs{0.25, 0.25, 0.25}, Costs{1, 2, 1},
                      Costs{2, 1, 1}, Costs{1, 1, 0.5}, Costs{1.5, 1.2, 0.3}}) {
        Schedule s = build(ScheduleKind::ZBH1, p, m);
        SimulationResult r = simulate(s, uniform(p, c.f, c.b, c.w));
        std::string name = caseName(ScheduleKind::ZBH1, p, m, 1) +
                           " F=" + std::to_string(c.f) +
                           " B=" + std::to_string(c.b) +
                           " W=" + std::to_string(c.w);
        ASSERT_FALSE(r.deadlock) << name;
        double bubble = (p - 1) * (c.f + c.b - c.w);
        for (int d = 0; d < p; ++d)
          expectRelNear(r.idle[d], bubble, name);
        expectRelNear(r.iterationTime, m * (c.f + c.b + c.w) + bubble, name);
      }
      // F = B = W: a third of 1F1B's bubble.
      Schedule zb = build(ScheduleKind::ZBH1, p, m);
      Schedule ofob = build(ScheduleKind::OneFOneB, p, m);
      SimulationResult rz = simulate(zb, uniform(p, 1, 1, 1));
      SimulationResult r1 = simulate(ofob, uniform(p, 1, 1, 1));
      expectRelNear(rz.idle[0] * 3, r1.idle[0], "third");
      expectRelNear(rz.bubbleFraction, double(p - 1) / (3 * m + p - 1),
                    "fraction");
    }
  // W larger than F or B: the lower bounds take over.
  for (Costs c : {Costs{1, 1, 2}, Costs{1, 2, 2}, Costs{0.5, 1, 1},
                  Costs{2.3, 1.9, 2.1}}) {
    int p = 4, m = 8;
    SimulationResult r =
        simulate(build(ScheduleKind::ZBH1, p, m), uniform(p, c.f, c.b, c.w));
    double bubble = (p - 1) * std::max({c.f, c.b, c.f + c.b - c.w});
    expectRelNear(r.iterationTime, m * (c.f + c.b + c.w) + bubble, "bounds");
  }
}

TEST(Bubble, ZBH1BeatsOneFOneB) {
  for (int p = 2; p <= 6; ++p)
    for (int m = 1; m <= 12; ++m)
      for (auto [f, b, w] :
           {std::tuple{1.0, 1.0, 1.0}, {1.0, 2.0, 0.5}, {0.5, 1.0, 2.0}}) {
        SimulationResult zb =
            simulate(build(ScheduleKind::ZBH1, p, m), uniform(p, f, b, w));
        SimulationResult ofob =
            simulate(build(ScheduleKind::OneFOneB, p, m), uniform(p, f, b, w));
        EXPECT_LT(zb.bubbleFraction, ofob.bubbleFraction)
            << "p=" << p << " m=" << m;
        EXPECT_LT(zb.iterationTime, ofob.iterationTime);
      }
}

// ZB-V and DualPipeV place stage s < p on device s and stage s >= p on
// device 2p-1-s: device 0 holds the first stage and the loss.
TEST(BuildSchedule, VShapedPlacement) {
  for (ScheduleKind kind : {ScheduleKind::ZBV, ScheduleKind::DualPipeV})
    for (int p : {1, 2, 3, 5}) {
      Schedule s = build(kind, p, 2 * p + 1, 2);
      ASSERT_EQ(s.numStages(), 2 * p);
      for (int stage = 0; stage < 2 * p; ++stage)
        EXPECT_EQ(s.deviceOf(stage), stage < p ? stage : 2 * p - 1 - stage)
            << caseName(kind, p, 2 * p + 1, 2);
      for (int d = 0; d < p; ++d)
        for (const Action &a : s.actions[d])
          EXPECT_TRUE(a.stage == d || a.stage == 2 * p - 1 - d);
    }
  // Device 2 of 3 runs its stages' forwards F2 F3 alternately after one
  // warm-up forward (2(p-d)-1), as ScheduleZBVZeroBubble does.
  Schedule zbv = build(ScheduleKind::ZBV, 3, 5, 2);
  std::vector<Action> head(zbv.actions[2].begin(), zbv.actions[2].begin() + 7);
  EXPECT_EQ(compact(head), "F2.0 F3.0 F2.1 F3.1 F2.2 F3.2 I3.0");
}

// The steady-state bubble (idle between a device's first and last action)
// of the zero-bubble schedules that overlap consecutive steps, for uniform
// stages: ZB-H2 (p-1)(F+B-2W) and ZB-V 0 when F = B = W (Qi et al.), and
// DualPipeV (p-1)(F&B + B_full - 3W) when F = B (DeepSeek's table; B_full =
// B+W, the stage count there being 2p), with an overlapped pair's outputs
// leaving when the pair ends and F&B = F + B_full (no speed-up from the
// overlap). With one synchronising step, ZB-V pays
// the fill of (p-1) F: the step takes 6mF + (p-1)F.
TEST(Bubble, ZeroBubbleFamilyMatchesClosedForms) {
  struct Costs {
    double f, b, w;
  };
  auto name = [](ScheduleKind kind, int p, int m, Costs c) {
    return caseName(kind, p, m, 1) + " F=" + std::to_string(c.f) +
           " B=" + std::to_string(c.b) + " W=" + std::to_string(c.w);
  };
  for (int p : {2, 3, 4, 6})
    for (int m : {2 * p, 2 * p + 1, 3 * p, 24}) {
      for (Costs c : {Costs{1, 1, 1}, Costs{2, 2, 1}, Costs{1, 2, 1},
                      Costs{1.5, 1.2, 0.3}, Costs{0.25, 0.25, 0.25}}) {
        SimulationResult r = simulate(build(ScheduleKind::ZBH2, p, m),
                                      uniform(p, c.f, c.b, c.w));
        ASSERT_FALSE(r.deadlock);
        expectRelNear(r.spanIdle[0], (p - 1) * (c.f + c.b - 2 * c.w),
                      name(ScheduleKind::ZBH2, p, m, c));
        for (int d = 1; d < p; ++d)
          EXPECT_LE(r.spanIdle[d], r.spanIdle[0] + 1e-9);
      }
      for (double f : {1.0, 0.25}) {
        Costs c{f, f, f};
        SimulationResult r = simulate(build(ScheduleKind::ZBV, p, m, 2),
                                      uniform(2 * p, f, f, f));
        ASSERT_FALSE(r.deadlock);
        for (int d = 0; d < p; ++d)
          EXPECT_NEAR(r.spanIdle[d], 0, 1e-9)
              << name(ScheduleKind::ZBV, p, m, c);
        expectRelNear(r.iterationTime, 6 * m * f + (p - 1) * f,
                      name(ScheduleKind::ZBV, p, m, c));
      }
      for (Costs c : {Costs{1, 1, 1}, Costs{2, 2, 1}, Costs{2, 2, 2},
                      Costs{0.5, 0.5, 0.25}}) {
        Schedule dual = build(ScheduleKind::DualPipeV, p, m, 2);
        SimulationInput input = uniform(2 * p, c.f, c.b, c.w);
        input.overlappedPairs = true;
        SimulationResult r = simulate(dual, input);
        ASSERT_FALSE(r.deadlock);
        double full = c.b + c.w, overlapped = c.f + full;
        double bubble = (p - 1) * (overlapped + full - 3 * c.w);
        expectRelNear(r.spanIdle[0], bubble,
                      name(ScheduleKind::DualPipeV, p, m, c));
        // Our runtime hands the forward's activations on before the pair's
        // backward: never a larger bubble.
        input.overlappedPairs = false;
        SimulationResult sequential = simulate(dual, input);
        EXPECT_LE(sequential.spanIdle[0], bubble + 1e-9);
        EXPECT_LE(sequential.iterationTime, r.iterationTime + 1e-9);
      }
    }
}

// Activation memory: ZB-H2 holds 2p-1 stashes on every stage; ZB-V 2p
// half-size ones per device, 1F1B's peak (p whole-stage stashes); DualPipeV
// 2p+1 (DeepSeek's PP+1).
TEST(Memory, ZeroBubbleFamilyPeaks) {
  for (int p : {2, 3, 4, 6})
    for (int m : {2 * p, 3 * p, 24}) {
      std::string name = "p=" + std::to_string(p) + " m=" + std::to_string(m);
      SimulationResult h2 =
          simulate(build(ScheduleKind::ZBH2, p, m), uniform(p, 1, 1, 1));
      SimulationResult v =
          simulate(build(ScheduleKind::ZBV, p, m, 2), uniform(2 * p, 1, 1, 1));
      SimulationResult dual = simulate(build(ScheduleKind::DualPipeV, p, m, 2),
                                       uniform(2 * p, 1, 1, 1));
      for (int d = 0; d < p; ++d) {
        EXPECT_EQ(h2.peakMemory[d], uint64_t(2 * p - 1)) << name;
        EXPECT_EQ(v.peakMemory[d], uint64_t(2 * p)) << name;
        EXPECT_EQ(dual.peakMemory[d], uint64_t(2 * p + 1)) << name;
      }
      std::vector<int64_t> inFlight =
          peakInFlight(build(ScheduleKind::ZBV, p, m, 2));
      for (int stage = 0; stage < 2 * p; ++stage)
        EXPECT_EQ(inFlightMicroBatches(ScheduleKind::ZBV, stage, 2 * p, m),
                  inFlight[stage]);
    }
}

TEST(Memory, PeakStashCounts) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 12; ++m) {
      std::string name = "p=" + std::to_string(p) + " m=" + std::to_string(m);
      SimulationResult gpipe =
          simulate(build(ScheduleKind::GPipe, p, m), uniform(p, 1, 2));
      SimulationResult ofob =
          simulate(build(ScheduleKind::OneFOneB, p, m), uniform(p, 1, 2));
      SimulationResult zb =
          simulate(build(ScheduleKind::ZBH1, p, m), uniform(p, 1, 1, 1));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(gpipe.peakMemory[s], uint64_t(m)) << name;
        EXPECT_EQ(ofob.peakMemory[s], uint64_t(std::min(p - s, m))) << name;
        // A stash lives until its W, which trails its forward by p-1
        // micro-batches on every stage: every stage holds what 1F1B's first
        // stage holds, so the peak over devices is 1F1B's.
        EXPECT_EQ(zb.peakMemory[s], uint64_t(std::min(p, m))) << name;
      }
      EXPECT_EQ(
          *std::max_element(zb.peakMemory.begin(), zb.peakMemory.end()),
          *std::max_element(ofob.peakMemory.begin(), ofob.peakMemory.end()))
          << name;
    }
}

TEST(Memory, StaticAndInputGradientStashes) {
  // One device: F0 B0 W0 F1 B1 W1; static + one stash + one input gradient.
  SimulationInput input = uniform(1, 1, 1, 1);
  input.stages[0].stashBytes = 100;
  input.stages[0].inputGradStashBytes = 10;
  input.stages[0].staticBytes = 5000;
  SimulationResult zb = simulate(build(ScheduleKind::ZBH1, 1, 2), input);
  EXPECT_EQ(zb.peakMemory[0], 5110u);
  SimulationResult gpipe = simulate(build(ScheduleKind::GPipe, 1, 3), input);
  EXPECT_EQ(gpipe.peakMemory[0], 5300u);

  // Interleaved: a device pays the static bytes of every chunk it holds.
  SimulationInput chunks = uniform(4, 1, 1);
  for (int s = 0; s < 4; ++s) {
    chunks.stages[s].stashBytes = 0;
    chunks.stages[s].staticBytes = 1u << (4 * s);
  }
  SimulationResult r =
      simulate(build(ScheduleKind::Interleaved1F1B, 2, 4, 2), chunks);
  EXPECT_EQ(r.peakMemory[0], 0x101u);
  EXPECT_EQ(r.peakMemory[1], 0x1010u);
}

//===----------------------------------------------------------------------===//
// Links and deadlocks
//===----------------------------------------------------------------------===//

TEST(Simulate, TransfersOnOneLinkSerialise) {
  // Stage 0's forwards take no time, so both activations are sent at t = 0;
  // each takes 0.5 + 100 / 100 = 1.5 s on the one link 0 -> 1.
  Schedule s = build(ScheduleKind::GPipe, 2, 2);
  SimulationInput input = uniform(2, 1, 1);
  input.stages[0].forward = 0;
  input.stages[0].activationBytes = 100;
  input.bandwidth = {{0, 100}, {100, 0}};
  input.latency = {{0, 0.5}, {0.5, 0}};
  SimulationResult r = simulate(s, input);
  ASSERT_FALSE(r.deadlock);
  std::vector<const TransferTiming *> forward;
  for (const TransferTiming &t : r.transfers)
    if (t.forward)
      forward.push_back(&t);
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_EQ(forward[0]->microBatch, 0);
  EXPECT_DOUBLE_EQ(forward[0]->start, 0);
  EXPECT_DOUBLE_EQ(forward[0]->end, 1.5);
  EXPECT_EQ(forward[1]->microBatch, 1);
  EXPECT_DOUBLE_EQ(forward[1]->start, 1.5);
  EXPECT_DOUBLE_EQ(forward[1]->end, 3.0);
  EXPECT_EQ(forward[1]->bytes, 100u);
  EXPECT_EQ(forward[1]->fromStage, 0);
  EXPECT_EQ(forward[1]->toStage, 1);
  // Stage 1 runs F0 at [1.5, 2.5] and then waits for the second transfer.
  std::vector<double> starts;
  for (const ActionTiming &t : r.actions)
    if (t.device == 1 && t.action.kind == ActionKind::Forward)
      starts.push_back(t.start);
  EXPECT_EQ(starts, (std::vector<double>{1.5, 3.0}));

  // Without latency or bandwidth limits the link costs nothing.
  input.bandwidth.clear();
  input.latency.clear();
  SimulationResult free = simulate(s, input);
  EXPECT_DOUBLE_EQ(free.iterationTime, 5);
}

TEST(Deadlock, ForwardMovedAfterItsBackward) {
  // 1F1B's last stage: F0 B0 F1 B1 ... becomes F0 B0 B1 F1 ...
  Schedule s = build(ScheduleKind::OneFOneB, 3, 4);
  std::vector<Action> &last = s.actions[2];
  ASSERT_EQ(last[2], (Action{ActionKind::Forward, 2, 1}));
  std::swap(last[2], last[3]);
  std::string error;
  EXPECT_TRUE(validateSchedule(s, error)) << "order is not validated";
  SimulationResult r = simulate(s, uniform(3, 1, 2));
  ASSERT_TRUE(r.deadlock);
  EXPECT_NE(std::find(r.stuck.begin(), r.stuck.end(),
                      "device 2: backward(stage 2, mb 1) waits for "
                      "forward(stage 2, mb 1) on device 2"),
            r.stuck.end());
  EXPECT_NE(std::find(r.stuck.begin(), r.stuck.end(),
                      "device 1: backward(stage 1, mb 1) waits for "
                      "backward(stage 2, mb 1) on device 2"),
            r.stuck.end());
  // The actions that did run are reported, and the writers still work.
  EXPECT_FALSE(r.actions.empty());
  std::ostringstream svg;
  writeTimelineSVG(s, r, {}, svg);
  EXPECT_NE(svg.str().find("DEADLOCK"), std::string::npos);
}

TEST(Deadlock, MissingAction) {
  Schedule s = build(ScheduleKind::GPipe, 3, 4);
  s.actions[1].erase(s.actions[1].begin() + 2); // forward(stage 1, mb 2)
  SimulationResult r = simulate(s, uniform(3, 1, 1));
  ASSERT_TRUE(r.deadlock);
  EXPECT_NE(std::find(r.stuck.begin(), r.stuck.end(),
                      "device 2: forward(stage 2, mb 2) waits for "
                      "forward(stage 1, mb 2), which is never scheduled"),
            r.stuck.end());
  EXPECT_NE(std::find(r.stuck.begin(), r.stuck.end(),
                      "device 1: backward(stage 1, mb 0) waits for "
                      "backward(stage 2, mb 0) on device 2"),
            r.stuck.end());
}

TEST(Deadlock, CycleAcrossDevices) {
  // Device 0 wants B0 before sending F1; device 1 wants F1 before B0.
  Schedule s{ScheduleKind::OneFOneB, 2, 1, 2, {}};
  s.actions = {{{ActionKind::Forward, 0, 0},
                {ActionKind::Backward, 0, 0},
                {ActionKind::Forward, 0, 1},
                {ActionKind::Backward, 0, 1},
                {ActionKind::OptimizerStep, 0, -1}},
               {{ActionKind::Forward, 1, 1},
                {ActionKind::Forward, 1, 0},
                {ActionKind::Backward, 1, 0},
                {ActionKind::Backward, 1, 1},
                {ActionKind::OptimizerStep, 1, -1}}};
  std::string error;
  EXPECT_TRUE(validateSchedule(s, error)) << error;
  SimulationResult r = simulate(s, uniform(2, 1, 1));
  ASSERT_TRUE(r.deadlock);
  EXPECT_EQ(r.stuck, (std::vector<std::string>{
                         "device 0: backward(stage 0, mb 0) waits for "
                         "backward(stage 1, mb 0) on device 1",
                         "device 1: forward(stage 1, mb 1) waits for "
                         "forward(stage 0, mb 1) on device 0"}));
  // Only F(0, 0) ran.
  ASSERT_EQ(r.actions.size(), 1u);
  EXPECT_EQ(r.actions[0].action, (Action{ActionKind::Forward, 0, 0}));
}

TEST(Simulate, RejectsMismatchedInput) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  SimulationResult r = simulate(s, uniform(3, 1, 1));
  EXPECT_NE(r.error.find("costs for 3 stages, expected 2"), std::string::npos)
      << r.error;
  EXPECT_TRUE(r.actions.empty());
}

//===----------------------------------------------------------------------===//
// Timelines
//===----------------------------------------------------------------------===//

namespace {
SimulationResult sampleRun(Schedule &s) {
  s = build(ScheduleKind::Interleaved1F1B, 2, 4, 2);
  SimulationInput input = uniform(4, 0.0005, 0.001);
  for (StageCosts &c : input.stages)
    c.activationBytes = c.gradientBytes = 1 << 20;
  input.bandwidth = {{0, 1e9}, {1e9, 0}};
  input.latency = {{0, 1e-5}, {1e-5, 0}};
  return simulate(s, input);
}
} // namespace

TEST(Timeline, ChromeTraceOfSeveralPipelines) {
  // Two virtual workers: each its own process (2k) and links process
  // (2k + 1), named after it, with all of its actions.
  Schedule s;
  SimulationResult r = sampleRun(s);
  ASSERT_FALSE(r.deadlock);
  std::ostringstream os;
  writeChromeTrace(
      {{"VW 0", &s, &r, {"a0", "a1"}}, {"VW 1", &s, &r, {"b0", "b1"}}}, os);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(os.str());
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  std::map<int64_t, std::string> processNames;
  std::map<int64_t, size_t> events;
  std::map<std::pair<int64_t, int64_t>, std::string> threadNames;
  for (const llvm::json::Value &value :
       *parsed->getAsObject()->getArray("traceEvents")) {
    const llvm::json::Object *event = value.getAsObject();
    int64_t pid = *event->getInteger("pid");
    if (event->getString("name") == "process_name")
      processNames[pid] = event->getObject("args")->getString("name")->str();
    if (event->getString("name") == "thread_name")
      threadNames[{pid, *event->getInteger("tid")}] =
          event->getObject("args")->getString("name")->str();
    if (event->getString("ph") == "X")
      ++events[pid];
  }
  EXPECT_EQ(processNames[0], "VW 0");
  EXPECT_EQ(processNames[1], "VW 0: links");
  EXPECT_EQ(processNames[2], "VW 1");
  EXPECT_EQ(processNames[3], "VW 1: links");
  EXPECT_EQ(threadNames[std::make_pair(int64_t{2}, int64_t{1})], "b1");
  EXPECT_EQ(events[0], r.actions.size());
  EXPECT_EQ(events[2], r.actions.size());
  EXPECT_EQ(events[3], r.transfers.size());
}

TEST(Timeline, ChromeTraceIsValidJSON) {
  Schedule s;
  SimulationResult r = sampleRun(s);
  ASSERT_FALSE(r.deadlock);
  ASSERT_FALSE(r.transfers.empty());
  std::vector<std::string> names = {"gpu \"0\"\\\n<a>", "gpu1"};
  std::ostringstream os;
  writeChromeTrace(s, r, names, os);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(os.str());
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object *root = parsed->getAsObject();
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->getString("displayTimeUnit"), "ms");
  const llvm::json::Array *events = root->getArray("traceEvents");
  ASSERT_NE(events, nullptr);

  size_t actionEvents = 0, transferEvents = 0;
  std::map<int64_t, std::string> threadNames;
  bool sawF3 = false;
  for (const llvm::json::Value &value : *events) {
    const llvm::json::Object *event = value.getAsObject();
    ASSERT_NE(event, nullptr);
    std::optional<llvm::StringRef> ph = event->getString("ph");
    std::optional<int64_t> pid = event->getInteger("pid");
    ASSERT_TRUE(ph && pid);
    if (*ph == "M" && *pid == 0 && event->getString("name") == "thread_name")
      threadNames[*event->getInteger("tid")] =
          event->getObject("args")->getString("name")->str();
    if (*ph != "X")
      continue;
    ASSERT_TRUE(event->getNumber("ts") && event->getNumber("dur"));
    if (*pid == 0) {
      ++actionEvents;
      const llvm::json::Object *args = event->getObject("args");
      ASSERT_NE(args, nullptr);
      EXPECT_TRUE(args->getInteger("stage") && args->getInteger("microBatch") &&
                  args->getInteger("weightVersion"));
      if (event->getString("name") == "F3" && args->getInteger("stage") == 2) {
        sawF3 = true;
        EXPECT_EQ(event->getString("cat"), "forward");
      }
    } else {
      ++transferEvents;
    }
  }
  EXPECT_EQ(actionEvents, r.actions.size());
  EXPECT_EQ(transferEvents, r.transfers.size());
  EXPECT_TRUE(sawF3);
  EXPECT_EQ(threadNames[0], names[0]);
  EXPECT_EQ(threadNames[1], names[1]);

  // Microseconds: the first action is a 0.5 ms forward.
  for (const llvm::json::Value &value : *events) {
    const llvm::json::Object *event = value.getAsObject();
    if (event->getString("ph") == "X" && event->getInteger("pid") == 0) {
      EXPECT_NEAR(*event->getNumber("dur"), 500, 1e-6);
      break;
    }
  }
}

TEST(Timeline, SVGHasOneRectPerAction) {
  Schedule s;
  SimulationResult r = sampleRun(s);
  std::ostringstream os;
  writeTimelineSVG(s, r, {"gpu<0>", "gpu&1"}, os);
  std::string svg = os.str();
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos;
       at = svg.find("<rect", at + 1))
    ++rects;
  EXPECT_EQ(rects, r.actions.size());
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
  EXPECT_NE(svg.find("gpu&lt;0&gt;"), std::string::npos);
  EXPECT_NE(svg.find("gpu&amp;1"), std::string::npos);
  EXPECT_EQ(svg.find("gpu<0>"), std::string::npos);
  // Legend and axis.
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  EXPECT_NE(svg.find(" ms</text>"), std::string::npos);
  // Every tag opened is closed (a cheap well-formedness check).
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<'),
            std::count(svg.begin(), svg.end(), '>'));
}

//===----------------------------------------------------------------------===//
// Wave Synchronous Parallel
//===----------------------------------------------------------------------===//

// Closed forms for W waves, push time P, VWs of wave times T_k (slowest T):
// D = 0 pays every push on the critical path, W (T + P); any D >= 1 hides
// it behind the next wave while the VWs keep pace, W T + P (P <= T); pushes
// longer than a wave share the links, W P + T at D >= 1; the fast VW runs D
// waves ahead of the slow one when W (T - T_fast) allows.
TEST(WaveSync, ClosedForms) {
  for (int64_t waves : {1, 4, 20})
    for (double push : {0.0, 0.25, 0.5}) {
      WaveSyncInput equal{{1.0, 1.0, 1.0}, push, 0, waves};
      WaveSyncResult r = simulateWaveSync(equal);
      EXPECT_DOUBLE_EQ(r.seconds, waves * (1.0 + push));
      EXPECT_EQ(r.maxStaleness, (std::vector<int64_t>{0, 0, 0}));
      for (int64_t d : {1, 2, 5}) {
        equal.staleness = d;
        r = simulateWaveSync(equal);
        EXPECT_DOUBLE_EQ(r.seconds, waves * 1.0 + push) << d;
        EXPECT_DOUBLE_EQ(r.idleSeconds[0], push);
      }
    }
  WaveSyncInput bound{{1.0, 1.0}, 3.0, 2, 10};
  EXPECT_DOUBLE_EQ(simulateWaveSync(bound).seconds, 10 * 3.0 + 1.0);
  // One VW twice as fast: D = 0 keeps it at the slow pace, waiting half of
  // every wave; D = 2 lets it run 2 waves ahead, then it waits as well.
  WaveSyncInput het{{0.5, 1.0}, 0.1, 0, 20};
  WaveSyncResult r = simulateWaveSync(het);
  EXPECT_DOUBLE_EQ(r.seconds, 20 * 1.1);
  EXPECT_NEAR(r.idleSeconds[0], 20 * 1.1 - 10, 1e-12);
  EXPECT_EQ(r.maxStaleness, (std::vector<int64_t>{0, 0}));
  het.staleness = 2;
  r = simulateWaveSync(het);
  EXPECT_DOUBLE_EQ(r.seconds, 20 * 1.0 + 0.1);
  EXPECT_EQ(r.maxStaleness[0], 2);
  EXPECT_LE(r.maxStaleness[1], 1);
}

// A larger bound never slows the VWs down (it only removes waits).
TEST(WaveSync, LargerBoundIsNeverSlower) {
  WaveSyncInput in{{1.0, 1.3, 0.7}, 0.2, 0, 10};
  double previous = simulateWaveSync(in).seconds;
  for (int64_t d = 1; d <= 4; ++d) {
    in.staleness = d;
    double now = simulateWaveSync(in).seconds;
    EXPECT_LE(now, previous + 1e-12) << d;
    previous = now;
  }
}

//===----------------------------------------------------------------------===//
// Weight-versioned schedules
//===----------------------------------------------------------------------===//

namespace {

constexpr ScheduleKind kVersionedKinds[] = {
    ScheduleKind::PipeDream,  ScheduleKind::PipeDream2BW,
    ScheduleKind::NF1B,       ScheduleKind::VTimePReSt,
    ScheduleKind::ITimePReSt, ScheduleKind::HetPipe};

/// HetPipe keeps `inFlight` micro-batches (Nm, a step's) in flight; 0: m.
Schedule buildVersioned(ScheduleKind kind, int p, int m, int n,
                        bool vertical = false, int inFlight = 0) {
  Schedule s;
  std::string error;
  EXPECT_TRUE(buildVersionedSchedule(kind, p, m, n, vertical, s, error, nullptr,
                                     inFlight > 0 ? inFlight : m))
      << error;
  return s;
}

std::string versionedName(ScheduleKind kind, int p, int m, int n,
                          bool vertical) {
  return std::string(toString(kind)) + " p=" + std::to_string(p) +
         " m=" + std::to_string(m) + " n=" + std::to_string(n) +
         (vertical ? " vertical" : "");
}

/// Every case the tests sweep: p in 1..6; PipeDream n = 1, with and without
/// vertical sync; 2BW n in p..p+2 (it needs n >= p - 1 so that the version
/// a micro-batch reads exists); TiMePReSt n in 1..4; m = n times 1..5
/// mini-batches.
template <typename Fn> void forEachVersioned(Fn fn) {
  for (ScheduleKind kind : kVersionedKinds)
    for (int p = 1; p <= 6; ++p) {
      std::vector<int> sizes;
      if (kind == ScheduleKind::PipeDream || kind == ScheduleKind::HetPipe)
        sizes = {1};
      else if (kind == ScheduleKind::PipeDream2BW)
        sizes = {p, p + 1, p + 2};
      else
        sizes = {1, 2, 3, 4};
      for (int n : sizes)
        for (int miniBatches = 1; miniBatches <= 5; ++miniBatches)
          for (bool vertical : {false, true}) {
            if (vertical && kind != ScheduleKind::PipeDream)
              continue;
            fn(kind, p, n * miniBatches, n, vertical);
          }
    }
}

} // namespace

TEST(VersionedSchedule, ValidAndRunAsSoonAsPossible) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  forEachVersioned([&](ScheduleKind kind, int p, int m, int n, bool vertical) {
    std::string name = versionedName(kind, p, m, n, vertical);
    Schedule s = buildVersioned(kind, p, m, n, vertical);
    std::string error;
    ASSERT_TRUE(validateSchedule(s, error)) << name << ": " << error;
    EXPECT_EQ(s.updatesPerStep(), m / n) << name;
    SimulationInput input;
    input.stages.resize(p);
    for (StageCosts &c : input.stages) {
      c.forward = time(rng);
      c.backward = 2 * time(rng);
      c.optimizer = 0.1 * time(rng);
      c.activationBytes = 1000 + rng() % 1000;
      c.gradientBytes = 1000 + rng() % 1000;
    }
    input.bandwidth.assign(p, std::vector<double>(p, 1000));
    input.latency.assign(p, std::vector<double>(p, 0.05));
    SimulationResult r = simulate(s, input);
    EXPECT_TRUE(r.error.empty()) << name << ": " << r.error;
    checkTimings(s, input, r, name);
  });
}

TEST(VersionedSchedule, EachActionReadsWhatItsRuleSays) {
  forEachVersioned([&](ScheduleKind kind, int p, int m, int n, bool vertical) {
    std::string name = versionedName(kind, p, m, n, vertical);
    Schedule s = buildVersioned(kind, p, m, n, vertical);
    // The version stage 0's forward of each micro-batch read.
    std::map<int, int> stage0;
    for (const Action &a : s.actions[0])
      if (a.kind == ActionKind::Forward)
        stage0[a.microBatch] = a.weightVersion;
    for (const std::vector<Action> &list : s.actions) {
      int latest = 0;
      std::map<int, int> forwardRead;
      for (const Action &a : list) {
        std::string what = name + ": " + toString(a);
        if (a.kind == ActionKind::OptimizerStep) {
          // Updates run in mini-batch order, after the mini-batch's
          // backwards.
          EXPECT_EQ(a.microBatch, latest) << what;
          ++latest;
          continue;
        }
        EXPECT_LE(a.weightVersion, latest) << what;
        int j = a.microBatch;
        if (a.kind == ActionKind::Forward) {
          forwardRead[j] = a.weightVersion;
          int expected = latest;
          bool firstOfPass = &list == &s.actions[0] && j % n == 0;
          if (kind == ScheduleKind::PipeDream2BW)
            expected = std::max(j / n - 1, 0);
          else if (kind == ScheduleKind::HetPipe) // Nm = m here
            expected = std::max(j - m + 1, 0);
          else if (firstOfPass)
            expected = latest; // stage 0 starts a pass on its latest
          else if ((kind == ScheduleKind::PipeDream && vertical) ||
                   kind == ScheduleKind::NF1B)
            expected = stage0[j / n * n];
          EXPECT_EQ(a.weightVersion, expected) << what;
          continue;
        }
        ASSERT_EQ(a.kind, ActionKind::Backward) << what;
        switch (kind) {
        case ScheduleKind::PipeDream:
        case ScheduleKind::PipeDream2BW:
        case ScheduleKind::HetPipe: // weight stashing
          EXPECT_EQ(a.weightVersion, forwardRead[j]) << what;
          EXPECT_EQ(a.blendVersion, -1) << what;
          break;
        case ScheduleKind::ITimePReSt: // the older kept one and the latest
          if (forwardRead[j] == latest) {
            EXPECT_EQ(a.weightVersion, latest) << what;
            EXPECT_EQ(a.blendVersion, -1) << what;
          } else {
            EXPECT_EQ(a.weightVersion, std::max(forwardRead[j], latest - 1))
                << what;
            EXPECT_EQ(a.blendVersion, latest) << what;
            EXPECT_EQ(a.staleness, latest - forwardRead[j]) << what;
          }
          break;
        default: // nF1B, V: the latest
          EXPECT_EQ(a.weightVersion, latest) << what;
          EXPECT_EQ(a.blendVersion, -1) << what;
          break;
        }
      }
      EXPECT_EQ(latest, m / n) << name;
    }
  });
}

TEST(VersionedSchedule, NF1BOrderIsTimePReStsExample) {
  // TiMePReSt's example, 3 stages, n = 2, slots 1-10 (1-based mini-batches
  // there): stage 1: F1a F1b F2a F2b F3a F3b B1 F4a F4b B2; stage 2: - F1a
  // F1b F2a F2b B1 F3a F3b B2 F4a; stage 3: - - F1a F1b B1 F2a F2b B2 F3a
  // F3b. A mini-batch's backward is its two micro-batch backwards, then
  // the update.
  Schedule s = buildVersioned(ScheduleKind::NF1B, 3, 10, 2);
  auto prefix = [&](int stage, size_t count) {
    std::vector<Action> list(s.actions[stage].begin(),
                             s.actions[stage].begin() + count);
    return compact(list);
  };
  EXPECT_EQ(prefix(0, 14), "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 B0.0 B0.1 O0 F0.6 "
                           "F0.7 B0.2 B0.3 O0");
  EXPECT_EQ(prefix(1, 13), "F1.0 F1.1 F1.2 F1.3 B1.0 B1.1 O1 F1.4 F1.5 B1.2 "
                           "B1.3 O1 F1.6");
  EXPECT_EQ(prefix(2, 13), "F2.0 F2.1 B2.0 B2.1 O2 F2.2 F2.3 B2.2 B2.3 O2 "
                           "F2.4 F2.5 B2.4");
}

TEST(VersionedMemory, WeightVersionsMatchClosedForms) {
  // PipeDream: stage s keeps p - s versions (its warm-up + 1); 2BW: 2 (the
  // delay of 1 holds for p = 1 too);
  // V-TiMePReSt: 1; I-TiMePReSt: 2 (the latest and the one before), 1 on
  // the last stage, whose backward follows its forwards before any update.
  // Enough mini-batches to reach the steady state.
  for (int p = 1; p <= 6; ++p) {
    std::vector<int64_t> pipedream = peakWeightVersions(
        buildVersioned(ScheduleKind::PipeDream, p, 3 * p, 1));
    for (int st = 0; st < p; ++st)
      EXPECT_EQ(pipedream[st], p - st) << "pipedream p=" << p << " s=" << st;
    for (int n : {p, p + 2}) {
      for (int64_t v : peakWeightVersions(
               buildVersioned(ScheduleKind::PipeDream2BW, p, 4 * n, n)))
        EXPECT_EQ(v, 2) << "2bw p=" << p << " n=" << n;
    }
    for (int n : {std::max(p - 1, 1), p + 1}) {
      for (int64_t v : peakWeightVersions(
               buildVersioned(ScheduleKind::VTimePReSt, p, 4 * n, n)))
        EXPECT_EQ(v, 1) << "v p=" << p << " n=" << n;
      std::vector<int64_t> intermediate = peakWeightVersions(
          buildVersioned(ScheduleKind::ITimePReSt, p, 4 * n, n));
      for (int st = 0; st < p; ++st)
        EXPECT_EQ(intermediate[st], st == p - 1 ? 1 : 2)
            << "i p=" << p << " n=" << n << " s=" << st;
    }
  }
  // Synchronous schedules hold one version.
  for (int64_t v : peakWeightVersions(build(ScheduleKind::OneFOneB, 4, 8)))
    EXPECT_EQ(v, 1);
}

TEST(VersionedMemory, SimulatorHoldsTheOlderVersions) {
  // Only weight copies cost memory here: each device's simulated peak is
  // its stage's extra versions, what peakWeightVersions counts in order.
  forEachVersioned([&](ScheduleKind kind, int p, int m, int n, bool vertical) {
    std::string name = versionedName(kind, p, m, n, vertical);
    Schedule s = buildVersioned(kind, p, m, n, vertical);
    SimulationInput input = uniform(p, 1, 2);
    for (StageCosts &c : input.stages) {
      c.stashBytes = 0;
      c.versionBytes = 1000;
    }
    SimulationResult r = simulate(s, input);
    ASSERT_FALSE(r.deadlock) << name;
    std::vector<int64_t> versions = peakWeightVersions(s);
    for (int d = 0; d < p; ++d)
      EXPECT_EQ(r.peakMemory[d], static_cast<uint64_t>(versions[d] - 1) * 1000)
          << name << " device " << d;
  });
}

TEST(VersionedMemory, ActivationsAsOneFOneB) {
  // PipeDream and 2BW keep 1F1B's order: min(p - s, m) stashes on stage s.
  for (int p = 1; p <= 6; ++p)
    for (int m : {1, 2, p, 3 * p}) {
      std::vector<int64_t> peak =
          peakInFlight(buildVersioned(ScheduleKind::PipeDream, p, m, 1));
      for (int st = 0; st < p; ++st)
        EXPECT_EQ(peak[st], std::min(p - st, m)) << "p=" << p << " m=" << m;
    }
}

TEST(VersionedStaleness, PipeDreamAnd2BWClosedForms) {
  for (int p = 1; p <= 6; ++p) {
    int m = 3 * p;
    // Stashing: stage s's update u applies a gradient from version
    // u - min(u, p - 1 - s); with vertical sync every stage's is stage 0's,
    // min(u, p - 1).
    std::vector<std::vector<int>> stale =
        updateStaleness(buildVersioned(ScheduleKind::PipeDream, p, m, 1));
    std::vector<std::vector<int>> vertical =
        updateStaleness(buildVersioned(ScheduleKind::PipeDream, p, m, 1, true));
    for (int st = 0; st < p; ++st)
      for (int u = 0; u < m; ++u) {
        EXPECT_EQ(stale[st][u], std::min(u, p - 1 - st))
            << "p=" << p << " s=" << st << " u=" << u;
        EXPECT_EQ(vertical[st][u], std::min(u, p - 1))
            << "vertical p=" << p << " s=" << st << " u=" << u;
      }
    // 2BW: W(t + 1) = W(t) - lr grad f(W(t - 1)): a delay of 1 after the
    // first update.
    std::vector<std::vector<int>> twoBW = updateStaleness(
        buildVersioned(ScheduleKind::PipeDream2BW, p, 4 * p, p));
    for (int st = 0; st < p; ++st)
      for (int u = 0; u < 4; ++u)
        EXPECT_EQ(twoBW[st][u], std::min(u, 1)) << "2bw p=" << p << " u=" << u;
  }
}

TEST(VersionedStaleness, TimePReStVersionGap) {
  // floor((W + n - 2) / n), and 1 iff W <= n + 1.
  EXPECT_EQ(timePReStVersionGap(3, 2), 1);
  EXPECT_EQ(timePReStVersionGap(4, 2), 2);
  EXPECT_EQ(timePReStVersionGap(8, 2), 4);
  for (int w = 1; w <= 8; ++w)
    for (int n = 1; n <= 6; ++n)
      EXPECT_EQ(timePReStVersionGap(w, n) <= 1, w <= n + 1)
          << "W=" << w << " n=" << n;
  // V-TiMePReSt reads the latest weights everywhere: staleness is the
  // updates that land between a mini-batch's forward and its update, and
  // never negative.
  for (int p = 1; p <= 5; ++p)
    for (const std::vector<int> &list :
         updateStaleness(buildVersioned(ScheduleKind::VTimePReSt, p, 12, 2)))
      for (int u : list)
        EXPECT_GE(u, 0);
}

TEST(VersionedBubble, PipeDreamRunsOneFOneBsOrder) {
  // Free updates and uniform stages: a step of PipeDream takes what 1F1B's
  // does, (m + p - 1)(F + B), the pipeline filling and draining once.
  for (int p : {1, 2, 4})
    for (int m : {1, 4, 8}) {
      SimulationResult r = simulate(
          buildVersioned(ScheduleKind::PipeDream, p, m, 1), uniform(p, 1, 2));
      ASSERT_FALSE(r.deadlock);
      expectRelNear(r.iterationTime, (m + p - 1) * 3.0,
                    "p=" + std::to_string(p) + " m=" + std::to_string(m));
      expectRelNear(r.bubbleFraction, double(p - 1) / (m + p - 1), "bubble");
    }
}

TEST(BuildVersioned, RejectsInvalidArguments) {
  Schedule s;
  std::string error;
  EXPECT_FALSE(buildVersionedSchedule(ScheduleKind::PipeDream, 4, 8, 2, false,
                                      s, error));
  EXPECT_EQ(error, "PipeDream updates after every micro-batch: "
                   "microBatchesPerUpdate must be 1, got 2");
  EXPECT_FALSE(
      buildVersionedSchedule(ScheduleKind::NF1B, 4, 9, 2, false, s, error));
  EXPECT_EQ(error, "microBatchesPerUpdate (2) must divide microBatches (9)");
  EXPECT_FALSE(
      buildVersionedSchedule(ScheduleKind::NF1B, 4, 8, 2, true, s, error));
  EXPECT_EQ(error, "vertical sync is an option of pipedream, not nf1b");
  EXPECT_FALSE(
      buildVersionedSchedule(ScheduleKind::OneFOneB, 4, 8, 1, false, s, error));
  EXPECT_EQ(error, "1f1b is not a weight-versioned schedule (buildSchedule "
                   "builds it)");
  // 2BW with mini-batches shorter than the pipeline: micro-batch 2 of
  // stage 0 would read version 1 before stage 0's first update (the
  // paper's m >= p).
  EXPECT_FALSE(buildVersionedSchedule(ScheduleKind::PipeDream2BW, 6, 8, 1,
                                      false, s, error));
  EXPECT_EQ(error, "PipeDream-2BW accumulates over at least as many "
                   "micro-batches as stages: microBatchesPerUpdate (1) must "
                   "be >= numDevices (6)");
  EXPECT_TRUE(buildVersionedSchedule(ScheduleKind::PipeDream2BW, 4, 8, 4, false,
                                     s, error))
      << error;
  // The synchronous builder sends them to the versioned one.
  EXPECT_FALSE(buildSchedule(ScheduleKind::PipeDream, 4, 8, 1, s, error));
  EXPECT_EQ(error,
            "pipedream is weight-versioned: buildVersionedSchedule builds it");
}

namespace {

/// Every device of the schedule in sharing group 0 of `processors`, each
/// action asking for `demand`.
SimulationInput shared(SimulationInput input, int devices, double processors,
                       double demand = 1) {
  input.sharing.group.assign(devices, 0);
  input.sharing.processors = {processors};
  input.sharing.demand.assign(devices, demand);
  return input;
}

/// The timing of `a` in `r` (fails when absent).
ActionTiming timingOf(const SimulationResult &r, const Action &a) {
  for (const ActionTiming &t : r.actions)
    if (t.action.kind == a.kind && t.action.stage == a.stage &&
        t.action.microBatch == a.microBatch)
      return t;
  ADD_FAILURE() << "no " << toString(a);
  return {};
}

} // namespace

/// Two stages on one processor (two ranks on one core): while both run,
/// each goes at half speed.
TEST(ProcessorSharing, OverlappingActionsShareTheProcessor) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  SimulationResult r = simulate(s, shared(uniform(2, 1, 1), 2, 1));
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_FALSE(r.deadlock);
  // F0.0 alone on [0, 1]; then F1.0 and F0.1 together, one unit each at
  // rate 1/2: both end at 3.
  ActionTiming f00 = timingOf(r, {ActionKind::Forward, 0, 0});
  ActionTiming f10 = timingOf(r, {ActionKind::Forward, 1, 0});
  ActionTiming f01 = timingOf(r, {ActionKind::Forward, 0, 1});
  expectRelNear(f00.end, 1, "F0.0 end");
  expectRelNear(f10.start, 1, "F1.0 start");
  expectRelNear(f10.end, 3, "F1.0 end");
  expectRelNear(f01.end, 3, "F0.1 end");
  // One processor, always some work ready: the makespan is the total work
  // (2 stages x 2 micro-batches x (F + B)), and busy is wall time.
  expectRelNear(r.iterationTime, 8, "makespan");
  EXPECT_GT(r.busy[0] + r.busy[1], 8.0);
}

/// Enough processors for every device's demand: exactly the unshared
/// timings; half as many: every schedule takes at least the total work over
/// the processors and at most the unshared makespan times the shortfall.
TEST(ProcessorSharing, BoundsForEverySchedule) {
  forEachSchedule([](ScheduleKind kind, int p, int m, int v) {
    std::string name = caseName(kind, p, m, v);
    Schedule s = build(kind, p, m, v);
    SimulationInput base = uniform(p * v, 1, 2, 1);
    SimulationResult alone = simulate(s, base);
    SimulationResult roomy = simulate(s, shared(base, p, 2.0 * p, 2));
    ASSERT_TRUE(roomy.error.empty()) << name << ": " << roomy.error;
    ASSERT_EQ(roomy.actions.size(), alone.actions.size()) << name;
    for (size_t i = 0; i < alone.actions.size(); ++i) {
      expectRelNear(roomy.actions[i].start, alone.actions[i].start, name);
      expectRelNear(roomy.actions[i].end, alone.actions[i].end, name);
    }
    double processors = std::max(1.0, p / 2.0);
    SimulationResult tight = simulate(s, shared(base, p, processors));
    ASSERT_TRUE(tight.error.empty()) << name << ": " << tight.error;
    ASSERT_FALSE(tight.deadlock) << name;
    double work = 0;
    for (const ActionTiming &t : alone.actions)
      work += t.end - t.start;
    EXPECT_GE(tight.iterationTime, work / processors * (1 - 1e-9)) << name;
    EXPECT_GE(tight.iterationTime, alone.iterationTime * (1 - 1e-9)) << name;
    EXPECT_LE(tight.iterationTime,
              alone.iterationTime * p / processors * (1 + 1e-9))
        << name;
  });
}

TEST(ProcessorSharing, RejectsAGroupWithoutProcessors) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  SimulationInput input = shared(uniform(2, 1, 1), 2, 1);
  input.sharing.group[1] = 3;
  SimulationResult r = simulate(s, input);
  EXPECT_EQ(r.error, "device 1's sharing group 3 has no processors");
  input.sharing.group[1] = 0;
  input.sharing.processors[0] = 0;
  EXPECT_EQ(simulate(s, input).error,
            "device 0's sharing group 0 has no processors");
}

namespace {

WindowBuilder versionedWindows(ScheduleKind kind, int p, int m, int n,
                               bool vertical) {
  return [=](int steps, Schedule &out, std::string &error) {
    return buildVersionedSchedule(kind, p, steps * m, n, vertical, out, error,
                                  nullptr, m);
  };
}

} // namespace

// Every weight-versioned schedule is periodic from step to step: the stream
// from its 2- and 3-step windows expands to the builder's window of any
// length (checked to 7 steps here, 5 inside buildStream).
TEST(StreamSchedule, ExpandsToEveryWindow) {
  forEachVersioned([&](ScheduleKind kind, int p, int m, int n, bool vertical) {
    std::string name = versionedName(kind, p, m, n, vertical);
    StreamSchedule stream;
    std::string error;
    bool built = buildStream(versionedWindows(kind, p, m, n, vertical), m,
                             m / n, stream, error);
    // I-TiMePReSt's blends follow the versions kept, whose pattern can
    // repeat over more than one step (p = 6, m = 1): it drains every step.
    if (!built && kind == ScheduleKind::ITimePReSt && m == 1)
      return;
    ASSERT_TRUE(built) << name << ": " << error;
    int first = stream.minSteps;
    // A warm-up longer than a step delays the steady state; the others'
    // orders repeat once the first window's cool-down is past.
    if (kind != ScheduleKind::ITimePReSt)
      EXPECT_LE(first, 2 + 2 * (p - 1) / m) << name;
    for (int steps : {first, first + 1, first + 4, first + 5}) {
      Schedule window = buildVersioned(kind, p, steps * m, n, vertical, m);
      for (int d = 0; d < p; ++d)
        ASSERT_EQ(expandStream(stream, d, steps), window.actions[d])
            << name << ", " << steps << " steps, device " << d;
    }
    // The body is one step's work: m forwards and m backwards of each
    // stage, and its m / n updates.
    for (int d = 0; d < p; ++d) {
      int forwards = 0, backwards = 0, updates = 0;
      for (const Action &a : stream.body[d]) {
        forwards += a.kind == ActionKind::Forward;
        backwards += a.kind == ActionKind::Backward;
        updates += a.kind == ActionKind::OptimizerStep;
      }
      EXPECT_EQ(forwards, m) << name << ", device " << d;
      EXPECT_EQ(backwards, m) << name << ", device " << d;
      EXPECT_EQ(updates, m / n) << name << ", device " << d;
    }
  });
}

// The window's steady steps have no fill and drain: with equal stage times
// a steady step of a long window takes m (F + B) on the busiest stage,
// where a drained step takes (m + p - 1) (F + B) under 1F1B.
TEST(StreamSchedule, SteadyStepsHaveNoBubble) {
  for (int p : {2, 4})
    for (ScheduleKind kind :
         {ScheduleKind::PipeDream, ScheduleKind::PipeDream2BW,
          ScheduleKind::HetPipe}) {
      // HetPipe: Nm = m = 8 in flight, 1F1B's steady state.
      int m = 8, n = kind == ScheduleKind::PipeDream2BW ? p : 1;
      StreamSchedule stream;
      std::string error;
      ASSERT_TRUE(buildStream(versionedWindows(kind, p, m, n, false), m,
                              m / n, stream, error))
          << error;
      SimulationInput input;
      input.stages.assign(p, StageCosts{});
      for (StageCosts &c : input.stages) {
        c.forward = 1;
        c.backward = 2;
      }
      auto windowTime = [&](int steps) {
        Schedule s = buildVersioned(kind, p, steps * m, n, false, m);
        for (int d = 0; d < p; ++d)
          s.actions[d] = expandStream(stream, d, steps);
        SimulationResult r = simulate(s, input);
        EXPECT_FALSE(r.deadlock) << toString(kind);
        return r.iterationTime;
      };
      double steady = windowTime(6) - windowTime(5);
      EXPECT_NEAR(steady, m * 3.0, 1e-9) << toString(kind) << " p=" << p;
      Schedule drained = buildVersioned(kind, p, m, n);
      EXPECT_NEAR(simulate(drained, input).iterationTime, (m + p - 1) * 3.0,
                  1e-9)
          << toString(kind) << " p=" << p;
    }
}

// An order that changes from step to step is refused, naming the device.
TEST(StreamSchedule, RefusesAnOrderThatIsNotPeriodic) {
  WindowBuilder reversed = [](int steps, Schedule &out, std::string &error) {
    if (!buildVersionedSchedule(ScheduleKind::PipeDream, 2, 4 * steps, 1,
                                false, out, error))
      return false;
    // Device 1 swaps two actions at a place that moves with the window.
    std::swap(out.actions[1][steps], out.actions[1][steps + 2]);
    return true;
  };
  StreamSchedule stream;
  std::string error;
  EXPECT_FALSE(buildStream(reversed, 4, 4, stream, error));
  EXPECT_NE(error.find("device 1"), std::string::npos) << error;
}
