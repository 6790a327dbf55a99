//===- TensorParallelPlan.cpp - Pipeline x tensor x data plans --*- C++ -*-===//
//
// See TensorParallelPlan.h for the cost model and the search.
//
//===----------------------------------------------------------------------===//

#include "TensorParallelPlan.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Transforms/TensorParallelGroups.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/ReportFile.h"
#include "pp/Schedule/Simulator.h"
#include "pp/Schedule/Timeline.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>

using namespace mlir;
namespace onnx = pp::onnx;
namespace partition = pp::partition;
namespace sched = pp::schedule;

std::optional<pp::pipeline::TensorParallelRequest>
pp::pipeline::parseTensorParallel(StringRef text) {
  TensorParallelRequest request;
  text = text.trim();
  if (text == "auto") {
    request.automatic = true;
    return request;
  }
  for (StringRef entry : llvm::split(text, ',')) {
    unsigned degree;
    if (entry.trim().getAsInteger(10, degree) || degree == 0 || degree > 1024)
      return std::nullopt;
    request.degrees.push_back(degree);
  }
  if (request.degrees.empty())
    return std::nullopt;
  return request;
}

namespace {

/// The most GPUs tp=auto puts in one group (one NVLink domain).
constexpr unsigned kMaxAutoDegree = 8;
/// Beyond this many per-run combinations, tp=auto tries uniform degrees.
constexpr size_t kMaxAutoCombinations = 64;

/// What the groups split at one degree.
struct DegreeFacts {
  llvm::DenseSet<Operation *> splitOps;
  /// Row op -> bytes all-reduced in its forward and in its backward.
  llvm::DenseMap<Operation *, std::pair<double, double>> reduceBytes;
  llvm::DenseSet<Operation *> splitReads; ///< onnx.global_read ops.
  std::vector<std::vector<Operation *>> groups;
  unsigned numGroups = 0, wholePairs = 0;
};

/// The global reads a weight operand comes from (through transposes,
/// slices and the like of weights alone).
void collectReads(Value value, llvm::DenseSet<Operation *> &reads,
                  int depth = 0) {
  Operation *def = value.getDefiningOp();
  if (!def || depth > 8)
    return;
  if (isa<onnx::GlobalReadOp>(def)) {
    reads.insert(def);
    return;
  }
  for (Value operand : def->getOperands())
    collectReads(operand, reads, depth + 1);
}

/// One tensor-parallel group of GPUs: a stage's device.
struct Group {
  std::vector<int> devices;
  unsigned degree = 1;
};

/// A candidate plan of one virtual worker.
struct Candidate {
  std::vector<Group> groups;
  partition::PartitionResult result;
  bool assumesRecompute = false;
  bool feasible = false;
  std::string error; ///< Partitioning failed.
  /// No iteration of the candidate can be faster than this (seconds).
  double lowerBound = 0;
  /// Not partitioned: its lower bound is no better than the best plan.
  bool skipped = false;
  /// Not partitioned: its weights cannot fit (why, for the error).
  std::string memoryNote;
  /// The simulated iteration (for the timeline).
  struct Trace {
    sched::Schedule schedule;
    sched::SimulationResult result;
  };
  std::shared_ptr<const Trace> trace;
  double iteration = std::numeric_limits<double>::infinity();
  std::vector<uint64_t> peak; ///< Per stage (per GPU of its group).
  std::vector<double> forward, backward, reduce; ///< Per stage.
  /// Per stage: the data-parallel ring all-reduce of its gradients.
  std::vector<double> gradReduce;
  std::vector<double> reduceBytes;               ///< Per stage.
  std::vector<unsigned> reduces;                 ///< Per stage.
  std::vector<unsigned> ops;                     ///< Per stage.

  std::string degreesText() const {
    bool uniform = llvm::all_of(groups, [&](const Group &g) {
      return g.degree == groups.front().degree;
    });
    if (uniform)
      return std::to_string(groups.front().degree);
    std::string text = "[";
    for (auto [i, g] : llvm::enumerate(groups))
      text += (i ? "," : "") + std::to_string(g.degree);
    return text + "]";
  }
  unsigned maxDegree() const {
    unsigned most = 1;
    for (const Group &g : groups)
      most = std::max(most, g.degree);
    return most;
  }
};

class Planner {
public:
  Planner(pp::pipeline::TensorParallelPlanInput &in) : in(in) {}

  LogicalResult run(const pp::pipeline::TensorParallelRequest &request);

private:
  enum class WorkersOutcome { Planned, DoesNotFit, Error };
  /// Plans every virtual worker of in.workers (crossLink set for them),
  /// skipping candidates whose lower bound is at least `beat`. `quiet`: a
  /// worker that does not fit fails without a diagnostic.
  WorkersOutcome planWorkers(const pp::pipeline::TensorParallelRequest &request,
                             bool quiet, double beat,
                             std::vector<Candidate> &chosen,
                             std::vector<std::vector<Candidate>> &tried);
  void computeCrossLinks();
  /// One grouping of the virtual workers tried (regroup-workers).
  struct Grouping {
    unsigned workers, gpusPerWorker, microBatches;
    bool planned;
    double iteration;
    std::string degrees;
  };
  std::vector<Grouping> groupings;
  /// The cost model's forward and backward seconds of `op` on `device`,
  /// computed once per op and kind of device (kind, rates and memory
  /// bandwidth).
  std::pair<double, double> opTimes(Operation *op,
                                    const pp::cluster::Device &device) {
    size_t index = &device - in.cluster->devices.data();
    if (kindOfDevice.empty())
      kindOfDevice.assign(in.cluster->devices.size(), -1);
    if (kindOfDevice[index] < 0) {
      std::string key =
          llvm::formatv("{0}|{1}|{2}|{3}|{4}", device.kind, device.peakFlopsF32,
                        device.peakFlopsF16, device.peakFlopsF64,
                        device.memoryBandwidth)
              .str();
      kindOfDevice[index] =
          deviceKinds.try_emplace(key, deviceKinds.size()).first->second;
    }
    unsigned kind = static_cast<unsigned>(kindOfDevice[index]);
    auto [it, inserted] = timeCache.try_emplace({op, kind});
    if (inserted)
      it->second = {in.costModel->getForwardTime(op, device),
                    in.costModel->getBackwardTime(op, device)};
    return it->second;
  }
  llvm::StringMap<unsigned> deviceKinds;
  std::vector<int> kindOfDevice; ///< Per cluster device, -1: not seen.
  llvm::DenseMap<std::pair<Operation *, unsigned>, std::pair<double, double>>
      timeCache;
  /// Bytes of the trainable global `read` reads; nullopt for others.
  std::optional<uint64_t> trainableBytes(onnx::GlobalReadOp read) {
    auto [it, inserted] = trainable.try_emplace(read.getOperation());
    if (inserted) {
      if (!symbols)
        symbols.emplace(in.module);
      auto global =
          symbols->lookup<onnx::GlobalOp>(read.getGlobalAttr().getValue());
      if (global && global.getKind() == onnx::kTrainable)
        it->second =
            static_cast<uint64_t>(pp::getTensorBytes(global.getType()));
    }
    return it->second;
  }
  std::optional<SymbolTable> symbols;
  llvm::DenseMap<Operation *, std::optional<uint64_t>> trainable;
  /// Micro-batches per replica: the option's for the workers as given; a
  /// grouping of g merged workers runs g times as many (the same global
  /// batch).
  unsigned microBatches = 0;
  const DegreeFacts &facts(unsigned degree);
  /// Runs of consecutive devices of one node and kind in `worker`.
  std::vector<std::pair<size_t, size_t>> runsOf(const std::vector<int> &worker);
  FailureOr<std::vector<Group>>
  groupsFor(unsigned w, const pp::pipeline::TensorParallelRequest &request);
  /// `w`: the virtual worker the groups belong to.
  Candidate evaluate(const std::vector<Group> &groups, unsigned w);
  /// A lower bound on the candidate's iteration (see run()).
  double iterationLowerBound(const std::vector<Group> &groups);
  Candidate evaluateUncached(const std::vector<Group> &groups, unsigned w);
  std::string deviceName(int device) const {
    return in.cluster->devices[device].name;
  }
  std::string groupName(const Group &g) const {
    std::string name = deviceName(g.devices.front());
    if (g.devices.size() > 1)
      name += ".." + deviceName(g.devices.back());
    return name;
  }
  LogicalResult emitError(const Twine &message) {
    in.module.emitError() << "pp-partition: " << message;
    return failure();
  }
  void writeReport(const std::vector<Candidate> &chosen,
                   const std::vector<std::vector<Candidate>> &tried,
                   llvm::raw_ostream &os);
  llvm::json::Value toJSON(const std::vector<Candidate> &chosen,
                           const std::vector<std::vector<Candidate>> &tried);

