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

/// WSP's costs for the workers' partitions; `residentPerWeightByte`: the
/// bytes a weight byte keeps resident with its gradient and optimizer state.
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

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

/// The options every plan reads, checked: the function to partition, the
/// cluster, the schedule, the optimizer's state and tp=.
struct PartitionRequest {
  func::FuncOp func;
  pp::cluster::Cluster cluster;
  pp::schedule::ScheduleKind kind = pp::schedule::ScheduleKind::OneFOneB;
  /// Optimizer state bytes per weight byte: 0 (sgd), 1 (momentum), 2 (adam).
  double stateFactor = 0;
  pipeline::TensorParallelRequest tensorParallel;
};

/// Optimizer state bytes per weight byte.
double optimizerStateFactor(pp::OptimizerState optimizer) {
  switch (optimizer) {
  case pp::OptimizerState::SGD:
    return 0.0;
  case pp::OptimizerState::Momentum:
    return 1.0;
  case pp::OptimizerState::Adam:
    return 2.0;
  }
  llvm_unreachable("unknown optimizer state");
}

/// The first problem with schedule=, vertical-sync=, update-every=,
/// microbatches= and chunks=, or "" when they go together.
std::string checkScheduleOptions(const pp::PartitionPassOptions &options) {
  pp::schedule::ScheduleKind scheduleKind = options.schedule;
  std::string schedule = pp::schedule::toString(scheduleKind);
  if (options.verticalSync &&
      scheduleKind != pp::schedule::ScheduleKind::PipeDream)
    return "vertical-sync is an option of schedule=pipedream, not " + schedule;
  if (options.updateEvery != 0 &&
      !pp::schedule::isWeightVersioned(scheduleKind))
    return "update-every is an option of the weight-versioned schedules "
           "(pipedream, pipedream-2bw, nf1b, v-timeprest, i-timeprest); " +
           schedule + " updates once a step";
  if ((scheduleKind == pp::schedule::ScheduleKind::PipeDream ||
       scheduleKind == pp::schedule::ScheduleKind::HetPipe) &&
      options.updateEvery > 1)
    return "schedule=" + schedule +
           " updates after every micro-batch: "
           "update-every must be 1, got " +
           std::to_string(options.updateEvery);
  if (options.updateEvery > 0 && options.microBatches > 0 &&
      options.microBatches % options.updateEvery != 0)
    return "update-every (" + std::to_string(options.updateEvery) +
           ") must divide microbatches (" +
           std::to_string(options.microBatches) + ")";
  if (options.microBatches == 0)
    return "microbatches must be > 0";
  if (options.microBatches > pp::limits::kMaxMicroBatches)
    return "microbatches must be at most " +
           std::to_string(pp::limits::kMaxMicroBatches);
  if (pp::kinds::isVShaped(scheduleKind) && options.chunks != 2)
    return "schedule=" + schedule +
           " places two chunks per device in a V: chunks must be 2, got " +
           std::to_string(options.chunks);
  if (!pp::kinds::isVShaped(scheduleKind) &&
      (options.chunks == 0 ||
       (options.chunks > 1 &&
        scheduleKind != pp::schedule::ScheduleKind::Interleaved1F1B)))
    return "chunks must be 1, or > 1 with schedule interleaved";
  return "";
}

/// Checks the function, cluster=, recompute=, the schedule's options and
/// tp=, in that order: the first problem is the one diagnosed.
FailureOr<PartitionRequest>
parseRequest(ModuleOp module, const pp::PartitionPassOptions &options) {
  auto func =
      pipeline::lookupFunction(module, options.funcName, "to partition");
  if (!func)
    return failure();
  if (options.clusterSpec.empty() && !pipeline::getCluster(module)) {
    module.emitError() << "pp-partition needs cluster=<spec or .json>";
    return failure();
  }
  if (failed(pp::verifyPlannableSizes(module, "pp-partition")))
    return failure();
  FailureOr<std::optional<pp::cluster::Cluster>> cluster =
      pipeline::resolveCluster(module, options.clusterSpec, "pp-partition",
                               [&] { return module.emitError(); });
  if (failed(cluster))
    return failure();
  // Parsed once: the passes after this one read it from the module.
  pipeline::setCluster(
      module, pipeline::ClusterAttr::get(module.getContext(), **cluster));
  double stateFactor = optimizerStateFactor(options.optimizer);
  std::string invalid = checkScheduleOptions(options);
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
  return PartitionRequest{func, std::move(**cluster), options.schedule,
                          stateFactor, std::move(*tpRequest)};
}

/// The cost model: roofline, or a measured profile on top of it. It learns
/// which values the backward reads, whose bytes a stage keeps.
FailureOr<std::unique_ptr<pp::CostModel>>
createPlannerCostModel(ModuleOp module, StringRef profileFile, Block &body) {
  auto createdModel = pp::createCostModel(profileFile);
  if (!createdModel) {
    module.emitError() << llvm::toString(createdModel.takeError());
    return failure();
  }
  std::unique_ptr<pp::CostModel> costModel = std::move(*createdModel);
  costModel->setSavedValues(pp::findValuesSavedForBackward(body));
  return costModel;
}

/// data-parallel=, staleness= and wave= as given.
struct DataParallelRequest {
  /// Whether data-parallel= was given; if not (-1), a virtual-workers
  /// policy's worker count, else 1.
  bool given = false;
  unsigned dataParallel = 1;
  /// staleness=auto / wave=auto: chosen once the workers are partitioned.
  bool autoStaleness = false;
  bool autoWave = false;
  /// The staleness bound D (-1: synchronous data parallel) and the steps
  /// of a wave.
  int64_t staleness = -1;
  int64_t wave = 1;
  /// Wave Synchronous Parallel: staleness=auto or a bound D >= 0.
  bool waveSynchronous = false;
};

/// Parses data-parallel= (>= 1 when given), staleness= (an integer >= -1
/// or auto) and wave= (an integer >= 1 or auto).
FailureOr<DataParallelRequest>
parseDataParallel(ModuleOp module, const pp::PartitionPassOptions &options) {
  if (options.dataParallel == 0 || options.dataParallel < -1) {
    module.emitError() << "pp-partition: data-parallel must be >= 1";
    return failure();
  }
  DataParallelRequest request;
  request.given = options.dataParallel > 0;
  request.dataParallel = request.given ? options.dataParallel : 1;
  request.autoStaleness = options.staleness == "auto";
  request.autoWave = options.wave == "auto";
  if (!request.autoStaleness &&
      (StringRef(options.staleness).getAsInteger(10, request.staleness) ||
       request.staleness < -1)) {
    module.emitError() << "pp-partition: staleness must be an integer >= 0, "
                          "-1 (synchronous data parallel) or auto, got '"
                       << options.staleness << "'";
    return failure();
  }
  if (!request.autoWave &&
      (StringRef(options.wave).getAsInteger(10, request.wave) ||
       request.wave < 1 || request.wave > (int64_t(1) << 30))) {
    module.emitError() << "pp-partition: wave must be an integer >= 1 or "
                          "auto, got '"
                       << options.wave << "'";
    return failure();
  }
  request.waveSynchronous = request.autoStaleness || request.staleness >= 0;
  return request;
}

//===----------------------------------------------------------------------===//
// Virtual workers
//===----------------------------------------------------------------------===//

/// The workers of a virtual-workers policy, by the policy's name.
using PolicyWorkers = std::pair<std::string, std::vector<std::vector<int>>>;

