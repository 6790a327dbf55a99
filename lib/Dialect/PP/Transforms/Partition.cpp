//===- Partition.cpp - Assign forward ops to pipeline stages ----*- C++ -*-===//

#include "pp/Analysis/CostModel.h"
#include "pp/Cluster/Cluster.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Partition/Partitioner.h"
#include "pp/Schedule/Schedule.h"
#include "pp/Schedule/Simulator.h"
#include "pp/Support/InputLimits.h"

#include "pp/Dialect/PP/Transforms/ReportFile.h"

#include "TensorParallelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace mlir;
namespace onnx = pp::onnx;
namespace partition = pp::partition;
namespace pipeline = pp::pipeline;

namespace {

/// Micro-batches per update of a weight-versioned schedule: `requested`, or
/// when 0 the schedule's default for `numStages` stages: 1 for PipeDream;
/// for 2BW the smallest divisor of m that is >= the stages (2BW
/// accumulates over m >= p micro-batches); for the TiMePReSt family the
/// smallest >= stages - 1 (version gap 1). Capped at m.
int64_t chooseUpdateEvery(pp::schedule::ScheduleKind kind, unsigned requested,
                          unsigned microBatches, size_t numStages) {
  if (requested > 0)
    return requested;
  if (kind == pp::schedule::ScheduleKind::PipeDream ||
      kind == pp::schedule::ScheduleKind::HetPipe)
    return 1;
  int64_t wanted = kind == pp::schedule::ScheduleKind::PipeDream2BW
                       ? static_cast<int64_t>(numStages)
                       : static_cast<int64_t>(numStages) - 1;
  for (int64_t n = std::max<int64_t>(wanted, 1); n < microBatches; ++n)
    if (microBatches % n == 0)
      return n;
  return microBatches;
}

/// A staleness bound and wave size for Wave Synchronous Parallel, chosen by
/// chooseWaveSync, with the report's line.
struct WaveChoice {
  int64_t staleness = 0;
  int64_t wave = 1;
  std::string report;
};

/// Picks D (each VW at most D waves ahead of the slowest) and the wave
/// size K (steps per push) that `fixedStaleness` / `fixedWave` leave open.
/// Each VW's step is its partition's bottleneck times (m + stages - 1); a
/// wave's push is the largest stage's ring all-reduce of its weights over
/// the slowest link between VWs; simulateWaveSync gives the steps per
/// second. Staleness costs convergence that throughput does not show, so
/// among the candidates within 1% of the best the one with the least
/// staleness in steps, (D + 1) K - 1, wins (then the smaller D). A pending
/// wave keeps a sum of its stage's weights on the device: D + 1 of them
/// must fit beside the stage. Failure when no candidate fits.
/// What WSP costs the workers' partitions: each VW's predicted step, a
/// wave's push, and the most pending waves every device can hold.
struct WaveModel {
  std::vector<double> step;
  double push = 0;
  int64_t mostPending = std::numeric_limits<int64_t>::max();
  /// Where the fewest fit: the device, its stage's weight bytes, the
  /// memory left beside the stage.
  std::string tightest;
};

WaveModel modelWaves(const pp::cluster::Cluster &cluster,
                     const std::vector<std::vector<int>> &workers,
                     const std::vector<partition::PartitionResult> &plans,
                     const partition::PartitionGraph &graph,
                     uint64_t microBatches, double residentPerWeightByte) {
  size_t n = plans.size();
  WaveModel model;
  std::vector<double> &step = model.step;
  step.assign(n, 0);
  uint64_t largestStage = 0;
  int64_t &mostPending = model.mostPending;
  for (size_t k = 0; k < n; ++k) {
    const partition::PartitionResult &plan = plans[k];
    size_t stages = plan.deviceOrder.size();
    step[k] =
        plan.bottleneck * (static_cast<double>(microBatches) + stages - 1);
    std::vector<uint64_t> weights(stages, 0);
    for (auto [node, stage] : llvm::enumerate(plan.stageOf))
      weights[stage] += static_cast<uint64_t>(
          static_cast<double>(graph.nodes[node].weightBytes) /
          residentPerWeightByte);
    for (size_t s = 0; s < stages; ++s) {
      largestStage = std::max(largestStage, weights[s]);
      if (weights[s] == 0)
        continue;
      const auto &device = cluster.devices[workers[k][plan.deviceOrder[s]]];
      uint64_t capacity = static_cast<uint64_t>(device.memoryBytes);
      uint64_t free =
          capacity > plan.stageMemory[s] ? capacity - plan.stageMemory[s] : 0;
      int64_t fits = static_cast<int64_t>(free / weights[s]);
      if (fits < mostPending) {
        mostPending = fits;
        model.tightest = llvm::formatv(
            "{0} (virtual worker {1}) holds {2} of weights with {3} left "
            "beside its stage",
            device.name, k, pp::formatMegabytes(weights[s]),
            pp::formatMegabytes(free));
      }
    }
  }
  // The slowest link between devices of different VWs carries the ring.
  double bandwidth = std::numeric_limits<double>::infinity(), latency = 0;
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b)
        for (int x : workers[a])
          for (int y : workers[b]) {
            bandwidth = std::min(bandwidth, cluster.bandwidth(x, y));
            latency = std::max(latency, cluster.latency(x, y));
          }
  double ring = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
  model.push = (std::isfinite(bandwidth) && bandwidth > 0
                    ? ring * static_cast<double>(largestStage) / bandwidth
                    : 0) +
               2.0 * static_cast<double>(n - 1) * latency;
  return model;
}

