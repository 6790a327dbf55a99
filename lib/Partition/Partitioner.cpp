//===- Partitioner.cpp - Optimal pipeline partitioning of a DAG -----------===//
//
// The pieces, in the order of this file:
//  - Model: validated inputs in flat tables, and the cost evaluation of one
//    assignment (the definition of the model; the brute force and the
//    reported costs use it).
//  - Level: the graph contracted into blocks (colocated nodes, then
//    coarsening), a DAG numbered in topological order.
//  - Family: a set of downsets of a level (all of them, or only the prefixes
//    of the topological order) with what the stage costs need of each.
//  - StageDP: the dynamic program over chains of downsets of a family.
//  - The search: for every device order, a cheap DP over prefixes gives an
//    upper bound that prunes the exact DP over all downsets; memory-
//    infeasible inputs get a second pass that minimises the overflow.
//
//===----------------------------------------------------------------------===//

#include "pp/Partition/Partitioner.h"
#include "pp/Schedule/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <random>
#include <set>

using namespace pp::partition;
using llvm::ArrayRef;
using llvm::SmallVector;

static constexpr double kInf = std::numeric_limits<double>::infinity();

static llvm::Error partitionError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Public helpers
//===----------------------------------------------------------------------===//

double PartitionDevices::bandwidth(unsigned from, unsigned to) const {
  auto it = links.find({from, to});
  return it == links.end() ? defaultBandwidth : it->second.first;
}

double PartitionDevices::latency(unsigned from, unsigned to) const {
  auto it = links.find({from, to});
  return it == links.end() ? defaultLatency : it->second.second;
}

double PartitionDevices::time(const PartitionGraph &graph, unsigned node,
                              unsigned device) const {
  if (graph.timeFn)
    return graph.timeFn(node, device);
  const std::vector<double> &times = graph.nodes[node].time;
  unsigned kind = devices[device].kind;
  return kind < times.size() ? times[kind] : 0.0;
}

std::string PartitionResult::ordersNote() const {
  if (!ordersTruncated)
    return "";
  return llvm::formatv(" (of {0}{1}: the search's limits left the rest out)",
                       moreOrders ? "more than " : "", ordersListed)
      .str();
}