/// The pipelines: one per virtual worker (the IR gets the first one's plan;
/// HetPipe's virtual workers run the same model on their own devices), or
/// all devices as one.
struct VirtualWorkers {
  /// Device indices of each worker in pipeline order; with chunks, each
  /// device once per chunk.
  std::vector<std::vector<int>> workers;
  /// virtual-workers=auto: every policy that fits, chosen between once
  /// each is partitioned.
  std::vector<PolicyWorkers> candidates;
  /// Why virtual-workers= was ignored, for the report; "" when it was not.
  std::string policyNote;
  /// The replicas that train synchronously (or under WSP).
  unsigned dataParallel = 1;
};

/// virtual-workers=auto: the policies (np, ed, hd) whose workers can be
/// the data-parallel replicas: dp= of them of equal size when dp= is
/// given; else of equal size, and at least two under WSP. Fails, saying
/// why each was rejected, when none can.
FailureOr<std::vector<PolicyWorkers>>
fittingPolicies(ModuleOp module, const pp::PartitionPassOptions &options,
                const pp::cluster::Cluster &cluster,
                const DataParallelRequest &dp) {
  std::vector<PolicyWorkers> candidates;
  std::string rejected;
  for (StringRef name : {"np", "ed", "hd"}) {
    auto grouped = pp::cluster::groupVirtualWorkers(cluster, name);
    if (!grouped) {
      rejected += "; " + llvm::toString(grouped.takeError());
      continue;
    }
    bool sizesEqual = llvm::all_of(*grouped, [&](const auto &w) {
      return w.size() == grouped->front().size();
    });
    if (dp.given && dp.dataParallel > 1 &&
        (grouped->size() != dp.dataParallel || !sizesEqual)) {
      rejected +=
          "; virtual-workers=" + name.str() + ": " +
          std::to_string(grouped->size()) +
          " workers, not data-parallel=" + std::to_string(dp.dataParallel) +
          " of equal size";
      continue;
    }
    // Without dp= the workers are the data-parallel replicas.
    std::string unfit;
    if (!dp.given && grouped->size() > 1 && !sizesEqual)
      unfit = "workers of different sizes cannot be data-parallel "
              "replicas";
    else if (!dp.given && grouped->size() < 2 && dp.waveSynchronous)
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
  return candidates;
}

/// Virtual workers by the virtual-workers= policy, unless the cluster file
/// lists its own; with neither, none yet (formReplicas splits the
/// devices). auto keeps every policy that fits and starts from the first.
FailureOr<VirtualWorkers> groupByPolicy(ModuleOp module,
                                        const pp::PartitionPassOptions &options,
                                        const pp::cluster::Cluster &cluster,
                                        const DataParallelRequest &dp) {
  VirtualWorkers result;
  result.workers = cluster.virtualWorkers;
  result.dataParallel = dp.dataParallel;
  StringRef policy = options.virtualWorkers;
  if (!policy.empty() && !result.workers.empty()) {
    result.policyNote = "virtual-workers=" + policy.str() +
                        " ignored: the cluster file lists its virtual workers";
  } else if (policy == "auto") {
    FailureOr<std::vector<PolicyWorkers>> candidates =
        fittingPolicies(module, options, cluster, dp);
    if (failed(candidates))
      return failure();
    result.candidates = std::move(*candidates);
    result.workers = result.candidates.front().second;
    // Until auto chooses: every candidate has as many workers as it needs.
    if (!dp.given)
      result.dataParallel = result.workers.size();
  } else if (!policy.empty()) {
    auto grouped = pp::cluster::groupVirtualWorkers(cluster, policy);
    if (!grouped) {
      module.emitError() << "pp-partition: "
                         << llvm::toString(grouped.takeError());
      return failure();
    }
    result.workers = std::move(*grouped);
    if (dp.given && result.workers.size() != dp.dataParallel) {
      module.emitError() << "pp-partition: data-parallel=" << dp.dataParallel
                         << " but virtual-workers=" << policy << " forms "
                         << result.workers.size() << " virtual workers";
      return failure();
    }
    result.dataParallel = result.workers.size();
  }
  return result;
}

/// Wave Synchronous Parallel needs two or more replicas, wave= a staleness
/// bound, and HetPipe's wave is its Nm mini-batches in flight: one step.
LogicalResult checkWaveSync(ModuleOp module,
                            const pp::PartitionPassOptions &options,
                            pp::schedule::ScheduleKind kind,
                            const DataParallelRequest &dp,
                            unsigned dataParallel) {
  if (dp.waveSynchronous && dataParallel < 2) {
    module.emitError() << "pp-partition: staleness=" << options.staleness
                       << " (Wave Synchronous Parallel) needs data-parallel "
                          ">= 2 virtual workers, got "
                       << dataParallel;
    return failure();
  }
  if ((dp.autoWave || dp.wave > 1) && !dp.waveSynchronous) {
    module.emitError() << "pp-partition: wave=" << options.wave
                       << " needs a staleness bound (staleness=D or auto)";
    return failure();
  }
  if (kind == pp::schedule::ScheduleKind::HetPipe && dp.wave > 1) {
    module.emitError() << "pp-partition: schedule=hetpipe: a wave is the Nm "
                          "mini-batches of one step (microbatches=Nm); wave "
                          "must be 1 or auto, got "
                       << dp.wave;
    return failure();
  }
  return success();
}

/// Checks the workers against the data-parallel degree and, when there
/// are none, splits the cluster's devices into that many equal replicas.
/// Synchronous data parallelism runs one partition on every replica, so
/// the replicas need as many devices each.
LogicalResult formReplicas(ModuleOp module, int numDevices,
                           VirtualWorkers &result) {
  unsigned dataParallel = result.dataParallel;
  std::vector<std::vector<int>> &workers = result.workers;
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
  if (dataParallel > 1)
    for (const auto &worker : workers)
      if (worker.size() != workers.front().size()) {
        module.emitError()
            << "pp-partition: data-parallel replicas need as many devices "
               "each; the virtual workers have "
            << workers.front().size() << " and " << worker.size();
        return failure();
      }
  return success();
}

/// Interleaving: chunks x devices stages, stage c on device c mod p; a V
/// (zb-v, dualpipev) runs the second chunk back up the devices.
void addChunks(std::vector<std::vector<int>> &workers, unsigned chunks,
               bool vShaped) {
  for (auto &worker : workers) {
    unsigned numPhysical = worker.size();
    for (unsigned c = 1; c < chunks; ++c)
      for (unsigned i = 0; i < numPhysical; ++i)
        worker.push_back(worker[vShaped ? numPhysical - 1 - i : i]);
  }
}

/// At most kMaxPartitionDevices stages per pipeline; checked before the
/// per-pair link tables, which take seconds for thousands of devices. With
/// tensor parallelism a stage is a group of GPUs (the planner drops
/// groupings of too many stages).
LogicalResult checkPipelineLength(ModuleOp module,
                                  const std::vector<std::vector<int>> &workers,
                                  bool tensorParallel) {
  for (const auto &worker : workers)
    if (worker.size() > partition::kMaxPartitionDevices && !tensorParallel) {
      module.emitError() << "pp-partition: " << worker.size()
                         << " stages (devices x chunks) in one pipeline: "
                         << "the partitioner supports at most "
                         << partition::kMaxPartitionDevices;
      return failure();
    }
  return success();
}

/// The virtual workers of the plan, with their chunks, checked against the
/// data-parallel and WSP options. Clears `dp.autoWave` for HetPipe, whose
/// wave is its step.
FailureOr<VirtualWorkers>
formVirtualWorkers(ModuleOp module, const pp::PartitionPassOptions &options,
                   const PartitionRequest &request, DataParallelRequest &dp) {
  FailureOr<VirtualWorkers> result =
      groupByPolicy(module, options, request.cluster, dp);
  if (failed(result) || failed(checkWaveSync(module, options, request.kind, dp,
                                             result->dataParallel)))
    return failure();
  if (request.kind == pp::schedule::ScheduleKind::HetPipe)
    dp.autoWave = false;
  if (failed(formReplicas(module, request.cluster.numDevices(), *result)))
    return failure();
  // Each chunk gets an equal share of its device's memory (makeDevices).
  bool vShaped = pp::kinds::isVShaped(request.kind);
  addChunks(result->workers, options.chunks, vShaped);
  for (auto &[name, list] : result->candidates)
    addChunks(list, options.chunks, vShaped);
  if (failed(checkPipelineLength(module, result->workers,
                                 request.tensorParallel.active())))
    return failure();
  return result;
}

//===----------------------------------------------------------------------===//
// The partitioner's graph and constraints
//===----------------------------------------------------------------------===//

/// The forward function as the partitioner sees it.
struct PlannerGraph {
  partition::PartitionGraph graph;
  /// The op of each node.
  std::vector<Operation *> nodeOps;
  DenseMap<Operation *, unsigned> nodeOf;
  /// Bytes of trainable weights each node's stage updates for it: a tied
  /// weight's split evenly over its readers, whose stages all update it.
  std::vector<int64_t> updateBytes;
};

/// Nodes: every op but constants and weight reads (whose bytes belong to
/// the ops that read them), with the activation and output bytes of one
/// micro-batch.
void addOpNodes(Block &body, const pp::CostModel &costModel, PlannerGraph &g) {
  for (Operation &op : body.without_terminator()) {
    if (isa<onnx::ConstantOp, onnx::GlobalReadOp>(op))
      continue;
    partition::PartitionNode node;
    node.name = pp::getOpName(&op);
    if (node.name.empty())
      node.name = op.getName().getStringRef().str() + "#" +
                  std::to_string(g.nodeOps.size());
    pp::OpWork work = costModel.getWork(&op);
    node.activationBytes = work.activationBytes;
    for (Value result : op.getResults())
      node.outputBytes += pp::getTensorBytes(result.getType());
    g.nodeOf[&op] = g.graph.addNode(std::move(node));
    g.nodeOps.push_back(&op);
  }
}

/// Parameters: weights + gradients + optimizer state, on the node that
/// reads them; returns the tied groups of those that several nodes read.
std::vector<partition::TiedGroup> assignParameters(PlannerGraph &g,
                                                   double stateFactor) {
  llvm::MapVector<StringRef, SmallVector<unsigned>> readers;
  llvm::StringMap<int64_t> globalBytes;
  SymbolTableCollection symbolTables;
  for (Operation *op : g.nodeOps)
    for (Value operand : op->getOperands())
      if (auto read = operand.getDefiningOp<onnx::GlobalReadOp>()) {
        auto global = symbolTables.lookupNearestSymbolFrom<onnx::GlobalOp>(
            read, read.getGlobalAttr());
        if (!global || global.getKind() != onnx::kTrainable)
          continue;
        auto &list = readers[global.getSymName()];
        if (!llvm::is_contained(list, g.nodeOf[op]))
          list.push_back(g.nodeOf[op]);
        globalBytes[global.getSymName()] = pp::getTensorBytes(global.getType());
      }
  std::vector<partition::TiedGroup> tiedGroups;
  g.updateBytes.assign(g.nodeOps.size(), 0);
  for (auto &[name, nodes] : readers) {
    uint64_t bytes = globalBytes[name];
    for (unsigned node : nodes)
      g.updateBytes[node] += static_cast<int64_t>(bytes / nodes.size());
    uint64_t state = bytes * static_cast<uint64_t>(2.0 + stateFactor);
    if (nodes.size() == 1) {
      g.graph.nodes[nodes.front()].weightBytes += state;
      continue;
    }
    partition::TiedGroup group;
    group.nodes.assign(nodes.begin(), nodes.end());
    group.stateBytes = state;
    group.gradientBytes = bytes;
    tiedGroups.push_back(std::move(group));
  }
  return tiedGroups;
}

/// Edges: from each node to the nodes that read its results.
void addDataEdges(PlannerGraph &g) {
  for (Operation *op : g.nodeOps)
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp();
          producer && g.nodeOf.count(producer))
        g.graph.addEdge(g.nodeOf[producer], g.nodeOf[op]);
}

