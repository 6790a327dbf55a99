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

/// Forward, backward and all-reduce seconds of one node on one group.
struct NodeTimes {
  double forward, backward, reduce, reduceBytes;
  unsigned reduces;
};

/// The NodeTimes of every node of a candidate on each of its groups.
struct NodeTimeTable {
  std::vector<NodeTimes> times; ///< [node * numGroups + group].
  size_t numGroups = 0;
  const NodeTimes &at(unsigned v, unsigned g) const {
    return times[v * numGroups + g];
  }
};

/// A candidate's groups as the partitioner's devices (each costed as its
/// first GPU), and each group's slowest inside link (its all-reduces).
struct GroupDevices {
  partition::PartitionDevices devices;
  std::vector<pp::cluster::LinkParams> inside; ///< Per group.
};

/// Memory sums that rule a candidate out before partitioning. Per GPU:
/// each group's memory once, split parts at the largest degree; over all
/// GPUs: every GPU's memory, every byte once.
struct MemorySums {
  double capacity = 0, allGPUs = 0;
  double resident = 0, residentOnce = 0, activations = 0;
};

/// Per stage of a partitioned candidate, the bytes the simulator keeps and
/// sends.
struct StageBytes {
  std::vector<uint64_t> stash; ///< Activations kept per micro-batch.
  std::vector<uint64_t> cut;   ///< Values crossing the boundary after it.
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
  /// tp=auto's groupings of `worker` (sets searchNote to how it chose them).
  std::vector<std::vector<Group>> autoGroupings(const std::vector<int> &worker);
  /// Evaluates the groupings of worker `w` by their iteration's lower bound,
  /// the ones that cannot beat `beat` or a plan found before them skipped.
  std::vector<Candidate>
  evaluateByBound(const std::vector<std::vector<Group>> &groupings, unsigned w,
                  double beat);
  /// Why no candidate of worker `w` fits (a diagnostic unless `quiet`).
  WorkersOutcome
  explainNoPlan(const pp::pipeline::TensorParallelRequest &request, bool quiet,
                unsigned w, const std::vector<Candidate> &candidates);
  /// The memory `closest` still lacks, per stage, appended to `diag`.
  void explainShortfall(InFlightDiagnostic &diag, const Candidate &closest);

