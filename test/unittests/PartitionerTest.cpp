//===- PartitionerTest.cpp - Tests of the partitioner -----------*- C++ -*-===//
//
// The dynamic program of pp::partition::partition against exhaustive
// enumeration (bruteForcePartition) on hundreds of random small DAGs and
// heterogeneous device lists, plus hand-computed costs, coarsening (optimal at
// block granularity) and the memory shortfall report.
//
//===----------------------------------------------------------------------===//

#include "pp/Partition/Partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

using namespace pp::partition;

namespace {

struct Case {
  PartitionGraph graph;
  PartitionDevices devices;
  PartitionOptions options;
};

/// Equal up to 1e-9 relative (the DP and the brute force add in different
/// orders).
bool near(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

/// Knobs of the random cases.
struct RandomSpec {
  unsigned minNodes = 1;
  unsigned maxNodes = 12;
  unsigned maxDevices = 4;
  bool pins = true;
  bool colocate = true;
  bool orders = true;
};

Case randomCase(std::mt19937 &rng, const RandomSpec &spec) {
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto integer = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return uniform(0, 1) < p; };

  Case c;
  unsigned n = integer(spec.minNodes, spec.maxNodes);
  unsigned numKinds = integer(1, 3);
  std::vector<double> kindSpeed;
  for (unsigned kind = 0; kind < numKinds; ++kind)
    kindSpeed.push_back(uniform(0.5, 2.0));
  for (unsigned v = 0; v < n; ++v) {
    PartitionNode node;
    node.name = "n" + std::to_string(v);
    double base = uniform(0.2, 4.0);
    for (unsigned kind = 0; kind < numKinds; ++kind)
      node.time.push_back(base * kindSpeed[kind] * uniform(0.8, 1.25));
    node.weightBytes = chance(0.2) ? 0 : integer(0, 200);
    node.activationBytes = chance(0.2) ? 0 : integer(0, 50);
    node.outputBytes = chance(0.1) ? 0 : integer(1, 100);
    c.graph.addNode(node);
  }
  // A backbone with branches (recent predecessors) and skip edges.
  for (unsigned v = 1; v < n; ++v) {
    if (chance(0.85))
      c.graph.addEdge(integer(std::max(0, int(v) - 3), v - 1), v);
    if (chance(0.3))
      c.graph.addEdge(integer(0, v - 1), v);
  }
  for (int extra = integer(0, n / 3); extra > 0 && n >= 2; --extra) {
    unsigned a = integer(0, n - 2);
    c.graph.addEdge(a, integer(a + 1, n - 1));
  }

  unsigned k = integer(1, spec.maxDevices);
  for (unsigned d = 0; d < k; ++d)
    c.devices.addDevice(
        {"d" + std::to_string(d), unsigned(integer(0, numKinds - 1)), 0});
  c.devices.defaultBandwidth = uniform(20, 200);
  c.devices.defaultLatency = chance(0.5) ? 0 : uniform(0, 0.05);
  for (unsigned a = 0; a < k; ++a)
    for (unsigned b = a + 1; b < k; ++b) {
      if (chance(0.5))
        c.devices.setLink(a, b, uniform(10, 200), uniform(0, 0.05));
      if (chance(0.2))
        c.devices.setDirectedLink(b, a, uniform(10, 200), uniform(0, 0.05));
    }

  // Sometimes per-device times (devices of one kind that differ).
  if (chance(0.15)) {
    std::vector<double> factor;
    for (unsigned d = 0; d < k; ++d)
      factor.push_back(uniform(0.5, 2));
    std::vector<PartitionNode> nodes = c.graph.nodes;
    std::vector<unsigned> kinds;
    for (const PartitionDevice &device : c.devices.devices)
      kinds.push_back(device.kind);
    c.graph.timeFn = [=](unsigned node, unsigned device) {
      return nodes[node].time[kinds[device]] * factor[device];
    };
  }

  PartitionOptions &o = c.options;
  int schedule = integer(0, 2);
  o.schedule = schedule == 0   ? PipelineSchedule::OneFOneB
               : schedule == 1 ? PipelineSchedule::GPipe
                               : PipelineSchedule::Custom;
  o.inflight = [](unsigned stage, unsigned numStages) {
    return uint64_t(numStages - stage + 1);
  };
  o.microBatches = integer(1, 8);
  o.allowEmptyStages = chance(0.3);
  if (spec.pins && chance(0.25))
    for (int i = integer(1, 2); i > 0; --i)
      o.pins.push_back(
          {unsigned(integer(0, n - 1)), unsigned(integer(0, k - 1))});
  if (spec.colocate && chance(0.15) && n >= 2)
    o.colocate.push_back(
        {unsigned(integer(0, n - 1)), unsigned(integer(0, n - 1))});
  if (chance(0.25) && n >= 2) {
    TiedGroup group;
    for (int i = integer(2, 3); i > 0; --i)
      group.nodes.push_back(integer(0, n - 1));
    group.stateBytes = integer(0, 200);
    group.gradientBytes = integer(0, 300);
    o.tiedGroups.push_back(group);
  }
  o.tryDeviceOrders = spec.orders && n <= 9 && chance(0.25);

  // Memory around what an even split needs: some cases cannot fit.
  uint64_t weight = 0, activation = 0;
  for (const PartitionNode &node : c.graph.nodes) {
    weight += node.weightBytes;
    activation += node.activationBytes;
  }
  for (const TiedGroup &group : o.tiedGroups)
    weight += group.stateBytes;
  uint64_t need = (weight + 4 * activation) / k + 1;
  for (PartitionDevice &device : c.devices.devices)
    device.memoryBytes = uint64_t(need * uniform(0.3, 2.5));
  return c;
}

/// The DP's result is a valid assignment whose costs are the reported ones.
void checkResult(const Case &c, const PartitionResult &r) {
  llvm::Expected<PartitionResult> check = evaluatePartition(
      c.graph, c.devices, c.options, r.deviceOrder, r.stageOf);
  ASSERT_TRUE(bool(check)) << llvm::toString(check.takeError());
  EXPECT_TRUE(near(check->bottleneck, r.bottleneck));
  EXPECT_TRUE(near(r.searchBottleneck, r.bottleneck))
      << r.searchBottleneck << " vs " << r.bottleneck;
  EXPECT_EQ(check->feasible, r.feasible);
  EXPECT_EQ(check->shortfall, r.shortfall);
  EXPECT_EQ(check->stageMemory, r.stageMemory);
  ASSERT_EQ(r.blockOf.size(), c.graph.size());
  for (unsigned v = 0; v < c.graph.size(); ++v)
    for (unsigned w = 0; w < c.graph.size(); ++w)
      if (r.blockOf[v] == r.blockOf[w]) {
        EXPECT_EQ(r.stageOf[v], r.stageOf[w]);
      }
}

/// Tallies of a batch of random cases.
struct Tally {
  unsigned solved = 0;     ///< An assignment exists.
  unsigned infeasible = 0; ///< ... but nothing fits in memory.
  unsigned nonPrefix = 0;  ///< The optimum is no split of the index order.
};

/// The DP and the brute force agree on `c`.
void compareWithBruteForce(const Case &c, Tally &tally) {
  llvm::Expected<PartitionResult> dp = partition(c.graph, c.devices, c.options);
  llvm::Expected<PartitionResult> brute =
      bruteForcePartition(c.graph, c.devices, c.options);
  EXPECT_EQ(bool(dp), bool(brute));
  if (!dp || !brute) {
    if (!dp)
      llvm::consumeError(dp.takeError());
    if (!brute)
      llvm::consumeError(brute.takeError());
    return;
  }
  EXPECT_EQ(dp->feasible, brute->feasible);
  EXPECT_EQ(dp->maxShortfall, brute->maxShortfall);
  EXPECT_TRUE(near(dp->bottleneck, brute->bottleneck))
      << "dp " << dp->bottleneck << " brute force " << brute->bottleneck;
  checkResult(c, *dp);
  ++tally.solved;
  tally.infeasible += !dp->feasible;
  tally.nonPrefix += !std::is_sorted(dp->stageOf.begin(), dp->stageOf.end());
}

/// Runs `count` random cases from `seed` on.
Tally compareRandomCases(const RandomSpec &spec, unsigned seed, unsigned count,
                         const char *what) {
  auto start = std::chrono::steady_clock::now();
  Tally tally;
  unsigned withOrders = 0;
  for (unsigned i = 0; i < count; ++i) {
    std::mt19937 rng(seed + i);
    Case c = randomCase(rng, spec);
    SCOPED_TRACE("case " + std::to_string(seed + i));
    withOrders += c.options.tryDeviceOrders;
    compareWithBruteForce(c, tally);
    if (::testing::Test::HasFailure())
      break;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("%u %s (%u with an assignment, %u memory-infeasible, %u not "
              "splits of the index order, %u over device orders) in %.2f s\n",
              count, what, tally.solved, tally.infeasible, tally.nonPrefix,
              withOrders, seconds);
  return tally;
}

/// PP_PARTITION_CASES=N runs N cases per random test (a longer soak).
unsigned caseCount(unsigned fallback) {
  const char *env = std::getenv("PP_PARTITION_CASES");
  return env ? std::atoi(env) : fallback;
}

TEST(Partitioner, MatchesBruteForceOnRandomDAGs) {
  unsigned count = caseCount(1000);
  Tally tally = compareRandomCases(RandomSpec(), 1000, count, "random cases");
  // Enough of each kind to mean something.
  EXPECT_GT(tally.solved, count / 2);
  EXPECT_GT(tally.infeasible, count / 20);
  EXPECT_GT(tally.nonPrefix, count / 20);
}

/// Larger graphs on up to five devices, one fixed order.
TEST(Partitioner, MatchesBruteForceOnLargerDAGs) {
  RandomSpec spec;
  spec.minNodes = 10;
  spec.maxNodes = 15;
  spec.maxDevices = 5;
  spec.orders = false;
  unsigned count = caseCount(200);
  Tally tally = compareRandomCases(spec, 100000, count, "larger random cases");
  EXPECT_GT(tally.nonPrefix, count / 20);
}

/// Costs of given assignments, computed by hand from the model in
/// Partitioner.h.
TEST(Partitioner, CostModelByHand) {
  Case c;
  // a -> b -> c and a -> c; times per kind (0, 1).
  c.graph.addNode({"a", {1, 2}, 10, 1, 20});
  c.graph.addNode({"b", {2, 1}, 20, 2, 30});
  c.graph.addNode({"c", {3, 1}, 30, 3, 40});
  c.graph.addEdge(0, 1);
  c.graph.addEdge(1, 2);
  c.graph.addEdge(0, 2);
  c.devices.addDevice({"d0", 0, 1000});
  c.devices.addDevice({"d1", 1, 1000});
  c.devices.setDirectedLink(0, 1, 10, 0.5);
  c.devices.setDirectedLink(1, 0, 20, 0.25);
  c.options.microBatches = 8;

  // Stage 0 = {a}: only a's value crosses (once, for both consumers).
  auto r = evaluatePartition(c.graph, c.devices, c.options, {0, 1}, {0, 1, 1});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->stageTime[0], 1 + 20.0 / 10 + 0.5);
  EXPECT_DOUBLE_EQ(r->stageTime[1], 1 + 1 + 20.0 / 20 + 0.25);
  // 1F1B: stage 0 of 2 holds min(2, 8) micro-batches, stage 1 one.
  EXPECT_EQ(r->stageMemory[0], 10u + 2 * 1);
  EXPECT_EQ(r->stageMemory[1], 50u + 1 * 5);

  // Stage 0 = {a, b}: a (for c) and b cross.
  r = evaluatePartition(c.graph, c.devices, c.options, {0, 1}, {0, 0, 1});
  ASSERT_TRUE(bool(r));
  EXPECT_DOUBLE_EQ(r->stageTime[0], 3 + 50.0 / 10 + 2 * 0.5);
  EXPECT_DOUBLE_EQ(r->stageTime[1], 1 + 50.0 / 20 + 2 * 0.25);
  EXPECT_DOUBLE_EQ(r->bottleneck, 9);

  // The other device order.
  r = evaluatePartition(c.graph, c.devices, c.options, {1, 0}, {0, 1, 1});
  ASSERT_TRUE(bool(r));
  EXPECT_DOUBLE_EQ(r->stageTime[0], 2 + 20.0 / 20 + 0.25);
  EXPECT_DOUBLE_EQ(r->stageTime[1], 2 + 3 + 20.0 / 10 + 0.5);

  // Tying a and c: each holding stage pays the state; the split boundary
  // carries the gradient each way once per mini-batch (m = 8).
  c.options.tiedGroups.push_back({{0, 2}, 7, 16});
  r = evaluatePartition(c.graph, c.devices, c.options, {0, 1}, {0, 1, 1});
  ASSERT_TRUE(bool(r));
  EXPECT_DOUBLE_EQ(r->stageTime[0], 3.5 + 16.0 / 8 / 10 + 0.5 / 8);
  EXPECT_DOUBLE_EQ(r->stageTime[1], 3.25 + 16.0 / 8 / 20 + 0.25 / 8);
  EXPECT_EQ(r->stageMemory[0], 12u + 7);
  EXPECT_EQ(r->stageMemory[1], 55u + 7);

  llvm::Expected<PartitionResult> best =
      partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(best));
  EXPECT_EQ(best->stageOf, (std::vector<unsigned>{0, 1, 1}));
  EXPECT_TRUE(best->exact);
  EXPECT_EQ(best->granularity, "exact over 3 ops");