/// pin=PATTERN=STAGE,...: the ops whose name matches a pattern go to its
/// stage (of `numStages`).
LogicalResult addPins(ModuleOp module, StringRef pins,
                      ArrayRef<Operation *> nodeOps, size_t numStages,
                      partition::PartitionOptions &searchOptions) {
  for (StringRef entry : llvm::split(pins, ',')) {
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
    if (stage >= numStages) {
      emitError(module.getLoc())
          << "pp-partition: pin '" << entry << "' names stage " << stage
          << " of " << numStages;
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
  return success();
}

/// split-after=OP,...: fixes every op, its stage the number of split
/// points before it in op order; stages may then be empty.
LogicalResult addSplitPoints(ModuleOp module, StringRef splitAfter,
                             ArrayRef<Operation *> nodeOps, size_t numStages,
                             partition::PartitionOptions &searchOptions) {
  if (splitAfter.empty())
    return success();
  SmallVector<StringRef> names;
  splitAfter.split(names, ',', -1, false);
  if (names.size() + 1 > numStages) {
    emitError(module.getLoc())
        << "pp-partition: " << names.size() << " split points need "
        << names.size() + 1 << " stages, the cluster has " << numStages;
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
        emitError(module.getLoc()) << "pp-partition: split point '"
                                   << name.trim() << "' is no op of the model";
        return failure();
      }
  }
  searchOptions.allowEmptyStages = true;
  return success();
}

//===----------------------------------------------------------------------===//
// What a stage holds under the schedule
//===----------------------------------------------------------------------===//

/// Each stage's in-flight micro-batches and weight versions under a
/// weight-versioned schedule, as the built schedule holds them; built once
/// per stage count, since the partitioner asks for many.
class VersionedStageCosts {
public:
  struct Costs {
    std::vector<int64_t> inflight, versions;
  };

  VersionedStageCosts(pp::schedule::ScheduleKind kind, unsigned microBatches,
                      int64_t updateEvery, bool verticalSync)
      : kind(kind), microBatches(microBatches), updateEvery(updateEvery),
        verticalSync(verticalSync) {}

  /// The costs over `numStages` stages; null when the schedule cannot be
  /// built over them (`error`, when given, says why).
  const Costs *get(unsigned numStages, std::string *error) {
    auto it = byStages.find(numStages);
    if (it != byStages.end())
      return &it->second;
    Costs costs;
    // A drained step, and a window of 3 steps (the stream's steady state
    // holds more when the warm-up spans the step: HetPipe's Nm).
    for (int steps : {1, 3}) {
      pp::schedule::Schedule schedule;
      std::string ignored;
      if (!pp::schedule::buildVersionedSchedule(
              kind, static_cast<int>(numStages),
              static_cast<int>(microBatches) * steps,
              static_cast<int>(updateEvery), verticalSync, schedule,
              error ? *error : ignored, nullptr,
              static_cast<int>(microBatches)))
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
    return &byStages.emplace(numStages, std::move(costs)).first->second;
  }

private:
  pp::schedule::ScheduleKind kind;
  unsigned microBatches;
  int64_t updateEvery;
  bool verticalSync;
  std::map<unsigned, Costs> byStages;
};

/// Weight-versioned schedules: the in-flight micro-batches and the weight
/// versions of each stage are those of the built schedule. Returns
/// update-every as chosen; fails when the schedule cannot be built over
/// the first worker's `numStages`.
FailureOr<int64_t> configureVersionedMemory(
    ModuleOp module, const pp::PartitionPassOptions &options,
    pp::schedule::ScheduleKind kind, double stateFactor, size_t numStages,
    partition::PartitionOptions &searchOptions) {
  int64_t updateEvery = chooseUpdateEvery(kind, options.updateEvery,
                                          options.microBatches, numStages);
  // Shared by the search's callbacks, which outlive this function.
  auto costs = std::make_shared<VersionedStageCosts>(
      kind, options.microBatches, updateEvery, options.verticalSync);
  std::string error;
  if (!costs->get(numStages, &error)) {
    module.emitError() << "pp-partition: schedule="
                       << pp::schedule::toString(options.schedule) << " over "
                       << numStages << " stages, update-every=" << updateEvery
                       << ": " << error;
    return failure();
  }
  searchOptions.schedule = partition::PipelineSchedule::Custom;
  searchOptions.inflight = [costs](unsigned stage, unsigned numStages) {
    const VersionedStageCosts::Costs *held = costs->get(numStages, nullptr);
    return held && stage < held->inflight.size()
               ? static_cast<uint64_t>(held->inflight[stage])
               : 0;
  };
  // Each older version held costs the weights once more, beside the
  // weights, gradients and optimizer state the weight bytes count.
  searchOptions.weightScale = [costs, stateFactor](unsigned stage,
                                                   unsigned numStages) {
    const VersionedStageCosts::Costs *held = costs->get(numStages, nullptr);
    double extra =
        held && stage < held->versions.size() ? held->versions[stage] - 1 : 0;
    return (2.0 + stateFactor + extra) / (2.0 + stateFactor);
  };
  return updateEvery;
}

/// ZB-H2 and the V-shaped schedules hold other counts than 1F1B (ZB-H2
/// 2p-1 stashes on every stage): those of the built order, once per stage
/// count.
void configureBuiltInFlight(pp::schedule::ScheduleKind kind,
                            unsigned microBatches, unsigned chunks,
                            partition::PartitionOptions &searchOptions) {
  auto builtInFlight =
      std::make_shared<std::map<unsigned, std::vector<int64_t>>>();
  searchOptions.schedule = partition::PipelineSchedule::Custom;
  searchOptions.inflight = [builtInFlight, kind, microBatches, chunks](
                               unsigned stage, unsigned numStages) -> uint64_t {
    auto [it, inserted] = builtInFlight->try_emplace(numStages);
    pp::schedule::Schedule schedule;
    std::string ignored;
    if (inserted && numStages % chunks == 0 &&
        pp::schedule::buildSchedule(kind, static_cast<int>(numStages / chunks),
                                    static_cast<int>(microBatches),
                                    static_cast<int>(chunks), schedule,
                                    ignored))
      it->second = pp::schedule::peakInFlight(schedule);
    return stage < it->second.size() ? static_cast<uint64_t>(it->second[stage])
                                     : 0;
  };
}

/// How the search counts a stage's memory under the schedule (in-flight
/// micro-batches, weight versions) and how hard it searches. Returns
/// update-every: 0 for the schedules that update once a step.
FailureOr<int64_t>
configureScheduleMemory(ModuleOp module,
                        const pp::PartitionPassOptions &options,
                        const PartitionRequest &request, size_t numStages,
                        partition::PartitionOptions &searchOptions) {
  pp::schedule::ScheduleKind kind = request.kind;
  searchOptions.schedule = kind == pp::schedule::ScheduleKind::GPipe
                               ? partition::PipelineSchedule::GPipe
                               : partition::PipelineSchedule::OneFOneB;
  searchOptions.microBatches = options.microBatches;
  int64_t updateEvery = 0;
  if (pp::schedule::isWeightVersioned(kind)) {
    FailureOr<int64_t> chosen = configureVersionedMemory(
        module, options, kind, request.stateFactor, numStages, searchOptions);
    if (failed(chosen))
      return failure();
    updateEvery = *chosen;
  }
  if (kind == pp::schedule::ScheduleKind::ZBH2 || pp::kinds::isVShaped(kind))
    configureBuiltInFlight(kind, options.microBatches, options.chunks,
                           searchOptions);
  // Reordering would break the chunk-to-device rule of interleaving.
  searchOptions.tryDeviceOrders =
      options.tryDeviceOrders && options.chunks == 1;
  return updateEvery;
}

//===----------------------------------------------------------------------===//
// Partitioning the workers
//===----------------------------------------------------------------------===//

/// Partitions the model for one virtual worker at a time: the graph's
/// cost queries read the worker being partitioned. Virtual workers of the
/// same devices in the same order (kinds, speeds, memory and links:
/// HetPipe's ED policy makes them so) get the same plan, so each distinct
/// worker is partitioned once (of 64 such workers of 16 GPUs, 63
/// partitions of a 3,270-op model are seconds each).
class WorkerPartitioner {
public:
  WorkerPartitioner(const pp::cluster::Cluster &cluster,
                    const partition::PartitionOptions &searchOptions,
                    unsigned chunks)
      : cluster(cluster), searchOptions(searchOptions), chunks(chunks) {}
  // The graph's times point at this object.
  WorkerPartitioner(const WorkerPartitioner &) = delete;
  WorkerPartitioner &operator=(const WorkerPartitioner &) = delete;

  /// Sets `g`'s times: a node's forward and backward on its device of the
  /// worker being partitioned, and its share of the optimizer updates: a
  /// weight-versioned schedule updates every `updateEvery` micro-batches
  /// (HetPipe and PipeDream every one), the others once in `microBatches`.
  void setTimes(PlannerGraph &g, const pp::CostModel &costModel,
                int64_t updateEvery, unsigned microBatches,
                double stateFactor) {
    double updatesPerMicroBatch =
        1.0 / static_cast<double>(updateEvery > 0 ? updateEvery
                                                  : std::max(microBatches, 1u));
    g.graph.timeFn = [this, &costModel, &g, updatesPerMicroBatch,
                      stateFactor](unsigned node, unsigned device) {
      const auto &d = cluster.devices[current[device]];
      Operation *op = g.nodeOps[node];
      return costModel.getForwardTime(op, d) +
             costModel.getBackwardTime(op, d) +
             updatesPerMicroBatch *
                 costModel.getUpdateTime(g.updateBytes[node], stateFactor, d);
    };
  }

  /// The devices of a pipeline, as the partitioner sees them: each chunk
  /// gets an equal share of its device's memory, and chunks of one device
  /// pass activations for free.
  partition::PartitionDevices makeDevices(const std::vector<int> &worker) {
    partition::PartitionDevices devices;
    for (int index : worker) {
      const auto &device = cluster.devices[index];
      partition::PartitionDevice d;
      d.name = device.name;
      d.kind =
          kindIndex.try_emplace(device.kind, kindIndex.size()).first->second;
      d.memoryBytes = static_cast<uint64_t>(device.memoryBytes) / chunks;
      devices.addDevice(std::move(d));
    }
    for (unsigned a = 0; a < worker.size(); ++a)
      for (unsigned b = 0; b < worker.size(); ++b)
        if (a != b && worker[a] == worker[b])
          devices.setDirectedLink(a, b, 1e18, 0); // chunks of one device
        else if (a != b)
          devices.setDirectedLink(a, b, cluster.bandwidth(worker[a], worker[b]),
                                  cluster.latency(worker[a], worker[b]));
    return devices;
  }

  /// The plan of `graph` on `worker`; `lean` when the graph counts no
  /// activations (recomputation), which plans apart.
  llvm::Expected<partition::PartitionResult>
  plan(const partition::PartitionGraph &graph, const std::vector<int> &worker,
       bool lean) {
    current = worker;
    std::string key = planningKey(worker, lean);
    if (auto it = plans.find(key); it != plans.end())
      return it->second;
    auto result =
        partition::partition(graph, makeDevices(worker), searchOptions);
    if (result)
      plans.emplace(std::move(key), *result);
    return result;
  }

  /// How many of `workers` plan apart.
  size_t countDistinct(const std::vector<std::vector<int>> &workers) const {
    std::set<std::string> keys;
    for (const std::vector<int> &worker : workers)
      keys.insert(planningKey(worker, /*lean=*/false));
    return keys.size();
  }

private:
  std::string planningKey(const std::vector<int> &worker, bool lean) const {
    std::string key = lean ? "lean" : "full";
    cluster.appendPlanningKey(worker, key);
    return key;
  }

  const pp::cluster::Cluster &cluster;
  const partition::PartitionOptions &searchOptions;
  unsigned chunks;
  /// The worker being partitioned, whose devices the times are of.
  std::vector<int> current;
  /// Partitioner kind of each device kind, numbered in order of first use
  /// (so by the order of the makeDevices calls).
  llvm::StringMap<unsigned> kindIndex;
  std::map<std::string, partition::PartitionResult> plans;
};

/// virtual-workers=auto: each policy's workers partitioned on their own;
/// a worker's step takes about (m + stages - 1) bottlenecks, and the
/// slowest worker paces synchronous training, so the policy with the most
/// samples per second wins (ties: np, ed, hd in that order). Sets the
/// workers (and, without dp=, the degree) and returns the report's line;
/// "" without candidates.
std::string chooseAutoPolicy(WorkerPartitioner &partitioner,
                             const partition::PartitionGraph &graph,
                             unsigned microBatches,
                             const DataParallelRequest &dp,
                             VirtualWorkers &result) {
  if (result.candidates.empty())
    return "";
  std::string autoReport;
  double bestRate = -1;
  size_t best = 0;
  for (auto [index, candidate] : llvm::enumerate(result.candidates)) {
    double slowest = 0;
    bool fits = true;
    for (const std::vector<int> &worker : candidate.second) {
      auto plan = partitioner.plan(graph, worker, /*lean=*/false);
      if (!plan) {
        llvm::consumeError(plan.takeError());
        fits = false;
        break;
      }
      fits &= plan->feasible;
      slowest = std::max(
          slowest, plan->bottleneck *
                       (microBatches + static_cast<double>(worker.size()) - 1));
    }
    double rate = fits && slowest > 0
                      ? static_cast<double>(candidate.second.size()) / slowest
                      : 0;
    autoReport += llvm::formatv(
        "{0}{1}: {2} workers, slowest step ~{3:f3} ms{4}",
        autoReport.empty() ? "" : "; ", candidate.first,
        candidate.second.size(), slowest * 1e3, fits ? "" : " (does not fit)");
    if (rate > bestRate) {
      bestRate = rate;
      best = index;
    }
  }
  result.workers = result.candidates[best].second;
  if (!dp.given)
    result.dataParallel = result.workers.size();
  return "virtual-workers=auto chose " + result.candidates[best].first + " (" +
         autoReport + ")";
}

/// The model and how the partitioner searches it.
struct PlannerInputs {
  PlannerGraph graph;
  partition::PartitionOptions searchOptions;
  /// Of a weight-versioned schedule; 0 for the others.
  int64_t updateEvery = 0;
};

/// Tensor parallelism: each stage on a group of GPUs, planned by
/// TensorParallelPlan.h from what --pp-partition has built.
LogicalResult planWithTensorParallel(ModuleOp module,
                                     const pp::PartitionPassOptions &options,
                                     const PartitionRequest &request,
                                     const VirtualWorkers &workers,
                                     const PlannerInputs &inputs,
                                     const pp::CostModel *costModel) {
  pipeline::TensorParallelPlanInput input;
  input.module = module;
  input.func = request.func;
  input.options = &options;
  input.cluster = &request.cluster;
  input.workers = workers.workers;
  input.graph = inputs.graph.graph;
  input.graph.timeFn = nullptr;
  input.nodeOps = inputs.graph.nodeOps;
  input.searchOptions = inputs.searchOptions;
  input.costModel = costModel;
  input.kind = request.kind;
  input.stateFactor = request.stateFactor;
  input.updateEvery = inputs.updateEvery;
  StringRef policy = options.virtualWorkers;
  if (!workers.policyNote.empty())
    input.notes.push_back(workers.policyNote);
  else if (!policy.empty())
    input.notes.push_back("virtual-workers=" + policy.str() + ": " +
                          std::to_string(workers.workers.size()) +
                          " virtual workers");
  return pipeline::planTensorParallel(input, request.tensorParallel);
}

/// The graph with no activations kept: each stage holds only its inputs,
/// which is what recomputation leaves.
partition::PartitionGraph
withoutActivations(const partition::PartitionGraph &graph) {
  partition::PartitionGraph lean = graph;
  for (auto &node : lean.nodes)
    node.activationBytes = 0;
  return lean;
}

/// The first virtual worker's plan, which the IR gets.
struct FirstWorkerPlan {
  partition::PartitionResult result;
  /// Fits only with recomputation: memory counts stage inputs, not
  /// activations.
  bool assumesRecompute = false;
};

/// The error of a first worker that the model does not fit: what each
/// device lacks.
void emitDoesNotFit(func::FuncOp func, const pp::PartitionPassOptions &options,
                    const partition::PartitionResult &result,
                    const partition::PartitionDevices &devices) {
  auto diag = func.emitError()
              << "the model does not fit the cluster with schedule "
              << pp::schedule::toString(options.schedule) << " and "
              << static_cast<unsigned>(options.microBatches)
              << " micro-batches; the best plan still needs";
  for (unsigned s = 0; s < result.deviceOrder.size(); ++s) {
    unsigned d = result.deviceOrder[s];
    if (result.shortfall[d] == 0)
      continue;
    diag << llvm::formatv(" {0} more bytes on {1} (stage {2}: {3} of {4});",
                          result.shortfall[d], devices.devices[d].name, s,
                          pp::formatMegabytes(result.stageMemory[s]),
                          pp::formatMegabytes(devices.memory(d)));
  }
}

/// Partitions the first worker (`devices` its partitioner devices). With
/// recomputation allowed, a model that does not fit with every activation
/// kept is partitioned as if each stage kept only its inputs;
/// --pp-recompute then chooses what to recompute.
FailureOr<FirstWorkerPlan>
planFirstWorker(func::FuncOp func, const pp::PartitionPassOptions &options,
                WorkerPartitioner &partitioner,
                const partition::PartitionGraph &graph,
                const std::vector<int> &worker,
                const partition::PartitionDevices &devices) {
  auto result = partitioner.plan(graph, worker, /*lean=*/false);
  if (!result) {
    func.emitError() << "partitioning failed: "
                     << llvm::toString(result.takeError());
    return failure();
  }
  bool assumesRecompute = false;
  if (!result->feasible && options.recompute != pp::RecomputePolicy::None) {
    auto retry =
        partitioner.plan(withoutActivations(graph), worker, /*lean=*/true);
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
    emitDoesNotFit(func, options, *result, devices);
    return failure();
  }
  return FirstWorkerPlan{std::move(*result), assumesRecompute};
}

/// Heterogeneous data-parallel workers: each one partitioned for its own
/// devices (without activations when the first needed recomputation).
/// Returns every worker's plan, the first's first; none without data
/// parallelism over several workers.
FailureOr<std::vector<partition::PartitionResult>> planReplicaWorkers(
    func::FuncOp func, const pp::PartitionPassOptions &options,
    const pp::cluster::Cluster &cluster, WorkerPartitioner &partitioner,
    const partition::PartitionGraph &graph, const VirtualWorkers &workers,
    const FirstWorkerPlan &first) {
  std::vector<partition::PartitionResult> workerPlans;
  if (workers.dataParallel <= 1 || workers.workers.size() <= 1)
    return workerPlans;
  workerPlans.push_back(first.result);
  for (unsigned w = 1; w < workers.workers.size(); ++w) {
    const std::vector<int> &worker = workers.workers[w];
    auto plan = partitioner.plan(graph, worker, /*lean=*/false);
    if (plan && !plan->feasible && first.assumesRecompute)
      plan = partitioner.plan(withoutActivations(graph), worker,
                              /*lean=*/true);
    if (!plan) {
      func.emitError() << "partitioning virtual worker " << w
                       << " failed: " << llvm::toString(plan.takeError());
      return failure();
    }
    if (!plan->feasible) {
      auto diag = func.emitError() << "the model does not fit virtual worker "
                                   << w << " with schedule "
                                   << pp::schedule::toString(options.schedule)
                                   << "; its best plan still needs";
      for (unsigned st = 0; st < plan->deviceOrder.size(); ++st) {
        unsigned d = plan->deviceOrder[st];
        if (plan->shortfall[d] > 0)
          diag << llvm::formatv(" {0} more bytes on {1} (stage {2});",
                                plan->shortfall[d],
                                cluster.devices[worker[d]].name, st);
      }
      return failure();
    }
    workerPlans.push_back(std::move(*plan));
  }
  return workerPlans;
}

/// WSP: every pending wave keeps a sum of its stage's weights on the
/// device, D + 1 of them at most; staleness=auto / wave=auto simulate
/// HetPipe's WSP for each candidate D and wave size. Sets the bound and
/// wave in `dp`; returns the report's line of the auto choice ("" if none).
FailureOr<std::string>
resolveWaveSync(ModuleOp module, const pp::PartitionPassOptions &options,
                const PartitionRequest &request,
                const std::vector<std::vector<int>> &workers,
                const std::vector<partition::PartitionResult> &workerPlans,
                const partition::PartitionGraph &graph,
                DataParallelRequest &dp) {
  if (!dp.waveSynchronous || workerPlans.empty())
    return std::string();
  // A node's resident bytes: weights, gradients and optimizer state.
  WaveModel model = modelWaves(request.cluster, workers, workerPlans, graph,
                               options.microBatches, 2.0 + request.stateFactor);
  if (!dp.autoStaleness && dp.staleness + 1 > model.mostPending) {
    auto diag = module.emitError()
                << "pp-partition: staleness=" << dp.staleness << " keeps up to "
                << dp.staleness + 1
                << " pending waves, each a sum of its stage's weights, but "
                << model.tightest << ": ";
    if (model.mostPending >= 1)
      diag << "the largest bound that fits is D = " << model.mostPending - 1;
    else
      diag << "not even D = 0 fits";
    return failure();
  }
  if (!dp.autoStaleness && !dp.autoWave)
    return std::string();
  FailureOr<WaveChoice> choice = chooseWaveSync(
      model,
      dp.autoStaleness ? std::nullopt : std::optional<int64_t>(dp.staleness),
      dp.autoWave ? std::nullopt : std::optional<int64_t>(dp.wave));
  if (failed(choice)) {
    module.emitError() << "pp-partition: staleness=auto: no bound fits: "
                       << model.tightest << ", not room for one pending wave";
    return failure();
  }
  dp.staleness = choice->staleness;
  dp.wave = choice->wave;
  return choice->report;
}

//===----------------------------------------------------------------------===//
// Stages shared by the workers
//===----------------------------------------------------------------------===//

/// The IR's stages, and where each worker runs them when the workers keep
/// their own partitions.
struct SharedStages {
  /// Whether the workers run partitions of their own (`placements`), or
  /// every worker runs worker 0's.
  bool ownPartitions = false;
  std::vector<unsigned> stageOfNode;
  /// Per worker, its own stage of each shared stage.
  std::vector<std::vector<int64_t>> placements;
  /// Why the workers share worker 0's partition, or how their cuts were
  /// made to agree; "" when neither.
  std::string note;
};

/// The common refinement of the workers' cuts: a stage per distinct tuple
/// of the workers' stages, in lexicographic order; each worker places the
/// refined stages on its own stages (`placements`). Every worker runs the
/// refined stages in its own stage order, so each worker's stage must not
/// decrease along the refined order. Cuts of a DAG can cross (side
/// branches on stage 0 of one worker and stage 1 of the other); such ops
/// move to the later stage of the worker that cuts them earlier: in
/// lexicographic order, a worker's stage becomes the largest seen so far.
/// That keeps every dependency forward, since a consumer's tuple is >= its
/// producer's in every worker. Returns how many ops moved.
unsigned refineCuts(const std::vector<partition::PartitionResult> &workerPlans,
                    size_t numNodes, SharedStages &shared) {
  std::set<std::vector<unsigned>> refined;
  std::vector<std::vector<unsigned>> keyOf(numNodes);
  for (size_t n = 0; n < numNodes; ++n) {
    for (const auto &plan : workerPlans)
      keyOf[n].push_back(plan.stageOf[n]);
    refined.insert(keyOf[n]);
  }
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
  shared.placements.assign(workerPlans.size(), {});
  for (auto &[key, stage] : merged)
    for (size_t w = 0; w < key.size(); ++w)
      shared.placements[w].push_back(key[w]);
  unsigned movedOps = 0;
  for (size_t n = 0; n < numNodes; ++n) {
    const std::vector<unsigned> &moved = adjusted[keyOf[n]];
    movedOps += moved != keyOf[n];
    shared.stageOfNode[n] = merged[moved];
  }
  return movedOps;
}

/// Whether every stage of every worker keeps a shared stage: a worker
/// whose stage lost every op cannot run its schedule.
bool everyStagePlaced(
    const std::vector<partition::PartitionResult> &workerPlans,
    const std::vector<std::vector<int64_t>> &placements) {
  for (auto [w, placement] : llvm::enumerate(placements))
    for (unsigned st = 0; st < workerPlans[w].deviceOrder.size(); ++st)
      if (!llvm::is_contained(placement, static_cast<int64_t>(st)))
        return false;
  return true;
}

/// The stages of the IR: worker 0's, or, when heterogeneous workers
/// partitioned apart, the common refinement of their cuts (interleaved
/// chunks need one partition, and no worker may lose a stage).
SharedStages
shareStages(const partition::PartitionResult &first,
            const std::vector<partition::PartitionResult> &workerPlans,
            unsigned chunks, size_t numNodes) {
  SharedStages shared;
  shared.ownPartitions = llvm::any_of(workerPlans, [&](const auto &plan) {
    return plan.stageOf != first.stageOf;
  });
  shared.stageOfNode = first.stageOf;
  if (shared.ownPartitions && chunks != 1) {
    shared.ownPartitions = false;
    shared.note = "the virtual workers' own partitions differ, but "
                  "interleaved chunks need one partition: every worker runs "
                  "worker 0's";
  }
  if (!shared.ownPartitions)
    return shared;
  unsigned movedOps = refineCuts(workerPlans, numNodes, shared);
  if (!everyStagePlaced(workerPlans, shared.placements)) {
    shared.ownPartitions = false;
    shared.placements.clear();
    shared.stageOfNode = first.stageOf;
    shared.note = "the virtual workers' own partitions cross so that a "
                  "stage would empty: every worker runs worker 0's";
  } else if (movedOps > 0) {
    shared.note = llvm::formatv("the virtual workers' cuts cross: {0} op(s) "
                                "moved to a later stage of a worker so that "
                                "every worker runs the shared stages in "
                                "order",
                                movedOps);
  }
  return shared;
}

//===----------------------------------------------------------------------===//
// The IR and the report
//===----------------------------------------------------------------------===//

/// Ops get their stage; constants and weight reads the first stage that
/// uses them.
void annotateStages(Block &body, ArrayRef<Operation *> nodeOps,
                    ArrayRef<unsigned> stageOfNode) {
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
}

/// What the partitioning decided, for the IR and the report.
struct PlanOutcome {
  FirstWorkerPlan first;
  /// The first worker's devices, as partitioned.
  partition::PartitionDevices devices;
  /// With data parallelism over several workers, each one's own plan.
  std::vector<partition::PartitionResult> workerPlans;
  SharedStages shared;
  /// The report's lines of virtual-workers=auto and staleness/wave=auto.
  std::string autoPolicyReport;
  std::string waveAutoReport;
};

/// #pp.plan: the schedule and the stages' devices (in worker 0's order of
/// the shared stages when the workers keep their own partitions).
void attachPlan(ModuleOp module, const pp::PartitionPassOptions &options,
                pp::schedule::ScheduleKind kind, const PlanOutcome &outcome,
                unsigned dataParallel, const DataParallelRequest &dp,
                int64_t updateEvery) {
  const partition::PartitionResult &result = outcome.first.result;
  const partition::PartitionDevices &devices = outcome.devices;
  Builder b(module.getContext());
  SmallVector<Attribute> order;
  SmallVector<Attribute> placementAttrs;
  if (outcome.shared.ownPartitions) {
    for (int64_t coarse : outcome.shared.placements.front())
      order.push_back(
          b.getStringAttr(devices.devices[result.deviceOrder[coarse]].name));
    for (const auto &placement : outcome.shared.placements)
      placementAttrs.push_back(b.getDenseI64ArrayAttr(placement));
  } else {
    for (unsigned d : result.deviceOrder)
      order.push_back(b.getStringAttr(devices.devices[d].name));
  }
  pipeline::setPlan(
      module, pipeline::PlanAttr::get(module.getContext(), kind,
                                      options.microBatches, options.chunks,
                                      static_cast<int64_t>(order.size()),
                                      b.getArrayAttr(order), dataParallel,
                                      /*tensorParallel=*/1, dp.staleness,
                                      dp.wave, b.getArrayAttr(placementAttrs),
                                      updateEvery, options.verticalSync));
}

/// The other replicas run the stages on their own workers' devices, in
/// their own partition's device order when they have one.
void attachReplicaDevices(ModuleOp module, const pp::cluster::Cluster &cluster,
                          const std::vector<std::vector<int>> &workers,
                          const PlanOutcome &outcome, unsigned chunks) {
  const partition::PartitionResult &result = outcome.first.result;
  const std::vector<partition::PartitionResult> &workerPlans =
      outcome.workerPlans;
  unsigned numPlanDevices = result.deviceOrder.size() / chunks;
  std::vector<std::string> names;
  for (unsigned r = 1; r < workers.size(); ++r)
    for (unsigned d = 0; d < numPlanDevices; ++d) {
      // A worker with the same cut may still order its devices its own
      // way (its fast device first).
      bool own =
          !workerPlans.empty() && (outcome.shared.ownPartitions ||
                                   workerPlans[r].stageOf == result.stageOf);
      const auto &deviceOrder =
          own ? workerPlans[r].deviceOrder : result.deviceOrder;
      names.push_back(cluster.devices[workers[r][deviceOrder[d]]].name);
    }
  pipeline::setReplicaDevices(module, names);
}

/// The report's opening lines: the plan, the notes on the virtual workers
/// and their partitions, and the data-parallel settings.
void writeReportHeader(llvm::raw_ostream &os,
                       const pp::PartitionPassOptions &options,
                       const VirtualWorkers &workers,
                       const DataParallelRequest &dp,
                       const PlanOutcome &outcome) {
  const partition::PartitionResult &result = outcome.first.result;
  const SharedStages &shared = outcome.shared;
  os << llvm::formatv(
      "== pipeline plan: {0} stages, schedule {1}, {2} "
      "micro-batches, {3} ==\n",
      result.deviceOrder.size(), pp::schedule::toString(options.schedule),
      static_cast<unsigned>(options.microBatches), result.granularity);
  if (!workers.policyNote.empty())
    os << workers.policyNote << "\n";
  if (!shared.note.empty())
    os << shared.note << "\n";
  if (shared.ownPartitions) {
    os << llvm::formatv("virtual workers partitioned on their own: {0} "
                        "shared stages (the common refinement of their "
                        "cuts); stage -> device per worker:",
                        shared.placements.front().size());
    for (auto [w, placement] : llvm::enumerate(shared.placements)) {
      os << (w ? ";" : "") << " worker " << w << " [";
      for (auto [k, d] : llvm::enumerate(placement))
        os << (k ? " " : "") << d;
      os << "]";
    }
    os << "\n";
  }
  StringRef policy = options.virtualWorkers;
  if (!outcome.autoPolicyReport.empty())
    os << outcome.autoPolicyReport << "\n";
  else if (!policy.empty() && workers.policyNote.empty())
    os << "virtual-workers=" << policy << ": " << workers.workers.size()
       << " virtual workers\n";
  if (!outcome.waveAutoReport.empty())
    os << outcome.waveAutoReport << "\n";
  if (workers.dataParallel > 1 && dp.staleness >= 0)
    os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                        "(virtual workers) under Wave Synchronous "
                        "Parallel: a wave of {1} step(s), staleness bound "
                        "D = {2}\n",
                        workers.dataParallel, dp.wave, dp.staleness);
  else if (workers.dataParallel > 1)
    os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                        "(virtual workers), gradients all-reduced per "
                        "stage\n",
                        workers.dataParallel);
}