FailureOr<WaveChoice> chooseWaveSync(const WaveModel &model,
                                     std::optional<int64_t> fixedStaleness,
                                     std::optional<int64_t> fixedWave) {
  const std::vector<double> &step = model.step;
  size_t n = step.size();
  double push = model.push;
  int64_t mostPending = model.mostPending;

  std::vector<int64_t> bounds =
      fixedStaleness ? std::vector<int64_t>{*fixedStaleness}
                     : std::vector<int64_t>{0, 1, 2, 3, 4, 6, 8, 16, 32};
  std::vector<int64_t> sizes = fixedWave ? std::vector<int64_t>{*fixedWave}
                                         : std::vector<int64_t>{1, 2, 4, 8};
  struct Candidate {
    int64_t staleness, wave;
    double stepsPerSecond;
  };
  std::vector<Candidate> fitting;
  // The same number of steps for every wave size.
  constexpr int64_t kSteps = 512;
  for (int64_t d : bounds) {
    if (d + 1 > mostPending)
      continue;
    for (int64_t k : sizes) {
      pp::schedule::WaveSyncInput input;
      for (double seconds : step)
        input.waveSeconds.push_back(seconds * static_cast<double>(k));
      input.pushSeconds = push;
      input.staleness = d;
      input.waves = std::max<int64_t>(1, kSteps / k);
      double seconds = pp::schedule::simulateWaveSync(input).seconds;
      double steps =
          static_cast<double>(input.waves * k) * static_cast<double>(n);
      fitting.push_back({d, k, seconds > 0 ? steps / seconds : 0});
    }
  }
  if (fitting.empty())
    return failure();
  double best = 0;
  for (const Candidate &c : fitting)
    best = std::max(best, c.stepsPerSecond);
  const Candidate *chosen = nullptr;
  for (const Candidate &c : fitting) {
    if (c.stepsPerSecond < 0.99 * best)
      continue;
    auto staleSteps = [](const Candidate &x) {
      return (x.staleness + 1) * x.wave - 1;
    };
    if (!chosen || staleSteps(c) < staleSteps(*chosen) ||
        (staleSteps(c) == staleSteps(*chosen) &&
         c.staleness < chosen->staleness))
      chosen = &c;
  }
  WaveChoice choice{chosen->staleness, chosen->wave, ""};
  std::string fits =
      mostPending == std::numeric_limits<int64_t>::max()
          ? "no stage has weights"
          : "push buffers fit up to D = " + std::to_string(mostPending - 1);
  choice.report = llvm::formatv(
      "wave synchronous auto: D = {0}, wave = {1}: {2:f1} steps/s predicted "
      "over all VWs, the least staleness ({3} step(s)) within 1% of the best "
      "({4:f1} steps/s) among {5} candidates ({6}; push {7:f3} ms, slowest "
      "VW step {8:f3} ms)",
      chosen->staleness, chosen->wave, chosen->stepsPerSecond,
      (chosen->staleness + 1) * chosen->wave - 1, best, fitting.size(), fits,
      push * 1e3, *llvm::max_element(step) * 1e3);
  return choice;
}

} // namespace