  // GPipe keeps all m micro-batches on every stage.
  c.options.schedule = PipelineSchedule::GPipe;
  r = evaluatePartition(c.graph, c.devices, c.options, {0, 1}, {0, 1, 1});
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->stageMemory[0], 10u + 7 + 8 * 1);
}

/// A value that skips a stage is relayed: it crosses both boundaries.
TEST(Partitioner, SkipValuesAreRelayed) {
  Case c;
  c.graph.addNode({"a", {1}, 0, 0, 100});
  c.graph.addNode({"b", {1}, 0, 0, 10});
  c.graph.addNode({"c", {1}, 0, 0, 1});
  c.graph.addEdge(0, 1);
  c.graph.addEdge(1, 2);
  c.graph.addEdge(0, 2);
  for (int d = 0; d < 3; ++d)
    c.devices.addDevice({"gpu", 0, 1 << 20});
  c.devices.defaultBandwidth = 100;
  auto r =
      evaluatePartition(c.graph, c.devices, c.options, {0, 1, 2}, {0, 1, 2});
  ASSERT_TRUE(bool(r));
  // Boundary 0 carries a (100 B); boundary 1 carries a and b (110 B).
  EXPECT_DOUBLE_EQ(r->stageTime[0], 1 + 1.0);
  EXPECT_DOUBLE_EQ(r->stageTime[1], 1 + 1.1 + 1.0);
  EXPECT_DOUBLE_EQ(r->stageTime[2], 1 + 1.1);
}