/// A line per stage of the first worker (device, ops, time, memory), then
/// the bottleneck.
void writeStageTable(llvm::raw_ostream &os, const PlanOutcome &outcome) {
  const partition::PartitionResult &result = outcome.first.result;
  const partition::PartitionDevices &devices = outcome.devices;
  std::vector<unsigned> opsPerStage(result.deviceOrder.size(), 0);
  for (unsigned s : result.stageOf)
    ++opsPerStage[s];
  for (unsigned s = 0; s < result.deviceOrder.size(); ++s) {
    unsigned d = result.deviceOrder[s];
    os << llvm::formatv(
        "stage {0}: {1,-14} {2,4} ops  {3,10:f3} ms  {4,10} of {5}\n", s,
        devices.devices[d].name, opsPerStage[s], result.stageTime[s] * 1e3,
        pp::formatMegabytes(result.stageMemory[s]),
        pp::formatMegabytes(devices.memory(d)));
  }
  os << llvm::formatv("bottleneck {0:f3} ms per micro-batch; {1} device "
                      "order(s) tried{3}{2}\n",
                      result.bottleneck * 1e3, result.ordersTried,
                      outcome.first.assumesRecompute
                          ? "; fits only with recomputation (memory "
                            "counts stage inputs, not activations)"
                          : "",
                      result.ordersNote());
}