/// --pp-partition with `options.microBatches` as given (inflight resolved).
static LogicalResult partitionOnce(ModuleOp module,
                                   const pp::PartitionPassOptions &options) {
  auto func =
      pipeline::lookupFunction(module, options.funcName, "to partition");
  if (!func)
    return failure();
  if (options.clusterSpec.empty()) {
    module.emitError() << "pp-partition needs cluster=<spec or .json>";
    return failure();
  }
  if (failed(pp::verifyPlannableSizes(module, "pp-partition")))
    return failure();
  auto cluster = pp::cluster::parseClusterSpec(options.clusterSpec);
  if (!cluster) {
    module.emitError() << "cluster: " << llvm::toString(cluster.takeError());
    return failure();
  }
  double stateFactor = options.optimizer == "sgd"        ? 0.0
                       : options.optimizer == "momentum" ? 1.0
                       : options.optimizer == "adam"     ? 2.0
                                                         : -1.0;
  if (!llvm::is_contained({"none", "full", "selective", "auto"},
                          StringRef(options.recompute))) {
    module.emitError() << "pp-partition: recompute must be none, full, "
                          "selective or auto, got '"
                       << options.recompute << "'";
    return failure();
  }
  std::string invalid;
  std::optional<pp::schedule::ScheduleKind> scheduleKind =
      pp::schedule::parseScheduleKind(options.schedule);
  if (stateFactor < 0)
    invalid = "optimizer must be sgd, momentum or adam, got '" +
              options.optimizer + "'";
  else if (!scheduleKind)
    invalid = "schedule must be 1f1b, gpipe, interleaved, zb-h1, zb-h2, "
              "zb-v, dualpipev, pipedream, pipedream-2bw, nf1b, v-timeprest, "
              "i-timeprest or hetpipe (or auto in --pp-compile), got '" +
              options.schedule + "'";
  else if (options.verticalSync &&
           scheduleKind != pp::schedule::ScheduleKind::PipeDream)
    invalid = "vertical-sync is an option of schedule=pipedream, not " +
              options.schedule;
  else if (options.updateEvery != 0 &&
           !pp::schedule::isWeightVersioned(*scheduleKind))
    invalid = "update-every is an option of the weight-versioned schedules "
              "(pipedream, pipedream-2bw, nf1b, v-timeprest, i-timeprest); " +
              options.schedule + " updates once a step";
  else if ((scheduleKind == pp::schedule::ScheduleKind::PipeDream ||
            scheduleKind == pp::schedule::ScheduleKind::HetPipe) &&
           options.updateEvery > 1)
    invalid = "schedule=" + options.schedule +
              " updates after every micro-batch: "
              "update-every must be 1, got " +
              std::to_string(options.updateEvery);
  else if (options.updateEvery > 0 && options.microBatches > 0 &&
           options.microBatches % options.updateEvery != 0)
    invalid = "update-every (" + std::to_string(options.updateEvery) +
              ") must divide microbatches (" +
              std::to_string(options.microBatches) + ")";
  else if (options.microBatches == 0)
    invalid = "microbatches must be > 0";
  else if (options.microBatches > pp::limits::kMaxMicroBatches)
    invalid = "microbatches must be at most " +
              std::to_string(pp::limits::kMaxMicroBatches);
  else if (pp::kinds::isVShaped(*scheduleKind) && options.chunks != 2)
    invalid = std::string("schedule=") + pp::kinds::toString(*scheduleKind) +
              " places two chunks per device in a V: chunks must be 2, got " +
              std::to_string(options.chunks);
  else if (!pp::kinds::isVShaped(*scheduleKind) &&
           (options.chunks == 0 ||
            (options.chunks > 1 &&
             scheduleKind != pp::schedule::ScheduleKind::Interleaved1F1B)))
    invalid = "chunks must be 1, or > 1 with schedule interleaved";
  std::optional<pipeline::TensorParallelRequest> tpRequest =
      pipeline::parseTensorParallel(options.tensorParallel);
  if (invalid.empty() && !tpRequest)
    invalid = "tp must be a degree >= 1, a per-stage list of degrees "
              "(tp=4,2,2) or auto, got '" +
              options.tensorParallel + "'";
  if (!invalid.empty()) {
    module.emitError() << "pp-partition: " << invalid;
    return failure();
  }

  // The cost model: roofline, or a measured profile on top of it.
  auto createdModel = pp::createCostModel(options.profileFile);
  if (!createdModel) {
    module.emitError() << llvm::toString(createdModel.takeError());
    return failure();
  }
  std::unique_ptr<pp::CostModel> costModel = std::move(*createdModel);
  Block &body = func.getBody().front();
  costModel->setSavedValues(pp::findValuesSavedForBackward(body));

  // The pipelines: one per virtual worker (the IR gets the first one's
  // plan; HetPipe's virtual workers run the same model on their own
  // devices), or all devices as one.
  std::vector<std::vector<int>> workers = cluster->virtualWorkers;
  // Not given (-1): a virtual-workers policy's worker count, else 1.
  if (options.dataParallel == 0 || options.dataParallel < -1) {
    module.emitError() << "pp-partition: data-parallel must be >= 1";
    return failure();
  }
  bool dataParallelGiven = options.dataParallel > 0;
  unsigned dataParallel = dataParallelGiven ? options.dataParallel : 1;
  // staleness: an integer >= -1 or auto; wave: an integer >= 1 or auto.
  bool autoStaleness = options.staleness == "auto";
  bool autoWave = options.wave == "auto";
  int64_t staleness = -1;
  int64_t wave = 1;
  if (!autoStaleness &&
      (StringRef(options.staleness).getAsInteger(10, staleness) ||
       staleness < -1)) {
    module.emitError() << "pp-partition: staleness must be an integer >= 0, "
                          "-1 (synchronous data parallel) or auto, got '"
                       << options.staleness << "'";
    return failure();
  }
  if (!autoWave && (StringRef(options.wave).getAsInteger(10, wave) ||
                    wave < 1 || wave > (int64_t(1) << 30))) {
    module.emitError() << "pp-partition: wave must be an integer >= 1 or "
                          "auto, got '"
                       << options.wave << "'";
    return failure();
  }
  bool waveSynchronous = autoStaleness || staleness >= 0;
  int numDevices = static_cast<int>(cluster->devices.size());
  // Virtual workers by policy, unless the cluster file lists its own; auto
  // keeps every policy that fits and picks once the model is partitioned.
  StringRef policy = options.virtualWorkers;
  std::vector<std::pair<std::string, std::vector<std::vector<int>>>> candidates;
  std::string policyNote;
  if (!policy.empty() && !workers.empty()) {
    policyNote = "virtual-workers=" + policy.str() +
                 " ignored: the cluster file lists its virtual workers";
  } else if (policy == "auto") {
    std::string rejected;
    for (StringRef name : {"np", "ed", "hd"}) {
      auto grouped = pp::cluster::groupVirtualWorkers(*cluster, name);
      if (!grouped) {
        rejected += "; " + llvm::toString(grouped.takeError());
        continue;
      }
      bool sizesEqual = llvm::all_of(*grouped, [&](const auto &w) {
        return w.size() == grouped->front().size();
      });
      if (dataParallelGiven && dataParallel > 1 &&
          (grouped->size() != dataParallel || !sizesEqual)) {
        rejected +=
            "; virtual-workers=" + name.str() + ": " +
            std::to_string(grouped->size()) +
            " workers, not data-parallel=" + std::to_string(dataParallel) +
            " of equal size";
        continue;
      }
      // Without dp= the workers are the data-parallel replicas.
      std::string unfit;
      if (!dataParallelGiven && grouped->size() > 1 && !sizesEqual)
        unfit = "workers of different sizes cannot be data-parallel "
                "replicas";
      else if (!dataParallelGiven && grouped->size() < 2 && waveSynchronous)
        unfit = "staleness=" + options.staleness + " needs at least 2";
      if (!unfit.empty()) {
        rejected += "; virtual-workers=" + name.str() + ": " +
                    std::to_string(grouped->size()) + " workers, " + unfit;
        continue;
      }
      candidates.emplace_back(name.str(), std::move(*grouped));
    }
    if (candidates.empty()) {
      module.emitError() << "pp-partition: virtual-workers=auto: no policy "
                            "fits the cluster"
                         << rejected;
      return failure();
    }
    workers = candidates.front().second;
    // Until auto chooses: every candidate has as many workers as it needs.
    if (!dataParallelGiven)
      dataParallel = workers.size();
  } else if (!policy.empty()) {
    auto grouped = pp::cluster::groupVirtualWorkers(*cluster, policy);
    if (!grouped) {
      module.emitError() << "pp-partition: "
                         << llvm::toString(grouped.takeError());
      return failure();
    }
    workers = std::move(*grouped);
    if (dataParallelGiven && workers.size() != dataParallel) {
      module.emitError() << "pp-partition: data-parallel=" << dataParallel
                         << " but virtual-workers=" << policy << " forms "
                         << workers.size() << " virtual workers";
      return failure();
    }
    dataParallel = workers.size();
  }
  if (waveSynchronous && dataParallel < 2) {
    module.emitError() << "pp-partition: staleness=" << options.staleness
                       << " (Wave Synchronous Parallel) needs data-parallel "
                          ">= 2 virtual workers, got "
                       << dataParallel;
    return failure();
  }
  if ((autoWave || wave > 1) && !waveSynchronous) {
    module.emitError() << "pp-partition: wave=" << options.wave
                       << " needs a staleness bound (staleness=D or auto)";
    return failure();
  }
  // HetPipe's wave is its Nm mini-batches in flight: one step.
  if (*scheduleKind == pp::schedule::ScheduleKind::HetPipe && wave > 1) {
    module.emitError() << "pp-partition: schedule=hetpipe: a wave is the Nm "
                          "mini-batches of one step (microbatches=Nm); wave "
                          "must be 1 or auto, got "
                       << wave;
    return failure();
  }
  if (*scheduleKind == pp::schedule::ScheduleKind::HetPipe)
    autoWave = false;
  if (dataParallel > 1 && !workers.empty() && workers.size() != dataParallel) {
    module.emitError() << "pp-partition: data-parallel=" << dataParallel
                       << " but the cluster names " << workers.size()
                       << " virtual workers";
    return failure();
  }
  if (dataParallel > 1 && workers.empty() &&
      numDevices % static_cast<int>(dataParallel) != 0) {
    module.emitError() << "pp-partition: data-parallel=" << dataParallel
                       << " does not divide the cluster's " << numDevices
                       << " devices into equal replicas";
    return failure();
  }
  if (workers.empty()) {
    int perReplica = numDevices / static_cast<int>(dataParallel);
    for (unsigned r = 0; r < dataParallel; ++r) {
      workers.emplace_back();
      for (int i = 0; i < perReplica; ++i)
        workers.back().push_back(static_cast<int>(r) * perReplica + i);
    }
  }
  // Synchronous data parallelism runs one partition on every replica.
  if (dataParallel > 1)
    for (const auto &worker : workers)
      if (worker.size() != workers.front().size()) {
        module.emitError()
            << "pp-partition: data-parallel replicas need as many devices "
               "each; the virtual workers have "
            << workers.front().size() << " and " << worker.size();
        return failure();
      }
  // Interleaving: chunks x devices stages, stage c on device c mod p; a V
  // (zb-v, dualpipev) runs the second chunk back up the devices. Each chunk
  // gets an equal share of its device's memory.
  bool vShaped = pp::kinds::isVShaped(*scheduleKind);
  auto addChunks = [&](std::vector<std::vector<int>> &list) {
    for (auto &worker : list) {
      unsigned numPhysical = worker.size();
      for (unsigned c = 1; c < options.chunks; ++c)
        for (unsigned i = 0; i < numPhysical; ++i)
          worker.push_back(worker[vShaped ? numPhysical - 1 - i : i]);
    }
  };
  addChunks(workers);
  for (auto &[name, list] : candidates)
    addChunks(list);
  // Before the per-pair link tables below, which take seconds for
  // thousands of devices. With tensor parallelism a stage is a group of
  // GPUs (the planner drops groupings of too many stages).
  for (const auto &worker : workers)
    if (worker.size() > partition::kMaxPartitionDevices &&
        !(tpRequest && tpRequest->active())) {
      module.emitError() << "pp-partition: " << worker.size()
                         << " stages (devices x chunks) in one pipeline: "
                         << "the partitioner supports at most "
                         << partition::kMaxPartitionDevices;
      return failure();
    }
  std::vector<int> pipeline = workers.front();

  // Nodes: every op but constants and weight reads (whose bytes belong to
  // the ops that read them).
  partition::PartitionGraph graph;
  std::vector<Operation *> nodeOps;
  DenseMap<Operation *, unsigned> nodeOf;
  for (Operation &op : body.without_terminator()) {
    if (isa<onnx::ConstantOp, onnx::GlobalReadOp>(op))
      continue;
    partition::PartitionNode node;
    node.name = pp::getOpName(&op);
    if (node.name.empty())
      node.name = op.getName().getStringRef().str() + "#" +
                  std::to_string(nodeOps.size());
    pp::OpWork work = costModel->getWork(&op);
    node.activationBytes = work.activationBytes;
    for (Value result : op.getResults())
      node.outputBytes += pp::getTensorBytes(result.getType());
    nodeOf[&op] = graph.addNode(std::move(node));
    nodeOps.push_back(&op);
  }
  // Parameters: weights + gradients + optimizer state, on the node that
  // reads them, or on a tied group when several nodes do.
  llvm::MapVector<StringRef, SmallVector<unsigned>> readers;
  llvm::StringMap<int64_t> globalBytes;
  SymbolTableCollection symbolTables;
  for (Operation *op : nodeOps)
    for (Value operand : op->getOperands())
      if (auto read = operand.getDefiningOp<onnx::GlobalReadOp>()) {
        auto global = symbolTables.lookupNearestSymbolFrom<onnx::GlobalOp>(
            read, read.getGlobalAttr());
        if (!global || global.getKind() != onnx::kTrainable)
          continue;
        auto &list = readers[global.getSymName()];
        if (!llvm::is_contained(list, nodeOf[op]))
          list.push_back(nodeOf[op]);
        globalBytes[global.getSymName()] = pp::getTensorBytes(global.getType());
      }
  partition::PartitionOptions searchOptions;
  for (auto &[name, nodes] : readers) {
    uint64_t bytes = globalBytes[name];
    uint64_t state = bytes * static_cast<uint64_t>(2.0 + stateFactor);
    if (nodes.size() == 1) {
      graph.nodes[nodes.front()].weightBytes += state;
      continue;
    }
    partition::TiedGroup group;
    group.nodes.assign(nodes.begin(), nodes.end());
    group.stateBytes = state;
    group.gradientBytes = bytes;
    searchOptions.tiedGroups.push_back(std::move(group));
  }
  for (Operation *op : nodeOps)
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp();
          producer && nodeOf.count(producer))
        graph.addEdge(nodeOf[producer], nodeOf[op]);

  // User pins: ops whose name matches a pattern go to its stage; split
  // points fix every op (stage = split points before it in op order).
  for (StringRef entry : llvm::split(StringRef(options.pins), ',')) {
    if (entry.trim().empty())
      continue;
    auto [pattern, stageText] = entry.rsplit('=');
    unsigned stage;
    llvm::Regex regex(pattern.trim());
    std::string regexError;
    if (stageText.trim().getAsInteger(10, stage) ||
        !regex.isValid(regexError)) {
      emitError(module.getLoc())
          << "pp-partition: pin '" << entry
          << "' is not PATTERN=STAGE with a valid regex "
          << (regexError.empty() ? "" : "(" + regexError + ")");
      return failure();
    }
    if (stage >= pipeline.size()) {
      emitError(module.getLoc())
          << "pp-partition: pin '" << entry << "' names stage " << stage
          << " of " << pipeline.size();
      return failure();
    }
    bool matched = false;
    for (auto [node, op] : llvm::enumerate(nodeOps))
      if (regex.match(pp::getOpName(op))) {
        searchOptions.pins.push_back({static_cast<unsigned>(node), stage});
        matched = true;
      }
    if (!matched) {
      emitError(module.getLoc())
          << "pp-partition: pin pattern '" << pattern << "' matches no op";
      return failure();
    }
  }
  if (!options.splitAfter.empty()) {
    SmallVector<StringRef> names;
    StringRef(options.splitAfter).split(names, ',', -1, false);
    if (names.size() + 1 > pipeline.size()) {
      emitError(module.getLoc())
          << "pp-partition: " << names.size() << " split points need "
          << names.size() + 1 << " stages, the cluster has " << pipeline.size();
      return failure();
    }
    unsigned stage = 0;
    size_t found = 0;
    for (auto [node, op] : llvm::enumerate(nodeOps)) {
      searchOptions.pins.push_back({static_cast<unsigned>(node), stage});
      if (llvm::is_contained(names, StringRef(pp::getOpName(op)).trim())) {
        ++stage;
        ++found;
      }
    }
    if (found != names.size()) {
      for (StringRef name : names)
        if (llvm::none_of(nodeOps, [&](Operation *op) {
              return pp::getOpName(op) == name.trim();
            })) {
          emitError(module.getLoc())
              << "pp-partition: split point '" << name.trim()
              << "' is no op of the model";
          return failure();
        }
    }
    searchOptions.allowEmptyStages = true;
  }

  // The devices of a pipeline, as the partitioner sees them.
  llvm::StringMap<unsigned> kindIndex;
  auto makeDevices = [&](const std::vector<int> &worker) {
    partition::PartitionDevices devices;
    for (int index : worker) {
      const auto &device = cluster->devices[index];
      partition::PartitionDevice d;
      d.name = device.name;
      d.kind =
          kindIndex.try_emplace(device.kind, kindIndex.size()).first->second;
      d.memoryBytes =
          static_cast<uint64_t>(device.memoryBytes) / options.chunks;
      devices.addDevice(std::move(d));
    }
    for (unsigned a = 0; a < worker.size(); ++a)
      for (unsigned b = 0; b < worker.size(); ++b)
        if (a != b && worker[a] == worker[b])
          devices.setDirectedLink(a, b, 1e18, 0); // chunks of one device
        else if (a != b)
          devices.setDirectedLink(a, b,
                                  cluster->bandwidth(worker[a], worker[b]),
                                  cluster->latency(worker[a], worker[b]));
    return devices;
  };
  // Virtual workers of the same devices in the same order (kinds, speeds,
  // memory and links: HetPipe's ED policy makes them so) get the same
  // plan, so each distinct worker is partitioned once (of 64 such workers
  // of 16 GPUs, 63 partitions of a 3,270-op model are seconds each).
  auto workerKey = [&](const std::vector<int> &worker, bool lean) {
    std::string key = lean ? "lean" : "full";
    cluster->appendPlanningKey(worker, key);
    return key;
  };
  std::map<std::string, partition::PartitionResult> workerPlanCache;
  auto distinctWorkers = [&](const std::vector<std::vector<int>> &list) {
    std::set<std::string> keys;
    for (const std::vector<int> &worker : list)
      keys.insert(workerKey(worker, /*lean=*/false));
    return keys.size();
  };
  // Reads and sets `pipeline`, which the cost queries read.
  auto partitionWorker =
      [&](const partition::PartitionGraph &g, const std::vector<int> &worker,
          bool lean) -> llvm::Expected<partition::PartitionResult> {
    pipeline = worker;
    std::string key = workerKey(worker, lean);
    if (auto it = workerPlanCache.find(key); it != workerPlanCache.end())
      return it->second;
    auto plan = partition::partition(g, makeDevices(worker), searchOptions);
    if (plan)
      workerPlanCache.emplace(std::move(key), *plan);
    return plan;
  };
  // Reads `pipeline`, which later points at the other virtual workers.
  graph.timeFn = [&](unsigned node, unsigned device) {
    const auto &d = cluster->devices[pipeline[device]];
    return costModel->getForwardTime(nodeOps[node], d) +
           costModel->getBackwardTime(nodeOps[node], d);
  };
  searchOptions.schedule = scheduleKind == pp::schedule::ScheduleKind::GPipe
                               ? partition::PipelineSchedule::GPipe
                               : partition::PipelineSchedule::OneFOneB;
  searchOptions.microBatches = options.microBatches;
  // Weight-versioned schedules: the in-flight micro-batches and the weight
  // versions of each stage are those of the built schedule, for the
  // pipeline's stages.
  int64_t updateEvery = 0;
  // Per stage count: each stage's in-flight micro-batches and weight
  // versions held under the built schedule, computed once.
  struct VersionedCosts {
    std::vector<int64_t> inflight, versions;
  };
  std::map<unsigned, VersionedCosts> versionedCosts;
  if (pp::schedule::isWeightVersioned(*scheduleKind)) {
    updateEvery = chooseUpdateEvery(*scheduleKind, options.updateEvery,
                                    options.microBatches, pipeline.size());
    auto costsOf = [&, kind = *scheduleKind](unsigned numStages,
                                             std::string *error)
        -> const VersionedCosts * {
      auto it = versionedCosts.find(numStages);
      if (it != versionedCosts.end())
        return &it->second;
      VersionedCosts costs;
      // A drained step, and a window of 3 steps (the stream's steady state
      // holds more when the warm-up spans the step: HetPipe's Nm).
      for (int steps : {1, 3}) {
        pp::schedule::Schedule schedule;
        std::string ignored;
        if (!pp::schedule::buildVersionedSchedule(
                kind, static_cast<int>(numStages),
                static_cast<int>(options.microBatches) * steps,
                static_cast<int>(updateEvery), options.verticalSync, schedule,
                error ? *error : ignored, nullptr,
                static_cast<int>(options.microBatches)))
          return nullptr;
        std::vector<int64_t> inflight = pp::schedule::peakInFlight(schedule);
        std::vector<int64_t> versions =
            pp::schedule::peakWeightVersions(schedule);
        costs.inflight.resize(inflight.size(), 0);
        costs.versions.resize(versions.size(), 0);
        for (size_t s = 0; s < inflight.size(); ++s) {
          costs.inflight[s] = std::max(costs.inflight[s], inflight[s]);
          costs.versions[s] = std::max(costs.versions[s], versions[s]);
        }
      }
      return &versionedCosts.emplace(numStages, std::move(costs))
                  .first->second;
    };
    std::string error;
    if (!costsOf(pipeline.size(), &error)) {
      module.emitError() << "pp-partition: schedule=" << options.schedule
                         << " over " << pipeline.size()
                         << " stages, update-every=" << updateEvery << ": "
                         << error;
      return failure();
    }
    searchOptions.schedule = partition::PipelineSchedule::Custom;
    searchOptions.inflight = [costsOf](unsigned stage, unsigned numStages) {
      const VersionedCosts *costs = costsOf(numStages, nullptr);
      return costs && stage < costs->inflight.size()
                 ? static_cast<uint64_t>(costs->inflight[stage])
                 : 0;
    };
    // Each older version held costs the weights once more, beside the
    // weights, gradients and optimizer state the weight bytes count.
    searchOptions.weightScale = [costsOf, stateFactor](unsigned stage,
                                                       unsigned numStages) {
      const VersionedCosts *costs = costsOf(numStages, nullptr);
      double extra = costs && stage < costs->versions.size()
                         ? costs->versions[stage] - 1
                         : 0;
      return (2.0 + stateFactor + extra) / (2.0 + stateFactor);
    };
  }
  // ZB-H2 and the V-shaped schedules hold other counts than 1F1B (ZB-H2
  // 2p-1 stashes on every stage): those of the built order, once per stage
  // count.
  std::map<unsigned, std::vector<int64_t>> builtInFlight;
  if (*scheduleKind == pp::schedule::ScheduleKind::ZBH2 ||
      pp::kinds::isVShaped(*scheduleKind)) {
    searchOptions.schedule = partition::PipelineSchedule::Custom;
    searchOptions.inflight =
        [&builtInFlight, kind = *scheduleKind,
         microBatches = options.microBatches, chunks = options.chunks](
            unsigned stage, unsigned numStages) -> uint64_t {
      auto [it, inserted] = builtInFlight.try_emplace(numStages);
      pp::schedule::Schedule schedule;
      std::string ignored;
      if (inserted && numStages % chunks == 0 &&
          pp::schedule::buildSchedule(
              kind, static_cast<int>(numStages / chunks),
              static_cast<int>(microBatches), static_cast<int>(chunks),
              schedule, ignored))
        it->second = pp::schedule::peakInFlight(schedule);
      return stage < it->second.size()
                 ? static_cast<uint64_t>(it->second[stage])
                 : 0;
    };
  }
  // Reordering would break the chunk-to-device rule of interleaving.
  searchOptions.tryDeviceOrders =
      options.tryDeviceOrders && options.chunks == 1;

  // virtual-workers=auto: each policy's workers partitioned on their own;
  // a worker's step takes about (m + stages - 1) bottlenecks, and the
  // slowest worker paces synchronous training, so the policy with the most
  // samples per second wins (ties: np, ed, hd in that order).
  std::string autoReport;
  if (candidates.size() > 0) {
    double bestRate = -1;
    size_t best = 0;
    for (auto [index, candidate] : llvm::enumerate(candidates)) {
      double slowest = 0;
      bool fits = true;
      for (const std::vector<int> &worker : candidate.second) {
        auto plan = partitionWorker(graph, worker, /*lean=*/false);
        if (!plan) {
          llvm::consumeError(plan.takeError());
          fits = false;
          break;
        }
        fits &= plan->feasible;
        slowest =
            std::max(slowest, plan->bottleneck *
                                  (options.microBatches +
                                   static_cast<double>(worker.size()) - 1));
      }
      double rate = fits && slowest > 0
                        ? static_cast<double>(candidate.second.size()) / slowest
                        : 0;
      autoReport +=
          llvm::formatv("{0}{1}: {2} workers, slowest step ~{3:f3} ms{4}",
                        autoReport.empty() ? "" : "; ", candidate.first,
                        candidate.second.size(), slowest * 1e3,
                        fits ? "" : " (does not fit)");
      if (rate > bestRate) {
        bestRate = rate;
        best = index;
      }
    }
    workers = candidates[best].second;
    if (!dataParallelGiven)
      dataParallel = workers.size();
    autoReport = "virtual-workers=auto chose " + candidates[best].first + " (" +
                 autoReport + ")";
  }
  pipeline = workers.front();
  // Tensor parallelism: each stage on a group of GPUs (TensorParallelPlan.h).
  if (tpRequest->active()) {
    pipeline::TensorParallelPlanInput input;
    input.module = module;
    input.func = func;
    input.options = &options;
    input.cluster = &*cluster;
    input.workers = workers;
    input.graph = graph;
    input.graph.timeFn = nullptr;
    input.nodeOps = nodeOps;
    input.searchOptions = searchOptions;
    input.costModel = costModel.get();
    input.kind = *scheduleKind;
    input.stateFactor = stateFactor;
    input.updateEvery = updateEvery;
    if (!policyNote.empty())
      input.notes.push_back(policyNote);
    else if (!policy.empty())
      input.notes.push_back("virtual-workers=" + policy.str() + ": " +
                            std::to_string(workers.size()) +
                            " virtual workers");
    return pipeline::planTensorParallel(input, *tpRequest);
  }
  partition::PartitionDevices devices = makeDevices(pipeline);

  auto result = partitionWorker(graph, workers.front(), /*lean=*/false);
  if (!result) {
    func.emitError() << "partitioning failed: "
                     << llvm::toString(result.takeError());
    return failure();
  }
  // With recomputation allowed, a model that does not fit with every
  // activation kept is partitioned as if each stage kept only its inputs;
  // --pp-recompute then chooses what to recompute.
  bool assumesRecompute = false;
  if (!result->feasible && options.recompute != "none") {
    partition::PartitionGraph lean = graph;
    for (auto &node : lean.nodes)
      node.activationBytes = 0;
    auto retry = partitionWorker(lean, workers.front(), /*lean=*/true);
    if (!retry) {
      func.emitError() << "partitioning failed: "
                       << llvm::toString(retry.takeError());
      return failure();
    }
    if (retry->feasible) {
      result = std::move(retry);
      assumesRecompute = true;
    }
  }
  if (!result->feasible) {
    auto diag = func.emitError()
                << "the model does not fit the cluster with schedule "
                << options.schedule << " and "
                << static_cast<unsigned>(options.microBatches)
                << " micro-batches; the best plan still needs";
    for (unsigned s = 0; s < result->deviceOrder.size(); ++s) {
      unsigned d = result->deviceOrder[s];
      if (result->shortfall[d] == 0)
        continue;
      diag << llvm::formatv(" {0} more bytes on {1} (stage {2}: {3} of {4});",
                            result->shortfall[d], devices.devices[d].name, s,
                            pp::formatMegabytes(result->stageMemory[s]),
                            pp::formatMegabytes(devices.memory(d)));
    }
    return failure();
  }

  // Heterogeneous virtual workers: each worker gets its own partition for
  // its own devices. When they differ, the IR's stages are the common
  // refinement of the workers' cuts (a stage per distinct tuple of the
  // workers' stages, in lexicographic order), and each worker places the
  // refined stages on its own devices (the plan's placements).
  std::vector<partition::PartitionResult> workerPlans;
  std::string sharedNote;
  if (dataParallel > 1 && workers.size() > 1) {
    workerPlans.push_back(*result);
    for (unsigned w = 1; w < workers.size(); ++w) {
      auto plan = partitionWorker(graph, workers[w], /*lean=*/false);
      if (plan && !plan->feasible && assumesRecompute) {
        partition::PartitionGraph lean = graph;
        for (auto &node : lean.nodes)
          node.activationBytes = 0;
        plan = partitionWorker(lean, workers[w], /*lean=*/true);
      }
      if (!plan) {
        func.emitError() << "partitioning virtual worker " << w
                         << " failed: " << llvm::toString(plan.takeError());
        return failure();
      }
      if (!plan->feasible) {
        auto diag = func.emitError()
                    << "the model does not fit virtual worker " << w
                    << " with schedule " << options.schedule
                    << "; its best plan still needs";
        for (unsigned st = 0; st < plan->deviceOrder.size(); ++st) {
          unsigned d = plan->deviceOrder[st];
          if (plan->shortfall[d] > 0)
            diag << llvm::formatv(" {0} more bytes on {1} (stage {2});",
                                  plan->shortfall[d],
                                  cluster->devices[workers[w][d]].name, st);
        }
        return failure();
      }
      workerPlans.push_back(std::move(*plan));
    }
    pipeline = workers.front();
  }
  // WSP: every pending wave keeps a sum of its stage's weights on the
  // device, D + 1 of them at most; staleness=auto / wave=auto simulate
  // HetPipe's WSP for each candidate D and wave size.
  std::string waveAutoReport;
  if (waveSynchronous && !workerPlans.empty()) {
    // A node's resident bytes: weights, gradients and optimizer state.
    WaveModel model = modelWaves(*cluster, workers, workerPlans, graph,
                                 options.microBatches, 2.0 + stateFactor);
    if (!autoStaleness && staleness + 1 > model.mostPending) {
      auto diag = module.emitError()
                  << "pp-partition: staleness=" << staleness << " keeps up to "
                  << staleness + 1
                  << " pending waves, each a sum of its stage's weights, but "
                  << model.tightest << ": ";
      if (model.mostPending >= 1)
        diag << "the largest bound that fits is D = " << model.mostPending - 1;
      else
        diag << "not even D = 0 fits";
      return failure();
    }
    if (autoStaleness || autoWave) {
      FailureOr<WaveChoice> choice = chooseWaveSync(
          model,
          autoStaleness ? std::nullopt : std::optional<int64_t>(staleness),
          autoWave ? std::nullopt : std::optional<int64_t>(wave));
      if (failed(choice)) {
        module.emitError() << "pp-partition: staleness=auto: no bound fits: "
                           << model.tightest
                           << ", not room for one pending wave";
        return failure();
      }
      staleness = choice->staleness;
      wave = choice->wave;
      waveAutoReport = choice->report;
    }
  }
  bool ownPartitions = llvm::any_of(workerPlans, [&](const auto &plan) {
    return plan.stageOf != result->stageOf;
  });
  std::vector<unsigned> stageOfNode = result->stageOf;
  std::vector<std::vector<int64_t>> placements;
  if (ownPartitions && options.chunks != 1) {
    ownPartitions = false;
    sharedNote = "the virtual workers' own partitions differ, but "
                 "interleaved chunks need one partition: every worker runs "
                 "worker 0's";
  }
  if (ownPartitions) {
    std::set<std::vector<unsigned>> refined;
    std::vector<std::vector<unsigned>> keyOf(nodeOps.size());
    for (size_t n = 0; n < nodeOps.size(); ++n) {
      for (const auto &plan : workerPlans)
        keyOf[n].push_back(plan.stageOf[n]);
      refined.insert(keyOf[n]);
    }
    // Every worker runs the refined stages in its own stage order, so each
    // worker's stage must not decrease along the refined order. Cuts of a
    // DAG can cross (side branches on stage 0 of one worker and stage 1 of
    // the other); such ops move to the later stage of the worker that
    // cuts them earlier: in lexicographic order, a worker's stage becomes
    // the largest seen so far. That keeps every dependency forward, since a
    // consumer's tuple is >= its producer's in every worker.
    std::vector<unsigned> running(workerPlans.size(), 0);
    std::map<std::vector<unsigned>, std::vector<unsigned>> adjusted;
    for (const std::vector<unsigned> &key : refined) {
      std::vector<unsigned> moved = key;
      for (size_t w = 0; w < key.size(); ++w)
        moved[w] = running[w] = std::max(running[w], key[w]);
      adjusted[key] = moved;
    }
    std::map<std::vector<unsigned>, unsigned> merged;
    for (auto &[key, moved] : adjusted)
      merged.try_emplace(moved, 0);
    unsigned index = 0;
    for (auto &[key, stage] : merged)
      stage = index++;
    placements.assign(workerPlans.size(), {});
    for (auto &[key, stage] : merged)
      for (size_t w = 0; w < key.size(); ++w)
        placements[w].push_back(key[w]);
    unsigned movedOps = 0;
    for (size_t n = 0; n < nodeOps.size(); ++n) {
      const std::vector<unsigned> &moved = adjusted[keyOf[n]];
      movedOps += moved != keyOf[n];
      stageOfNode[n] = merged[moved];
    }
    // A worker whose stage lost every op cannot run its schedule.
    for (auto [w, placement] : llvm::enumerate(placements))
      for (unsigned st = 0; st < workerPlans[w].deviceOrder.size(); ++st)
        if (!llvm::is_contained(placement, static_cast<int64_t>(st)))
          ownPartitions = false;
    if (!ownPartitions) {
      placements.clear();
      stageOfNode = result->stageOf;
      sharedNote = "the virtual workers' own partitions cross so that a "
                   "stage would empty: every worker runs worker 0's";
    } else if (movedOps > 0) {
      sharedNote = llvm::formatv("the virtual workers' cuts cross: {0} op(s) "
                                 "moved to a later stage of a worker so that "
                                 "every worker runs the shared stages in "
                                 "order",
                                 movedOps);
    }
  }

  // Annotate: ops get their stage; constants and weight reads the first
  // stage that uses them.
  Builder b(module.getContext());
  for (auto [node, op] : llvm::enumerate(nodeOps))
    pipeline::setStage(op, stageOfNode[node]);
  for (Operation &op : body.without_terminator()) {
    if (!isa<onnx::ConstantOp, onnx::GlobalReadOp>(op))
      continue;
    std::optional<int64_t> first;
    for (Operation *user : op.getUsers())
      if (std::optional<int64_t> stage = pipeline::getStage(user))
        first = first ? std::min(*first, *stage) : *stage;
    pipeline::setStage(&op, first.value_or(0));
  }
  SmallVector<Attribute> order;
  SmallVector<Attribute> placementAttrs;
  if (ownPartitions) {
    for (int64_t coarse : placements.front())
      order.push_back(
          b.getStringAttr(devices.devices[result->deviceOrder[coarse]].name));
    for (const auto &placement : placements)
      placementAttrs.push_back(b.getDenseI64ArrayAttr(placement));
  } else {
    for (unsigned d : result->deviceOrder)
      order.push_back(b.getStringAttr(devices.devices[d].name));
  }
  pipeline::setPlan(
      module, pipeline::PlanAttr::get(module.getContext(), *scheduleKind,
                                      options.microBatches, options.chunks,
                                      static_cast<int64_t>(order.size()),
                                      b.getArrayAttr(order), dataParallel,
                                      /*tensorParallel=*/1, staleness, wave,
                                      b.getArrayAttr(placementAttrs),
                                      updateEvery, options.verticalSync));
  // The other replicas run the stages on their own workers' devices, in
  // their own partition's device order when they have one.
  if (dataParallel > 1) {
    unsigned numPlanDevices = result->deviceOrder.size() / options.chunks;
    std::vector<std::string> names;
    for (unsigned r = 1; r < workers.size(); ++r)
      for (unsigned d = 0; d < numPlanDevices; ++d) {
        // A worker with the same cut may still order its devices its own
        // way (its fast device first).
        bool own = !workerPlans.empty() &&
                   (ownPartitions || workerPlans[r].stageOf == result->stageOf);
        const auto &deviceOrder =
            own ? workerPlans[r].deviceOrder : result->deviceOrder;
        names.push_back(cluster->devices[workers[r][deviceOrder[d]]].name);
      }
    pipeline::setReplicaDevices(module, names);
  }

  if (!options.reportFile.empty()) {
    std::string error;
    auto out = pp::openReportFile(options.reportFile, &error);
    if (!out) {
      module.emitError() << "cannot write report: " << error;
      return failure();
    }
    llvm::raw_ostream &os = out->os();
    os << llvm::formatv("== pipeline plan: {0} stages, schedule {1}, {2} "
                        "micro-batches, {3} ==\n",
                        result->deviceOrder.size(), options.schedule,
                        static_cast<unsigned>(options.microBatches),
                        result->granularity);
    if (!policyNote.empty())
      os << policyNote << "\n";
    if (!sharedNote.empty())
      os << sharedNote << "\n";
    if (ownPartitions) {
      os << llvm::formatv("virtual workers partitioned on their own: {0} "
                          "shared stages (the common refinement of their "
                          "cuts); stage -> device per worker:",
                          placements.front().size());
      for (auto [w, placement] : llvm::enumerate(placements)) {
        os << (w ? ";" : "") << " worker " << w << " [";
        for (auto [k, d] : llvm::enumerate(placement))
          os << (k ? " " : "") << d;
        os << "]";
      }
      os << "\n";
    }
    if (!autoReport.empty())
      os << autoReport << "\n";
    else if (!policy.empty() && policyNote.empty())
      os << "virtual-workers=" << policy << ": " << workers.size()
         << " virtual workers\n";
    if (!waveAutoReport.empty())
      os << waveAutoReport << "\n";
    if (dataParallel > 1 && staleness >= 0)
      os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                          "(virtual workers) under Wave Synchronous "
                          "Parallel: a wave of {1} step(s), staleness bound "
                          "D = {2}\n",
                          dataParallel, wave, staleness);
    else if (dataParallel > 1)
      os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                          "(virtual workers), gradients all-reduced per "
                          "stage\n",
                          dataParallel);
    std::vector<unsigned> opsPerStage(result->deviceOrder.size(), 0);
    for (unsigned s : result->stageOf)
      ++opsPerStage[s];
    for (unsigned s = 0; s < result->deviceOrder.size(); ++s) {
      unsigned d = result->deviceOrder[s];
      os << llvm::formatv(
          "stage {0}: {1,-14} {2,4} ops  {3,10:f3} ms  {4,10} of {5}\n", s,
          devices.devices[d].name, opsPerStage[s], result->stageTime[s] * 1e3,
          pp::formatMegabytes(result->stageMemory[s]),
          pp::formatMegabytes(devices.memory(d)));
    }
    os << llvm::formatv("bottleneck {0:f3} ms per micro-batch; {1} device "
                        "order(s) tried{3}{2}\n",
                        result->bottleneck * 1e3, result->ordersTried,
                        assumesRecompute
                            ? "; fits only with recomputation (memory "
                              "counts stage inputs, not activations)"
                            : "",
                        result->ordersNote());
    // The other virtual workers get their own plans (the IR carries the
    // first); the slowest one sets the pace of data-parallel training.
    // With data parallelism they were partitioned above.
    for (unsigned w = 1; w < workers.size(); ++w) {
      pipeline = workers[w];
      partition::PartitionDevices other = makeDevices(pipeline);
      auto plan =
          w < workerPlans.size()
              ? llvm::Expected<partition::PartitionResult>(workerPlans[w])
              : partitionWorker(graph, workers[w], /*lean=*/false);
      if (!plan) {
        os << "virtual worker " << w << ": " << llvm::toString(plan.takeError())
           << "\n";
        continue;
      }
      os << llvm::formatv("virtual worker {0}: bottleneck {1:f3} ms{2}; "
                          "stages",
                          w, plan->bottleneck * 1e3,
                          plan->feasible ? "" : " (does not fit)");
      std::vector<unsigned> count(plan->deviceOrder.size(), 0);
      for (unsigned st : plan->stageOf)
        ++count[st];
      for (unsigned st = 0; st < plan->deviceOrder.size(); ++st)
        os << " " << other.devices[plan->deviceOrder[st]].name << ":"
           << count[st];
      os << "\n";
    }
    if (workers.size() > 1)
      os << llvm::formatv("virtual workers: {0}, of which {1} distinct "
                          "(kinds, speeds, memory and links in order): each "
                          "distinct one partitioned once\n",
                          workers.size(), distinctWorkers(workers));
    if (failed(pp::keepReportFile(module, *out, options.reportFile)))
      return failure();
  }
  return success();
}