/// Nothing fits: the best effort minimises the largest overflow and reports
/// each device's shortfall.
TEST(Partitioner, ShortfallReport) {
  Case c;
  for (int v = 0; v < 4; ++v) {
    c.graph.addNode({"n" + std::to_string(v), {1}, 100, 0, 1});
    if (v > 0)
      c.graph.addEdge(v - 1, v);
  }
  c.devices.addDevice({"big", 0, 180});
  c.devices.addDevice({"small", 0, 120});
  // Splits 1|3, 2|2, 3|1 overflow by (0, 180), (20, 80), (120, 0).
  llvm::Expected<PartitionResult> r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_FALSE(r->feasible);
  EXPECT_EQ(r->stageOf, (std::vector<unsigned>{0, 0, 1, 1}));
  EXPECT_EQ(r->shortfall, (std::vector<uint64_t>{20, 80}));
  EXPECT_EQ(r->maxShortfall, 80u);
  llvm::Expected<PartitionResult> brute =
      bruteForcePartition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(brute));
  EXPECT_EQ(brute->shortfall, r->shortfall);

  // With room for everything the same split is feasible.
  c.devices.devices[1].memoryBytes = 200;
  c.devices.devices[0].memoryBytes = 200;
  r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r));
  EXPECT_TRUE(r->feasible);
  EXPECT_EQ(r->shortfall, (std::vector<uint64_t>{0, 0}));
}