/// The other virtual workers get their own plans (the IR carries the
/// first); the slowest one sets the pace of data-parallel training. With
/// data parallelism they were partitioned already; else they are here.
void writeOtherWorkers(llvm::raw_ostream &os, WorkerPartitioner &partitioner,
                       const partition::PartitionGraph &graph,
                       const std::vector<std::vector<int>> &workers,
                       const std::vector<partition::PartitionResult> &plans) {
  for (unsigned w = 1; w < workers.size(); ++w) {
    partition::PartitionDevices other = partitioner.makeDevices(workers[w]);
    auto plan = w < plans.size()
                    ? llvm::Expected<partition::PartitionResult>(plans[w])
                    : partitioner.plan(graph, workers[w], /*lean=*/false);
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
                        workers.size(), partitioner.countDistinct(workers));
}

/// report=: the plan in text, to a file or "-" (stdout).
LogicalResult
writeReport(ModuleOp module, const pp::PartitionPassOptions &options,
            const VirtualWorkers &workers, const DataParallelRequest &dp,
            const PlanOutcome &outcome, WorkerPartitioner &partitioner,
            const partition::PartitionGraph &graph) {
  if (options.reportFile.empty())
    return success();
  return pp::writeReportFile(module, options.reportFile,
                             [&](llvm::raw_ostream &os) {
                               writeReportHeader(os, options, workers, dp,
                                                 outcome);
                               writeStageTable(os, outcome);
                               writeOtherWorkers(os, partitioner, graph,
                                                 workers.workers,
                                                 outcome.workerPlans);
                             });
}