  pp::pipeline::TensorParallelPlanInput &in;
  std::map<unsigned, DegreeFacts> byDegree;
  std::string searchNote;
  /// Per virtual worker, the slowest link from one of its GPUs to a GPU of
  /// another worker (data parallelism's gradient all-reduce).
  std::vector<pp::cluster::LinkParams> crossLink;
  /// Candidates evaluated, by what they depend on (evaluationKey): virtual
  /// workers of the same devices get the same plan, each computed once.
  std::map<std::string, Candidate> evaluated;
  std::string evaluationKey(const std::vector<Group> &groups, unsigned w);
};

const DegreeFacts &Planner::facts(unsigned degree) {
  auto [it, inserted] = byDegree.try_emplace(degree);
  DegreeFacts &f = it->second;
  if (!inserted || degree <= 1)
    return f;
  SmallVector<Operation *> whole;
  auto groups = onnx::findTensorParallelGroups(in.func, degree, &whole);
  f.numGroups = groups.size();
  f.wholePairs = whole.size();
  for (const onnx::TensorParallelGroup &group : groups) {
    for (Operation *op : group.splitOps)
      f.splitOps.insert(op);
    double backward = 0;
    for (Value input : group.backwardReduced)
      backward += pp::getTensorBytes(input.getType());
    f.reduceBytes[group.row] = {
        static_cast<double>(pp::getTensorBytes(group.forwardReduced.getType())),
        backward};
    for (Value weight : group.splitWeights)
      collectReads(weight, f.splitReads);
    f.groups.emplace_back(group.splitOps.begin(), group.splitOps.end());
  }
  return f;
}

std::vector<std::pair<size_t, size_t>>
Planner::runsOf(const std::vector<int> &worker) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < worker.size(); ++i) {
    const auto &d = in.cluster->devices[worker[i]];
    if (!runs.empty()) {
      const auto &prev = in.cluster->devices[worker[i - 1]];
      if (prev.node == d.node && prev.kind == d.kind) {
        ++runs.back().second;
        continue;
      }
    }
    runs.push_back({i, 1});
  }
  return runs;
}

FailureOr<std::vector<Group>>
Planner::groupsFor(unsigned w,
                   const pp::pipeline::TensorParallelRequest &request) {
  const std::vector<int> &worker = in.workers[w];
  const pp::cluster::Cluster &cluster = *in.cluster;
  std::vector<Group> groups;
  auto where = [&](int device) {
    const auto &d = cluster.devices[device];
    std::string node = d.node < static_cast<int>(cluster.nodes.size())
                           ? cluster.nodes[d.node]
                           : std::to_string(d.node);
    return llvm::formatv("{0} GPUs on node {1}", d.kind, node).str();
  };
  std::string workerText =
      in.workers.size() > 1 ? " of virtual worker " + std::to_string(w) : "";
  if (request.degrees.size() == 1) {
    unsigned t = request.degrees.front();
    for (auto [start, length] : runsOf(worker)) {
      if (length % t != 0) {
        (void)emitError(llvm::formatv(
            "tp={0} does not divide the {1} {2}{3}: a tensor-parallel group "
            "is {0} GPUs of one kind on one node",
            t, length, where(worker[start]), workerText));
        return failure();
      }
      for (size_t i = start; i < start + length; i += t)
        groups.push_back(
            {std::vector<int>(worker.begin() + i, worker.begin() + i + t), t});
    }
    return groups;
  }
  size_t total = 0;
  for (unsigned t : request.degrees)
    total += t;
  if (total != worker.size()) {
    (void)emitError(llvm::formatv(
        "tp={0} puts {1} GPUs in {2} stages, but each pipeline (virtual "
        "worker) has {3}",
        in.options->tensorParallel, total, request.degrees.size(),
        worker.size()));
    return failure();
  }
  size_t next = 0;
  for (auto [s, t] : llvm::enumerate(request.degrees)) {
    Group g{std::vector<int>(worker.begin() + next, worker.begin() + next + t),
            t};
    for (int d : g.devices)
      if (cluster.devices[d].node != cluster.devices[g.devices.front()].node ||
          cluster.devices[d].kind != cluster.devices[g.devices.front()].kind) {
        (void)emitError(llvm::formatv(
            "tp={0}: stage {1}'s group would hold {2} and {3}{4}, which are "
            "not GPUs of one kind on one node",
            in.options->tensorParallel, s, deviceName(g.devices.front()),
            deviceName(d), workerText));
        return failure();
      }
    next += t;
    groups.push_back(std::move(g));
  }
  return groups;
}

std::string Planner::evaluationKey(const std::vector<Group> &groups,
                                   unsigned w) {
  // Each group by its devices (evaluate costs its first one, and its inside
  // link) and degree, the links between the groups' first devices, and the
  // worker's link to the other replicas.
  const pp::cluster::Cluster &cluster = *in.cluster;
  std::string key;
  std::vector<int> firsts;
  for (const Group &g : groups) {
    key += "|tp" + std::to_string(g.degree);
    cluster.appendPlanningKey(g.devices, key);
    firsts.push_back(g.devices.front());
  }
  key += "|m" + std::to_string(microBatches) + "|groups";
  cluster.appendPlanningKey(firsts, key);
  if (w < crossLink.size())
    key += "|cross" +
           std::to_string(llvm::bit_cast<uint64_t>(crossLink[w].bandwidth)) +
           ',' + std::to_string(llvm::bit_cast<uint64_t>(crossLink[w].latency));
  return key;
}