/// Coarsened searches are optimal over the blocks they report: equal to the
/// brute force with every block colocated.
TEST(Partitioner, CoarseningIsOptimalAtBlockGranularity) {
  unsigned coarsened = 0, count = caseCount(150);
  for (unsigned i = 0; i < count; ++i) {
    std::mt19937 rng(5000 + i);
    RandomSpec spec;
    spec.maxNodes = 13;
    spec.pins = false;
    spec.orders = false;
    Case c = randomCase(rng, spec);
    // Too many downsets, or too much DP work.
    if (i % 2)
      c.options.maxDownsets = std::uniform_int_distribution<int>(3, 30)(rng);
    else
      c.options.maxDownsetPairs =
          std::uniform_int_distribution<int>(10, 200)(rng);
    SCOPED_TRACE(testing::Message() << "case " << i);
    llvm::Expected<PartitionResult> dp =
        partition(c.graph, c.devices, c.options);
    if (!dp) {
      // Only when colocation leaves fewer blocks than stages.
      llvm::consumeError(dp.takeError());
      llvm::Expected<PartitionResult> brute =
          bruteForcePartition(c.graph, c.devices, c.options);
      EXPECT_FALSE(bool(brute));
      if (!brute)
        llvm::consumeError(brute.takeError());
      continue;
    }
    checkResult(c, *dp);
    // Coarsening stops at one block per stage.
    if (i % 2 && dp->numBlocks > c.devices.size()) {
      EXPECT_LE(dp->numDownsets, c.options.maxDownsets);
    }
    if (!dp->exact) {
      ++coarsened;
      EXPECT_LT(dp->numBlocks, c.graph.size());
      EXPECT_NE(dp->granularity.find("blocks of"), std::string::npos);
    }
    Case blocks = c;
    std::vector<std::vector<unsigned>> members(dp->numBlocks);
    for (unsigned v = 0; v < c.graph.size(); ++v)
      members[dp->blockOf[v]].push_back(v);
    blocks.options.colocate = members;
    blocks.options.maxDownsets = 1u << 20;
    llvm::Expected<PartitionResult> brute =
        bruteForcePartition(blocks.graph, blocks.devices, blocks.options);
    ASSERT_TRUE(bool(brute)) << llvm::toString(brute.takeError());
    EXPECT_EQ(dp->feasible, brute->feasible);
    EXPECT_EQ(dp->maxShortfall, brute->maxShortfall);
    EXPECT_TRUE(near(dp->bottleneck, brute->bottleneck))
        << dp->bottleneck << " vs " << brute->bottleneck;
    // The exact search over the blocks finds the same optimum.
    llvm::Expected<PartitionResult> exact =
        partition(blocks.graph, blocks.devices, blocks.options);
    ASSERT_TRUE(bool(exact));
    EXPECT_TRUE(exact->exact);
    EXPECT_TRUE(near(dp->bottleneck, exact->bottleneck));
    if (HasFailure())
      break;
  }
  EXPECT_GT(coarsened, count / 3);
}