//===----------------------------------------------------------------------===//
// The planner
//===----------------------------------------------------------------------===//

/// The partitioner's inputs: the graph of `body` with its parameters, the
/// user's pins and split points over the first worker's `numStages`, and
/// how the schedule holds memory.
FailureOr<PlannerInputs>
buildPlannerInputs(ModuleOp module, const pp::PartitionPassOptions &options,
                   const PartitionRequest &request, Block &body,
                   const pp::CostModel &costModel, size_t numStages) {
  PlannerInputs inputs;
  PlannerGraph &g = inputs.graph;
  addOpNodes(body, costModel, g);
  inputs.searchOptions.tiedGroups = assignParameters(g, request.stateFactor);
  addDataEdges(g);
  if (failed(addPins(module, options.pins, g.nodeOps, numStages,
                     inputs.searchOptions)) ||
      failed(addSplitPoints(module, options.splitAfter, g.nodeOps, numStages,
                            inputs.searchOptions)))
    return failure();
  FailureOr<int64_t> updateEvery = configureScheduleMemory(
      module, options, request, numStages, inputs.searchOptions);
  if (failed(updateEvery))
    return failure();
  inputs.updateEvery = *updateEvery;
  return inputs;
}

/// Partitions the model for the virtual workers (tp= hands over to the
/// tensor-parallel planner), annotates the IR with the stages and the plan,
/// and writes the report.
LogicalResult planWorkers(ModuleOp module,
                          const pp::PartitionPassOptions &options,
                          const PartitionRequest &request,
                          const pp::CostModel &costModel, PlannerInputs &inputs,
                          VirtualWorkers &workers, DataParallelRequest &dp) {
  const partition::PartitionGraph &graph = inputs.graph.graph;
  WorkerPartitioner partitioner(request.cluster, inputs.searchOptions,
                                options.chunks);
  partitioner.setTimes(inputs.graph, costModel, inputs.updateEvery,
                       options.microBatches, request.stateFactor);
  PlanOutcome outcome;
  outcome.autoPolicyReport =
      chooseAutoPolicy(partitioner, graph, options.microBatches, dp, workers);
  if (request.tensorParallel.active())
    return planWithTensorParallel(module, options, request, workers, inputs,
                                  &costModel);

  const std::vector<int> &firstWorker = workers.workers.front();
  outcome.devices = partitioner.makeDevices(firstWorker);
  FailureOr<FirstWorkerPlan> first = planFirstWorker(
      request.func, options, partitioner, graph, firstWorker, outcome.devices);
  if (failed(first))
    return failure();
  outcome.first = std::move(*first);
  FailureOr<std::vector<partition::PartitionResult>> workerPlans =
      planReplicaWorkers(request.func, options, request.cluster, partitioner,
                         graph, workers, outcome.first);
  if (failed(workerPlans))
    return failure();
  outcome.workerPlans = std::move(*workerPlans);
  FailureOr<std::string> waveAutoReport =
      resolveWaveSync(module, options, request, workers.workers,
                      outcome.workerPlans, graph, dp);
  if (failed(waveAutoReport))
    return failure();
  outcome.waveAutoReport = std::move(*waveAutoReport);

  outcome.shared = shareStages(outcome.first.result, outcome.workerPlans,
                               options.chunks, inputs.graph.nodeOps.size());
  func::FuncOp func = request.func;
  annotateStages(func.getBody().front(), inputs.graph.nodeOps,
                 outcome.shared.stageOfNode);
  attachPlan(module, options, request.kind, outcome, workers.dataParallel, dp,
             inputs.updateEvery);
  if (workers.dataParallel > 1)
    attachReplicaDevices(module, request.cluster, workers.workers, outcome,
                         options.chunks);
  return writeReport(module, options, workers, dp, outcome, partitioner, graph);
}

} // namespace