Candidate Planner::evaluate(const std::vector<Group> &groups, unsigned w) {
  std::string key = evaluationKey(groups, w);
  if (auto it = evaluated.find(key); it != evaluated.end()) {
    Candidate c = it->second;
    c.groups = groups;
    return c;
  }
  Candidate c = evaluateUncached(groups, w);
  evaluated.emplace(std::move(key), c);
  return c;
}

Candidate Planner::evaluateUncached(const std::vector<Group> &groups,
                                    unsigned w) {
  Candidate c;
  c.groups = groups;
  const pp::cluster::Cluster &cluster = *in.cluster;
  size_t k = groups.size();
  // Split bytes: what every degree in use splits.
  std::set<unsigned> used;
  for (const Group &g : groups)
    if (g.degree > 1)
      used.insert(g.degree);
  auto splitEverywhere = [&](auto member) {
    return [this, &used, member](Operation *op) {
      return !used.empty() && llvm::all_of(used, [&](unsigned t) {
        return (facts(t).*member).contains(op);
      });
    };
  };
  auto isSplitOp = splitEverywhere(&DegreeFacts::splitOps);
  auto isSplitRead = splitEverywhere(&DegreeFacts::splitReads);
  partition::PartitionGraph graph = in.graph;
  partition::PartitionOptions options = in.searchOptions;
  for (auto [v, op] : llvm::enumerate(in.nodeOps)) {
    partition::PartitionNode &node = graph.nodes[v];
    if (isSplitOp(op) && !llvm::any_of(used, [&](unsigned t) {
          return facts(t).reduceBytes.count(op);
        })) {
      node.splitActivationBytes = node.activationBytes;
      node.activationBytes = 0;
    }
    llvm::SmallDenseSet<Operation *, 2> seen;
    for (Value operand : op->getOperands()) {
      auto read = operand.getDefiningOp<onnx::GlobalReadOp>();
      if (!read || !isSplitRead(read.getOperation()) ||
          !seen.insert(read.getOperation()).second)
        continue;
      std::optional<uint64_t> bytes = trainableBytes(read);
      if (!bytes)
        continue;
      // Tied weights (read by several nodes) stay whole in their group.
      bool tied = llvm::any_of(options.tiedGroups, [&](const auto &group) {
        return llvm::is_contained(group.nodes, static_cast<unsigned>(v));
      });
      if (tied)
        continue;
      uint64_t state = *bytes * static_cast<uint64_t>(2.0 + in.stateFactor);
      uint64_t moved = std::min<uint64_t>(state, node.weightBytes);
      node.weightBytes -= moved;
      node.splitWeightBytes += moved;
    }
  }
  // A group's ops share a stage.
  llvm::DenseMap<Operation *, unsigned> nodeOf;
  for (auto [v, op] : llvm::enumerate(in.nodeOps))
    nodeOf[op] = v;
  for (unsigned t : used)
    for (const auto &group : facts(t).groups) {
      std::vector<unsigned> set;
      for (Operation *op : group)
        if (auto it = nodeOf.find(op); it != nodeOf.end())
          set.push_back(it->second);
      if (set.size() > 1)
        options.colocate.push_back(std::move(set));
    }

  // The devices: one per group.
  partition::PartitionDevices devices;
  std::vector<pp::cluster::LinkParams> inside;
  llvm::StringMap<unsigned> kindIndex;
  for (const Group &g : groups) {
    const auto &d = cluster.devices[g.devices.front()];
    partition::PartitionDevice device;
    device.name = groupName(g);
    device.kind = kindIndex.try_emplace(d.kind, kindIndex.size()).first->second;
    device.memoryBytes = static_cast<uint64_t>(d.memoryBytes);
    device.tensorParallel = g.degree;
    devices.addDevice(std::move(device));
    inside.push_back(cluster.slowestLink(g.devices));
  }
  for (unsigned a = 0; a < k; ++a)
    for (unsigned b = 0; b < k; ++b)
      if (a != b)
        devices.setDirectedLink(a, b,
                                cluster.bandwidth(groups[a].devices.front(),
                                                  groups[b].devices.front()),
                                cluster.latency(groups[a].devices.front(),
                                                groups[b].devices.front()));
  // Forward, backward and all-reduce seconds of node v on group g.
  struct NodeTimes {
    double forward, backward, reduce, reduceBytes;
    unsigned reduces;
  };
  auto timesOf = [&](unsigned v, unsigned g) {
    Operation *op = in.nodeOps[v];
    const auto &device = cluster.devices[groups[g].devices.front()];
    unsigned t = groups[g].degree;
    auto [forward, backward] = opTimes(op, device);
    NodeTimes times{forward, backward, 0, 0, 0};
    if (t <= 1)
      return times;
    const DegreeFacts &f = facts(t);
    if (f.splitOps.contains(op)) {
      times.forward /= t;
      times.backward /= t;
    }
    if (auto it = f.reduceBytes.find(op); it != f.reduceBytes.end()) {
      const auto &link = inside[g];
      double fwd = pp::cluster::ringAllReduceSeconds(
          it->second.first, t, link.bandwidth, link.latency);
      double bwd = pp::cluster::ringAllReduceSeconds(
          it->second.second, t, link.bandwidth, link.latency);
      times.forward += fwd;
      times.backward += bwd;
      times.reduce = fwd + bwd;
      times.reduceBytes = it->second.first + it->second.second;
      times.reduces = 2;
    }
    return times;
  };
  std::vector<NodeTimes> table(graph.size() * k);
  for (unsigned v = 0; v < graph.size(); ++v)
    for (unsigned g = 0; g < k; ++g)
      table[v * k + g] = timesOf(v, g);
  graph.timeFn = [&table, k](unsigned v, unsigned g) {
    const NodeTimes &t = table[v * k + g];
    return t.forward + t.backward;
  };

  // Memory sums that rule a candidate out before partitioning. Per GPU:
  // each group's memory once, split parts at the largest degree; over all
  // GPUs: every GPU's memory, every byte once.
  unsigned largest = 1;
  double capacity = 0, allGPUs = 0;
  for (const Group &g : groups) {
    largest = std::max(largest, g.degree);
    double memory =
        static_cast<double>(cluster.devices[g.devices.front()].memoryBytes);
    capacity += memory;
    allGPUs += g.degree * memory;
  }
  double resident = 0, residentOnce = 0, activations = 0;
  for (const partition::PartitionNode &node : graph.nodes) {
    resident +=
        node.weightBytes + static_cast<double>(node.splitWeightBytes) / largest;
    residentOnce += node.weightBytes + node.splitWeightBytes;
    activations += node.activationBytes +
                   static_cast<double>(node.splitActivationBytes) / largest;
  }
  for (const partition::TiedGroup &tied : options.tiedGroups) {
    resident += tied.stateBytes;
    residentOnce += tied.stateBytes;
  }
  // Weights, gradients and optimizer state alone: when they exceed the
  // GPUs' memory, no partition fits, recomputing or not.
  if (resident > capacity || residentOnce > allGPUs) {
    bool perGPU = residentOnce <= allGPUs;
    c.memoryNote = llvm::formatv(
        "tp={0}: the weights, gradients and optimizer state alone need at "
        "least {1}, more than the pipeline's GPUs hold ({2})",
        c.degreesText(),
        pp::formatMegabytes(
            static_cast<uint64_t>(perGPU ? resident : residentOnce)),
        pp::formatMegabytes(
            static_cast<uint64_t>(perGPU ? capacity : allGPUs)));
    return c;
  }
  // Every stage keeps at least one micro-batch of its activations: when the
  // GPUs cannot hold them that way, only the lean partition (stages keep
  // their inputs, --pp-recompute does the rest) is searched.
  bool recompute = in.options->recompute != "none";
  bool keepingCannotFit = recompute && resident + activations > capacity;
  auto partitionLean = [&] {
    partition::PartitionGraph lean = graph;
    for (auto &node : lean.nodes)
      node.activationBytes = node.splitActivationBytes = 0;
    auto leanResult = partition::partition(lean, devices, options);
    return std::make_pair(std::move(lean), std::move(leanResult));
  };
  llvm::Expected<partition::PartitionResult> result =
      llvm::Expected<partition::PartitionResult>(partition::PartitionResult{});
  if (keepingCannotFit) {
    auto [lean, leanResult] = partitionLean();
    result = std::move(leanResult);
    c.assumesRecompute = true;
    graph = std::move(lean);
  } else {
    result = partition::partition(graph, devices, options);
    if (result && !result->feasible && recompute) {
      auto [lean, retry] = partitionLean();
      if (retry && retry->feasible) {
        result = std::move(retry);
        c.assumesRecompute = true;
        graph = std::move(lean);
      } else if (!retry) {
        llvm::consumeError(retry.takeError());
      }
    }
  }
  if (!result) {
    c.error = llvm::toString(result.takeError());
    return c;
  }
  c.result = std::move(*result);
  c.feasible = c.result.feasible;

  // Per stage (stage s on group deviceOrder[s]).
  c.forward.assign(k, 0);
  c.backward.assign(k, 0);
  c.reduce.assign(k, 0);
  c.reduceBytes.assign(k, 0);
  c.reduces.assign(k, 0);
  c.gradReduce.assign(k, 0);
  std::vector<double> parameterBytes(k, 0);
  c.ops.assign(k, 0);
  std::vector<uint64_t> stash(k, 0), cut(k, 0);
  for (unsigned v = 0; v < graph.size(); ++v) {
    unsigned s = c.result.stageOf[v];
    unsigned g = c.result.deviceOrder[s];
    const NodeTimes &t = table[v * k + g];
    c.forward[s] += t.forward;
    c.backward[s] += t.backward;
    c.reduce[s] += t.reduce;
    c.reduceBytes[s] += t.reduceBytes;
    c.reduces[s] += t.reduces;
    ++c.ops[s];
    stash[s] += graph.nodes[v].activationBytes +
                graph.nodes[v].splitActivationBytes / groups[g].degree;
    // Weight bytes count weights, gradients and optimizer state.
    parameterBytes[s] += static_cast<double>(graph.nodes[v].weightBytes +
                                             graph.nodes[v].splitWeightBytes /
                                                 groups[g].degree) /
                         (2.0 + in.stateFactor);
  }
  // Data parallelism: a ring all-reduce of each stage's gradients (per GPU
  // of its group, 1/t of the split ones) over the dp replicas, on the
  // slowest link between this worker and the others, after the stage's last
  // backward (as --pp-plan-report models it).
  size_t dp = in.workers.size();
  if (dp > 1)
    for (unsigned s = 0; s < k; ++s)
      c.gradReduce[s] = pp::cluster::ringAllReduceSeconds(
          parameterBytes[s], static_cast<unsigned>(dp), crossLink[w].bandwidth,
          crossLink[w].latency);
  // Values crossing boundary s, each once (relayed stage to stage).
  std::vector<unsigned> lastStage(c.result.stageOf);
  for (auto [from, to] : graph.edges)
    lastStage[from] = std::max(lastStage[from], c.result.stageOf[to]);
  for (unsigned v = 0; v < graph.size(); ++v)
    for (unsigned b = c.result.stageOf[v]; b < lastStage[v]; ++b)
      cut[b] += graph.nodes[v].outputBytes;

  // The simulator: the schedule over the k groups.
  std::vector<bool> reduceStages(k, true);
  sched::Schedule schedule;
  std::string error;
  bool built =
      sched::isWeightVersioned(in.kind)
          ? sched::buildVersionedSchedule(
                in.kind, static_cast<int>(k), static_cast<int>(microBatches),
                static_cast<int>(in.updateEvery), in.options->verticalSync,
                schedule, error, dp > 1 ? &reduceStages : nullptr,
                static_cast<int>(microBatches))
          : sched::buildSchedule(in.kind, static_cast<int>(k),
                                 static_cast<int>(microBatches), 1, schedule,
                                 error, dp > 1 ? &reduceStages : nullptr);
  if (!built) {
    c.error = "schedule: " + error;
    c.feasible = false;
    return c;
  }
  sched::SimulationInput input;
  bool split = sched::usesSplitBackward(in.kind);
  for (unsigned s = 0; s < k; ++s) {
    sched::StageCosts costs;
    costs.forward = c.forward[s];
    costs.backward = c.backward[s];
    if (split) // a contraction's backward: dX and dW, equal GEMMs
      costs.backwardInput = costs.backwardWeight = c.backward[s] / 2;
    costs.activationBytes = s + 1 < k ? cut[s] : 0;
    costs.gradientBytes = s > 0 ? cut[s - 1] : 0;
    costs.stashBytes = stash[s];
    costs.gradReduce = c.gradReduce[s];
    uint64_t inflight =
        partition::inflightMicroBatches(options, s, static_cast<unsigned>(k));
    uint64_t held = inflight * stash[s];
    costs.staticBytes =
        c.result.stageMemory[s] > held ? c.result.stageMemory[s] - held : 0;
    input.stages.push_back(costs);
  }
  input.bandwidth.assign(k, std::vector<double>(k, 0));
  input.latency.assign(k, std::vector<double>(k, 0));
  for (unsigned a = 0; a < k; ++a)
    for (unsigned b = 0; b < k; ++b)
      if (a != b) {
        unsigned ga = c.result.deviceOrder[a], gb = c.result.deviceOrder[b];
        input.bandwidth[a][b] = devices.bandwidth(ga, gb);
        input.latency[a][b] = devices.latency(ga, gb);
      }
  sched::SimulationResult sim = sched::simulate(schedule, input);
  if (!sim.error.empty() || sim.deadlock) {
    c.error = "simulation: " + (sim.error.empty() ? "deadlock" : sim.error);
    c.feasible = false;
    return c;
  }
  c.iteration = sim.iterationTime;
  c.peak = sim.peakMemory;
  c.trace = std::make_shared<const Candidate::Trace>(
      Candidate::Trace{std::move(schedule), std::move(sim)});
  return c;
}