namespace {
/// Whether `options` partition a copy of `module` (errors swallowed), and
/// the devices of a replica (the pipeline's length) when they do.
std::optional<int64_t> stagesIfFits(ModuleOp module,
                                    pp::PartitionPassOptions options,
                                    unsigned inflight) {
  options.microBatches = inflight;
  options.reportFile = "";
  options.planJson = "";
  options.timeline = "";
  OwningOpRef<ModuleOp> copy = module.clone();
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  if (failed(partitionOnce(*copy, options)))
    return std::nullopt;
  pipeline::PlanAttr plan = pipeline::getPlan(*copy);
  return plan ? std::optional<int64_t>(plan.getNumDevices()) : std::nullopt;
}

/// inflight=auto: the largest Nm in 1..2 x devices that partitions (fits
/// every device's memory); 1 when none does, so that partitioning again
/// reports why. Fitting is monotone in Nm (more in flight, more memory),
/// so a binary search over the range.
unsigned largestFittingInflight(ModuleOp module,
                                const pp::PartitionPassOptions &options) {
  std::optional<int64_t> stages = stagesIfFits(module, options, 1);
  if (!stages)
    return 1;
  unsigned low = 1;
  unsigned high = static_cast<unsigned>(
      std::min<int64_t>(2 * *stages, pp::limits::kMaxMicroBatches));
  while (low < high) {
    unsigned middle = low + (high - low + 1) / 2;
    if (stagesIfFits(module, options, middle))
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}
} // namespace

LogicalResult
pp::pipeline::partitionStages(ModuleOp module,
                              const pp::PartitionPassOptions &options) {
  if (options.inflight.empty())
    return partitionOnce(module, options);
  if (pp::schedule::parseScheduleKind(options.schedule) !=
      pp::schedule::ScheduleKind::HetPipe) {
    module.emitError() << "pp-partition: inflight=" << options.inflight
                       << " sets HetPipe's Nm: it needs schedule=hetpipe, got '"
                       << options.schedule << "' (use microbatches=)";
    return failure();
  }
  pp::PartitionPassOptions resolved = options;
  if (options.inflight == "auto") {
    resolved.microBatches = largestFittingInflight(module, options);
    module.emitRemark() << "pp-partition: inflight=auto: Nm = "
                        << resolved.microBatches
                        << ", the most mini-batches in flight (up to twice "
                           "the devices of a virtual worker) that fit";
  } else {
    unsigned count = 0;
    if (StringRef(options.inflight).getAsInteger(10, count) || count < 1 ||
        count > pp::limits::kMaxMicroBatches) {
      module.emitError() << "pp-partition: inflight must be auto or a count "
                            "in 1.."
                         << pp::limits::kMaxMicroBatches << ", got '"
                         << options.inflight << "'";
      return failure();
    }
    resolved.microBatches = count;
  }
  return partitionOnce(module, resolved);
}