/// A wide fork-join (2^30 downsets) is coarsened where it is wide.
TEST(Partitioner, CoarsensWideGraphs) {
  Case c;
  c.graph.addNode({"fork", {1}, 10, 1, 8});
  for (int i = 0; i < 30; ++i) {
    c.graph.addNode({"branch" + std::to_string(i), {0.5}, 10, 1, 8});
    c.graph.addEdge(0, i + 1);
  }
  unsigned join = c.graph.addNode({"join", {1}, 10, 1, 8});
  for (int i = 0; i < 30; ++i)
    c.graph.addEdge(i + 1, join);
  unsigned tail = join;
  for (int i = 0; i < 10; ++i) {
    unsigned next =
        c.graph.addNode({"tail" + std::to_string(i), {2}, 10, 1, 8});
    c.graph.addEdge(tail, next);
    tail = next;
  }
  for (int d = 0; d < 3; ++d)
    c.devices.addDevice({"gpu", 0, 1 << 20});
  c.options.maxDownsets = 1000;
  llvm::Expected<PartitionResult> r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_FALSE(r->exact);
  EXPECT_LE(r->numDownsets, 1000u);
  checkResult(c, *r);
  // The branches were merged; the tail, on every path, stays cuttable.
  EXPECT_LT(r->numBlocks, 25u);
  for (unsigned v = join + 1; v + 1 < c.graph.size(); ++v)
    EXPECT_NE(r->blockOf[v], r->blockOf[v + 1]);
  Case blocks = c;
  std::vector<std::vector<unsigned>> members(r->numBlocks);
  for (unsigned v = 0; v < c.graph.size(); ++v)
    members[r->blockOf[v]].push_back(v);
  blocks.options.colocate = members;
  llvm::Expected<PartitionResult> brute =
      bruteForcePartition(blocks.graph, blocks.devices, blocks.options);
  ASSERT_TRUE(bool(brute));
  EXPECT_TRUE(near(r->bottleneck, brute->bottleneck));
}

/// 2^14 downsets and a work budget that a sample shows too small: coarsened
/// before the DP runs.
TEST(Partitioner, CoarsensWhenTheWorkEstimateIsTooLarge) {
  Case c;
  c.graph.addNode({"fork", {1}, 10, 1, 8});
  for (int i = 0; i < 14; ++i) {
    c.graph.addNode({"branch" + std::to_string(i), {1.0 + i}, 10, 1, 8});
    c.graph.addEdge(0, i + 1);
    c.graph.addEdge(i + 1, 15);
  }
  c.graph.addNode({"join", {1}, 10, 1, 8});
  for (int d = 0; d < 3; ++d)
    c.devices.addDevice({"gpu", 0, 1 << 20});
  c.options.maxDownsetPairs = 20000;
  llvm::Expected<PartitionResult> r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_FALSE(r->exact);
  EXPECT_LE(r->numPairsVisited, 3 * c.options.maxDownsetPairs);
  checkResult(c, *r);
  Case blocks = c;
  std::vector<std::vector<unsigned>> members(r->numBlocks);
  for (unsigned v = 0; v < c.graph.size(); ++v)
    members[r->blockOf[v]].push_back(v);
  blocks.options.colocate = members;
  llvm::Expected<PartitionResult> brute =
      bruteForcePartition(blocks.graph, blocks.devices, blocks.options);
  ASSERT_TRUE(bool(brute));
  EXPECT_TRUE(near(r->bottleneck, brute->bottleneck));
}