double Planner::iterationLowerBound(const std::vector<Group> &groups) {
  // W: the forward and backward of every op once, each on the group kind
  // and degree where it is fastest (transfers left out).
  std::vector<std::pair<int, unsigned>> kinds; // (first device, degree)
  for (const Group &g : groups)
    if (llvm::none_of(kinds, [&](const auto &kind) {
          return in.cluster->devices[kind.first].kind ==
                     in.cluster->devices[g.devices.front()].kind &&
                 kind.second == g.degree;
        }))
      kinds.push_back({g.devices.front(), g.degree});
  double work = 0;
  for (Operation *op : in.nodeOps) {
    double fastest = std::numeric_limits<double>::infinity();
    for (auto [device, t] : kinds) {
      const auto &dev = in.cluster->devices[device];
      auto [forward, backward] = opTimes(op, dev);
      double time = forward + backward;
      if (t > 1 && facts(t).splitOps.contains(op))
        time /= t;
      fastest = std::min(fastest, time);
    }
    work += fastest;
  }
  // One micro-batch passes every stage forward and back (not for schedules
  // that split the backward: their chain needs only its input half); every
  // stage runs m micro-batches, the busiest at least W / k of each.
  double m = static_cast<double>(microBatches);
  double k = static_cast<double>(groups.size());
  double perStage = m * work / k;
  return sched::usesSplitBackward(in.kind) ? perStage
                                           : std::max(work, perStage);
}