/// --pp-partition with `options.microBatches` as given (inflight resolved):
/// the options checked in the order their diagnostics come, the virtual
/// workers formed, the model partitioned for them.
static LogicalResult partitionOnce(ModuleOp module,
                                   const pp::PartitionPassOptions &options) {
  FailureOr<PartitionRequest> request = parseRequest(module, options);
  if (failed(request))
    return failure();
  Block &body = request->func.getBody().front();
  FailureOr<std::unique_ptr<pp::CostModel>> costModel =
      createPlannerCostModel(module, options.profileFile, body);
  if (failed(costModel))
    return failure();
  FailureOr<DataParallelRequest> dp = parseDataParallel(module, options);
  if (failed(dp))
    return failure();
  FailureOr<VirtualWorkers> workers =
      formVirtualWorkers(module, options, *request, *dp);
  if (failed(workers))
    return failure();
  FailureOr<PlannerInputs> inputs =
      buildPlannerInputs(module, options, *request, body, **costModel,
                         workers->workers.front().size());
  if (failed(inputs))
    return failure();
  return planWorkers(module, options, *request, **costModel, *inputs, *workers,
                     *dp);
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
  if (options.schedule != pp::schedule::ScheduleKind::HetPipe) {
    module.emitError() << "pp-partition: inflight=" << options.inflight
                       << " sets HetPipe's Nm: it needs schedule=hetpipe, got '"
                       << pp::schedule::toString(options.schedule)
                       << "' (use microbatches=)";
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