/// Device orders: interchangeable devices are tried once; the best order
/// wins.
TEST(Partitioner, DeviceOrders) {
  Case c;
  // A heavy first op, a light second op.
  c.graph.addNode({"heavy", {8, 2}, 0, 0, 1});
  c.graph.addNode({"light", {1, 1}, 0, 0, 1});
  c.graph.addEdge(0, 1);
  c.devices.addDevice({"slow", 0, 100});
  c.devices.addDevice({"fast", 1, 100});
  llvm::Expected<PartitionResult> fixed =
      partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(fixed));
  EXPECT_EQ(fixed->ordersTried, 1u);
  c.options.tryDeviceOrders = true;
  llvm::Expected<PartitionResult> best =
      partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(best));
  EXPECT_EQ(best->ordersTried, 2u);
  EXPECT_EQ(best->deviceOrder, (std::vector<unsigned>{1, 0}));
  EXPECT_LT(best->bottleneck, fixed->bottleneck);

  // Kinds A, A, B: three distinct orders.
  c.devices.addDevice({"slow2", 0, 100});
  bool truncated = true;
  auto orders =
      candidateDeviceOrders(c.graph, c.devices, c.options, &truncated);
  EXPECT_EQ(orders.size(), 3u);
  EXPECT_FALSE(truncated);
  EXPECT_EQ(orders.front(), (std::vector<unsigned>{0, 1, 2}));
  c.options.maxDeviceOrders = 2;
  orders = candidateDeviceOrders(c.graph, c.devices, c.options, &truncated);
  EXPECT_EQ(orders.size(), 2u);
  EXPECT_TRUE(truncated);
  // A link that differs makes the two slow devices distinguishable.
  c.options.maxDeviceOrders = 720;
  c.devices.setLink(0, 1, 1e3, 0);
  orders = candidateDeviceOrders(c.graph, c.devices, c.options, &truncated);
  EXPECT_EQ(orders.size(), 6u);
}

/// A cut list of device orders starts with those that keep each kind
/// together (its devices on different nodes count as one kind); a work
/// budget over the orders leaves the rest out and says so.
TEST(Partitioner, KindOrdersFirstAndOrderBudget) {
  Case c;
  unsigned previous = c.graph.addNode({"in", {1, 2}, 10, 1, 8});
  for (int i = 0; i < 40; ++i) {
    unsigned v = c.graph.addNode(
        {"op" + std::to_string(i), {1.0 + i % 3, 2.5 + i % 3}, 10, 1, 8});
    c.graph.addEdge(previous, v);
    previous = v;
  }
  // Kind 0 on nodes A (devices 0, 1) and B (2, 3), kind 1 on node C (4, 5):
  // a fast link inside a node, a slow one across.
  std::vector<unsigned> node{0, 0, 1, 1, 2, 2};
  for (unsigned d = 0; d < 6; ++d)
    c.devices.addDevice({"d" + std::to_string(d), d < 4 ? 0u : 1u, 1 << 20});
  for (unsigned a = 0; a < 6; ++a)
    for (unsigned b = 0; b < 6; ++b)
      if (a != b)
        c.devices.setDirectedLink(a, b, node[a] == node[b] ? 1e4 : 10, 0);
  c.options.tryDeviceOrders = true;
  c.options.maxDeviceOrders = 4;
  bool truncated = false;
  auto orders =
      candidateDeviceOrders(c.graph, c.devices, c.options, &truncated);
  EXPECT_TRUE(truncated);
  ASSERT_EQ(orders.size(), 4u);
  EXPECT_EQ(orders[0], (std::vector<unsigned>{0, 1, 2, 3, 4, 5}));
  // The kinds swapped, each kind's nodes in their first order.
  EXPECT_EQ(orders[1], (std::vector<unsigned>{4, 5, 0, 1, 2, 3}));

  c.options.maxDeviceOrders = 720;
  llvm::Expected<PartitionResult> all =
      partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  EXPECT_FALSE(all->ordersTruncated);
  EXPECT_EQ(all->ordersTried, all->ordersListed);
  EXPECT_EQ(all->ordersNote(), "");
  c.options.orderSearchWork = 1;
  llvm::Expected<PartitionResult> cut =
      partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(cut)) << llvm::toString(cut.takeError());
  checkResult(c, *cut);
  EXPECT_TRUE(cut->ordersTruncated);
  EXPECT_EQ(cut->ordersTried, 1u);
  EXPECT_EQ(cut->ordersListed, all->ordersListed);
  EXPECT_EQ(cut->ordersNote(), " (of " + std::to_string(all->ordersListed) +
                                   ": the search's limits left the rest out)");
  EXPECT_GE(cut->bottleneck, all->bottleneck * (1 - 1e-12));
}