void Planner::computeCrossLinks() {
  crossLink.assign(in.workers.size(),
                   {std::numeric_limits<double>::infinity(), 0});
  for (unsigned a = 0; a < in.workers.size(); ++a)
    for (unsigned b = 0; b < in.workers.size(); ++b)
      if (a != b)
        for (int x : in.workers[a])
          for (int y : in.workers[b]) {
            crossLink[a].bandwidth =
                std::min(crossLink[a].bandwidth, in.cluster->bandwidth(x, y));
            crossLink[a].latency =
                std::max(crossLink[a].latency, in.cluster->latency(x, y));
          }
}

Planner::WorkersOutcome
Planner::planWorkers(const pp::pipeline::TensorParallelRequest &request,
                     bool quiet, double beat, std::vector<Candidate> &chosen,
                     std::vector<std::vector<Candidate>> &tried) {
  const pp::PartitionPassOptions &options = *in.options;
  chosen.clear();
  tried.assign(in.workers.size(), {});
  for (unsigned w = 0; w < in.workers.size(); ++w) {
    std::vector<std::vector<Group>> options3d;
    if (!request.automatic) {
      FailureOr<std::vector<Group>> groups = groupsFor(w, request);
      if (failed(groups))
        return WorkersOutcome::Error;
      options3d.push_back(std::move(*groups));
    } else {
      const std::vector<int> &worker = in.workers[w];
      auto runs = runsOf(worker);
      std::vector<std::vector<unsigned>> choices;
      size_t combinations = 1;
      for (auto [start, length] : runs) {
        std::vector<unsigned> divisors;
        for (unsigned t = 1; t <= std::min<size_t>(length, kMaxAutoDegree); ++t)
          if (length % t == 0)
            divisors.push_back(t);
        // Saturating: a worker of many nodes has more than 2^64.
        combinations =
            combinations > std::numeric_limits<size_t>::max() / divisors.size()
                ? std::numeric_limits<size_t>::max()
                : combinations * divisors.size();
        choices.push_back(std::move(divisors));
      }
      auto build = [&](const std::vector<unsigned> &perRun) {
        std::vector<Group> groups;
        for (auto [r, run] : llvm::enumerate(runs)) {
          unsigned t = perRun[r];
          for (size_t i = run.first; i < run.first + run.second; i += t)
            groups.push_back(
                {std::vector<int>(worker.begin() + i, worker.begin() + i + t),
                 t});
        }
        return groups;
      };
      if (combinations <= kMaxAutoCombinations) {
        searchNote = "a degree per node (run of GPUs of one kind on one node)";
        std::vector<unsigned> index(runs.size(), 0);
        while (true) {
          std::vector<unsigned> perRun;
          for (size_t r = 0; r < runs.size(); ++r)
            perRun.push_back(choices[r][index[r]]);
          options3d.push_back(build(perRun));
          size_t r = runs.size();
          while (r > 0 && ++index[r - 1] == choices[r - 1].size())
            index[--r] = 0;
          if (r == 0)
            break;
        }
      } else {
        std::string count = combinations == std::numeric_limits<size_t>::max()
                                ? std::string("over 2^64")
                                : std::to_string(combinations);
        searchNote = llvm::formatv("one degree per virtual worker ({0} "
                                   "per-node combinations are more than {1})",
                                   count, kMaxAutoCombinations);
        for (unsigned t = 1; t <= kMaxAutoDegree; ++t)
          if (llvm::all_of(runs, [&](auto run) { return run.second % t == 0; }))
            options3d.push_back(build(std::vector<unsigned>(runs.size(), t)));
      }
    }
    // Stages must fit the partitioner.
    llvm::erase_if(options3d, [](const std::vector<Group> &groups) {
      return groups.size() > partition::kMaxPartitionDevices;
    });
    if (options3d.empty()) {
      if (quiet)
        return WorkersOutcome::DoesNotFit;
      (void)emitError(llvm::formatv(
          "tp={0}: every grouping has more than {1} stages",
          options.tensorParallel, partition::kMaxPartitionDevices));
      return WorkersOutcome::Error;
    }
    // A per-stage list names the stages in order: no other order.
    if (!request.automatic && request.degrees.size() > 1)
      in.searchOptions.tryDeviceOrders = false;
    // Candidates by a lower bound of their iteration, which skips those
    // that cannot beat the best plan found (their partition is the work).
    std::vector<double> bounds;
    for (const std::vector<Group> &groups : options3d)
      bounds.push_back(iterationLowerBound(groups));
    std::vector<size_t> byBound(options3d.size());
    for (size_t i = 0; i < byBound.size(); ++i)
      byBound[i] = i;
    llvm::stable_sort(
        byBound, [&](size_t a, size_t b) { return bounds[a] < bounds[b]; });
    std::vector<Candidate> evaluatedHere(options3d.size());
    double bestSoFar = beat;
    for (size_t i : byBound) {
      if (bounds[i] >= bestSoFar) {
        Candidate c;
        c.groups = options3d[i];
        c.skipped = true;
        evaluatedHere[i] = std::move(c);
      } else {
        evaluatedHere[i] = evaluate(options3d[i], w);
        if (evaluatedHere[i].feasible)
          bestSoFar = std::min(bestSoFar, evaluatedHere[i].iteration);
      }
      evaluatedHere[i].lowerBound = bounds[i];
    }
    const Candidate *best = nullptr;
    for (Candidate &c : evaluatedHere)
      tried[w].push_back(std::move(c));
    for (const Candidate &c : tried[w])
      if (c.feasible && (!best || c.iteration < best->iteration * (1 - 1e-9)))
        best = &c;
    if (!best) {
      const Candidate &first = tried[w].front();
      if (quiet)
        return WorkersOutcome::DoesNotFit;
      if (!first.error.empty()) {
        (void)emitError("tp=" + options.tensorParallel +
                        ": partitioning failed: " + first.error);
        return WorkersOutcome::Error;
      }
      if (first.skipped)
        return WorkersOutcome::DoesNotFit;
      auto diag = in.func.emitError()
                  << "the model does not fit the cluster with tp="
                  << options.tensorParallel << ", schedule " << options.schedule
                  << " and " << microBatches << " micro-batches";
      if (in.workers.size() > 1)
        diag << " (virtual worker " << w << ")";
      // The candidate with the least shortfall.
      const Candidate *closest = nullptr;
      for (const Candidate &c : tried[w])
        if (c.error.empty() && !c.skipped && c.memoryNote.empty() &&
            (!closest || c.result.maxShortfall < closest->result.maxShortfall))
          closest = &c;
      if (!closest) {
        for (const Candidate &c : tried[w])
          if (!c.memoryNote.empty()) {
            diag << "; " << c.memoryNote;
            break;
          }
        if (request.automatic && !options.regroupWorkers &&
            in.workers.size() > 1)
          diag << " (regroup-workers=1 also plans fewer, larger virtual "
                  "workers)";
      }
      if (closest) {
        diag << "; the best plan, tp=" << closest->degreesText()
             << ", still needs";
        for (unsigned s = 0; s < closest->result.deviceOrder.size(); ++s) {
          unsigned g = closest->result.deviceOrder[s];
          if (closest->result.shortfall[g] == 0)
            continue;
          diag << llvm::formatv(
              " {0} more bytes per GPU on {1} (stage {2}: {3} of {4});",
              closest->result.shortfall[g], groupName(closest->groups[g]), s,
              pp::formatMegabytes(closest->result.stageMemory[s]),
              pp::formatMegabytes(static_cast<uint64_t>(
                  in.cluster->devices[closest->groups[g].devices.front()]
                      .memoryBytes)));
        }
      }
      return WorkersOutcome::DoesNotFit;
    }
    chosen.push_back(*best);
  }
  return WorkersOutcome::Planned;
}