  /// The best plan over the groupings run() searches.
  struct ChosenPlan {
    std::vector<Candidate> chosen;             ///< Per virtual worker.
    std::vector<std::vector<Candidate>> tried; ///< Per virtual worker.
    unsigned merge = 1; ///< Given workers merged into each of its workers.
    std::string searchNote;
  };
  /// Rejects the options tensor parallelism is not built for.
  LogicalResult checkSupported();
  /// The numbers of given workers run() merges into one (1: as given).
  FailureOr<std::vector<unsigned>>
  mergeCounts(const pp::pipeline::TensorParallelRequest &request,
              size_t numGiven);
  /// The `given` workers merged by `g` consecutive ones.
  std::vector<std::vector<int>>
  mergedWorkers(const std::vector<std::vector<int>> &given, unsigned g) const;
  /// Makes the merge of `g` given workers the one planned.
  void useGrouping(const std::vector<std::vector<int>> &given, unsigned g);
  /// Plans every merge of `merges` and keeps the fastest in `best` (left
  /// empty when none fits); fails on an error.
  LogicalResult
  searchGroupings(const pp::pipeline::TensorParallelRequest &request,
                  const std::vector<std::vector<int>> &given,
                  ArrayRef<unsigned> merges, ChosenPlan &best);
  /// Sets the stages, the plan and the replicas' devices on the module.
  void annotateModule(const std::vector<Candidate> &chosen);
  LogicalResult writePlanJson(const std::vector<Candidate> &chosen,
                              const std::vector<std::vector<Candidate>> &tried);
  /// The Chrome trace and SVG of the simulated iteration of `plan`.
  LogicalResult writeTimeline(const Candidate &plan);
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
  /// Whether every degree of `used` (one at least) has `op` in `member`.
  bool splitByAll(const std::set<unsigned> &used,
                  llvm::DenseSet<Operation *> DegreeFacts::*member,
                  Operation *op);
  /// Moves the bytes every degree of `used` splits to the nodes' split
  /// activation and weight bytes.
  void moveSplitBytes(const std::set<unsigned> &used,
                      partition::PartitionGraph &graph,
                      ArrayRef<partition::TiedGroup> tiedGroups);
  /// Colocates the ops of each group of the degrees in `used`.
  void colocateGroups(const std::set<unsigned> &used,
                      partition::PartitionOptions &options);
  GroupDevices groupDevices(const std::vector<Group> &groups) const;
  /// The times of `op` on `group`, whose inside link is `inside`.
  NodeTimes nodeTimes(Operation *op, const Group &group,
                      const pp::cluster::LinkParams &inside);
  NodeTimeTable nodeTimeTable(const std::vector<Group> &groups, size_t numNodes,
                              ArrayRef<pp::cluster::LinkParams> inside);
  MemorySums memorySums(const std::vector<Group> &groups,
                        const partition::PartitionGraph &graph,
                        ArrayRef<partition::TiedGroup> tiedGroups);
  /// Sums the partitioned candidate's node costs per stage into `c` (and
  /// worker `w`'s data-parallel all-reduces); returns its stage bytes.
  StageBytes sumStages(Candidate &c, const partition::PartitionGraph &graph,
                       const NodeTimeTable &table, unsigned w);
  /// The schedule of `k` stages the candidates are simulated with.
  bool buildCandidateSchedule(size_t k, sched::Schedule &schedule,
                              std::string &error);
  sched::SimulationInput simulationInput(
      const Candidate &c, const partition::PartitionOptions &options,
      const partition::PartitionDevices &devices, const StageBytes &bytes);
  /// Simulates the partitioned candidate: its iteration, peak memory and
  /// trace, or its error.
  void simulateCandidate(Candidate &c,
                         const partition::PartitionOptions &options,
                         const partition::PartitionDevices &devices,
                         const StageBytes &bytes);
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
  /// The report's parts, in its order.
  void writeSummary(const std::vector<Candidate> &chosen,
                    llvm::raw_ostream &os);
  void writeGroupings(size_t dp, llvm::raw_ostream &os);
  void writeCandidates(const std::vector<Candidate> &chosen,
                       const std::vector<std::vector<Candidate>> &tried,
                       llvm::raw_ostream &os);
  /// What the groups split at the largest degree of the plan (or tried).
  void writeSplitSummary(const Candidate &plan,
                         const std::vector<std::vector<Candidate>> &tried,
                         llvm::raw_ostream &os);
  void writeStages(const Candidate &plan, size_t dp, llvm::raw_ostream &os);
  llvm::json::Value toJSON(const std::vector<Candidate> &chosen,
                           const std::vector<std::vector<Candidate>> &tried);
  /// The stages of `c` as plan-json lists them.
  llvm::json::Array stagesJSON(const Candidate &c);
  /// Every candidate tried, per worker.
  llvm::json::Array
  candidatesJSON(const std::vector<std::vector<Candidate>> &tried);

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

/// The degrees above 1 of `groups`.
std::set<unsigned> degreesInUse(const std::vector<Group> &groups) {
  std::set<unsigned> used;
  for (const Group &g : groups)
    if (g.degree > 1)
      used.insert(g.degree);
  return used;
}

bool Planner::splitByAll(const std::set<unsigned> &used,
                         llvm::DenseSet<Operation *> DegreeFacts::*member,
                         Operation *op) {
  return !used.empty() && llvm::all_of(used, [&](unsigned t) {
    return (facts(t).*member).contains(op);
  });
}

void Planner::moveSplitBytes(const std::set<unsigned> &used,
                             partition::PartitionGraph &graph,
                             ArrayRef<partition::TiedGroup> tiedGroups) {
  for (auto [v, op] : llvm::enumerate(in.nodeOps)) {
    partition::PartitionNode &node = graph.nodes[v];
    if (splitByAll(used, &DegreeFacts::splitOps, op) &&
        !llvm::any_of(
            used, [&](unsigned t) { return facts(t).reduceBytes.count(op); })) {
      node.splitActivationBytes = node.activationBytes;
      node.activationBytes = 0;
    }
    llvm::SmallDenseSet<Operation *, 2> seen;
    for (Value operand : op->getOperands()) {
      auto read = operand.getDefiningOp<onnx::GlobalReadOp>();
      if (!read ||
          !splitByAll(used, &DegreeFacts::splitReads, read.getOperation()) ||
          !seen.insert(read.getOperation()).second)
        continue;
      std::optional<uint64_t> bytes = trainableBytes(read);
      if (!bytes)
        continue;
      // Tied weights (read by several nodes) stay whole in their group.
      bool tied = llvm::any_of(tiedGroups, [&](const auto &group) {
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
}

void Planner::colocateGroups(const std::set<unsigned> &used,
                             partition::PartitionOptions &options) {
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
}

GroupDevices Planner::groupDevices(const std::vector<Group> &groups) const {
  const pp::cluster::Cluster &cluster = *in.cluster;
  GroupDevices result;
  llvm::StringMap<unsigned> kindIndex;
  for (const Group &g : groups) {
    const auto &d = cluster.devices[g.devices.front()];
    partition::PartitionDevice device;
    device.name = groupName(g);
    device.kind = kindIndex.try_emplace(d.kind, kindIndex.size()).first->second;
    device.memoryBytes = static_cast<uint64_t>(d.memoryBytes);
    device.tensorParallel = g.degree;
    result.devices.addDevice(std::move(device));
    result.inside.push_back(cluster.slowestLink(g.devices));
  }
  size_t k = groups.size();
  for (unsigned a = 0; a < k; ++a)
    for (unsigned b = 0; b < k; ++b)
      if (a != b)
        result.devices.setDirectedLink(
            a, b,
            cluster.bandwidth(groups[a].devices.front(),
                              groups[b].devices.front()),
            cluster.latency(groups[a].devices.front(),
                            groups[b].devices.front()));
  return result;
}

NodeTimes Planner::nodeTimes(Operation *op, const Group &group,
                             const pp::cluster::LinkParams &inside) {
  const auto &device = in.cluster->devices[group.devices.front()];
  unsigned t = group.degree;
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
    double fwd = pp::cluster::ringAllReduceSeconds(
        it->second.first, t, inside.bandwidth, inside.latency);
    double bwd = pp::cluster::ringAllReduceSeconds(
        it->second.second, t, inside.bandwidth, inside.latency);
    times.forward += fwd;
    times.backward += bwd;
    times.reduce = fwd + bwd;
    times.reduceBytes = it->second.first + it->second.second;
    times.reduces = 2;
  }
  return times;
}

NodeTimeTable Planner::nodeTimeTable(const std::vector<Group> &groups,
                                     size_t numNodes,
                                     ArrayRef<pp::cluster::LinkParams> inside) {
  NodeTimeTable table;
  table.numGroups = groups.size();
  table.times.resize(numNodes * table.numGroups);
  for (unsigned v = 0; v < numNodes; ++v)
    for (unsigned g = 0; g < table.numGroups; ++g)
      table.times[v * table.numGroups + g] =
          nodeTimes(in.nodeOps[v], groups[g], inside[g]);
  return table;
}

MemorySums Planner::memorySums(const std::vector<Group> &groups,
                               const partition::PartitionGraph &graph,
                               ArrayRef<partition::TiedGroup> tiedGroups) {
  MemorySums sums;
  unsigned largest = 1;
  for (const Group &g : groups) {
    largest = std::max(largest, g.degree);
    double memory =
        static_cast<double>(in.cluster->devices[g.devices.front()].memoryBytes);
    sums.capacity += memory;
    sums.allGPUs += g.degree * memory;
  }
  for (const partition::PartitionNode &node : graph.nodes) {
    sums.resident +=
        node.weightBytes + static_cast<double>(node.splitWeightBytes) / largest;
    sums.residentOnce += node.weightBytes + node.splitWeightBytes;
    sums.activations +=
        node.activationBytes +
        static_cast<double>(node.splitActivationBytes) / largest;
  }
  for (const partition::TiedGroup &tied : tiedGroups) {
    sums.resident += tied.stateBytes;
    sums.residentOnce += tied.stateBytes;
  }
  return sums;
}

/// Why the weights of a candidate with degrees `degrees` cannot fit.
std::string weightsNote(const MemorySums &memory, StringRef degrees) {
  bool perGPU = memory.residentOnce <= memory.allGPUs;
  return llvm::formatv(
      "tp={0}: the weights, gradients and optimizer state alone need at "
      "least {1}, more than the pipeline's GPUs hold ({2})",
      degrees,
      pp::formatMegabytes(static_cast<uint64_t>(perGPU ? memory.resident
                                                       : memory.residentOnce)),
      pp::formatMegabytes(
          static_cast<uint64_t>(perGPU ? memory.capacity : memory.allGPUs)));
}

/// Partitions `graph`, or its lean form (activations left to recomputation)
/// when `keepingCannotFit` or when only that form fits; `graph` becomes the
/// graph the result partitions and `assumesRecompute` says which it is.
llvm::Expected<partition::PartitionResult>
partitionCandidate(partition::PartitionGraph &graph,
                   const partition::PartitionDevices &devices,
                   const partition::PartitionOptions &options, bool recompute,
                   bool keepingCannotFit, bool &assumesRecompute) {
  auto partitionLean = [&] {
    partition::PartitionGraph lean = graph;
    for (auto &node : lean.nodes)
      node.activationBytes = node.splitActivationBytes = 0;
    auto leanResult = partition::partition(lean, devices, options);
    return std::make_pair(std::move(lean), std::move(leanResult));
  };
  if (keepingCannotFit) {
    auto [lean, leanResult] = partitionLean();
    assumesRecompute = true;
    graph = std::move(lean);
    return std::move(leanResult);
  }
  llvm::Expected<partition::PartitionResult> result =
      partition::partition(graph, devices, options);
  if (result && !result->feasible && recompute) {
    auto [lean, retry] = partitionLean();
    if (retry && retry->feasible) {
      assumesRecompute = true;
      graph = std::move(lean);
      return std::move(retry);
    }
    if (!retry)
      llvm::consumeError(retry.takeError());
  }
  return result;
}

StageBytes Planner::sumStages(Candidate &c,
                              const partition::PartitionGraph &graph,
                              const NodeTimeTable &table, unsigned w) {
  // Stage s runs on group deviceOrder[s].
  size_t k = c.groups.size();
  c.forward.assign(k, 0);
  c.backward.assign(k, 0);
  c.reduce.assign(k, 0);
  c.reduceBytes.assign(k, 0);
  c.reduces.assign(k, 0);
  c.gradReduce.assign(k, 0);
  std::vector<double> parameterBytes(k, 0);
  c.ops.assign(k, 0);
  StageBytes bytes;
  bytes.stash.assign(k, 0);
  bytes.cut.assign(k, 0);
  for (unsigned v = 0; v < graph.size(); ++v) {
    unsigned s = c.result.stageOf[v];
    unsigned g = c.result.deviceOrder[s];
    const NodeTimes &t = table.at(v, g);
    c.forward[s] += t.forward;
    c.backward[s] += t.backward;
    c.reduce[s] += t.reduce;
    c.reduceBytes[s] += t.reduceBytes;
    c.reduces[s] += t.reduces;
    ++c.ops[s];
    bytes.stash[s] += graph.nodes[v].activationBytes +
                      graph.nodes[v].splitActivationBytes / c.groups[g].degree;
    // Weight bytes count weights, gradients and optimizer state.
    parameterBytes[s] += static_cast<double>(graph.nodes[v].weightBytes +
                                             graph.nodes[v].splitWeightBytes /
                                                 c.groups[g].degree) /
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
      bytes.cut[b] += graph.nodes[v].outputBytes;
  return bytes;
}

bool Planner::buildCandidateSchedule(size_t k, sched::Schedule &schedule,
                                     std::string &error) {
  size_t dp = in.workers.size();
  std::vector<bool> reduceStages(k, true);
  if (sched::isWeightVersioned(in.kind))
    return sched::buildVersionedSchedule(
        in.kind, static_cast<int>(k), static_cast<int>(microBatches),
        static_cast<int>(in.updateEvery), in.options->verticalSync, schedule,
        error, dp > 1 ? &reduceStages : nullptr,
        static_cast<int>(microBatches));
  return sched::buildSchedule(in.kind, static_cast<int>(k),
                              static_cast<int>(microBatches), 1, schedule,
                              error, dp > 1 ? &reduceStages : nullptr);
}

sched::SimulationInput Planner::simulationInput(
    const Candidate &c, const partition::PartitionOptions &options,
    const partition::PartitionDevices &devices, const StageBytes &bytes) {
  size_t k = c.groups.size();
  sched::SimulationInput input;
  bool split = sched::usesSplitBackward(in.kind);
  for (unsigned s = 0; s < k; ++s) {
    sched::StageCosts costs;
    costs.forward = c.forward[s];
    costs.backward = c.backward[s];
    if (split) // a contraction's backward: dX and dW, equal GEMMs
      costs.backwardInput = costs.backwardWeight = c.backward[s] / 2;
    costs.activationBytes = s + 1 < k ? bytes.cut[s] : 0;
    costs.gradientBytes = s > 0 ? bytes.cut[s - 1] : 0;
    costs.stashBytes = bytes.stash[s];
    costs.gradReduce = c.gradReduce[s];
    uint64_t inflight =
        partition::inflightMicroBatches(options, s, static_cast<unsigned>(k));
    uint64_t held = inflight * bytes.stash[s];
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
  return input;
}

void Planner::simulateCandidate(Candidate &c,
                                const partition::PartitionOptions &options,
                                const partition::PartitionDevices &devices,
                                const StageBytes &bytes) {
  sched::Schedule schedule;
  std::string error;
  if (!buildCandidateSchedule(c.groups.size(), schedule, error)) {
    c.error = "schedule: " + error;
    c.feasible = false;
    return;
  }
  sched::SimulationResult sim =
      sched::simulate(schedule, simulationInput(c, options, devices, bytes));
  if (!sim.error.empty() || sim.deadlock) {
    c.error = "simulation: " + (sim.error.empty() ? "deadlock" : sim.error);
    c.feasible = false;
    return;
  }
  c.iteration = sim.iterationTime;
  c.peak = sim.peakMemory;
  c.trace = std::make_shared<const Candidate::Trace>(
      Candidate::Trace{std::move(schedule), std::move(sim)});
}

Candidate Planner::evaluateUncached(const std::vector<Group> &groups,
                                    unsigned w) {
  Candidate c;
  c.groups = groups;
  // Split bytes: what every degree in use splits.
  std::set<unsigned> used = degreesInUse(groups);
  partition::PartitionGraph graph = in.graph;
  partition::PartitionOptions options = in.searchOptions;
  moveSplitBytes(used, graph, options.tiedGroups);
  // A group's ops share a stage.
  colocateGroups(used, options);
  GroupDevices devices = groupDevices(groups);
  NodeTimeTable table = nodeTimeTable(groups, graph.size(), devices.inside);
  graph.timeFn = [&table](unsigned v, unsigned g) {
    const NodeTimes &t = table.at(v, g);
    return t.forward + t.backward;
  };
  MemorySums memory = memorySums(groups, graph, options.tiedGroups);
  // Weights, gradients and optimizer state alone: when they exceed the
  // GPUs' memory, no partition fits, recomputing or not.
  if (memory.resident > memory.capacity ||
      memory.residentOnce > memory.allGPUs) {
    c.memoryNote = weightsNote(memory, c.degreesText());
    return c;
  }
  // Every stage keeps at least one micro-batch of its activations: when the
  // GPUs cannot hold them that way, only the lean partition (stages keep
  // their inputs, --pp-recompute does the rest) is searched.
  bool recompute = in.options->recompute != pp::RecomputePolicy::None;
  bool keepingCannotFit =
      recompute && memory.resident + memory.activations > memory.capacity;
  llvm::Expected<partition::PartitionResult> result =
      partitionCandidate(graph, devices.devices, options, recompute,
                         keepingCannotFit, c.assumesRecompute);
  if (!result) {
    c.error = llvm::toString(result.takeError());
    return c;
  }
  c.result = std::move(*result);
  c.feasible = c.result.feasible;
  StageBytes bytes = sumStages(c, graph, table, w);
  simulateCandidate(c, options, devices.devices, bytes);
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

std::vector<std::vector<Group>>
Planner::autoGroupings(const std::vector<int> &worker) {
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
            {std::vector<int>(worker.begin() + i, worker.begin() + i + t), t});
    }
    return groups;
  };
  std::vector<std::vector<Group>> groupings;
  if (combinations <= kMaxAutoCombinations) {
    searchNote = "a degree per node (run of GPUs of one kind on one node)";
    std::vector<unsigned> index(runs.size(), 0);
    while (true) {
      std::vector<unsigned> perRun;
      for (size_t r = 0; r < runs.size(); ++r)
        perRun.push_back(choices[r][index[r]]);
      groupings.push_back(build(perRun));
      size_t r = runs.size();
      while (r > 0 && ++index[r - 1] == choices[r - 1].size())
        index[--r] = 0;
      if (r == 0)
        break;
    }
    return groupings;
  }
  std::string count = combinations == std::numeric_limits<size_t>::max()
                          ? std::string("over 2^64")
                          : std::to_string(combinations);
  searchNote = llvm::formatv("one degree per virtual worker ({0} "
                             "per-node combinations are more than {1})",
                             count, kMaxAutoCombinations);
  for (unsigned t = 1; t <= kMaxAutoDegree; ++t)
    if (llvm::all_of(runs, [&](auto run) { return run.second % t == 0; }))
      groupings.push_back(build(std::vector<unsigned>(runs.size(), t)));
  return groupings;
}

std::vector<Candidate>
Planner::evaluateByBound(const std::vector<std::vector<Group>> &groupings,
                         unsigned w, double beat) {
  std::vector<double> bounds;
  for (const std::vector<Group> &groups : groupings)
    bounds.push_back(iterationLowerBound(groups));
  std::vector<size_t> byBound(groupings.size());
  for (size_t i = 0; i < byBound.size(); ++i)
    byBound[i] = i;
  llvm::stable_sort(byBound,
                    [&](size_t a, size_t b) { return bounds[a] < bounds[b]; });
  std::vector<Candidate> candidates(groupings.size());
  double bestSoFar = beat;
  for (size_t i : byBound) {
    if (bounds[i] >= bestSoFar) {
      Candidate c;
      c.groups = groupings[i];
      c.skipped = true;
      candidates[i] = std::move(c);
    } else {
      candidates[i] = evaluate(groupings[i], w);
      if (candidates[i].feasible)
        bestSoFar = std::min(bestSoFar, candidates[i].iteration);
    }
    candidates[i].lowerBound = bounds[i];
  }
  return candidates;
}

/// The feasible candidate of the least iteration (the first of equals).
const Candidate *fastest(const std::vector<Candidate> &candidates) {
  const Candidate *best = nullptr;
  for (const Candidate &c : candidates)
    if (c.feasible && (!best || c.iteration < best->iteration * (1 - 1e-9)))
      best = &c;
  return best;
}

/// The partitioned candidate of the least memory shortfall, if any.
const Candidate *closestToFit(const std::vector<Candidate> &candidates) {
  const Candidate *closest = nullptr;
  for (const Candidate &c : candidates)
    if (c.error.empty() && !c.skipped && c.memoryNote.empty() &&
        (!closest || c.result.maxShortfall < closest->result.maxShortfall))
      closest = &c;
  return closest;
}

void Planner::explainShortfall(InFlightDiagnostic &diag,
                               const Candidate &closest) {
  diag << "; the best plan, tp=" << closest.degreesText() << ", still needs";
  for (unsigned s = 0; s < closest.result.deviceOrder.size(); ++s) {
    unsigned g = closest.result.deviceOrder[s];
    if (closest.result.shortfall[g] == 0)
      continue;
    diag << llvm::formatv(
        " {0} more bytes per GPU on {1} (stage {2}: {3} of {4});",
        closest.result.shortfall[g], groupName(closest.groups[g]), s,
        pp::formatMegabytes(closest.result.stageMemory[s]),
        pp::formatMegabytes(static_cast<uint64_t>(
            in.cluster->devices[closest.groups[g].devices.front()]
                .memoryBytes)));
  }
}

Planner::WorkersOutcome
Planner::explainNoPlan(const pp::pipeline::TensorParallelRequest &request,
                       bool quiet, unsigned w,
                       const std::vector<Candidate> &candidates) {
  const pp::PartitionPassOptions &options = *in.options;
  const Candidate &first = candidates.front();
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
              << options.tensorParallel << ", schedule "
              << pp::schedule::toString(options.schedule) << " and "
              << microBatches << " micro-batches";
  if (in.workers.size() > 1)
    diag << " (virtual worker " << w << ")";
  const Candidate *closest = closestToFit(candidates);
  if (closest) {
    explainShortfall(diag, *closest);
    return WorkersOutcome::DoesNotFit;
  }
  for (const Candidate &c : candidates)
    if (!c.memoryNote.empty()) {
      diag << "; " << c.memoryNote;
      break;
    }
  if (request.automatic && !options.regroupWorkers && in.workers.size() > 1)
    diag << " (regroup-workers=1 also plans fewer, larger virtual "
            "workers)";
  return WorkersOutcome::DoesNotFit;
}

Planner::WorkersOutcome
Planner::planWorkers(const pp::pipeline::TensorParallelRequest &request,
                     bool quiet, double beat, std::vector<Candidate> &chosen,
                     std::vector<std::vector<Candidate>> &tried) {
  chosen.clear();
  tried.assign(in.workers.size(), {});
  for (unsigned w = 0; w < in.workers.size(); ++w) {
    std::vector<std::vector<Group>> groupings;
    if (!request.automatic) {
      FailureOr<std::vector<Group>> groups = groupsFor(w, request);
      if (failed(groups))
        return WorkersOutcome::Error;
      groupings.push_back(std::move(*groups));
    } else {
      groupings = autoGroupings(in.workers[w]);
    }
    // Stages must fit the partitioner.
    llvm::erase_if(groupings, [](const std::vector<Group> &groups) {
      return groups.size() > partition::kMaxPartitionDevices;
    });
    if (groupings.empty()) {
      if (quiet)
        return WorkersOutcome::DoesNotFit;
      (void)emitError(llvm::formatv(
          "tp={0}: every grouping has more than {1} stages",
          in.options->tensorParallel, partition::kMaxPartitionDevices));
      return WorkersOutcome::Error;
    }
    // A per-stage list names the stages in order: no other order.
    if (!request.automatic && request.degrees.size() > 1)
      in.searchOptions.tryDeviceOrders = false;
    // Candidates by a lower bound of their iteration, which skips those
    // that cannot beat the best plan found (their partition is the work).
    tried[w] = evaluateByBound(groupings, w, beat);
    const Candidate *best = fastest(tried[w]);
    if (!best)
      return explainNoPlan(request, quiet, w, tried[w]);
    chosen.push_back(*best);
  }
  return WorkersOutcome::Planned;
}

LogicalResult Planner::checkSupported() {
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
  return success();
}

FailureOr<std::vector<unsigned>>
Planner::mergeCounts(const pp::pipeline::TensorParallelRequest &request,
                     size_t numGiven) {
  std::vector<unsigned> merges{1};
  if (!in.options->regroupWorkers)
    return merges;
  if (!request.automatic)
    return emitError("regroup-workers needs tp=auto (a fixed degree fixes "
                     "the groups of each worker)");
  for (unsigned g = 2; g <= numGiven; ++g)
    if (numGiven % g == 0)
      merges.push_back(g);
  return merges;
}

std::vector<std::vector<int>>
Planner::mergedWorkers(const std::vector<std::vector<int>> &given,
                       unsigned g) const {
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
}

void Planner::useGrouping(const std::vector<std::vector<int>> &given,
                          unsigned g) {
  in.workers = mergedWorkers(given, g);
  microBatches = static_cast<unsigned>(in.options->microBatches) * g;
  in.searchOptions.microBatches = microBatches;
  computeCrossLinks();
}

LogicalResult
Planner::searchGroupings(const pp::pipeline::TensorParallelRequest &request,
                         const std::vector<std::vector<int>> &given,
                         ArrayRef<unsigned> merges, ChosenPlan &best) {
  double bestIteration = std::numeric_limits<double>::infinity();
  for (unsigned g : merges) {
    useGrouping(given, g);
    ChosenPlan here;
    WorkersOutcome outcome =
        planWorkers(request, /*quiet=*/merges.size() > 1, bestIteration,
                    here.chosen, here.tried);
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
      for (const Candidate &c : here.chosen)
        record.iteration = std::max(record.iteration, c.iteration);
      record.degrees = here.chosen.front().degreesText();
      if (record.iteration < bestIteration * (1 - 1e-9)) {
        bestIteration = record.iteration;
        here.merge = g;
        here.searchNote = searchNote;
        best = std::move(here);
      }
    }
    groupings.push_back(record);
  }
  return success();
}

void Planner::annotateModule(const std::vector<Candidate> &chosen) {
  const Candidate &plan = chosen.front();
  ModuleOp module = in.module;
  Builder b(module.getContext());
  for (auto [node, op] : llvm::enumerate(in.nodeOps))
    pp::pipeline::setStage(op, plan.result.stageOf[node]);
  // Constants and global reads go with their first user.
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
  pp::pipeline::setPlan(module, pp::pipeline::PlanAttr::get(
                                    module.getContext(), in.kind, microBatches,
                                    1, static_cast<int64_t>(order.size()),
                                    b.getArrayAttr(order), dataParallel,
                                    plan.maxDegree(), /*staleness=*/-1,
                                    /*wave=*/1, b.getArrayAttr({}),
                                    in.updateEvery, in.options->verticalSync));
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
}

LogicalResult
Planner::writePlanJson(const std::vector<Candidate> &chosen,
                       const std::vector<std::vector<Candidate>> &tried) {
  const std::string &path = in.options->planJson;
  std::string error;
  // The plan directory of --pp-compile plan-dir= may not exist yet.
  StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty() && path != "-")
    (void)llvm::sys::fs::create_directories(parent);
  auto out = pp::openReportFile(path, &error);
  if (!out) {
    in.module.emitError() << "cannot write plan-json: " << error;
    return failure();
  }
  out->os() << llvm::formatv("{0:2}", toJSON(chosen, tried)) << "\n";
  return pp::keepReportFile(in.module, *out, path);
}

LogicalResult Planner::writeTimeline(const Candidate &plan) {
  const std::string &path = in.options->timeline;
  StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty())
    (void)llvm::sys::fs::create_directories(parent);
  std::vector<std::string> names;
  for (unsigned g : plan.result.deviceOrder)
    names.push_back("tp=" + std::to_string(plan.groups[g].degree) + " " +
                    groupName(plan.groups[g]));
  SmallString<256> svgPath(path);
  llvm::sys::path::replace_extension(svgPath, "svg");
  std::ofstream trace(path), svg(svgPath.str().str());
  if (!trace || !svg) {
    in.module.emitError() << "cannot write the timeline '" << path << "' or '"
                          << svgPath << "'";
    return failure();
  }
  sched::writeChromeTrace(plan.trace->schedule, plan.trace->result, names,
                          trace);
  sched::writeTimelineSVG(plan.trace->schedule, plan.trace->result, names, svg);
  trace.close();
  svg.close();
  if (!trace || !svg) {
    in.module.emitError() << "cannot write the timeline '" << path << "' or '"
                          << svgPath << "' (disk full?)";
    return failure();
  }
  return success();
}

LogicalResult Planner::run(const pp::pipeline::TensorParallelRequest &request) {
  const pp::PartitionPassOptions &options = *in.options;
  if (failed(checkSupported()))
    return failure();
  // Groupings of the virtual workers: as given, or (regroup-workers) also
  // every merge of g consecutive ones, each merged worker's GPUs by kind
  // (in the order the worker first lists them), then node.
  std::vector<std::vector<int>> given = in.workers;
  FailureOr<std::vector<unsigned>> merges = mergeCounts(request, given.size());
  if (failed(merges))
    return failure();
  ChosenPlan best;
  if (failed(searchGroupings(request, given, *merges, best)))
    return failure();
  if (best.chosen.empty()) {
    // Nothing fits: the error of the workers as given.
    useGrouping(given, 1);
    std::vector<Candidate> chosen;
    std::vector<std::vector<Candidate>> tried;
    if (merges->size() > 1 &&
        planWorkers(request, /*quiet=*/false,
                    std::numeric_limits<double>::infinity(), chosen,
                    tried) == WorkersOutcome::Planned)
      return emitError("regroup-workers: inconsistent search");
    return failure();
  }
  useGrouping(given, best.merge);
  searchNote = best.searchNote;

  // Annotate the module with worker 0's plan.
  annotateModule(best.chosen);
  if (!options.reportFile.empty() &&
      failed(pp::writeReportFile(in.module, options.reportFile,
                                 [&](llvm::raw_ostream &os) {
                                   writeReport(best.chosen, best.tried, os);
                                 })))
    return failure();
  if (!options.planJson.empty() &&
      failed(writePlanJson(best.chosen, best.tried)))
    return failure();
  if (!options.timeline.empty() && best.chosen.front().trace &&
      failed(writeTimeline(best.chosen.front())))
    return failure();
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

void Planner::writeSummary(const std::vector<Candidate> &chosen,
                           llvm::raw_ostream &os) {
  const pp::PartitionPassOptions &options = *in.options;
  size_t dp = chosen.size();
  const Candidate &plan = chosen.front();
  os << llvm::formatv("== pipeline plan: {0} stages, schedule {1}, {2} "
                      "micro-batches, {3} ==\n",
                      plan.groups.size(),
                      pp::schedule::toString(options.schedule), microBatches,
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
                      pp::schedule::toString(options.schedule),
                      pp::formatMegabytes(peakOf(plan)));
  if (dp > 1)
    os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                        "(virtual workers), gradients all-reduced per stage\n",
                        dp);
}

void Planner::writeGroupings(size_t dp, llvm::raw_ostream &os) {
  if (groupings.size() <= 1)
    return;
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

void Planner::writeCandidates(const std::vector<Candidate> &chosen,
                              const std::vector<std::vector<Candidate>> &tried,
                              llvm::raw_ostream &os) {
  size_t dp = chosen.size();
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
}

void Planner::writeSplitSummary(
    const Candidate &plan, const std::vector<std::vector<Candidate>> &tried,
    llvm::raw_ostream &os) {
  // The chosen plan's largest degree, or the largest tried.
  unsigned shown = plan.maxDegree();
  if (shown == 1)
    for (const auto &list : tried)
      for (const Candidate &c : list)
        shown = std::max(shown, c.maxDegree());
  if (shown <= 1)
    return;
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

void Planner::writeStages(const Candidate &plan, size_t dp,
                          llvm::raw_ostream &os) {
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
}

/// Whether and how the plan runs: one degree everywhere, or one degree
/// above 1 mixed stage-wise with 1 (which runs like one degree), or not.
void writeRunnability(const std::vector<Candidate> &chosen,
                      llvm::raw_ostream &os) {
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

void Planner::writeReport(const std::vector<Candidate> &chosen,
                          const std::vector<std::vector<Candidate>> &tried,
                          llvm::raw_ostream &os) {
  size_t dp = chosen.size();
  const Candidate &plan = chosen.front();
  writeSummary(chosen, os);
  writeGroupings(dp, os);
  writeCandidates(chosen, tried, os);
  writeSplitSummary(plan, tried, os);
  writeStages(plan, dp, os);
  for (unsigned w = 1; w < chosen.size(); ++w)
    os << llvm::formatv("virtual worker {0}: (pp, tp) = ({1}, {2}), "
                        "bottleneck {3:f3} ms, predicted iteration {4:f3} "
                        "ms\n",
                        w, chosen[w].groups.size(), chosen[w].degreesText(),
                        chosen[w].result.bottleneck * 1e3,
                        chosen[w].iteration * 1e3);
  writeRunnability(chosen, os);
}

llvm::json::Array Planner::stagesJSON(const Candidate &c) {
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
}

llvm::json::Array
Planner::candidatesJSON(const std::vector<std::vector<Candidate>> &tried) {
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
        entry["stages"] = stagesJSON(c);
      }
      candidates.push_back(std::move(entry));
    }
  return candidates;
}

llvm::json::Value
Planner::toJSON(const std::vector<Candidate> &chosen,
                const std::vector<std::vector<Candidate>> &tried) {
  const pp::PartitionPassOptions &options = *in.options;
  const Candidate &plan = chosen.front();
  llvm::json::Array degrees;
  for (unsigned g : plan.result.deviceOrder)
    degrees.push_back(plan.groups[g].degree);
  llvm::json::Array candidates = candidatesJSON(tried);
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
      {"schedule", pp::schedule::toString(options.schedule)},
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
      {"stages", stagesJSON(plan)},
      {"candidates", std::move(candidates)},
  };
}

} // namespace

LogicalResult
pp::pipeline::planTensorParallel(TensorParallelPlanInput &input,
                                 const TensorParallelRequest &request) {
  return Planner(input).run(request);
}