TEST(Partitioner, EmptyStagesAndPins) {
  Case c;
  c.graph.addNode({"a", {1}, 0, 0, 1});
  c.graph.addNode({"b", {1}, 0, 0, 1});
  c.graph.addEdge(0, 1);
  for (int d = 0; d < 3; ++d)
    c.devices.addDevice({"gpu", 0, 100});
  // Two ops on three devices: a stage stays empty.
  llvm::Expected<PartitionResult> r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  checkResult(c, *r);
  // Pins that contradict the edge have no assignment.
  c.options.pins = {{0, 2}, {1, 1}};
  r = partition(c.graph, c.devices, c.options);
  EXPECT_FALSE(bool(r));
  llvm::consumeError(r.takeError());
  c.options.pins = {{0, 1}};
  r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r));
  // b alone on the last stage halves the bottleneck.
  EXPECT_EQ(r->stageOf[0], 1u);
  EXPECT_EQ(r->stageOf[1], 2u);
}

TEST(Partitioner, RejectsMalformedInput) {
  Case c;
  c.graph.addNode({"a", {1}, 0, 0, 1});
  c.graph.addNode({"b", {1}, 0, 0, 1});
  c.graph.addEdge(1, 0);
  c.devices.addDevice({"gpu", 0, 100});
  llvm::Expected<PartitionResult> r = partition(c.graph, c.devices, c.options);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("topological"),
            std::string::npos);
  c.graph.edges = {{0, 1}};
  c.options.pins = {{0, 3}};
  r = partition(c.graph, c.devices, c.options);
  ASSERT_FALSE(bool(r));
  llvm::consumeError(r.takeError());
  c.options.pins.clear();
  c.devices.addDevice({"other kind", 1, 100});
  r = partition(c.graph, c.devices, c.options);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("no time for device kind"),
            std::string::npos);
}

/// A ResNet-like chain of residual blocks is solved exactly and quickly.
TEST(Partitioner, ResidualChainIsExact) {
  Case c;
  unsigned previous = c.graph.addNode({"stem", {3, 1.5}, 1000, 100, 64});
  for (int block = 0; block < 24; ++block) {
    std::string name = "block" + std::to_string(block);
    unsigned conv1 = c.graph.addNode({name + "/conv1", {2, 1}, 500, 50, 64});
    unsigned conv2 = c.graph.addNode({name + "/conv2", {2, 1}, 500, 50, 64});
    unsigned add = c.graph.addNode({name + "/add", {0.1, 0.05}, 0, 10, 64});
    c.graph.addEdge(previous, conv1);
    c.graph.addEdge(conv1, conv2);
    c.graph.addEdge(conv2, add);
    c.graph.addEdge(previous, add);
    previous = add;
  }
  c.devices.addDevice({"v100", 0, 40000});
  c.devices.addDevice({"a100", 1, 40000});
  c.devices.addDevice({"v100", 0, 40000});
  c.devices.addDevice({"a100", 1, 40000});
  c.devices.defaultBandwidth = 1e3;
  c.options.tryDeviceOrders = true;
  llvm::Expected<PartitionResult> r = partition(c.graph, c.devices, c.options);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_TRUE(r->exact);
  EXPECT_EQ(r->ordersTried, 6u);
  checkResult(c, *r);
}