LogicalResult Planner::run(const pp::pipeline::TensorParallelRequest &request) {
  const pp::PartitionPassOptions &options = *in.options;
  if (options.chunks != 1)
    return emitError("tp=" + options.tensorParallel +
                     " with chunks=" + std::to_string(options.chunks) +
                     ": interleaved and V-shaped schedules with tensor "
                     "parallelism are not built (chunks must be 1)");
  if (options.staleness != "-1")
    return emitError("tp=" + options.tensorParallel +
                     " with staleness=" + options.staleness +
                     ": Wave Synchronous Parallel with tensor parallelism "
                     "is not built");
  if (options.virtualWorkers == "auto")
    return emitError("tp=" + options.tensorParallel +
                     " with virtual-workers=auto is not built: name a policy "
                     "(np, ed, hd)");

  // Groupings of the virtual workers: as given, or (regroup-workers) also
  // every merge of g consecutive ones, each merged worker's GPUs by kind
  // (in the order the worker first lists them), then node.
  std::vector<std::vector<int>> given = in.workers;
  std::vector<unsigned> merges{1};
  if (options.regroupWorkers) {
    if (!request.automatic)
      return emitError("regroup-workers needs tp=auto (a fixed degree fixes "
                       "the groups of each worker)");
    for (unsigned g = 2; g <= given.size(); ++g)
      if (given.size() % g == 0)
        merges.push_back(g);
  }
  auto merged = [&](unsigned g) {
    std::vector<std::vector<int>> workers;
    for (size_t first = 0; first < given.size(); first += g) {
      std::vector<int> worker;
      for (size_t w = first; w < first + g; ++w)
        worker.insert(worker.end(), given[w].begin(), given[w].end());
      if (g > 1) {
        std::vector<std::string> kinds;
        for (int d : worker)
          if (!llvm::is_contained(kinds, in.cluster->devices[d].kind))
            kinds.push_back(in.cluster->devices[d].kind);
        auto rank = [&](int d) {
          return std::make_pair(llvm::find(kinds, in.cluster->devices[d].kind) -
                                    kinds.begin(),
                                in.cluster->devices[d].node);
        };
        llvm::stable_sort(worker,
                          [&](int a, int b) { return rank(a) < rank(b); });
      }
      workers.push_back(std::move(worker));
    }
    return workers;
  };
  std::vector<Candidate> chosen;
  std::vector<std::vector<Candidate>> tried;
  double bestIteration = std::numeric_limits<double>::infinity();
  auto useGrouping = [&](unsigned g) {
    in.workers = merged(g);
    microBatches = static_cast<unsigned>(options.microBatches) * g;
    in.searchOptions.microBatches = microBatches;
    computeCrossLinks();
  };
  unsigned bestMerge = 1;
  std::string bestNote;
  for (unsigned g : merges) {
    useGrouping(g);
    std::vector<Candidate> chosenHere;
    std::vector<std::vector<Candidate>> triedHere;
    WorkersOutcome outcome = planWorkers(request, /*quiet=*/merges.size() > 1,
                                         bestIteration, chosenHere, triedHere);
    if (outcome == WorkersOutcome::Error)
      return failure();
    Grouping record{static_cast<unsigned>(in.workers.size()),
                    static_cast<unsigned>(in.workers.front().size()),
                    microBatches,
                    false,
                    std::numeric_limits<double>::infinity(),
                    ""};
    if (outcome == WorkersOutcome::Planned) {
      record.planned = true;
      record.iteration = 0;
      for (const Candidate &c : chosenHere)
        record.iteration = std::max(record.iteration, c.iteration);
      record.degrees = chosenHere.front().degreesText();
      if (record.iteration < bestIteration * (1 - 1e-9)) {
        bestIteration = record.iteration;
        bestMerge = g;
        bestNote = searchNote;
        chosen = std::move(chosenHere);
        tried = std::move(triedHere);
      }
    }
    groupings.push_back(record);
  }
  if (chosen.empty()) {
    // Nothing fits: the error of the workers as given.
    useGrouping(1);
    if (merges.size() > 1 &&
        planWorkers(request, /*quiet=*/false,
                    std::numeric_limits<double>::infinity(), chosen,
                    tried) == WorkersOutcome::Planned)
      return emitError("regroup-workers: inconsistent search");
    return failure();
  }
  useGrouping(bestMerge);
  searchNote = bestNote;

  // Annotate the module with worker 0's plan.
  const Candidate &plan = chosen.front();
  ModuleOp module = in.module;
  Builder b(module.getContext());
  for (auto [node, op] : llvm::enumerate(in.nodeOps))
    pp::pipeline::setStage(op, plan.result.stageOf[node]);
  for (Operation &op : in.func.getBody().front().without_terminator()) {
    if (!isa<onnx::ConstantOp, onnx::GlobalReadOp>(op))
      continue;
    std::optional<int64_t> first;
    for (Operation *user : op.getUsers())
      if (std::optional<int64_t> stage = pp::pipeline::getStage(user))
        first = first ? std::min(*first, *stage) : *stage;
    pp::pipeline::setStage(&op, first.value_or(0));
  }
  SmallVector<Attribute> order;
  SmallVector<int64_t> degrees;
  for (unsigned g : plan.result.deviceOrder) {
    order.push_back(
        b.getStringAttr(deviceName(plan.groups[g].devices.front())));
    degrees.push_back(plan.groups[g].degree);
  }
  unsigned dataParallel = in.workers.size();
  pp::pipeline::setPlan(
      module, pp::pipeline::PlanAttr::get(
                  module.getContext(), in.kind, microBatches, 1,
                  static_cast<int64_t>(order.size()), b.getArrayAttr(order),
                  dataParallel, plan.maxDegree(), /*staleness=*/-1, /*wave=*/1,
                  b.getArrayAttr({}), in.updateEvery, options.verticalSync));
  pp::pipeline::setTensorParallelStages(module, degrees);
  if (dataParallel > 1 && llvm::all_of(chosen, [&](const Candidate &c) {
        return c.groups.size() == plan.groups.size();
      })) {
    std::vector<std::string> names;
    for (unsigned r = 1; r < chosen.size(); ++r)
      for (unsigned g : chosen[r].result.deviceOrder)
        names.push_back(deviceName(chosen[r].groups[g].devices.front()));
    pp::pipeline::setReplicaDevices(module, names);
  }

  if (!options.reportFile.empty() &&
      failed(pp::writeReportFile(
          module, options.reportFile,
          [&](llvm::raw_ostream &os) { writeReport(chosen, tried, os); })))
    return failure();
  if (!options.planJson.empty()) {
    std::string error;
    // The plan directory of --pp-compile plan-dir= may not exist yet.
    StringRef parent = llvm::sys::path::parent_path(options.planJson);
    if (!parent.empty() && options.planJson != "-")
      (void)llvm::sys::fs::create_directories(parent);
    auto out = pp::openReportFile(options.planJson, &error);
    if (!out) {
      module.emitError() << "cannot write plan-json: " << error;
      return failure();
    }
    out->os() << llvm::formatv("{0:2}", toJSON(chosen, tried)) << "\n";
    if (failed(pp::keepReportFile(module, *out, options.planJson)))
      return failure();
  }
  if (!options.timeline.empty() && plan.trace) {
    StringRef parent = llvm::sys::path::parent_path(options.timeline);
    if (!parent.empty())
      (void)llvm::sys::fs::create_directories(parent);
    std::vector<std::string> names;
    for (unsigned g : plan.result.deviceOrder)
      names.push_back("tp=" + std::to_string(plan.groups[g].degree) + " " +
                      groupName(plan.groups[g]));
    SmallString<256> svgPath(options.timeline);
    llvm::sys::path::replace_extension(svgPath, "svg");
    std::ofstream trace(options.timeline), svg(svgPath.str().str());
    if (!trace || !svg) {
      module.emitError() << "cannot write the timeline '" << options.timeline
                         << "' or '" << svgPath << "'";
      return failure();
    }
    sched::writeChromeTrace(plan.trace->schedule, plan.trace->result, names,
                            trace);
    sched::writeTimelineSVG(plan.trace->schedule, plan.trace->result, names,
                            svg);
    trace.close();
    svg.close();
    if (!trace || !svg) {
      module.emitError() << "cannot write the timeline '" << options.timeline
                         << "' or '" << svgPath << "' (disk full?)";
      return failure();
    }
  }
  return success();
}