uint64_t pp::partition::inflightMicroBatches(const PartitionOptions &options,
                                             unsigned stage,
                                             unsigned numStages) {
  switch (options.schedule) {
  case PipelineSchedule::OneFOneB:
  case PipelineSchedule::GPipe:
    return static_cast<uint64_t>(schedule::inFlightMicroBatches(
        options.schedule == PipelineSchedule::GPipe
            ? schedule::ScheduleKind::GPipe
            : schedule::ScheduleKind::OneFOneB,
        stage, numStages, options.microBatches));
  case PipelineSchedule::Custom:
    return options.inflight ? options.inflight(stage, numStages) : 0;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

namespace {

/// The validated problem in flat tables.
struct Model {
  unsigned n = 0; ///< Nodes.
  unsigned k = 0; ///< Devices = stages.
  std::vector<SmallVector<unsigned, 2>> preds, succs;
  std::vector<double> time; ///< [node * k + device].
  std::vector<uint64_t> weight, activation, output;
  /// The parts of weight and activation that tensor parallelism divides.
  std::vector<uint64_t> splitWeight, splitActivation;
  std::vector<uint64_t> tensorParallel; ///< Per device (>= 1).
  std::vector<int> pin; ///< Stage, or -1.
  /// Smallest node of the node's colocation class (itself when none).
  std::vector<unsigned> colocateRep;
  std::vector<TiedGroup> groups; ///< Node lists deduplicated.
  std::vector<SmallVector<unsigned, 1>> groupsOf;
  std::vector<uint64_t> inflight; ///< Per stage.
  std::vector<double> weightScale; ///< Per stage.
  std::vector<uint64_t> memory;   ///< Per device.
  double microBatches = 1;
  bool allowEmpty = false;
  std::vector<double> bandwidth, latency; ///< [from * k + to].

  /// Seconds to move one boundary's traffic from device `from` to `to`.
  double link(unsigned from, unsigned to, uint64_t cutBytes, uint64_t cutCount,
              uint64_t tieBytes, uint64_t tieCount) const {
    double bytes = double(cutBytes) + double(tieBytes) / microBatches;
    double count = double(cutCount) + double(tieCount) / microBatches;
    double seconds = bytes / bandwidth[from * k + to];
    if (count != 0)
      seconds += count * latency[from * k + to];
    return seconds;
  }
};

/// Union-find over indices.
struct UnionFind {
  std::vector<unsigned> parent;
  explicit UnionFind(unsigned size) : parent(size) {
    for (unsigned i = 0; i < size; ++i)
      parent[i] = i;
  }
  unsigned find(unsigned x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  }
  /// Keeps the smaller root.
  void unite(unsigned a, unsigned b) {
    a = find(a);
    b = find(b);
    if (a != b)
      parent[std::max(a, b)] = std::min(a, b);
  }
};

} // namespace

/// The graph's edges as sorted, unique predecessor and successor lists.
static llvm::Error addEdges(Model &m, const PartitionGraph &graph) {
  m.preds.resize(m.n);
  m.succs.resize(m.n);
  for (auto [from, to] : graph.edges) {
    if (from >= m.n || to >= m.n)
      return partitionError(
          llvm::formatv("edge {0} -> {1}: no such node", from, to));
    if (from >= to)
      return partitionError(llvm::formatv(
          "edge {0} -> {1} is not in topological order of the node indices",
          from, to));
    m.succs[from].push_back(to);
    m.preds[to].push_back(from);
  }
  for (unsigned v = 0; v < m.n; ++v) {
    llvm::sort(m.succs[v]);
    m.succs[v].erase(std::unique(m.succs[v].begin(), m.succs[v].end()),
                     m.succs[v].end());
    llvm::sort(m.preds[v]);
    m.preds[v].erase(std::unique(m.preds[v].begin(), m.preds[v].end()),
                     m.preds[v].end());
  }
  return llvm::Error::success();
}

/// Each node's time on each device and its bytes.
static llvm::Error addNodeCosts(Model &m, const PartitionGraph &graph,
                                const PartitionDevices &devices) {
  m.time.resize(size_t(m.n) * m.k);
  for (unsigned v = 0; v < m.n; ++v) {
    for (unsigned d = 0; d < m.k; ++d) {
      if (!graph.timeFn &&
          devices.devices[d].kind >= graph.nodes[v].time.size())
        return partitionError(
            llvm::formatv("node {0} ('{1}') has no time for device kind {2}", v,
                          graph.nodes[v].name, devices.devices[d].kind));
      double t = devices.time(graph, v, d);
      if (!std::isfinite(t) || t < 0)
        return partitionError(
            llvm::formatv("node {0} ('{1}') has time {2} on device {3}", v,
                          graph.nodes[v].name, t, d));
      m.time[size_t(v) * m.k + d] = t;
    }
    m.weight.push_back(graph.nodes[v].weightBytes);
    m.activation.push_back(graph.nodes[v].activationBytes);
    m.splitWeight.push_back(graph.nodes[v].splitWeightBytes);
    m.splitActivation.push_back(graph.nodes[v].splitActivationBytes);
    m.output.push_back(graph.nodes[v].outputBytes);
  }
  return llvm::Error::success();
}

/// The devices' memory, degree and links.
static llvm::Error addDevices(Model &m, const PartitionDevices &devices) {
  m.bandwidth.resize(m.k * m.k, kInf);
  m.latency.resize(m.k * m.k, 0);
  for (unsigned a = 0; a < m.k; ++a) {
    m.memory.push_back(devices.memory(a));
    if (devices.devices[a].tensorParallel == 0)
      return partitionError(
          llvm::formatv("device {0}: tensorParallel must be >= 1", a));
    m.tensorParallel.push_back(devices.devices[a].tensorParallel);
    for (unsigned b = 0; b < m.k; ++b) {
      if (a == b)
        continue;
      double bw = devices.bandwidth(a, b), lat = devices.latency(a, b);
      if (!(bw > 0) || std::isnan(bw) || !std::isfinite(lat) || lat < 0)
        return partitionError(llvm::formatv(
            "link {0} -> {1}: bandwidth {2} and latency {3} must be positive "
            "and non-negative",
            a, b, bw, lat));
      m.bandwidth[a * m.k + b] = bw;
      m.latency[a * m.k + b] = lat;
    }
  }
  return llvm::Error::success();
}

/// The pins, colocations and tied groups of the options.
static llvm::Error addConstraints(Model &m, const PartitionOptions &options) {
  m.pin.assign(m.n, -1);
  for (auto [node, stage] : options.pins) {
    if (node >= m.n || stage >= m.k)
      return partitionError(
          llvm::formatv("pin of node {0} to stage {1}: out of range (nodes: "
                        "{2}, stages: {3})",
                        node, stage, m.n, m.k));
    if (m.pin[node] >= 0 && m.pin[node] != int(stage))
      return partitionError(
          llvm::formatv("node {0} is pinned to stages {1} and {2}", node,
                        m.pin[node], stage));
    m.pin[node] = stage;
  }

  UnionFind colocate(m.n);
  for (const std::vector<unsigned> &set : options.colocate) {
    for (unsigned v : set)
      if (v >= m.n)
        return partitionError(
            llvm::formatv("colocated node {0}: no such node", v));
    for (unsigned v : set)
      colocate.unite(set.front(), v);
  }
  for (unsigned v = 0; v < m.n; ++v)
    m.colocateRep.push_back(colocate.find(v));

  m.groupsOf.resize(m.n);
  for (const TiedGroup &group : options.tiedGroups) {
    TiedGroup copy = group;
    llvm::sort(copy.nodes);
    copy.nodes.erase(std::unique(copy.nodes.begin(), copy.nodes.end()),
                     copy.nodes.end());
    for (unsigned v : copy.nodes) {
      if (v >= m.n)
        return partitionError(llvm::formatv("tied node {0}: no such node", v));
      m.groupsOf[v].push_back(m.groups.size());
    }
    m.groups.push_back(std::move(copy));
  }
  return llvm::Error::success();
}

static llvm::Expected<Model> buildModel(const PartitionGraph &graph,
                                        const PartitionDevices &devices,
                                        const PartitionOptions &options) {
  Model m;
  m.n = graph.nodes.size();
  m.k = devices.size();
  if (m.k == 0)
    return partitionError("no devices to partition over");
  if (m.k > kMaxPartitionDevices)
    return partitionError(llvm::formatv("{0} devices: at most {1} supported",
                                        m.k, kMaxPartitionDevices));
  if (options.microBatches == 0)
    return partitionError("microBatches must be at least 1");
  if (options.schedule == PipelineSchedule::Custom && !options.inflight)
    return partitionError("the custom schedule needs an inflight function");
  if (options.maxDownsets == 0 || options.maxDeviceOrders == 0)
    return partitionError("maxDownsets and maxDeviceOrders must be positive");
  m.microBatches = options.microBatches;
  if (llvm::Error error = addEdges(m, graph))
    return std::move(error);
  if (llvm::Error error = addNodeCosts(m, graph, devices))
    return std::move(error);
  if (llvm::Error error = addDevices(m, devices))
    return std::move(error);
  if (llvm::Error error = addConstraints(m, options))
    return std::move(error);
  for (unsigned s = 0; s < m.k; ++s) {
    m.inflight.push_back(inflightMicroBatches(options, s, m.k));
    m.weightScale.push_back(
        options.weightScale ? std::max(1.0, options.weightScale(s, m.k)) : 1.0);
  }
  m.allowEmpty = options.allowEmptyStages || m.n < m.k;
  return m;
}

namespace {

/// Per-stage costs of one assignment, with reusable buffers.
struct Costs {
  std::vector<double> time;
  std::vector<uint64_t> memory;
  double bottleneck = 0;
  uint64_t maxShortfall = 0;
  // Scratch, per stage or boundary.
  std::vector<double> compute;
  std::vector<uint64_t> cutBytes, cutCount, tieBytes, tieCount, weight,
      activation, splitWeight, splitActivation, held;
};

} // namespace

/// The cost model of the file comment of Partitioner.h, evaluated directly on
/// one monotone assignment.
static void evaluateCosts(const Model &m, ArrayRef<unsigned> order,
                          ArrayRef<unsigned> stageOf, Costs &c) {
  unsigned k = m.k;
  c.compute.assign(k, 0);
  c.cutBytes.assign(k, 0);
  c.cutCount.assign(k, 0);
  c.tieBytes.assign(k, 0);
  c.tieCount.assign(k, 0);
  c.weight.assign(k, 0);
  c.activation.assign(k, 0);
  c.splitWeight.assign(k, 0);
  c.splitActivation.assign(k, 0);
  c.held.assign(k, 0);
  for (unsigned v = 0; v < m.n; ++v) {
    unsigned s = stageOf[v];
    c.compute[s] += m.time[size_t(v) * k + order[s]];
    c.weight[s] += m.weight[v];
    c.activation[s] += m.activation[v];
    c.splitWeight[s] += m.splitWeight[v];
    c.splitActivation[s] += m.splitActivation[v];
    // The value crosses every boundary up to its last consumer's stage.
    unsigned last = s;
    for (unsigned consumer : m.succs[v])
      last = std::max(last, stageOf[consumer]);
    for (unsigned b = s; b < last; ++b) {
      c.cutBytes[b] += m.output[v];
      c.cutCount[b] += 1;
    }
  }
  for (const TiedGroup &group : m.groups) {
    if (group.nodes.empty())
      continue;
    uint64_t stages = 0;
    unsigned lo = k, hi = 0;
    for (unsigned v : group.nodes) {
      stages |= uint64_t(1) << stageOf[v];
      lo = std::min(lo, stageOf[v]);
      hi = std::max(hi, stageOf[v]);
    }
    for (unsigned b = lo; b < hi; ++b) {
      c.tieBytes[b] += group.gradientBytes;
      c.tieCount[b] += 1;
    }
    for (unsigned s = 0; s < k; ++s)
      if (stages >> s & 1)
        c.held[s] += group.stateBytes;
  }
  c.time.assign(k, 0);
  c.memory.assign(k, 0);
  c.bottleneck = 0;
  c.maxShortfall = 0;
  for (unsigned s = 0; s < k; ++s) {
    double t = c.compute[s];
    if (s + 1 < k)
      t += m.link(order[s], order[s + 1], c.cutBytes[s], c.cutCount[s],
                  c.tieBytes[s], c.tieCount[s]);
    if (s > 0)
      t += m.link(order[s], order[s - 1], c.cutBytes[s - 1], c.cutCount[s - 1],
                  c.tieBytes[s - 1], c.tieCount[s - 1]);
    uint64_t tp = m.tensorParallel[order[s]];
    uint64_t mem =
        static_cast<uint64_t>((c.weight[s] + c.splitWeight[s] / tp) *
                              m.weightScale[s]) +
        c.held[s] +
        m.inflight[s] * (c.activation[s] + c.splitActivation[s] / tp);
    c.time[s] = t;
    c.memory[s] = mem;
    c.bottleneck = std::max(c.bottleneck, t);
    uint64_t limit = m.memory[order[s]];
    if (mem > limit)
      c.maxShortfall = std::max(c.maxShortfall, mem - limit);
  }
}

/// The result fields that describe the assignment and its costs.
static PartitionResult makeResult(const Model &m, ArrayRef<unsigned> order,
                                  ArrayRef<unsigned> stageOf) {
  Costs c;
  evaluateCosts(m, order, stageOf, c);
  PartitionResult r;
  r.stageOf.assign(stageOf.begin(), stageOf.end());
  r.deviceOrder.assign(order.begin(), order.end());
  r.stageTime = c.time;
  r.stageMemory = c.memory;
  r.bottleneck = c.bottleneck;
  r.searchBottleneck = c.bottleneck;
  r.shortfall.assign(m.k, 0);
  for (unsigned s = 0; s < m.k; ++s) {
    uint64_t limit = m.memory[order[s]];
    if (c.memory[s] > limit)
      r.shortfall[order[s]] = c.memory[s] - limit;
  }
  r.maxShortfall = c.maxShortfall;
  r.feasible = c.maxShortfall == 0;
  r.blockOf.resize(m.n);
  for (unsigned v = 0; v < m.n; ++v)
    r.blockOf[v] = v;
  r.numBlocks = m.n;
  return r;
}

/// Checks that `order` is an order of the devices and `stageOf` a valid
/// assignment under the options.
static llvm::Error checkAssignment(const Model &m, ArrayRef<unsigned> order,
                                   ArrayRef<unsigned> stageOf) {
  if (order.size() != m.k)
    return partitionError(llvm::formatv(
        "device order has {0} entries, expected {1}", order.size(), m.k));
  uint64_t seen = 0;
  for (unsigned d : order) {
    if (d >= m.k || (seen >> d & 1))
      return partitionError("device order is not a permutation");
    seen |= uint64_t(1) << d;
  }
  if (stageOf.size() != m.n)
    return partitionError(llvm::formatv(
        "assignment has {0} entries, expected {1}", stageOf.size(), m.n));
  uint64_t used = 0;
  for (unsigned v = 0; v < m.n; ++v) {
    if (stageOf[v] >= m.k)
      return partitionError(
          llvm::formatv("node {0} is on stage {1} of {2}", v, stageOf[v], m.k));
    used |= uint64_t(1) << stageOf[v];
    for (unsigned p : m.preds[v])
      if (stageOf[p] > stageOf[v])
        return partitionError(llvm::formatv(
            "edge {0} -> {1} goes from stage {2} back to stage {3}", p, v,
            stageOf[p], stageOf[v]));
    if (m.pin[v] >= 0 && stageOf[v] != unsigned(m.pin[v]))
      return partitionError(
          llvm::formatv("node {0} is pinned to stage {1} but on stage {2}", v,
                        m.pin[v], stageOf[v]));
    if (stageOf[v] != stageOf[m.colocateRep[v]])
      return partitionError(
          llvm::formatv("colocated nodes {0} and {1} are on different stages",
                        m.colocateRep[v], v));
  }
  if (!m.allowEmpty &&
      used != (m.k == 64 ? ~uint64_t(0) : (uint64_t(1) << m.k) - 1))
    return partitionError("a stage is empty");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Device orders
//===----------------------------------------------------------------------===//

/// Whether devices `a` and `b` have the same memory, degree and times (they
/// may differ in their links only: one kind of GPU on several nodes).
static bool sameKind(const Model &m, unsigned a, unsigned b) {
  if (m.memory[a] != m.memory[b] || m.tensorParallel[a] != m.tensorParallel[b])
    return false;
  for (unsigned v = 0; v < m.n; ++v)
    if (m.time[size_t(v) * m.k + a] != m.time[size_t(v) * m.k + b])
      return false;
  return true;
}

/// Whether exchanging devices `a` and `b` changes no cost.
static bool interchangeable(const Model &m, unsigned a, unsigned b) {
  unsigned k = m.k;
  if (!sameKind(m, a, b))
    return false;
  for (unsigned x = 0; x < k; ++x) {
    if (x == a || x == b)
      continue;
    if (m.bandwidth[a * k + x] != m.bandwidth[b * k + x] ||
        m.bandwidth[x * k + a] != m.bandwidth[x * k + b] ||
        m.latency[a * k + x] != m.latency[b * k + x] ||
        m.latency[x * k + a] != m.latency[x * k + b])
      return false;
  }
  return m.bandwidth[a * k + b] == m.bandwidth[b * k + a] &&
         m.latency[a * k + b] == m.latency[b * k + a];
}

static std::vector<std::vector<unsigned>> deviceOrders(const Model &m,
                                                       bool tryOrders,
                                                       unsigned maxOrders,
                                                       bool *truncated) {
  if (truncated)
    *truncated = false;
  std::vector<unsigned> identity(m.k);
  for (unsigned d = 0; d < m.k; ++d)
    identity[d] = d;
  std::vector<std::vector<unsigned>> orders{identity};
  if (!tryOrders || m.k <= 1)
    return orders;
  // Classes of pairwise interchangeable devices: permuting inside a class is
  // a symmetry of every cost.
  std::vector<std::vector<unsigned>> classes;
  std::vector<unsigned> label(m.k);
  for (unsigned d = 0; d < m.k; ++d) {
    unsigned c = 0;
    for (; c < classes.size(); ++c)
      if (llvm::all_of(classes[c],
                       [&](unsigned e) { return interchangeable(m, d, e); }))
        break;
    if (c == classes.size())
      classes.emplace_back();
    classes[c].push_back(d);
    label[d] = c;
  }
  auto orderOf = [&](ArrayRef<unsigned> labels) {
    std::vector<unsigned> next(classes.size(), 0), order;
    for (unsigned c : labels)
      order.push_back(classes[c][next[c]++]);
    return order;
  };
  // When not all orders fit maxOrders, those that keep each class together
  // (every permutation of the classes: on a cluster, a kind's GPUs of one
  // node side by side, crossing fewer slow links) come first; the rest in
  // lexicographic order.
  std::set<std::vector<unsigned>> blockOrders;
  uint64_t distinct = 1;
  {
    // Multinomial m.k! / prod(|class|!), capped.
    uint64_t placed = 0;
    for (const auto &members : classes)
      for (uint64_t i = 1; i <= members.size() && distinct <= maxOrders; ++i)
        distinct = distinct * ++placed / i;
  }
  // Kinds: classes whose devices differ in their links only (a GPU kind
  // on several nodes). Every permutation of the kinds, each kind's classes
  // in their first order.
  std::vector<std::vector<unsigned>> kinds; // Classes of each kind.
  for (unsigned c = 0; c < classes.size(); ++c) {
    auto it = llvm::find_if(kinds, [&](const std::vector<unsigned> &kind) {
      return sameKind(m, classes[kind.front()].front(), classes[c].front());
    });
    if (it == kinds.end())
      kinds.push_back({c});
    else
      it->push_back(c);
  }
  if (distinct > maxOrders && kinds.size() <= 8) {
    std::vector<unsigned> kindOrder(kinds.size());
    for (unsigned c = 0; c < kinds.size(); ++c)
      kindOrder[c] = c;
    do {
      std::vector<unsigned> labels;
      for (unsigned kind : kindOrder)
        for (unsigned c : kinds[kind])
          labels.insert(labels.end(), classes[c].size(), c);
      if (labels == label)
        continue;
      if (orders.size() >= maxOrders)
        break;
      blockOrders.insert(labels);
      orders.push_back(orderOf(labels));
    } while (std::next_permutation(kindOrder.begin(), kindOrder.end()));
  }
  std::vector<unsigned> labels = label;
  llvm::sort(labels);
  do {
    if (labels == label || blockOrders.count(labels))
      continue;
    if (orders.size() >= maxOrders) {
      if (truncated)
        *truncated = true;
      break;
    }
    orders.push_back(orderOf(labels));
  } while (std::next_permutation(labels.begin(), labels.end()));
  return orders;
}

std::vector<std::vector<unsigned>> pp::partition::candidateDeviceOrders(
    const PartitionGraph &graph, const PartitionDevices &devices,
    const PartitionOptions &options, bool *truncated) {
  llvm::Expected<Model> m = buildModel(graph, devices, options);
  if (!m) {
    llvm::consumeError(m.takeError());
    return {};
  }
  return deviceOrders(*m, options.tryDeviceOrders, options.maxDeviceOrders,
                      truncated);
}

//===----------------------------------------------------------------------===//
// Brute force and evaluation
//===----------------------------------------------------------------------===//

namespace {

/// Orders results: feasible first, then the smaller overflow, then the
/// smaller bottleneck.
struct Score {
  bool found = false;
  uint64_t shortfall = 0;
  double bottleneck = kInf;
  bool betterThan(const Score &other) const {
    if (!other.found)
      return found;
    if (!found)
      return false;
    if (shortfall != other.shortfall)
      return shortfall < other.shortfall;
    return bottleneck < other.bottleneck;
  }
};

/// Enumerates the monotone assignments of one device order.
struct BruteForce {
  const Model &m;
  ArrayRef<unsigned> order;
  std::vector<unsigned> stage;
  Costs costs;
  Score best;
  std::vector<unsigned> bestStage;

  void run(unsigned v) {
    if (v == m.n) {
      if (!m.allowEmpty) {
        uint64_t used = 0;
        for (unsigned s : stage)
          used |= uint64_t(1) << s;
        if (llvm::popcount(used) != int(m.k))
          return;
      }
      evaluateCosts(m, order, stage, costs);
      Score score{true, costs.maxShortfall, costs.bottleneck};
      if (score.betterThan(best)) {
        best = score;
        bestStage = stage;
      }
      return;
    }
    unsigned lo = 0;
    for (unsigned p : m.preds[v])
      lo = std::max(lo, stage[p]);
    unsigned hi = m.k - 1;
    if (m.pin[v] >= 0) {
      lo = std::max<unsigned>(lo, m.pin[v]);
      hi = std::min<unsigned>(hi, m.pin[v]);
    }
    if (m.colocateRep[v] != v) {
      lo = std::max(lo, stage[m.colocateRep[v]]);
      hi = std::min(hi, stage[m.colocateRep[v]]);
    }
    for (unsigned s = lo; s <= hi; ++s) {
      stage[v] = s;
      run(v + 1);
    }
  }
};

} // namespace

llvm::Expected<PartitionResult>
pp::partition::bruteForcePartition(const PartitionGraph &graph,
                                   const PartitionDevices &devices,
                                   const PartitionOptions &options) {
  llvm::Expected<Model> model = buildModel(graph, devices, options);
  if (!model)
    return model.takeError();
  const Model &m = *model;
  bool truncated = false;
  std::vector<std::vector<unsigned>> orders = deviceOrders(
      m, options.tryDeviceOrders, options.maxDeviceOrders, &truncated);
  Score best;
  std::vector<unsigned> bestStage, bestOrder;
  for (const std::vector<unsigned> &order : orders) {
    BruteForce search{m, order, std::vector<unsigned>(m.n, 0), {}, {}, {}};
    search.run(0);
    if (search.best.betterThan(best)) {
      best = search.best;
      bestStage = search.bestStage;
      bestOrder = order;
    }
  }
  if (!best.found)
    return partitionError("no monotone assignment satisfies the pins, "
                          "colocations and non-empty stages");
  PartitionResult r = makeResult(m, bestOrder, bestStage);
  r.granularity = llvm::formatv("exhaustive over {0} ops", m.n).str();
  r.ordersTried = orders.size();
  r.ordersTruncated = truncated;
  r.ordersListed = orders.size();
  r.moreOrders = truncated;
  return r;
}

llvm::Expected<PartitionResult> pp::partition::evaluatePartition(
    const PartitionGraph &graph, const PartitionDevices &devices,
    const PartitionOptions &options, ArrayRef<unsigned> deviceOrder,
    ArrayRef<unsigned> stageOf) {
  llvm::Expected<Model> model = buildModel(graph, devices, options);
  if (!model)
    return model.takeError();
  if (llvm::Error error = checkAssignment(*model, deviceOrder, stageOf))
    return std::move(error);
  PartitionResult r = makeResult(*model, deviceOrder, stageOf);
  r.granularity = "given assignment";
  r.ordersTried = 1;
  return r;
}

//===----------------------------------------------------------------------===//
// Levels: the graph contracted into blocks
//===----------------------------------------------------------------------===//

namespace {

/// A contraction of the graph into blocks, numbered in topological order.
struct Level {
  unsigned numBlocks = 0;
  std::vector<unsigned> blockOf;                 ///< Node -> block.
  std::vector<SmallVector<unsigned, 4>> members; ///< Block -> nodes.
  std::vector<SmallVector<unsigned, 2>> preds, succs;
  std::vector<int> pin;     ///< Stage, or -1.
  bool pinConflict = false; ///< Some block holds nodes of different pins.
  // Sums over the members.
  std::vector<double> time; ///< [block * k + device].
  std::vector<uint64_t> weight, activation, splitWeight, splitActivation;
  std::vector<SmallVector<std::pair<unsigned, unsigned>, 1>> groups;
};

} // namespace

/// Strongly connected components of a graph given by adjacency lists
/// (iterative Tarjan); returns the component of every vertex.
static std::vector<unsigned>
stronglyConnected(const std::vector<SmallVector<unsigned, 2>> &adjacency,
                  unsigned &numComponents) {
  unsigned size = adjacency.size();
  std::vector<unsigned> index(size, ~0u), low(size), component(size, ~0u);
  std::vector<unsigned> stack;
  std::vector<std::pair<unsigned, unsigned>> frames; // (vertex, next edge)
  unsigned counter = 0;
  numComponents = 0;
  for (unsigned root = 0; root < size; ++root) {
    if (index[root] != ~0u)
      continue;
    frames.push_back({root, 0});
    index[root] = low[root] = counter++;
    stack.push_back(root);
    while (!frames.empty()) {
      auto &[v, edge] = frames.back();
      if (edge < adjacency[v].size()) {
        unsigned w = adjacency[v][edge++];
        if (index[w] == ~0u) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          frames.push_back({w, 0});
        } else if (component[w] == ~0u) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      unsigned done = v;
      frames.pop_back();
      if (!frames.empty())
        low[frames.back().first] =
            std::min(low[frames.back().first], low[done]);
      if (low[done] == index[done]) {
        unsigned w;
        do {
          w = stack.back();
          stack.pop_back();
          component[w] = numComponents;
        } while (w != done);
        ++numComponents;
      }
    }
  }
  return component;
}

/// Contracts the nodes of equal `label` into blocks, and further every cycle
/// this creates (its blocks must share a stage anyway).
static Level buildLevel(const Model &m, ArrayRef<unsigned> label) {
  // Dense labels.
  std::vector<unsigned> dense(m.n, ~0u), labelOf(m.n);
  unsigned numLabels = 0;
  for (unsigned v = 0; v < m.n; ++v) {
    if (dense[label[v]] == ~0u)
      dense[label[v]] = numLabels++;
    labelOf[v] = dense[label[v]];
  }
  std::vector<SmallVector<unsigned, 2>> adjacency(numLabels);
  for (unsigned v = 0; v < m.n; ++v)
    for (unsigned w : m.succs[v])
      if (labelOf[v] != labelOf[w])
        adjacency[labelOf[v]].push_back(labelOf[w]);
  unsigned numComponents = 0;
  std::vector<unsigned> component = stronglyConnected(adjacency, numComponents);

  // Blocks in topological order; among ready blocks the one holding the
  // smallest node first, so that an uncontracted graph keeps its numbering.
  std::vector<unsigned> minNode(numComponents, ~0u);
  for (unsigned v = 0; v < m.n; ++v) {
    unsigned c = component[labelOf[v]];
    minNode[c] = std::min(minNode[c], v);
  }
  std::vector<SmallVector<unsigned, 2>> cPreds(numComponents),
      cSuccs(numComponents);
  for (unsigned v = 0; v < m.n; ++v)
    for (unsigned w : m.succs[v]) {
      unsigned a = component[labelOf[v]], b = component[labelOf[w]];
      if (a != b)
        cSuccs[a].push_back(b);
    }
  for (unsigned c = 0; c < numComponents; ++c) {
    llvm::sort(cSuccs[c]);
    cSuccs[c].erase(std::unique(cSuccs[c].begin(), cSuccs[c].end()),
                    cSuccs[c].end());
    for (unsigned d : cSuccs[c])
      cPreds[d].push_back(c);
  }
  std::vector<unsigned> missing(numComponents), position(numComponents);
  using Entry = std::pair<unsigned, unsigned>; // (min node, component)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (unsigned c = 0; c < numComponents; ++c) {
    missing[c] = cPreds[c].size();
    if (missing[c] == 0)
      ready.push({minNode[c], c});
  }
  unsigned next = 0;
  while (!ready.empty()) {
    unsigned c = ready.top().second;
    ready.pop();
    position[c] = next++;
    for (unsigned d : cSuccs[c])
      if (--missing[d] == 0)
        ready.push({minNode[d], d});
  }

  Level level;
  unsigned nb = numComponents;
  level.numBlocks = nb;
  level.blockOf.resize(m.n);
  level.members.resize(nb);
  level.preds.resize(nb);
  level.succs.resize(nb);
  level.pin.assign(nb, -1);
  level.time.assign(size_t(nb) * m.k, 0);
  level.weight.assign(nb, 0);
  level.activation.assign(nb, 0);
  level.splitWeight.assign(nb, 0);
  level.splitActivation.assign(nb, 0);
  level.groups.resize(nb);
  for (unsigned v = 0; v < m.n; ++v) {
    unsigned b = position[component[labelOf[v]]];
    level.blockOf[v] = b;
    level.members[b].push_back(v);
    if (m.pin[v] >= 0) {
      if (level.pin[b] >= 0 && level.pin[b] != m.pin[v])
        level.pinConflict = true;
      level.pin[b] = m.pin[v];
    }
    for (unsigned d = 0; d < m.k; ++d)
      level.time[size_t(b) * m.k + d] += m.time[size_t(v) * m.k + d];
    level.weight[b] += m.weight[v];
    level.activation[b] += m.activation[v];
    level.splitWeight[b] += m.splitWeight[v];
    level.splitActivation[b] += m.splitActivation[v];
    for (unsigned g : m.groupsOf[v]) {
      auto it = llvm::find_if(
          level.groups[b], [&](const auto &entry) { return entry.first == g; });
      if (it == level.groups[b].end())
        level.groups[b].push_back({g, 1});
      else
        ++it->second;
    }
  }
  for (unsigned c = 0; c < nb; ++c)
    for (unsigned d : cSuccs[c]) {
      level.succs[position[c]].push_back(position[d]);
      level.preds[position[d]].push_back(position[c]);
    }
  for (unsigned b = 0; b < nb; ++b) {
    llvm::sort(level.succs[b]);
    llvm::sort(level.preds[b]);
  }
  return level;
}

/// Whether the pins leave every block of `level` a stage: no pinned block
/// reaches a block pinned to an earlier stage.
static bool pinsSatisfiable(const Level &level) {
  if (level.pinConflict)
    return false;
  std::vector<int> earliest(level.numBlocks, 0);
  for (unsigned b = 0; b < level.numBlocks; ++b) {
    for (unsigned p : level.preds[b])
      earliest[b] = std::max(earliest[b], earliest[p]);
    if (level.pin[b] >= 0) {
      if (earliest[b] > level.pin[b])
        return false;
      earliest[b] = level.pin[b];
    }
  }
  return true;
}

/// The level after merging each set of blocks of `sets` (block indices of
/// `level`). Sets that would conflict with pins or leave fewer than
/// `minBlocks` blocks are skipped; nullopt when nothing could be merged.
static std::optional<Level> mergeBlocks(const Model &m, const Level &level,
                                        ArrayRef<SmallVector<unsigned, 4>> sets,
                                        unsigned minBlocks) {
  auto attempt = [&](UnionFind &uf) -> std::optional<Level> {
    std::vector<unsigned> label(m.n);
    for (unsigned v = 0; v < m.n; ++v)
      label[v] = uf.find(level.blockOf[v]);
    Level next = buildLevel(m, label);
    if (next.numBlocks >= level.numBlocks || next.numBlocks < minBlocks ||
        !pinsSatisfiable(next))
      return std::nullopt;
    return next;
  };
  if (sets.empty())
    return std::nullopt;
  UnionFind all(level.numBlocks);
  for (const auto &set : sets)
    for (unsigned b : set)
      all.unite(set.front(), b);
  if (std::optional<Level> next = attempt(all))
    return next;
  // One set at a time, keeping those that are fine.
  UnionFind kept(level.numBlocks);
  bool any = false;
  for (const auto &set : sets) {
    UnionFind trial = kept;
    for (unsigned b : set)
      trial.unite(set.front(), b);
    if (attempt(trial)) {
      kept = trial;
      any = true;
    }
  }
  return any ? attempt(kept) : std::nullopt;
}

/// Side inputs (sources whose one consumer has other inputs too) merged into
/// their consumer, side outputs (sinks whose one producer has other
/// consumers) into their producer: they widen the graph (every subset of
/// them is in some downset) without being useful cut points. The head and
/// tail of a chain are left alone.
static SmallVector<SmallVector<unsigned, 4>>
danglingMerges(const Level &level) {
  SmallVector<SmallVector<unsigned, 4>> sets;
  for (unsigned b = 0; b < level.numBlocks; ++b) {
    if (level.preds[b].empty() && level.succs[b].size() == 1 &&
        level.preds[level.succs[b][0]].size() > 1)
      sets.push_back({b, level.succs[b][0]});
    else if (level.succs[b].empty() && level.preds[b].size() == 1 &&
             level.succs[level.preds[b][0]].size() > 1)
      sets.push_back({b, level.preds[b][0]});
  }
  return sets;
}

/// Immediate dominators of a DAG in topological order (`into` = preds),
/// with a virtual root numbered `size`.
static std::vector<unsigned>
dominators(const std::vector<SmallVector<unsigned, 2>> &into,
           ArrayRef<unsigned> topoOrder) {
  unsigned root = into.size();
  std::vector<unsigned> idom(root + 1, root), depth(root + 1, 0);
  for (unsigned b : topoOrder) {
    unsigned x = root;
    bool first = true;
    for (unsigned p : into[b]) {
      if (first) {
        x = p;
        first = false;
        continue;
      }
      unsigned y = p;
      while (x != y) {
        if (depth[x] > depth[y])
          x = idom[x];
        else if (depth[y] > depth[x])
          y = idom[y];
        else {
          x = idom[x];
          y = idom[y];
        }
      }
    }
    idom[b] = x;
    depth[b] = depth[x] + 1;
  }
  return idom;
}

/// The interiors of innermost fork-join regions: for a fork d whose
/// immediate post-dominator p has d as its immediate dominator, everything
/// strictly between them becomes one block, if its compute time is at most
/// 1/(2k) of the whole (a larger block would unbalance the stages; such
/// regions are left to the merges that halve).
static SmallVector<SmallVector<unsigned, 4>> regionMerges(const Level &level,
                                                          unsigned k) {
  unsigned nb = level.numBlocks;
  // Mean compute time over the devices, per block.
  std::vector<double> work(nb, 0);
  double total = 0;
  for (unsigned b = 0; b < nb; ++b) {
    for (unsigned d = 0; d < k; ++d)
      work[b] += level.time[size_t(b) * k + d] / k;
    total += work[b];
  }
  std::vector<unsigned> forward(nb), backward(nb);
  for (unsigned b = 0; b < nb; ++b) {
    forward[b] = b;
    backward[b] = nb - 1 - b;
  }
  std::vector<unsigned> idom = dominators(level.preds, forward);
  std::vector<unsigned> ipdom = dominators(level.succs, backward);
  struct Region {
    unsigned entry, exit;
    SmallVector<unsigned, 4> interior;
  };
  std::vector<Region> regions;
  std::vector<char> reach(nb), coreach(nb);
  for (unsigned d = 0; d < nb; ++d) {
    unsigned p = ipdom[d];
    if (level.succs[d].size() < 2 || p == nb || idom[p] != d)
      continue;
    std::fill(reach.begin(), reach.end(), 0);
    std::fill(coreach.begin(), coreach.end(), 0);
    reach[d] = 1;
    for (unsigned b = d; b <= p; ++b)
      if (reach[b])
        for (unsigned s : level.succs[b])
          reach[s] = 1;
    coreach[p] = 1;
    for (unsigned b = p + 1; b-- > d;)
      if (coreach[b])
        for (unsigned q : level.preds[b])
          coreach[q] = 1;
    Region region{d, p, {}};
    for (unsigned b = d + 1; b < p; ++b)
      if (reach[b] && coreach[b])
        region.interior.push_back(b);
    double interiorWork = 0;
    for (unsigned b : region.interior)
      interiorWork += work[b];
    if (region.interior.size() >= 2 && interiorWork <= total / (2 * k))
      regions.push_back(std::move(region));
  }
  llvm::stable_sort(regions, [](const Region &a, const Region &b) {
    return a.interior.size() < b.interior.size();
  });
  std::vector<char> inInterior(nb, 0), isEnd(nb, 0);
  SmallVector<SmallVector<unsigned, 4>> sets;
  for (const Region &region : regions) {
    if (inInterior[region.entry] || inInterior[region.exit] ||
        llvm::any_of(region.interior,
                     [&](unsigned b) { return inInterior[b] || isEnd[b]; }))
      continue;
    for (unsigned b : region.interior)
      inInterior[b] = 1;
    isEnd[region.entry] = isEnd[region.exit] = 1;
    sets.push_back(region.interior);
  }
  return sets;
}

/// Disjoint pairs of a block and its only successor when that successor has
/// no other predecessor (halves every chain).
static SmallVector<SmallVector<unsigned, 4>> chainMerges(const Level &level) {
  SmallVector<SmallVector<unsigned, 4>> sets;
  std::vector<char> used(level.numBlocks, 0);
  for (unsigned b = 0; b < level.numBlocks; ++b) {
    if (used[b] || level.succs[b].size() != 1)
      continue;
    unsigned c = level.succs[b][0];
    if (used[c] || level.preds[c].size() != 1)
      continue;
    used[b] = used[c] = 1;
    sets.push_back({b, c});
  }
  return sets;
}

/// Pairs of neighbours in the topological order (always acyclic).
static SmallVector<SmallVector<unsigned, 4>> halvingMerges(const Level &level) {
  SmallVector<SmallVector<unsigned, 4>> sets;
  for (unsigned b = 0; b + 1 < level.numBlocks; b += 2)
    sets.push_back({b, b + 1});
  return sets;
}

/// Blocks comparable with every other block (on every path through the
/// graph): any downset either holds them or not, independently of the rest.
/// With blocks in topological order, b is one iff no edge jumps over it, no
/// block before it is a sink and none after it a source.
static std::vector<char> spineBlocks(const Level &level) {
  unsigned nb = level.numBlocks;
  std::vector<int> jumps(nb + 1, 0);
  unsigned firstSink = nb, lastSource = 0;
  for (unsigned b = 0; b < nb; ++b) {
    if (level.succs[b].empty())
      firstSink = std::min(firstSink, b);
    if (level.preds[b].empty())
      lastSource = b;
    for (unsigned c : level.succs[b])
      if (c > b + 1) {
        ++jumps[b + 1];
        --jumps[c];
      }
  }
  std::vector<char> spine(nb);
  int over = 0;
  for (unsigned b = 0; b < nb; ++b) {
    over += jumps[b];
    spine[b] = over == 0 && b <= firstSink && b >= lastSource;
  }
  return spine;
}

/// One coarsening step: the first kind of merge that makes progress. Side
/// inputs and outputs are merged all at once; the merges that cost
/// granularity are sorted by the compute time of the block they make, and
/// when all of them overshoot (the level `fits` with fewer), only the
/// shortest prefix that fits is applied (binary search: merging more never
/// adds downsets).
static std::optional<Level>
coarsen(const Model &m, const Level &level, unsigned minBlocks,
        const std::function<bool(const Level &)> &fits) {
  if (std::optional<Level> next =
          mergeBlocks(m, level, danglingMerges(level), minBlocks))
    return next;
  std::vector<char> spine = spineBlocks(level);
  // First only merges that touch a block off the spine (merging spine blocks
  // removes one downset each), then any.
  for (unsigned pass = 0; pass < 6; ++pass) {
    SmallVector<SmallVector<unsigned, 4>> sets =
        pass % 3 == 0   ? regionMerges(level, m.k)
        : pass % 3 == 1 ? chainMerges(level)
                        : halvingMerges(level);
    if (pass < 3)
      llvm::erase_if(sets, [&](const SmallVector<unsigned, 4> &set) {
        return llvm::all_of(set, [&](unsigned b) { return spine[b]; });
      });
    // Lightest merged blocks first, so that a prefix coarsens evenly.
    std::vector<double> work(level.numBlocks, 0);
    for (unsigned b = 0; b < level.numBlocks; ++b)
      for (unsigned d = 0; d < m.k; ++d)
        work[b] += level.time[size_t(b) * m.k + d];
    auto setWork = [&](const SmallVector<unsigned, 4> &set) {
      double sum = 0;
      for (unsigned b : set)
        sum += work[b];
      return sum;
    };
    llvm::stable_sort(sets, [&](const auto &a, const auto &b) {
      return setWork(a) < setWork(b);
    });
    std::optional<Level> all = mergeBlocks(m, level, sets, minBlocks);
    if (!all)
      continue;
    if (sets.size() == 1 || !fits(*all))
      return all;
    size_t tooFew = 0, enough = sets.size();
    std::optional<Level> best = std::move(all);
    while (enough - tooFew > 1) {
      size_t middle = (tooFew + enough) / 2;
      std::optional<Level> some =
          mergeBlocks(m, level, ArrayRef(sets).take_front(middle), minBlocks);
      if (some && fits(*some)) {
        enough = middle;
        best = std::move(some);
      } else {
        tooFew = middle;
      }
    }
    return best;
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Families of downsets
//===----------------------------------------------------------------------===//

namespace {

/// Downsets of a level, with the per-downset quantities the stage costs
/// need. Downsets are identified by a Zobrist hash (XOR of random keys of
/// their blocks); the keys are redrawn until all hashes differ.
struct Family {
  unsigned numBlocks = 0, words = 0;
  bool prefixOnly = false;
  std::vector<uint64_t> keys; ///< Per block.
  std::vector<uint64_t> bits; ///< [id * words + word].
  std::vector<unsigned> size;
  std::vector<uint64_t> hash;
  /// The downset this one extends by `addedBlock` (both ~0u for the empty
  /// one); parents come first, so the quantities are filled incrementally.
  std::vector<unsigned> parentOf, addedBlock;
  /// Open addressing: (hash, id + 1) slots, id + 1 == 0 when free.
  std::vector<std::pair<uint64_t, unsigned>> slots;
  uint64_t slotMask = 0;
  std::vector<unsigned> bySize; ///< Ids, smaller downsets first.
  unsigned emptyId = 0, fullId = 0;
  // Boundary traffic after a stage ending at this downset.
  std::vector<uint64_t> cutBytes, cutCount, tieBytes, tieCount;
  /// Stages s for which the downset may be D_s: lo <= s <= hi.
  std::vector<int> lo, hi;
  /// Compute time of the downset with every block on its fastest device,
  /// and of all blocks: lower bounds on the sum of stage times.
  std::vector<double> fastTime;
  double fastTotal = 0;

  unsigned count() const { return size.size(); }
  /// The id of the downset of hash `h`, which must be in the family.
  unsigned find(uint64_t h) const {
    for (uint64_t slot = h & slotMask;; slot = (slot + 1) & slotMask)
      if (slots[slot].first == h && slots[slot].second != 0)
        return slots[slot].second - 1;
  }
  /// Adds `h`; false when it is already there.
  bool insert(uint64_t h, unsigned id) {
    for (uint64_t slot = h & slotMask;; slot = (slot + 1) & slotMask) {
      if (slots[slot].second == 0) {
        slots[slot] = {h, id + 1};
        return true;
      }
      if (slots[slot].first == h)
        return false;
    }
  }
  bool contains(unsigned id, unsigned block) const {
    return bits[size_t(id) * words + block / 64] >> (block % 64) & 1;
  }
};

/// Lists all downsets of a level in canonical order (each built by adding
/// blocks in increasing order). Stops early when there are more than `cap`.
struct DownsetEnumerator {
  const Level &level;
  Family &family;
  uint64_t cap;
  std::vector<uint64_t> current;
  std::vector<unsigned> missing; ///< Predecessors not yet in the downset.
  unsigned currentSize = 0;
  bool overflow = false;
  /// Only count the downsets (in `counted`), storing nothing.
  bool countOnly = false;
  uint64_t counted = 0;

  void record(uint64_t hash, unsigned parent, unsigned added) {
    if ((countOnly ? counted : family.count()) >= cap) {
      overflow = true;
      return;
    }
    if (countOnly) {
      ++counted;
      return;
    }
    family.bits.insert(family.bits.end(), current.begin(), current.end());
    family.size.push_back(currentSize);
    family.hash.push_back(hash);
    family.parentOf.push_back(parent);
    family.addedBlock.push_back(added);
  }

  /// `candidates`: addable blocks above the last one added, ascending;
  /// the downset is `parent`'s with `added`.
  void run(const SmallVector<unsigned, 8> &candidates, uint64_t hash,
           unsigned parent = ~0u, unsigned added = ~0u) {
    unsigned self = family.count();
    record(hash, parent, added);
    for (unsigned i = 0; i < candidates.size() && !overflow; ++i) {
      unsigned v = candidates[i];
      current[v / 64] |= uint64_t(1) << (v % 64);
      ++currentSize;
      SmallVector<unsigned, 8> fresh;
      for (unsigned w : level.succs[v])
        if (--missing[w] == 0)
          fresh.push_back(w);
      llvm::sort(fresh);
      SmallVector<unsigned, 8> next;
      std::merge(candidates.begin() + i + 1, candidates.end(), fresh.begin(),
                 fresh.end(), std::back_inserter(next));
      run(next, hash ^ family.keys[v], self, v);
      for (unsigned w : level.succs[v])
        ++missing[w];
      --currentSize;
      current[v / 64] &= ~(uint64_t(1) << (v % 64));
    }
  }
};

} // namespace

/// Fills the per-downset quantities of `family` and its hash index; false on
/// a hash collision.
static bool indexFamily(const Model &m, const Level &level, Family &f) {
  unsigned count = f.count(), nb = level.numBlocks;
  uint64_t capacity = 16;
  while (capacity < 2 * uint64_t(count))
    capacity *= 2;
  f.slots.assign(capacity, {0, 0});
  f.slotMask = capacity - 1;
  for (unsigned id = 0; id < count; ++id)
    if (!f.insert(f.hash[id], id))
      return false;
  f.bySize.resize(count);
  for (unsigned id = 0; id < count; ++id)
    f.bySize[id] = id;
  llvm::stable_sort(
      f.bySize, [&](unsigned a, unsigned b) { return f.size[a] < f.size[b]; });
  f.cutBytes.assign(count, 0);
  f.cutCount.assign(count, 0);
  f.tieBytes.assign(count, 0);
  f.tieCount.assign(count, 0);
  f.lo.assign(count, 0);
  f.fastTime.assign(count, 0);
  std::vector<double> fastest(nb, kInf);
  for (unsigned b = 0; b < nb; ++b)
    for (unsigned d = 0; d < m.k; ++d)
      fastest[b] = std::min(fastest[b], level.time[size_t(b) * m.k + d]);
  f.fastTotal = 0;
  for (unsigned b = 0; b < nb; ++b)
    f.fastTotal += fastest[b];
  f.hi.assign(count, 0);
  int k = m.k;
  SmallVector<unsigned> pinned;
  for (unsigned b = 0; b < nb; ++b)
    if (level.pin[b] >= 0)
      pinned.push_back(b);
  // Each downset's sums from its parent's (parents come first): the block
  // added, its members' boundary and that of their predecessors, which the
  // block may close; O(edges) per downset instead of O(blocks).
  std::vector<unsigned> seen(m.n, ~0u);
  for (unsigned id = 0; id < count; ++id) {
    if (f.size[id] == 0)
      f.emptyId = id;
    if (f.size[id] == nb)
      f.fullId = id;
    int pinIn = 0, pinOut = k;
    for (unsigned b : pinned) {
      if (f.contains(id, b))
        pinIn = std::max(pinIn, level.pin[b]);
      else
        pinOut = std::min(pinOut, level.pin[b]);
    }
    if (f.size[id] != 0) {
      unsigned parent = f.parentOf[id], v = f.addedBlock[id];
      assert(parent < id && "a downset before its parent");
      f.fastTime[id] = f.fastTime[parent] + fastest[v];
      f.cutBytes[id] = f.cutBytes[parent];
      f.cutCount[id] = f.cutCount[parent];
      f.tieBytes[id] = f.tieBytes[parent];
      f.tieCount[id] = f.tieCount[parent];
      auto leaves = [&](unsigned node) {
        return llvm::any_of(m.succs[node], [&](unsigned w) {
          return !f.contains(id, level.blockOf[w]);
        });
      };
      for (unsigned u : level.members[v]) {
        if (leaves(u)) {
          f.cutBytes[id] += m.output[u];
          f.cutCount[id] += 1;
        }
        // A predecessor in an earlier block fed u, outside the parent: it
        // was on the parent's boundary, and may not be on this one.
        for (unsigned q : m.preds[u]) {
          if (level.blockOf[q] == v || seen[q] == id)
            continue;
          seen[q] = id;
          if (!leaves(q)) {
            f.cutBytes[id] -= m.output[q];
            f.cutCount[id] -= 1;
          }
        }
      }
      for (auto [g, members] : level.groups[v]) {
        size_t total = m.groups[g].nodes.size();
        size_t before = llvm::count_if(m.groups[g].nodes, [&](unsigned x) {
          return f.contains(parent, level.blockOf[x]);
        });
        bool wasSplit = before != 0 && before != total;
        size_t after = before + members;
        bool isSplit = after != 0 && after != total;
        if (wasSplit != isSplit) {
          uint64_t bytes = m.groups[g].gradientBytes;
          f.tieBytes[id] += isSplit ? bytes : -bytes;
          f.tieCount[id] += isSplit ? 1 : -1;
        }
      }
    }
    int lo = pinIn, hi = pinOut - 1;
    if (f.size[id] != nb)
      hi = std::min(hi, k - 2); // Only D_{k-1} holds everything.
    if (!m.allowEmpty) {
      // Stages 0..s need s + 1 blocks, stages s+1..k-1 the rest.
      hi = std::min(hi, int(f.size[id]) - 1);
      lo = std::max(lo, (k - 1) - int(nb - f.size[id]));
    }
    f.lo[id] = lo;
    f.hi[id] = hi;
  }
  return true;
}

static void drawKeys(Family &f, unsigned nb, unsigned attempt) {
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull + attempt);
  f.keys.resize(nb);
  for (uint64_t &key : f.keys)
    key = rng();
}

static uint64_t countDownsets(const Level &level, uint64_t cap);

/// All downsets of `level`; nullopt when there are more than `cap` or they
/// would take more than `maxWords` words of bitsets.
static std::optional<Family> allDownsets(const Model &m, const Level &level,
                                         uint64_t cap, uint64_t maxWords) {
  unsigned nb = level.numBlocks;
  unsigned words = std::max(1u, (nb + 63) / 64);
  cap = std::min<uint64_t>(cap, std::max<uint64_t>(1, maxWords / words));
  // Counting first stores nothing when there are too many.
  if (countDownsets(level, cap) > cap)
    return std::nullopt;
  for (unsigned attempt = 0;; ++attempt) {
    Family f;
    f.numBlocks = nb;
    f.words = words;
    drawKeys(f, nb, attempt);
    DownsetEnumerator e{level,
                        f,
                        cap,
                        std::vector<uint64_t>(words, 0),
                        std::vector<unsigned>(nb),
                        0,
                        false};
    SmallVector<unsigned, 8> sources;
    for (unsigned b = 0; b < nb; ++b) {
      e.missing[b] = level.preds[b].size();
      if (e.missing[b] == 0)
        sources.push_back(b);
    }
    e.run(sources, 0);
    if (e.overflow)
      return std::nullopt;
    if (indexFamily(m, level, f))
      return f;
  }
}

/// The number of downsets of `level`, counting stopped above `cap`.
static uint64_t countDownsets(const Level &level, uint64_t cap) {
  unsigned nb = level.numBlocks;
  Family f;
  f.numBlocks = nb;
  f.words = std::max(1u, (nb + 63) / 64);
  drawKeys(f, nb, 0);
  DownsetEnumerator e{level,
                      f,
                      cap,
                      std::vector<uint64_t>(f.words, 0),
                      std::vector<unsigned>(nb),
                      0,
                      false};
  SmallVector<unsigned, 8> sources;
  for (unsigned b = 0; b < nb; ++b) {
    e.missing[b] = level.preds[b].size();
    if (e.missing[b] == 0)
      sources.push_back(b);
  }
  e.countOnly = true;
  e.run(sources, 0);
  return e.overflow ? cap + 1 : e.counted;
}

/// The prefixes of the topological order of `level`.
static Family prefixDownsets(const Model &m, const Level &level) {
  unsigned nb = level.numBlocks;
  for (unsigned attempt = 0;; ++attempt) {
    Family f;
    f.numBlocks = nb;
    f.words = std::max(1u, (nb + 63) / 64);
    f.prefixOnly = true;
    drawKeys(f, nb, attempt);
    std::vector<uint64_t> current(f.words, 0);
    uint64_t hash = 0;
    for (unsigned i = 0; i <= nb; ++i) {
      if (i > 0) {
        current[(i - 1) / 64] |= uint64_t(1) << ((i - 1) % 64);
        hash ^= f.keys[i - 1];
      }
      f.bits.insert(f.bits.end(), current.begin(), current.end());
      f.size.push_back(i);
      f.hash.push_back(hash);
      f.parentOf.push_back(i > 0 ? i - 1 : ~0u);
      f.addedBlock.push_back(i > 0 ? i - 1 : ~0u);
    }
    if (indexFamily(m, level, f))
      return f;
  }
}

//===----------------------------------------------------------------------===//
// The dynamic program
//===----------------------------------------------------------------------===//

namespace {

enum class Objective {
  Time,      ///< Minimise max_s T_s with M_s <= memory + slack.
  Shortfall, ///< Minimise max_s max(0, M_s - memory).
};

/// Costs of one device order that do not depend on the downset family.
struct OrderCosts {
  std::vector<unsigned> order;
  std::vector<uint64_t> limit;   ///< Memory of the device of each stage.
  std::vector<uint64_t> tensorParallel; ///< Of the device of each stage.
  std::vector<double> blockTime; ///< [stage * numBlocks + block].
};

struct DPOutcome {
  bool aborted = false;
  /// Downsets whose stages were all explored (all of them unless aborted).
  uint64_t processed = 0;
  double value = kInf;
  std::vector<unsigned> stageOfBlock;
  uint64_t visits = 0;
  /// Stage evaluations (each state times the stages it may end) and the
  /// tables' k entries per downset: what the DP costs.
  uint64_t work = 0;
};

/// DP[s][D] = min over downsets D' <= D of max(DP[s-1][D'], cost of stage s
/// = D \ D'). For each D, the D' are enumerated by removing maximal blocks in
/// decreasing order (each D' once), accumulating the stage's sums on the way;
/// a branch is cut when the stage alone already breaks the memory limit,
/// exceeds the upper bound, or is no better than DP[s][D] found so far, on
/// every stage s it could be, since removing more blocks only makes the
/// stage's memory and compute time larger (the last cut skips only states
/// that could not change the table, so the result is the same; it makes the
/// work per downset about the crossing point of DP[s-1][C] and the stage's
/// time instead of everything under the bound).
class StageDP {
public:
  StageDP(const Model &m, const Level &level, const Family &family,
          const OrderCosts &costs, Objective objective, uint64_t slack,
          double upperBound, uint64_t budget)
      : m(m), level(level), family(family), costs(costs), objective(objective),
        slack(slack), budget(budget), bound(upperBound * (1 + 1e-12)) {}

  DPOutcome run();
  /// The number of states `run` would visit, extrapolated from `samples`
  /// downsets spread over the family.
  double estimateVisits(unsigned samples);

private:
  void prepare();
  /// Computes DP[s][id] for every s from the smaller downsets.
  void processDownset(unsigned id);
  /// Stage sums of the blocks removed so far (the stage D \ C).
  struct Stage {
    uint64_t weight = 0, activation = 0, held = 0;
    uint64_t splitWeight = 0, splitActivation = 0;
    int pin = -1;
    /// Blocks removed so far: this stage's row of `timeRows`.
    unsigned depth = 0;
  };
  /// The stage's time per stage position (only [currentLo, currentHi] is
  /// kept up to date: no other position is read).
  double *timeOf(const Stage &stage) {
    return timeRows.data() + size_t(stage.depth) * m.k;
  }

  void expand(const SmallVector<unsigned, 8> &candidates, uint64_t hash,
              const Stage &stage);
  bool evaluate(unsigned idC, const Stage &stage);
  // Tables are id-major so that one downset's entries share a cache line.
  double &dp(unsigned s, unsigned id) { return table[size_t(id) * m.k + s]; }

  const Model &m;
  const Level &level;
  const Family &family;
  const OrderCosts &costs;
  Objective objective;
  uint64_t slack, budget;
  double bound;

  unsigned count = 0;
  std::vector<double> table;
  std::vector<unsigned> parent;
  std::vector<double> commOut, commIn; ///< [id * k + stage].
  std::vector<unsigned> succCount;     ///< Successors inside C.
  std::vector<unsigned> groupCount;    ///< Tied members inside the stage.
  /// One row of k stage times per recursion depth (no allocation per state).
  std::vector<double> timeRows;
  unsigned currentD = 0;
  int currentLo = 0, currentHi = -1;
  uint64_t visits = 0, work = 0;
  bool aborted = false;
};

} // namespace

bool StageDP::evaluate(unsigned idC, const Stage &stage) {
  int lo = currentLo, hi = currentHi;
  const double *time = timeOf(stage);
  if (stage.pin >= 0) {
    if (stage.pin < lo || stage.pin > hi)
      return false;
    lo = hi = stage.pin;
  }
  bool alive = false;
  for (int s = lo; s <= hi; ++s) {
    uint64_t tp = costs.tensorParallel[s];
    uint64_t mem =
        static_cast<uint64_t>((stage.weight + stage.splitWeight / tp) *
                              m.weightScale[s]) +
        stage.held +
        m.inflight[s] * (stage.activation + stage.splitActivation / tp);
    uint64_t limit = costs.limit[s];
    double value;
    if (objective == Objective::Time) {
      uint64_t allowed =
          limit > UINT64_MAX - slack ? UINT64_MAX : limit + slack;
      if (mem > allowed || time[s] > bound)
        continue;
      // No smaller C can improve DP[s][D] either: the stage's time only
      // grows as blocks are removed, and communication is not negative.
      if (time[s] >= dp(s, currentD))
        continue;
      value = time[s] + commOut[size_t(currentD) * m.k + s] +
              commIn[size_t(idC) * m.k + s];
    } else {
      value = mem > limit ? double(mem - limit) : 0.0;
      // The overflow only grows as blocks are removed (see above).
      if (value > bound || value >= dp(s, currentD))
        continue;
    }
    alive = true;
    double previous =
        s == 0 ? (idC == family.emptyId ? 0.0 : kInf) : dp(s - 1, idC);
    if (previous == kInf)
      continue;
    value = std::max(previous, value);
    if (value < dp(s, currentD)) {
      dp(s, currentD) = value;
      parent[size_t(currentD) * m.k + s] = idC;
    }
  }
  return alive;
}

void StageDP::expand(const SmallVector<unsigned, 8> &candidates, uint64_t hash,
                     const Stage &stage) {
  for (unsigned i = 0; i < candidates.size() && !aborted; ++i) {
    unsigned v = candidates[i];
    if (level.pin[v] >= 0 && stage.pin >= 0 && stage.pin != level.pin[v])
      continue; // Every stage containing v holds two pins.
    if (++visits > budget) {
      aborted = true;
      return;
    }
    work += currentHi - currentLo + 1;
    // Field by field: a copy-then-add of the struct made the compiler store
    // and reload overlapping vector halves (a store-forwarding stall that
    // was a fifth of this loop).
    Stage next;
    next.weight = stage.weight + level.weight[v];
    next.activation = stage.activation + level.activation[v];
    next.held = stage.held;
    next.splitWeight = stage.splitWeight + level.splitWeight[v];
    next.splitActivation = stage.splitActivation + level.splitActivation[v];
    next.pin = level.pin[v] >= 0 ? level.pin[v] : stage.pin;
    for (auto [g, members] : level.groups[v]) {
      if (groupCount[g] == 0)
        next.held += m.groups[g].stateBytes;
      groupCount[g] += members;
    }
    next.depth = stage.depth + 1;
    const double *time = timeOf(stage);
    double *nextTime = timeOf(next);
    for (int s = currentLo; s <= currentHi; ++s)
      nextTime[s] = time[s] + costs.blockTime[size_t(s) * level.numBlocks + v];
    uint64_t nextHash = hash ^ family.keys[v];
    unsigned idC = family.find(nextHash);
    if (evaluate(idC, next)) {
      SmallVector<unsigned, 8> nextCandidates;
      if (family.prefixOnly) {
        if (v > 0)
          nextCandidates.push_back(v - 1);
        expand(nextCandidates, nextHash, next);
      } else {
        SmallVector<unsigned, 8> fresh;
        for (unsigned p : llvm::reverse(level.preds[v]))
          if (--succCount[p] == 0)
            fresh.push_back(p);
        std::merge(candidates.begin() + i + 1, candidates.end(), fresh.begin(),
                   fresh.end(), std::back_inserter(nextCandidates),
                   std::greater<unsigned>());
        expand(nextCandidates, nextHash, next);
        for (unsigned p : level.preds[v])
          ++succCount[p];
      }
    }
    for (auto [g, members] : level.groups[v])
      groupCount[g] -= members;
  }
}

void StageDP::prepare() {
  unsigned k = m.k;
  count = family.count();
  table.assign(size_t(k) * count, kInf);
  parent.assign(size_t(k) * count, ~0u);
  commOut.assign(size_t(k) * count, 0);
  commIn.assign(size_t(k) * count, 0);
  for (unsigned id = 0; id < count; ++id)
    for (unsigned s = 0; s < k; ++s) {
      auto link = [&](unsigned to) {
        return m.link(costs.order[s], costs.order[to], family.cutBytes[id],
                      family.cutCount[id], family.tieBytes[id],
                      family.tieCount[id]);
      };
      if (s + 1 < k)
        commOut[size_t(id) * k + s] = link(s + 1);
      if (s > 0)
        commIn[size_t(id) * k + s] = link(s - 1);
    }
  succCount.assign(level.numBlocks, 0);
  groupCount.assign(m.groups.size(), 0);
  timeRows.assign(size_t(level.numBlocks + 1) * k, 0.0);
  work += uint64_t(count) * k;
}

void StageDP::processDownset(unsigned id) {
  unsigned k = m.k, nb = level.numBlocks;
  currentD = id;
  currentLo = family.lo[id];
  currentHi = family.hi[id];
  if (objective == Objective::Time && bound != kInf) {
    // D = D_s needs stages 0..s to hold D and stages s+1..k-1 the rest: the
    // largest of s + 1 stages is at least their average, which is at least
    // D's time on the fastest devices over s + 1. A stage s that breaks the
    // upper bound this way is on no optimal chain (whose every DP value is
    // at most the bound), so it is not tried (the slack covers rounding).
    double limit = bound * (1 + 1e-9);
    double inside = family.fastTime[id];
    double outside = std::max(0.0, family.fastTotal - inside);
    while (currentLo <= currentHi && inside / (currentLo + 1) > limit)
      ++currentLo;
    while (currentHi >= currentLo && currentHi + 1 < int(k) &&
           outside / (int(k) - 1 - currentHi) > limit)
      --currentHi;
  }
  if (currentLo > currentHi)
    return;
  if (family.size[id] > 0) {
    SmallVector<unsigned, 8> maximal;
    if (family.prefixOnly) {
      maximal.push_back(family.size[id] - 1);
    } else {
      for (unsigned b = nb; b-- > 0;) {
        if (!family.contains(id, b))
          continue;
        succCount[b] = llvm::count_if(
            level.succs[b], [&](unsigned c) { return family.contains(id, c); });
        if (succCount[b] == 0)
          maximal.push_back(b);
      }
    }
    Stage root;
    std::fill_n(timeRows.begin(), k, 0.0);
    expand(maximal, family.hash[id], root);
    if (aborted)
      return;
  }
  if (!m.allowEmpty)
    return;
  // Empty stage s: D_{s-1} = D_s = D; it relays what crosses it.
  for (int s = currentLo; s <= currentHi; ++s) {
    double previous =
        s == 0 ? (id == family.emptyId ? 0.0 : kInf) : dp(s - 1, id);
    if (previous == kInf)
      continue;
    double value = 0;
    if (objective == Objective::Time)
      value = commOut[size_t(id) * k + s] + commIn[size_t(id) * k + s];
    value = std::max(previous, value);
    if (value < dp(s, id)) {
      dp(s, id) = value;
      parent[size_t(id) * k + s] = id;
    }
  }
}

DPOutcome StageDP::run() {
  unsigned k = m.k, nb = level.numBlocks;
  prepare();
  DPOutcome outcome;
  for (unsigned id : family.bySize) {
    processDownset(id);
    if (aborted) {
      outcome.aborted = true;
      outcome.visits = visits;
      outcome.work = work;
      return outcome;
    }
    ++outcome.processed;
  }
  outcome.visits = visits;
  outcome.work = work;
  outcome.value = dp(k - 1, family.fullId);
  if (outcome.value == kInf)
    return outcome;
  outcome.stageOfBlock.assign(nb, 0);
  unsigned current = family.fullId;
  for (unsigned s = k; s-- > 0;) {
    unsigned previous = parent[size_t(current) * k + s];
    for (unsigned b = 0; b < nb; ++b)
      if (family.contains(current, b) && !family.contains(previous, b))
        outcome.stageOfBlock[b] = s;
    current = previous;
  }
  return outcome;
}

double StageDP::estimateVisits(unsigned samples) {
  prepare();
  unsigned count = family.count();
  samples = std::min(samples, count);
  // Only the cut by DP[s][D] depends on the DP values, and the full run has
  // every smaller downset's values (no larger than here), so it cuts at
  // least as much: the extrapolation bounds the run's work from above.
  unsigned done = 0;
  for (; done < samples && !aborted; ++done)
    processDownset(family.bySize[uint64_t(done) * count / samples]);
  return double(visits) * count / std::max(1u, done);
}

//===----------------------------------------------------------------------===//
// The search
//===----------------------------------------------------------------------===//

namespace {

enum class SearchStatus { Found, TooManyDownsets, TooManyPairs, NoAssignment };

struct SearchOutcome {
  SearchStatus status = SearchStatus::NoAssignment;
  std::vector<unsigned> order;
  std::vector<unsigned> stageOfBlock;
  double value = kInf;
  uint64_t numDownsets = 0, visits = 0;
  /// The DPs' work (DPOutcome::work), for the order search's budget.
  uint64_t work = 0;
  /// With TooManyPairs: downsets the DP got through before giving up.
  uint64_t processed = 0;
  /// The largest overflow `value` was found with (0: the plan fits).
  double shortfall = 0;
  /// Per order of the search: the bottleneck its DP found (infinity when
  /// it found nothing under the best of the orders before it).
  std::vector<double> orderValue;
  /// Orders searched; whether orderSearchWork left some out.
  unsigned ordersSearched = 0;
  bool ordersCut = false;
};

/// A known assignment of the level being searched (a coarser level's
/// optimum): its costs bound the exact search from above, which then skips
/// every state above them, and its per-order values say which orders to try
/// first.
struct SearchHint {
  bool valid = false;
  double value = kInf, shortfall = 0;
  std::vector<unsigned> order;
  std::vector<unsigned> stageOfNode;
  std::vector<double> orderValue;
};

} // namespace

static OrderCosts makeOrderCosts(const Model &m, const Level &level,
                                 ArrayRef<unsigned> order) {
  OrderCosts c;
  c.order.assign(order.begin(), order.end());
  c.blockTime.resize(size_t(m.k) * level.numBlocks);
  for (unsigned s = 0; s < m.k; ++s) {
    c.limit.push_back(m.memory[order[s]]);
    c.tensorParallel.push_back(m.tensorParallel[order[s]]);
    for (unsigned b = 0; b < level.numBlocks; ++b)
      c.blockTime[size_t(s) * level.numBlocks + b] =
          level.time[size_t(b) * m.k + order[s]];
  }
  return c;
}

static SearchHint boundingHint(const Model &m, const Level &level,
                               ArrayRef<std::vector<unsigned>> orders,
                               const PartitionOptions &options,
                               unsigned minBlocks);

namespace {

/// One search of a level over the device orders (searchLevel): the least
/// bottleneck of the orders in which the level fits, or else the least
/// largest memory overflow and the least bottleneck with it.
class LevelSearch {
public:
  LevelSearch(const Model &m, const Level &level,
              ArrayRef<std::vector<unsigned>> orders,
              const PartitionOptions &options, const Family &full,
              SearchHint coarseHint)
      : m(m), level(level), orders(orders), options(options), full(full),
        hint(std::move(coarseHint)), prefix(prefixDownsets(m, level)) {
    out.orderValue.assign(orders.size(), kInf);
    out.numDownsets = full.count();
    for (ArrayRef<unsigned> order : orders)
      orderCosts.push_back(makeOrderCosts(m, level, order));
    // The orders the hint found best first (a tighter bound sooner).
    byPromise.resize(orders.size());
    for (unsigned i = 0; i < orders.size(); ++i)
      byPromise[i] = i;
    if (hint.valid && hint.orderValue.size() == orders.size())
      llvm::stable_sort(byPromise, [&](unsigned a, unsigned b) {
        return hint.orderValue[a] < hint.orderValue[b];
      });
  }

  SearchOutcome run();

private:
  /// The best of one order: the prefix DP bounds the full DP. Returns false
  /// when the full DP ran out of budget.
  bool solve(const OrderCosts &c, Objective objective, uint64_t slack,
             double bound, DPOutcome &result);
  /// Minimises the bottleneck over the orders whose entry in `allowed` is
  /// set, with memory limits raised by `slack`, below `bound`. Returns false
  /// when a DP ran out of budget.
  bool bestTime(uint64_t slack, const std::vector<char> &allowed, double bound);
  /// Per order, the least largest overflow of the memory limits (infinity
  /// for the orders left out), and the least of all in `best`. Returns false
  /// when a DP ran out of budget.
  bool leastShortfall(std::vector<double> &shortfall, double &best);
  /// A hint that fits with `slack` bounds the time (a relative margin covers
  /// the different order of the sums).
  double hintBound(double slack) const {
    return hint.valid && hint.shortfall <= slack ? hint.value * (1 + 1e-9)
                                                 : kInf;
  }
  /// Takes the hint's assignment at this level, when nothing beats its
  /// bound.
  void useHint();
  SearchOutcome finish(SearchStatus status) {
    out.status = status;
    return std::move(out);
  }

  const Model &m;
  const Level &level;
  ArrayRef<std::vector<unsigned>> orders;
  const PartitionOptions &options;
  const Family &full;
  SearchHint hint;
  Family prefix;
  std::vector<OrderCosts> orderCosts;
  std::vector<unsigned> byPromise;
  SearchOutcome out;
};

} // namespace

bool LevelSearch::solve(const OrderCosts &c, Objective objective,
                        uint64_t slack, double bound, DPOutcome &result) {
  DPOutcome quick = StageDP(m, level, prefix, c, objective, slack, bound,
                            options.maxDownsetPairs)
                        .run();
  out.visits += quick.visits;
  out.work += quick.work;
  if (full.count() == prefix.count()) {
    // The prefixes are all the downsets: the quick DP was the exact one.
    out.processed = quick.processed;
    result = std::move(quick);
    return !result.aborted;
  }
  if (!quick.aborted)
    bound = std::min(bound, quick.value);
  // Give up early when a sample says the budget cannot suffice.
  if (full.count() > 4096) {
    double estimate = StageDP(m, level, full, c, objective, slack, bound,
                              options.maxDownsetPairs)
                          .estimateVisits(256);
    if (estimate > 2.0 * options.maxDownsetPairs) {
      out.processed =
          uint64_t(full.count() * (options.maxDownsetPairs / estimate));
      return false;
    }
  }
  result = StageDP(m, level, full, c, objective, slack, bound,
                   options.maxDownsetPairs)
               .run();
  out.visits += result.visits;
  out.work += result.work;
  if (result.aborted) {
    out.processed = result.processed;
    return false;
  }
  if (result.value == kInf && !quick.aborted && quick.value != kInf)
    result = std::move(quick); // Only rounding can get here.
  return true;
}

bool LevelSearch::bestTime(uint64_t slack, const std::vector<char> &allowed,
                           double bound) {
  out.value = bound;
  unsigned searched = 0;
  for (unsigned i : byPromise) {
    if (!allowed[i])
      continue;
    if (searched > 0 && out.work > options.orderSearchWork) {
      out.ordersCut = true;
      break;
    }
    out.ordersSearched = std::max(out.ordersSearched, ++searched);
    DPOutcome result;
    if (!solve(orderCosts[i], Objective::Time, slack, out.value, result))
      return false;
    out.orderValue[i] = result.value;
    if (result.value < out.value ||
        (out.order.empty() && result.value <= out.value)) {
      out.value = result.value;
      out.order = orders[i];
      out.stageOfBlock = std::move(result.stageOfBlock);
    }
  }
  return true;
}

bool LevelSearch::leastShortfall(std::vector<double> &shortfall, double &best) {
  best = hint.valid ? hint.shortfall : kInf;
  shortfall.assign(orders.size(), kInf);
  unsigned searched = 0;
  for (unsigned i : byPromise) {
    if (searched > 0 && out.work > options.orderSearchWork) {
      out.ordersCut = true;
      break;
    }
    out.ordersSearched = std::max(out.ordersSearched, ++searched);
    DPOutcome result;
    if (!solve(orderCosts[i], Objective::Shortfall, 0, best, result))
      return false;
    shortfall[i] = result.value;
    best = std::min(best, result.value);
  }
  return true;
}

void LevelSearch::useHint() {
  out.value = hint.value;
  out.order = hint.order;
  out.stageOfBlock.assign(level.numBlocks, 0);
  for (unsigned b = 0; b < level.numBlocks; ++b)
    out.stageOfBlock[b] = hint.stageOfNode[level.members[b].front()];
}

SearchOutcome LevelSearch::run() {
  std::vector<char> allOrders(orders.size(), 1);
  if (!bestTime(0, allOrders, hintBound(0)))
    return finish(SearchStatus::TooManyPairs);
  if (out.value != kInf) {
    if (out.order.empty())
      useHint();
    return finish(SearchStatus::Found);
  }
  // Nothing fits: the smallest largest overflow, then the best time with it.
  std::vector<double> shortfall;
  double bestShortfall;
  if (!leastShortfall(shortfall, bestShortfall))
    return finish(SearchStatus::TooManyPairs);
  if (bestShortfall == kInf)
    return finish(SearchStatus::NoAssignment);
  std::vector<char> best(orders.size());
  for (unsigned i = 0; i < orders.size(); ++i)
    best[i] = shortfall[i] == bestShortfall;
  // The hint's order is among the best when its overflow is the least.
  if (hint.valid && hint.shortfall == bestShortfall)
    for (unsigned i = 0; i < orders.size(); ++i)
      best[i] |= orders[i] == hint.order;
  if (!bestTime(uint64_t(bestShortfall), best, hintBound(bestShortfall)))
    return finish(SearchStatus::TooManyPairs);
  if (out.value != kInf && out.order.empty())
    useHint();
  out.shortfall = bestShortfall;
  return finish(out.value == kInf ? SearchStatus::NoAssignment
                                  : SearchStatus::Found);
}

/// The best assignment of `level` over `orders`. A level of more than
/// 2 options.boundingBlocks blocks is searched with its coarsening's optimum
/// as the hint (`minBlocks`: the fewest blocks that coarsening may leave).
static SearchOutcome searchLevel(const Model &m, const Level &level,
                                 ArrayRef<std::vector<unsigned>> orders,
                                 const PartitionOptions &options,
                                 unsigned minBlocks) {
  // Bitsets of at most 2^24 words (128 MiB).
  std::optional<Family> full =
      allDownsets(m, level, options.maxDownsets, uint64_t(1) << 24);
  if (!full) {
    SearchOutcome out;
    out.orderValue.assign(orders.size(), kInf);
    out.status = SearchStatus::TooManyDownsets;
    return out;
  }
  SearchHint hint = boundingHint(m, level, orders, options, minBlocks);
  return LevelSearch(m, level, orders, options, *full, std::move(hint)).run();
}

/// The optimum of `level` coarsened to about options.boundingBlocks
/// downsets, as a hint for searching `level` itself (an upper bound that
/// cuts the exact DP's work to the states near the optimum, in every device
/// order); invalid when `level` is small already or the coarse search
/// fails.
static SearchHint boundingHint(const Model &m, const Level &level,
                               ArrayRef<std::vector<unsigned>> orders,
                               const PartitionOptions &options,
                               unsigned minBlocks) {
  SearchHint hint;
  unsigned target = options.boundingBlocks;
  if (target == 0 || level.numBlocks <= 2 * target)
    return hint;
  std::function<bool(const Level &)> fits = [target](const Level &candidate) {
    return countDownsets(candidate, target) <= target;
  };
  std::optional<Level> coarse;
  const Level *current = &level;
  while (!fits(*current)) {
    std::optional<Level> next = coarsen(m, *current, minBlocks, fits);
    if (!next)
      break;
    coarse = std::move(next);
    current = &*coarse;
  }
  if (!coarse)
    return hint;
  SearchOutcome outcome = searchLevel(m, *coarse, orders, options, minBlocks);
  if (outcome.status != SearchStatus::Found)
    return hint;
  hint.valid = true;
  hint.value = outcome.value;
  hint.shortfall = outcome.shortfall;
  hint.order = outcome.order;
  hint.orderValue = outcome.orderValue;
  hint.stageOfNode.resize(m.n);
  for (unsigned v = 0; v < m.n; ++v)
    hint.stageOfNode[v] = outcome.stageOfBlock[coarse->blockOf[v]];
  return hint;
}

llvm::Expected<PartitionResult>
pp::partition::partition(const PartitionGraph &graph,
                         const PartitionDevices &devices,
                         const PartitionOptions &options) {
  llvm::Expected<Model> model = buildModel(graph, devices, options);
  if (!model)
    return model.takeError();
  const Model &m = *model;
  bool truncated = false;
  std::vector<std::vector<unsigned>> orders = deviceOrders(
      m, options.tryDeviceOrders, options.maxDeviceOrders, &truncated);

  // Colocated nodes (and everything forced between them) form the blocks of
  // the exact level.
  Level level = buildLevel(m, m.colocateRep);
  unsigned minBlocks = m.allowEmpty ? 1 : m.k;
  auto noAssignment = [&](llvm::StringRef why) {
    return partitionError(
        llvm::Twine("no monotone assignment satisfies the pins, colocations "
                    "and non-empty stages") +
        why);
  };
  if (!pinsSatisfiable(level) || level.numBlocks < minBlocks)
    return noAssignment("");
  bool exact = true;
  SearchOutcome outcome;
  for (;;) {
    outcome = searchLevel(m, level, orders, options, minBlocks);
    if (outcome.status == SearchStatus::Found)
      break;
    if (outcome.status == SearchStatus::NoAssignment)
      return noAssignment(
          exact ? ""
                : llvm::formatv(" at the granularity of {0} blocks",
                                level.numBlocks)
                      .str());
    // Coarsen until the downsets fit or, when the DP ran out of work budget
    // after `processed` downsets, to half as many as that (its work grows
    // faster than the number of downsets).
    uint64_t target =
        outcome.status == SearchStatus::TooManyDownsets
            ? options.maxDownsets
            : std::max<uint64_t>(
                  1, std::min(outcome.processed, outcome.numDownsets / 2) / 2);
    std::function<bool(const Level &)> fits = [&](const Level &candidate) {
      return countDownsets(candidate, target) <= target;
    };
    std::optional<Level> next = coarsen(m, level, minBlocks, fits);
    if (!next) {
      // No merge is left that keeps k blocks and the pins: this level is as
      // coarse as it gets, so search it whatever its number of downsets.
      PartitionOptions unlimited = options;
      unlimited.maxDownsets = std::numeric_limits<uint64_t>::max();
      unlimited.maxDownsetPairs = std::numeric_limits<uint64_t>::max();
      outcome = searchLevel(m, level, orders, unlimited, minBlocks);
      if (outcome.status == SearchStatus::Found)
        break;
      if (outcome.status == SearchStatus::NoAssignment)
        return noAssignment(
            llvm::formatv(" at the granularity of {0} blocks", level.numBlocks)
                .str());
      return partitionError(llvm::formatv(
          "cannot coarsen the graph ({0} blocks) below {1} downsets and it is "
          "too large to search",
          level.numBlocks, options.maxDownsets));
    }
    level = std::move(*next);
    exact = false;
  }

  std::vector<unsigned> stageOf(m.n);
  for (unsigned v = 0; v < m.n; ++v)
    stageOf[v] = outcome.stageOfBlock[level.blockOf[v]];
  PartitionResult r = makeResult(m, outcome.order, stageOf);
  r.searchBottleneck = outcome.value;
  r.exact = exact;
  r.blockOf = level.blockOf;
  r.numBlocks = level.numBlocks;
  r.granularity = exact ? llvm::formatv("exact over {0} ops", m.n).str()
                        : llvm::formatv("optimal over {0} blocks of {1} ops",
                                        level.numBlocks, m.n)
                              .str();
  r.numDownsets = outcome.numDownsets;
  r.numPairsVisited = outcome.visits;
  r.ordersTried = outcome.ordersSearched;
  r.ordersTruncated = truncated || outcome.ordersCut;
  r.ordersListed = orders.size();
  r.moreOrders = truncated;
  return r;
}