/// Large graphs are searched with a coarser level's optimum as the upper
/// bound: the optimum is the same as without it, with less work.
TEST(Partitioner, BoundingHintKeepsTheOptimum) {
  std::mt19937 rng(20261203);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  uint64_t withHint = 0, without = 0;
  for (unsigned i = 0; i < caseCount(6); ++i) {
    // A residual chain of 200 to 300 blocks (600 to 900 ops: few enough
    // downsets to search exactly) on 2 to 6 devices of up to 3 kinds.
    Case c;
    unsigned previous = c.graph.addNode({"stem", {1, 0.5, 2}, 100, 10, 64});
    for (int block = 0, blocks = 200 + i * 20; block < blocks; ++block) {
      std::string name = "block" + std::to_string(block);
      double t = uniform(0.5, 3);
      auto node = [&](const std::string &suffix, double scale) {
        return c.graph.addNode({name + suffix,
                                {t * scale, t * scale * uniform(0.3, 0.6),
                                 t * scale * uniform(1.5, 3)},
                                uint64_t(uniform(0, 500)),
                                uint64_t(uniform(0, 60)),
                                uint64_t(uniform(16, 128))});
      };
      unsigned a = node("/a", 1), b = node("/b", 1), add = node("/add", 0.05);
      c.graph.addEdge(previous, a);
      c.graph.addEdge(a, b);
      c.graph.addEdge(b, add);
      c.graph.addEdge(previous, add);
      previous = add;
    }
    unsigned k = 2 + i % 5;
    uint64_t total = 0;
    for (const PartitionNode &n : c.graph.nodes)
      total += n.weightBytes + 4 * n.activationBytes;
    for (unsigned d = 0; d < k; ++d)
      c.devices.addDevice({"d" + std::to_string(d), d % 3,
                           uint64_t(total / k * uniform(0.9, 2.0))});
    c.devices.defaultBandwidth = 500;
    c.devices.setLink(0, k - 1, 50, 0.01);
    c.options.tryDeviceOrders = i % 2 == 0;
    c.options.maxDeviceOrders = 24;
    c.options.boundingBlocks = 0;
    llvm::Expected<PartitionResult> plain =
        partition(c.graph, c.devices, c.options);
    c.options.boundingBlocks = 64;
    llvm::Expected<PartitionResult> hinted =
        partition(c.graph, c.devices, c.options);
    ASSERT_EQ(bool(plain), bool(hinted));
    if (!plain) {
      llvm::consumeError(plain.takeError());
      llvm::consumeError(hinted.takeError());
      continue;
    }
    SCOPED_TRACE(testing::Message() << "case " << i);
    EXPECT_EQ(plain->feasible, hinted->feasible);
    EXPECT_EQ(plain->maxShortfall, hinted->maxShortfall);
    EXPECT_TRUE(plain->exact);
    EXPECT_TRUE(hinted->exact);
    EXPECT_TRUE(near(plain->searchBottleneck, hinted->searchBottleneck))
        << plain->searchBottleneck << " vs " << hinted->searchBottleneck;
    checkResult(c, *hinted);
    withHint += hinted->numPairsVisited;
    without += plain->numPairsVisited;
  }
  EXPECT_LT(withHint, without);
}

} // namespace

/// Tensor-parallel device groups: the split parts of a node's weights and
/// activations are divided by the group's degree, the rest stays whole
/// (Partitioner.h); a degree of 1 counts both parts whole.
TEST(Partitioner, TensorParallelMemory) {
  Case c;
  PartitionNode a{"a", {1}, 100, 10, 5};
  a.splitWeightBytes = 1000;
  a.splitActivationBytes = 40;
  PartitionNode b{"b", {1}, 0, 0, 5};
  b.splitWeightBytes = 600;
  c.graph.addNode(a);
  c.graph.addNode(b);
  c.graph.addEdge(0, 1);
  c.devices.addDevice({"whole", 0, 1u << 20});
  PartitionDevice pair{"pair", 0, 1u << 20};
  pair.tensorParallel = 2;
  c.devices.addDevice(pair);
  c.options.microBatches = 4;
  auto r = evaluatePartition(c.graph, c.devices, c.options, {0, 1}, {0, 1});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  // Stage 0 of 2 (1F1B): 2 micro-batches in flight, everything whole.
  EXPECT_EQ(r->stageMemory[0], 100u + 1000u + 2 * (10u + 40u));
  // Stage 1 on the pair: the split weights halve.
  EXPECT_EQ(r->stageMemory[1], 600u / 2);
  // Swapped: node a on the pair halves its split parts only.
  auto s = evaluatePartition(c.graph, c.devices, c.options, {1, 0}, {0, 1});
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_EQ(s->stageMemory[0], 100u + 1000u / 2 + 2 * (10u + 40u / 2));
  EXPECT_EQ(s->stageMemory[1], 600u);
  // The search sees the same memory: a device too small for the whole
  // split weights takes them as a pair.
  Case tight = c;
  tight.devices = PartitionDevices();
  tight.devices.addDevice({"small", 0, 700});
  PartitionDevice smallPair{"small-pair", 0, 700};
  smallPair.tensorParallel = 2;
  tight.devices.addDevice(smallPair);
  tight.options.tryDeviceOrders = true;
  auto best = partition(tight.graph, tight.devices, tight.options);
  ASSERT_TRUE(bool(best)) << llvm::toString(best.takeError());
  EXPECT_TRUE(best->feasible);
  auto brute = bruteForcePartition(tight.graph, tight.devices, tight.options);
  ASSERT_TRUE(bool(brute)) << llvm::toString(brute.takeError());
  EXPECT_EQ(best->stageMemory, brute->stageMemory);
  // Node a (split weights 1000) cannot be on the whole device.
  EXPECT_EQ(best->deviceOrder[best->stageOf[0]], 1u);
}