/// "(pp, tp, dp)" of a candidate.
std::string triple(const Candidate &c, size_t dataParallel) {
  return llvm::formatv("({0}, {1}, {2})", c.groups.size(), c.degreesText(),
                       dataParallel);
}

uint64_t peakOf(const Candidate &c) {
  uint64_t peak = 0;
  for (uint64_t bytes : c.peak)
    peak = std::max(peak, bytes);
  return peak;
}

void Planner::writeReport(const std::vector<Candidate> &chosen,
                          const std::vector<std::vector<Candidate>> &tried,
                          llvm::raw_ostream &os) {
  const pp::PartitionPassOptions &options = *in.options;
  size_t dp = chosen.size();
  const Candidate &plan = chosen.front();
  os << llvm::formatv("== pipeline plan: {0} stages, schedule {1}, {2} "
                      "micro-batches, {3} ==\n",
                      plan.groups.size(), options.schedule, microBatches,
                      plan.result.granularity);
  for (const std::string &note : in.notes)
    os << note << "\n";
  size_t gpus = 0;
  for (const Group &g : plan.groups)
    gpus += g.devices.size();
  double slowest = 0;
  for (const Candidate &c : chosen)
    slowest = std::max(slowest, c.iteration);
  os << llvm::formatv("3D plan: (pp, tp, dp) = {0} on {1} GPUs: predicted "
                      "iteration {2:f3} ms (simulated {3}), peak {4} per GPU\n",
                      triple(plan, dp), gpus * dp, slowest * 1e3,
                      options.schedule, pp::formatMegabytes(peakOf(plan)));
  if (dp > 1)
    os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                        "(virtual workers), gradients all-reduced per stage\n",
                        dp);
  if (groupings.size() > 1) {
    os << "regroup-workers: chose " << dp << " virtual workers of "
       << in.workers.front().size() << " GPUs among";
    for (auto [i, g] : llvm::enumerate(groupings)) {
      os << (i ? ";" : "") << " " << g.workers << " x " << g.gpusPerWorker;
      if (g.planned)
        os << llvm::formatv(" (tp={0}, {1} micro-batches each) {2:f3} ms",
                            g.degrees, g.microBatches, g.iteration * 1e3);
      else
        os << " does not fit or cannot beat the best";
    }
    os << "\n";
  }
  for (auto [w, list] : llvm::enumerate(tried)) {
    if (list.size() < 2)
      continue;
    os << "tp=auto"
       << (dp > 1 ? " (virtual worker " + std::to_string(w) + ")"
                  : std::string())
       << ", " << searchNote << ": chose tp=" << chosen[w].degreesText()
       << " among";
    for (auto [i, c] : llvm::enumerate(list)) {
      os << (i ? ";" : "") << " " << triple(c, dp) << " ";
      if (c.skipped)
        os << llvm::formatv("skipped (at least {0:f3} ms)", c.lowerBound * 1e3);
      else if (!c.error.empty())
        os << "failed";
      else if (!c.feasible)
        os << "does not fit";
      else
        os << llvm::formatv("{0:f3} ms", c.iteration * 1e3);
    }
    os << "\n";
  }
  // What the degree splits: the chosen plan's largest degree, or the
  // largest tried.
  unsigned shown = plan.maxDegree();
  if (shown == 1)
    for (const auto &list : tried)
      for (const Candidate &c : list)
        shown = std::max(shown, c.maxDegree());
  if (shown > 1) {
    const DegreeFacts &f = facts(shown);
    const auto &device = in.cluster->devices[in.workers.front().front()];
    double all = 0, split = 0;
    for (Operation *op : in.nodeOps) {
      auto [forward, backward] = opTimes(op, device);
      double t = forward + backward;
      all += t;
      if (f.splitOps.contains(op))
        split += t;
    }
    os << llvm::formatv(
        "tensor-parallel groups at tp={0}: {1} (--pp-tensor-parallel's), "
        "splitting {2} of {3} ops, {4:f1}% of the compute on one {5}; "
        "{6} pair(s) stay whole; the rest is replicated\n",
        shown, f.numGroups, f.splitOps.size(), in.nodeOps.size(),
        all > 0 ? 100 * split / all : 0.0, device.kind, f.wholePairs);
  }
  for (unsigned s = 0; s < plan.groups.size(); ++s) {
    unsigned g = plan.result.deviceOrder[s];
    const Group &group = plan.groups[g];
    os << llvm::formatv(
        "stage {0}: tp={1} {2} {3,4} ops  {4,10:f3} ms  {5,10} of {6} per "
        "GPU (forward {7:f3} ms, backward {8:f3} ms, all-reduce {9:f3} ms)\n",
        s, group.degree, groupName(group), plan.ops[s],
        plan.result.stageTime[s] * 1e3,
        pp::formatMegabytes(plan.result.stageMemory[s]),
        pp::formatMegabytes(static_cast<uint64_t>(
            in.cluster->devices[group.devices.front()].memoryBytes)),
        plan.forward[s] * 1e3, plan.backward[s] * 1e3, plan.reduce[s] * 1e3);
    if (dp > 1)
      os << llvm::formatv("  data-parallel gradient all-reduce {0:f3} ms\n",
                          plan.gradReduce[s] * 1e3);
  }
  // The device orders, when the search's limits left some out.
  std::string orders =
      plan.result.ordersTruncated
          ? llvm::formatv("; {0} device order(s) tried{1}",
                          plan.result.ordersTried, plan.result.ordersNote())
                .str()
          : "";
  os << llvm::formatv("bottleneck {0:f3} ms per micro-batch{1}{2}\n",
                      plan.result.bottleneck * 1e3,
                      plan.assumesRecompute
                          ? "; fits only with recomputation (memory "
                            "counts stage inputs, not activations)"
                          : "",
                      orders);
  for (unsigned w = 1; w < chosen.size(); ++w)
    os << llvm::formatv("virtual worker {0}: (pp, tp) = ({1}, {2}), "
                        "bottleneck {3:f3} ms, predicted iteration {4:f3} "
                        "ms\n",
                        w, chosen[w].groups.size(), chosen[w].degreesText(),
                        chosen[w].result.bottleneck * 1e3,
                        chosen[w].iteration * 1e3);
  // The degree above 1, if the plan has one only: a stage-wise mix of it
  // and 1 runs like one degree everywhere.
  unsigned split = 1;
  bool runnable = true;
  for (const auto &worker : chosen)
    for (const auto &group : worker.groups) {
      if (group.degree > 1 && split > 1 && group.degree != split)
        runnable = false;
      if (group.degree > 1)
        split = group.degree;
    }
  unsigned first = chosen.front().groups.front().degree;
  bool uniform = llvm::all_of(chosen, [&](const auto &worker) {
    return llvm::all_of(worker.groups,
                        [&](const auto &g) { return g.degree == first; });
  });
  if (uniform)
    os << "one degree for every stage: --pp-compile tp=" << first
       << " runs it (pp-interpret, generated programs under mpirun)\n";
  else if (runnable)
    os << "a stage-wise mix of tp=" << split
       << " and tp=1: --pp-compile with this list runs it (pp-interpret, "
          "generated programs under mpirun)\n";
  else
    os << "different degrees above 1 per stage: a plan (running it is not "
          "built yet)\n";
}

llvm::json::Value
Planner::toJSON(const std::vector<Candidate> &chosen,
                const std::vector<std::vector<Candidate>> &tried) {
  const pp::PartitionPassOptions &options = *in.options;
  const Candidate &plan = chosen.front();
  auto stagesOf = [&](const Candidate &c) {
    llvm::json::Array stages;
    for (unsigned s = 0; s < c.groups.size(); ++s) {
      unsigned g = c.result.deviceOrder[s];
      const Group &group = c.groups[g];
      llvm::json::Array names;
      for (int d : group.devices)
        names.push_back(deviceName(d));
      pp::cluster::LinkParams link = in.cluster->slowestLink(group.devices);
      const auto &device = in.cluster->devices[group.devices.front()];
      stages.push_back(llvm::json::Object{
          {"stage", s},
          {"tp", group.degree},
          {"devices", std::move(names)},
          {"kind", device.kind},
          {"ops", c.ops[s]},
          {"forward_seconds", c.forward[s]},
          {"backward_seconds", c.backward[s]},
          {"allreduce_seconds", c.reduce[s]},
          {"allreduce_bytes", c.reduceBytes[s]},
          {"allreduce_count", c.reduces[s]},
          {"dp_allreduce_seconds", c.gradReduce[s]},
          {"group_link_bandwidth",
           std::isfinite(link.bandwidth) ? link.bandwidth : 0.0},
          {"group_link_latency", link.latency},
          {"time_seconds", c.result.stageTime[s]},
          {"memory_bytes_per_gpu", c.result.stageMemory[s]},
          {"peak_memory_bytes_per_gpu", s < c.peak.size() ? c.peak[s] : 0},
          {"memory_capacity_bytes", device.memoryBytes},
      });
    }
    return stages;
  };
  llvm::json::Array degrees;
  for (unsigned g : plan.result.deviceOrder)
    degrees.push_back(plan.groups[g].degree);
  llvm::json::Array candidates;
  for (auto [w, list] : llvm::enumerate(tried))
    for (const Candidate &c : list) {
      llvm::json::Array tp;
      for (unsigned g = 0; g < c.groups.size(); ++g)
        tp.push_back(c.groups[g].degree);
      llvm::json::Object entry{{"worker", w},
                               {"pp", c.groups.size()},
                               {"tp", std::move(tp)},
                               {"feasible", c.feasible},
                               {"skipped", c.skipped},
                               {"iteration_lower_bound_seconds", c.lowerBound}};
      if (c.feasible) {
        entry["iteration_seconds"] = c.iteration;
        entry["bottleneck_seconds"] = c.result.bottleneck;
        entry["stages"] = stagesOf(c);
      }
      candidates.push_back(std::move(entry));
    }
  double slowest = 0;
  for (const Candidate &c : chosen)
    slowest = std::max(slowest, c.iteration);
  llvm::json::Array workerList;
  for (const std::vector<int> &worker : in.workers) {
    llvm::json::Array names;
    for (int d : worker)
      names.push_back(deviceName(d));
    workerList.push_back(std::move(names));
  }
  llvm::json::Array groupingList;
  for (const Grouping &g : groupings) {
    llvm::json::Object entry{{"workers", g.workers},
                             {"gpus_per_worker", g.gpusPerWorker},
                             {"planned", g.planned}};
    if (g.planned)
      entry["iteration_seconds"] = g.iteration;
    groupingList.push_back(std::move(entry));
  }
  return llvm::json::Object{
      {"groupings", std::move(groupingList)},
      {"virtual_workers", std::move(workerList)},
      {"schedule", options.schedule},
      {"micro_batches", microBatches},
      {"pp", plan.groups.size()},
      {"tp", plan.maxDegree()},
      {"tp_per_stage", std::move(degrees)},
      {"dp", chosen.size()},
      {"tp_request", options.tensorParallel},
      {"execution", "not built"},
      {"prediction",
       llvm::json::Object{{"iteration_seconds", slowest},
                          {"bottleneck_seconds", plan.result.bottleneck},
                          {"peak_memory_bytes_per_gpu", peakOf(plan)}}},
      {"stages", stagesOf(plan)},
      {"candidates", std::move(candidates)},
  };
}

} // namespace

LogicalResult
pp::pipeline::planTensorParallel(TensorParallelPlanInput &input,
                                 const TensorParallelRequest &request) {
  return Planner(input).run(request);
}
