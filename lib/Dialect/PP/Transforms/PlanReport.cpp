//===- PlanReport.cpp - Predict and report a scheduled pipeline -*- C++ -*-===//
//
// Costs every stage of a scheduled module with the cost model on its device
// (forward and backward times of the stage's forward ops, as the
// partitioner counts them, plus recomputed ops; bytes of the values it
// sends and stashes; its weights, gradients and optimizer state), runs the
// event-driven simulator on the `pp.schedule`, and reports the prediction:
// a one-screen text summary, and in a directory plan.json, a Chrome trace
// (timeline.json, for chrome://tracing or Perfetto) and timeline.svg.
//
//===----------------------------------------------------------------------===//

#include "pp/Analysis/CostModel.h"
#include "pp/Cluster/Cluster.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Schedule/Simulator.h"
#include "pp/Schedule/Timeline.h"
#include "pp/Support/FileOutput.h"
#include "pp/Support/InputLimits.h"

#include "pp/Dialect/PP/Transforms/ReportFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <fstream>
#include <functional>
#include <sstream>

using namespace mlir;
namespace onnx = pp::onnx;
namespace pipeline = pp::pipeline;
namespace sched = pp::schedule;

namespace {

/// The steady step of a stream: the simulated window of K + 1 steps less
/// the window of K (K from `firstSteps`); `window` builds a window of the
/// given steps. 0 when a window cannot be built or simulated.
double steadyStepSeconds(
    int firstSteps,
    const std::function<bool(int steps, pp::schedule::Schedule &out)> &window,
    const pp::schedule::SimulationInput &input) {
  double times[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    pp::schedule::Schedule built;
    if (!window(firstSteps + i, built))
      return 0;
    pp::schedule::SimulationResult result =
        pp::schedule::simulate(built, input);
    if (!result.error.empty() || result.deadlock)
      return 0;
    times[i] = result.iterationTime;
  }
  return std::max(times[1] - times[0], 0.0);
}

/// A steady step of a weight-versioned schedule run as a stream of steps
/// (train --drain-every 0): the windows of 5 and 6 steps, built anew.
double continuousStepSeconds(const pp::schedule::Schedule &schedule,
                             const pp::schedule::SimulationInput &input,
                             bool verticalSync) {
  // Data parallelism: the stages that all-reduce before their updates.
  std::vector<bool> reduces(static_cast<size_t>(schedule.numStages()), false);
  for (const auto &list : schedule.actions)
    for (const pp::schedule::Action &a : list)
      if (a.kind == pp::schedule::ActionKind::GradReduce)
        reduces[static_cast<size_t>(a.stage)] = true;
  return steadyStepSeconds(
      5,
      [&](int steps, pp::schedule::Schedule &out) {
        std::string error;
        return pp::schedule::buildVersionedSchedule(
            schedule.kind, schedule.numDevices, steps * schedule.microBatches,
            schedule.microBatchesPerUpdate, verticalSync, out, error, &reduces,
            schedule.microBatches);
      },
      input);
}

/// The steady step of `stream` (`schedule` with the stream's expanded
/// actions, windows of at least 5 steps).
double streamStepSeconds(const pp::schedule::StreamSchedule &stream,
                         const pp::schedule::Schedule &schedule,
                         const pp::schedule::SimulationInput &input) {
  return steadyStepSeconds(
      std::max(stream.minSteps, 4) + 1,
      [&](int steps, pp::schedule::Schedule &out) {
        out = schedule;
        out.microBatches = steps * stream.microBatches;
        for (int d = 0; d < out.numDevices; ++d)
          out.actions[d] = pp::schedule::expandStream(stream, d, steps);
        return true;
      },
      input);
}

/// Waves the WSP prediction simulates: enough for the VWs' steady state.
constexpr int64_t kSimulatedWaves = 50;

struct Cut {
  int64_t from, to;
  bool forward;
  std::string tensor, type;
  int64_t bytes;
};

struct StageInfo {
  int device = 0;
  std::vector<std::string> ops;
  int64_t recomputed = 0;
  sched::StageCosts costs;
};

/// What a run's --log says of its steps: medians over the steps after the
/// first (which warms up), or over the one step there is.
struct MeasuredRun {
  int64_t steps = 0;
  double stepSeconds = 0;
  std::vector<double> stageBusySeconds;
};

double median(std::vector<double> values) {
  llvm::sort(values);
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// Reads the JSON lines a generated program's --log writes ({"step",
/// "step_ms", "busy_ms": [per stage]}, and evaluations, skipped); the error
/// names the file and line.
FailureOr<MeasuredRun> readMeasuredLog(ModuleOp module, StringRef path,
                                       int numStages) {
  auto fail = [&](const Twine &message) {
    emitError(module.getLoc())
        << "pp-plan-report: measured-log '" << path << "': " << message;
    return failure();
  };
  auto buffer = pp::limits::readRegularFile(
      path, pp::limits::kMaxProfileFileBytes, "measured log");
  if (!buffer)
    return fail(llvm::toString(buffer.takeError()));
  std::vector<double> stepMs;
  std::vector<std::vector<double>> busyMs(numStages);
  int lineNumber = 0;
  for (StringRef line : llvm::split((*buffer)->getBuffer(), '\n')) {
    ++lineNumber;
    if (line.trim().empty())
      continue;
    auto where = [&] { return "line " + std::to_string(lineNumber) + ": "; };
    // A CSV log (train --log FILE.csv) is the usual mistake: say so.
    if (!line.trim().starts_with("{"))
      return fail(where() + "expected JSON lines (one object per line, as "
                            "`train --log FILE.jsonl` writes), not CSV or "
                            "other text");
    llvm::Expected<llvm::json::Value> parsed =
        pp::limits::parseBoundedJSON(line);
    if (!parsed)
      return fail(where() + llvm::toString(parsed.takeError()));
    const llvm::json::Object *entry = parsed->getAsObject();
    // An evaluation's record (train --eval-data) times no step.
    if (entry && entry->get("eval_loss"))
      continue;
    // Bounded and finite: 1e400 reads as infinity, which would reach the
    // report and plan.json (where "inf" is not JSON).
    auto inRange = [](std::optional<double> ms) {
      return ms && *ms >= 0 && *ms <= pp::limits::kMaxMeasuredMs;
    };
    auto range = [&](std::optional<double> ms) {
      std::string text =
          llvm::formatv("a number of ms >= 0 and <= {0}",
                        llvm::format("%g", pp::limits::kMaxMeasuredMs))
              .str();
      if (ms)
        text += llvm::formatv(", got {0}", llvm::format("%g", *ms)).str();
      return text;
    };
    std::optional<double> ms =
        entry ? entry->getNumber("step_ms") : std::nullopt;
    const llvm::json::Array *busy =
        entry ? entry->getArray("busy_ms") : nullptr;
    if (!entry || !entry->get("step_ms"))
      return fail(where() + "expected a step with \"step_ms\"");
    if (!inRange(ms))
      return fail(where() + "\"step_ms\": expected " + range(ms));
    if (!busy)
      return fail(where() +
                  "expected \"busy_ms\" with one number per "
                  "stage (" +
                  std::to_string(numStages) + ")");
    if (static_cast<int>(busy->size()) != numStages)
      return fail(where() + "\"busy_ms\" has " + std::to_string(busy->size()) +
                  " entries (one per stage) but this plan has " +
                  std::to_string(numStages) +
                  " stages: is it the log of another program?");
    stepMs.push_back(*ms);
    for (int s = 0; s < numStages; ++s) {
      std::optional<double> b = (*busy)[s].getAsNumber();
      if (!inRange(b))
        return fail(where() + "\"busy_ms\"[" + std::to_string(s) +
                    "]: expected " + range(b));
      busyMs[s].push_back(*b);
    }
  }
  if (stepMs.empty())
    return fail("no step");
  size_t skip = stepMs.size() > 1 ? 1 : 0;
  MeasuredRun run;
  run.steps = static_cast<int64_t>(stepMs.size() - skip);
  run.stepSeconds = median({stepMs.begin() + skip, stepMs.end()}) / 1e3;
  for (int s = 0; s < numStages; ++s)
    run.stageBusySeconds.push_back(
        median({busyMs[s].begin() + skip, busyMs[s].end()}) / 1e3);
  return run;
}

bool isBookkeeping(Operation *op) {
  return isa<onnx::ConstantOp, onnx::GlobalReadOp, pp::train::GlobalWriteOp,
             func::ReturnOp>(op) ||
         op->getDialect()->getNamespace() == "pp";
}

/// Says, with the numbers, when pipelining gains little on this cluster or
/// the stages are unequal: what a user would otherwise read from a 99/3 op
/// split without a word.
void explainPlan(llvm::raw_ostream &os, ArrayRef<StageInfo> stages,
                 const sched::SimulationInput &input, int64_t microBatches,
                 double iterationTime) {
  int numStages = stages.size();
  if (numStages < 2 || iterationTime <= 0)
    return;
  // Compute per micro-batch of each stage, and the whole step run back to
  // back on the stages' own devices.
  std::vector<double> compute;
  double serial = 0;
  for (const StageInfo &info : stages) {
    compute.push_back(info.costs.forward + info.costs.backward);
    serial += compute.back() * microBatches + info.costs.optimizer;
  }
  auto [minIt, maxIt] = std::minmax_element(compute.begin(), compute.end());
  double speedup = serial / iterationTime;
  // The slowest forward transfer between consecutive stages.
  double transfer = 0;
  int64_t transferBytes = 0;
  for (int s = 0; s + 1 < numStages; ++s) {
    int from = stages[s].device, to = stages[s + 1].device;
    if (from == to)
      continue;
    double bandwidth = input.bandwidth[from][to];
    double t =
        input.latency[from][to] +
        (bandwidth > 0 ? stages[s].costs.activationBytes / bandwidth : 0);
    if (t > transfer) {
      transfer = t;
      transferBytes = stages[s].costs.activationBytes;
    }
  }
  if (speedup < 1.2)
    os << llvm::formatv(
        "note: pipelining gains little here ({0:f2}x): {1} stages take "
        "{2:f1} us per step against {3:f1} us of compute back to back; per "
        "micro-batch a stage computes {4:f1}..{5:f1} us and the slowest "
        "transfer between stages takes {6:f1} us ({7} B): fewer devices, "
        "more micro-batches or a larger batch would pay better\n",
        speedup, numStages, iterationTime * 1e6, serial * 1e6, *minIt * 1e6,
        *maxIt * 1e6, transfer * 1e6, transferBytes);
  double mean = 0;
  for (double c : compute)
    mean += c / numStages;
  if (mean > 0 && *maxIt > 1.5 * mean)
    os << llvm::formatv(
        "note: stages are unequal: stage {0} computes {1:f1} us per "
        "micro-batch, {2:f1}x the mean {3:f1} us (stage {4}: {5:f1} us); the "
        "slowest stage sets the pace\n",
        maxIt - compute.begin(), *maxIt * 1e6, *maxIt / mean, mean * 1e6,
        minIt - compute.begin(), *minIt * 1e6);
}

/// How many initializers are trained and frozen (constant globals; small
/// constants are inlined and not counted), naming the frozen float ones with
/// the importer's reasons: a buffer trained by mistake shows here.
void writeTrainableSet(ModuleOp module, llvm::raw_ostream &os) {
  int64_t trained = 0, trainedElements = 0, frozen = 0;
  SmallVector<std::string> frozenFloats;
  for (auto global : module.getOps<onnx::GlobalOp>()) {
    auto type = cast<RankedTensorType>(global.getType());
    if (global.getKind() == onnx::kTrainable) {
      ++trained;
      trainedElements += type.getNumElements();
      continue;
    }
    if (global.getKind() != onnx::kConstant)
      continue; // optimizer and BatchNorm state
    ++frozen;
    if (!isa<FloatType>(type.getElementType()))
      continue;
    std::string entry = global.getSymName().str();
    if (auto reason =
            global->getAttrOfType<StringAttr>(onnx::kFrozenReasonAttr))
      entry += " (" + reason.getValue().str() + ")";
    frozenFloats.push_back(std::move(entry));
  }
  os << llvm::formatv("parameters: {0} trained ({1} elements), {2} frozen "
                      "({3} of them floats)",
                      trained, trainedElements, frozen, frozenFloats.size());
  constexpr size_t kListed = 8;
  for (auto [i, entry] : llvm::enumerate(frozenFloats)) {
    if (i == kListed) {
      os << llvm::formatv("; +{0} more", frozenFloats.size() - kListed);
      break;
    }
    os << (i ? "; " : ": ") << entry;
  }
  os << "\n";
}

/// The compute precision of the step: the type trainable weights are cast
/// to where they are read (--pp-mixed-precision), and the loss scaling
/// --pp-optimizer set up (its state globals).
struct Precision {
  std::string compute = "fp32";
  std::string lossScale = "none";
};
Precision getPrecision(ModuleOp module) {
  Precision precision;
  SymbolTable symbols(module);
  module.walk([&](onnx::CastOp cast) {
    auto read = cast.getInput().getDefiningOp<onnx::GlobalReadOp>();
    auto global =
        read ? symbols.lookup<onnx::GlobalOp>(read.getGlobalAttr().getAttr())
             : onnx::GlobalOp();
    if (!global || global.getKind() != onnx::kTrainable)
      return WalkResult::advance();
    Type element = getElementTypeOrSelf(cast.getType());
    if (element.isBF16() || element.isF16()) {
      precision.compute = element.isBF16() ? "bf16" : "fp16";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (module.lookupSymbol<onnx::GlobalOp>("pp.loss_scale"))
    precision.lossScale =
        module.lookupSymbol("pp.loss_scale_good_steps") ? "dynamic" : "static";
  return precision;
}

void writePrecision(ModuleOp module, llvm::raw_ostream &os) {
  Precision precision = getPrecision(module);
  os << "precision: " << precision.compute;
  if (precision.compute != "fp32")
    os << " activations and compute, fp32 master weights and optimizer state";
  if (precision.lossScale != "none")
    os << "; " << precision.lossScale << " loss scaling";
  os << "\n";
}

//===----------------------------------------------------------------------===//
// The scheduled pipeline and its replicas
//===----------------------------------------------------------------------===//

/// The `pp.schedule` in the simulator's form on the cluster it runs on, with
/// the cost model that times its ops and the measured run to compare with.
struct ScheduledPipeline {
  pipeline::ScheduleOp scheduleOp;
  pp::cluster::Cluster cluster;
  std::unique_ptr<pp::CostModel> costModel;
  sched::Schedule schedule;
  int numStages = 0;
  /// The schedule's devices by name, and the cluster device of each.
  std::vector<std::string> deviceNames;
  std::vector<int> clusterIndex;
  /// The run measured-log= names, when given.
  std::optional<MeasuredRun> measured;

  int numDevices() const { return schedule.numDevices; }
  /// The cluster device that schedule device `d` runs on.
  const pp::cluster::Device &device(int d) const {
    return cluster.devices[clusterIndex[d]];
  }
};

/// The cluster device of each of the schedule's devices, by name.
LogicalResult findClusterDevices(ScheduledPipeline &pipe) {
  for (const std::string &name : pipe.deviceNames) {
    int index = pipe.cluster.findDevice(name);
    if (index < 0) {
      emitError(pipe.scheduleOp.getLoc())
          << "device '" << name << "' of the schedule is not in the cluster";
      return failure();
    }
    pipe.clusterIndex.push_back(index);
  }
  return success();
}

/// Reads the schedule, the cluster (the module's, or cluster=), the cost
/// model and measured-log=, in that order (the first problem is the one
/// diagnosed), then finds the schedule's devices in the cluster.
FailureOr<ScheduledPipeline>
loadPipeline(ModuleOp module, const pp::PlanReportPassOptions &options) {
  ScheduledPipeline pipe;
  pipe.scheduleOp = pipeline::lookupSchedule(module, "pp-plan-report");
  if (!pipe.scheduleOp)
    return failure();
  FailureOr<std::optional<pp::cluster::Cluster>> cluster =
      pipeline::resolveCluster(module, options.clusterSpec, "pp-plan-report",
                               [&] { return emitError(module.getLoc()); });
  if (failed(cluster))
    return failure();
  if (!*cluster) {
    emitError(module.getLoc()) << "pp-plan-report needs cluster=<spec>";
    return failure();
  }
  pipe.cluster = std::move(**cluster);
  auto createdModel = pp::createCostModel(options.profileFile);
  if (!createdModel) {
    emitError(module.getLoc()) << llvm::toString(createdModel.takeError());
    return failure();
  }
  pipe.costModel = std::move(*createdModel);

  // The schedule back into the simulator's form.
  pipe.schedule = pipeline::toLibrarySchedule(pipe.scheduleOp);
  for (auto device :
       pipe.scheduleOp.getBody().front().getOps<pipeline::DeviceOp>())
    pipe.deviceNames.push_back(device.getName().str());
  pipe.schedule.numDevices = static_cast<int>(pipe.deviceNames.size());
  pipe.numStages = pipe.schedule.numStages();
  if (!options.measuredLog.empty()) {
    FailureOr<MeasuredRun> run =
        readMeasuredLog(module, options.measuredLog, pipe.numStages);
    if (failed(run))
      return failure();
    pipe.measured = *run;
  }
  if (failed(findClusterDevices(pipe)))
    return failure();
  return pipe;
}

/// The data-parallel replicas of the pipeline (the virtual workers, VWs)
/// and, where they run apart from replica 0's devices, theirs.
struct Replicas {
  pipeline::PlanAttr plan;
  int64_t count = 1;
  /// The devices --pp-partition named for each replica after the first (a
  /// policy's virtual workers, in their own device order), if it did.
  ArrayAttr names;
  /// Under WSP every virtual worker runs the partition on its own devices.
  bool waveSynchronous = false;
  /// Replicas with placements of their own (heterogeneous virtual workers)
  /// run their own schedules on the devices those name.
  bool placed = false;
  /// Under either: devices[k][d] is VW k's cluster device for schedule
  /// device d.
  std::vector<std::vector<int>> devices;
  /// When placed: VW k's own schedule.
  std::vector<sched::Schedule> schedules;

  /// Whether the plan asks for WSP, with a single replica too (the
  /// prediction's `waveSynchronous` needs more than one).
  bool planIsWaveSynchronous() const {
    return plan && plan.isWaveSynchronous();
  }
  /// The schedule VW `k` runs: its own when placed, else `shared`.
  const sched::Schedule &scheduleOf(size_t k,
                                    const sched::Schedule &shared) const {
    return placed ? schedules[k] : shared;
  }
};

/// Where replica `k` runs what replica 0 runs on cluster device `c`: the
/// device --pp-partition named for replica k, else by the grouping (the
/// cluster's virtual workers, else equal groups of the devices in order).
int counterpartDevice(const ScheduledPipeline &pipe, const Replicas &replicas,
                      int c, int64_t k) {
  const pp::cluster::Cluster &cluster = pipe.cluster;
  const std::vector<int> &clusterIndex = pipe.clusterIndex;
  auto here = llvm::find(clusterIndex, c);
  if (k > 0 && replicas.names && here != clusterIndex.end()) {
    size_t index =
        (k - 1) * clusterIndex.size() + (here - clusterIndex.begin());
    if (index < replicas.names.size())
      if (auto name = dyn_cast<StringAttr>(replicas.names[index]))
        if (int there = cluster.findDevice(name.getValue()); there >= 0)
          return there;
  }
  const auto &workers = cluster.virtualWorkers;
  if (!workers.empty()) {
    const auto &first = workers.front();
    auto it = llvm::find(first, c);
    if (it == first.end() || k >= static_cast<int64_t>(workers.size()) ||
        workers[k].size() != first.size())
      return c;
    return workers[k][it - first.begin()];
  }
  int n = static_cast<int>(cluster.devices.size());
  int perReplica = n / static_cast<int>(replicas.count);
  return static_cast<int>((c + k * perReplica) % n);
}

/// Placed replica `k`: its own schedule and the cluster devices it names.
LogicalResult addPlacedReplica(ModuleOp module,
                               const pp::cluster::Cluster &cluster, int64_t k,
                               Replicas &replicas) {
  std::vector<int> &devices = replicas.devices.emplace_back();
  pipeline::ScheduleOp own =
      pipeline::lookupSchedule(module, "pp-plan-report", k);
  if (!own)
    return failure();
  replicas.schedules.push_back(pipeline::toLibrarySchedule(own));
  for (auto device : own.getBody().front().getOps<pipeline::DeviceOp>()) {
    int index = cluster.findDevice(device.getName());
    if (index < 0)
      return emitError(own.getLoc())
             << "device '" << device.getName() << "' of replica " << k
             << " is not in the cluster";
    devices.push_back(index);
  }
  return success();
}

/// The plan's replicas and, under WSP or with placements of their own, the
/// devices (and schedule) of each.
FailureOr<Replicas> placeReplicas(ModuleOp module,
                                  const ScheduledPipeline &pipe) {
  Replicas replicas;
  pipeline::PlanAttr plan = replicas.plan = pipeline::getPlan(module);
  replicas.count = plan ? plan.getDataParallel() : 1;
  replicas.names = pipeline::getReplicaDevices(module);
  replicas.waveSynchronous =
      plan && plan.isWaveSynchronous() && replicas.count > 1;
  replicas.placed = plan && plan.hasPlacements();
  if (!replicas.waveSynchronous && !replicas.placed)
    return replicas;
  for (int64_t k = 0; k < replicas.count; ++k) {
    if (replicas.placed) {
      if (failed(addPlacedReplica(module, pipe.cluster, k, replicas)))
        return failure();
      continue;
    }
    std::vector<int> &devices = replicas.devices.emplace_back();
    for (int d = 0; d < pipe.numDevices(); ++d)
      devices.push_back(
          counterpartDevice(pipe, replicas, pipe.clusterIndex[d], k));
  }
  return replicas;
}

//===----------------------------------------------------------------------===//
// Stage costs
//===----------------------------------------------------------------------===//

/// Each stage's costs and the values that cross between stages; under WSP
/// or placements also each stage's compute on every VW's devices
/// (vwCosts[k][s]).
struct StageCosting {
  std::vector<StageInfo> stages;
  std::vector<Cut> cuts;
  std::vector<std::vector<sched::StageCosts>> vwCosts;
};

/// Optimizer state bytes per weight byte of the module's updates: 1 for SGD
/// with momentum, 2 for Adam, else 0.
double optimizerStateFactor(ModuleOp module) {
  double stateFactor = 0;
  module.walk([&](Operation *op) {
    if (auto sgd = dyn_cast<pp::train::SGDOp>(op);
        sgd && sgd.getMomentumBuffer())
      stateFactor = std::max(stateFactor, 1.0);
    if (isa<pp::train::AdamOp>(op))
      stateFactor = 2.0;
  });
  return stateFactor;
}

/// Adds the compute time of `op` on `device` to `c`: a forward op's forward
/// and backward (a contraction's backward is half input, half weight
/// gradient), a recomputed op's forward in the backward, an update op's.
void addCompute(const pp::CostModel &costModel, Operation *op,
                sched::Phase phase, bool recomputed, sched::StageCosts &c,
                const pp::cluster::Device &device) {
  if (recomputed) {
    double f = costModel.getForwardTime(op, device);
    c.backward += f;
    c.backwardInput += f;
  } else if (phase == sched::Phase::Forward) {
    double b = costModel.getBackwardTime(op, device);
    c.forward += costModel.getForwardTime(op, device);
    c.backward += b;
    auto facts = dyn_cast<onnx::KernelFactsOpInterface>(op);
    bool contraction = facts && facts.isContraction();
    c.backwardWeight += contraction ? b / 2 : 0;
    c.backwardInput += contraction ? b / 2 : b;
  } else {
    c.optimizer += costModel.getForwardTime(op, device);
  }
}

/// Costs every stage from its stage functions, as the partitioner counts
/// them: the compute of its forward, recomputed and update ops, the bytes
/// it sends and stashes, its weights with their gradients and optimizer
/// state, and the all-reduce of its gradients over the replicas.
class StageCoster {
public:
  StageCoster(ModuleOp module, const ScheduledPipeline &pipe,
              const Replicas &replicas)
      : pipe(pipe), replicas(replicas),
        stateFactor(optimizerStateFactor(module)),
        functions(pipeline::getStageFunctions(pipe.scheduleOp)),
        symbols(module) {}

  StageCosting run() {
    costing.stages.resize(pipe.numStages);
    costing.vwCosts.assign(replicas.devices.size(),
                           std::vector<sched::StageCosts>(pipe.numStages));
    for (int s = 0; s < pipe.numStages; ++s)
      costStage(s);
    return std::move(costing);
  }

private:
  void costStage(int s) {
    StageInfo &info = costing.stages[s];
    info.device = pipe.schedule.deviceOf(s);
    llvm::StringSet<> weights;
    for (sched::Phase phase :
         {sched::Phase::Forward, sched::Phase::Backward,
          sched::Phase::BackwardInput, sched::Phase::BackwardWeight,
          sched::Phase::Update})
      if (func::FuncOp func = functionOf(s, phase))
        func.walk([&](Operation *op) { scanOp(s, phase, op, weights); });
    uint64_t weightBytes = 0;
    for (auto &entry : weights)
      if (auto global = symbols.lookup<onnx::GlobalOp>(entry.getKey()))
        weightBytes += pp::getTensorBytes(global.getType());
    info.costs.staticBytes =
        static_cast<uint64_t>(weightBytes * (2.0 + stateFactor));
    // Each older version a weight-versioned schedule keeps costs the
    // weights once more (the simulator counts them while held).
    info.costs.versionBytes = weightBytes;
    if (replicas.count > 1 && weightBytes > 0)
      info.costs.gradReduce = gradReduceSeconds(info.device, weightBytes);
  }

  func::FuncOp functionOf(int s, sched::Phase phase) const {
    auto it = functions.find({s, phase});
    return it == functions.end() ? func::FuncOp()
                                 : dyn_cast<func::FuncOp>(it->second);
  }

  /// What `op` of stage `s`'s `phase` function adds: the trainable weight
  /// it reads, what it sends or stashes, its name and its compute.
  void scanOp(int s, sched::Phase phase, Operation *op,
              llvm::StringSet<> &weights) {
    StageInfo &info = costing.stages[s];
    if (auto read = dyn_cast<onnx::GlobalReadOp>(op)) {
      auto global =
          symbols.lookup<onnx::GlobalOp>(read.getGlobalAttr().getAttr());
      if (global && global.getKind() == onnx::kTrainable)
        weights.insert(read.getGlobal());
    }
    if (auto send = dyn_cast<pipeline::SendOp>(op))
      recordSend(s, phase, send);
    if (auto stash = dyn_cast<pipeline::StashOp>(op))
      (phase == sched::Phase::Forward ? info.costs.stashBytes
                                      : info.costs.inputGradStashBytes) +=
          pp::getTensorBytes(stash.getValue().getType());
    if (isBookkeeping(op) || isa<func::FuncOp>(op))
      return;
    if (phase == sched::Phase::Forward)
      info.ops.push_back(pp::getOpName(op).empty()
                             ? op->getName().getStringRef().str()
                             : pp::getOpName(op));
    bool recomputed =
        phase != sched::Phase::Forward && pipeline::isRecomputed(op);
    if (recomputed)
      ++info.recomputed;
    else if (phase != sched::Phase::Forward && phase != sched::Phase::Update)
      return;
    addCompute(*pipe.costModel, op, phase, recomputed, info.costs,
               pipe.device(info.device));
    // Under WSP the same op on each VW's counterpart device.
    for (size_t k = 0; k < costing.vwCosts.size(); ++k) {
      int64_t d =
          replicas.placed ? replicas.plan.getDeviceOf(s, k) : info.device;
      addCompute(*pipe.costModel, op, phase, recomputed, costing.vwCosts[k][s],
                 pipe.cluster.devices[replicas.devices[k][d]]);
    }
  }

  /// A send of stage `s` outside its update: bytes it moves each
  /// micro-batch, and a cut of plan.json.
  void recordSend(int s, sched::Phase phase, pipeline::SendOp send) {
    int64_t bytes = pp::getTensorBytes(send.getValue().getType());
    bool forward = phase == sched::Phase::Forward;
    if (phase == sched::Phase::Update)
      return;
    StageInfo &info = costing.stages[s];
    (forward ? info.costs.activationBytes : info.costs.gradientBytes) += bytes;
    std::string type;
    llvm::raw_string_ostream os(type);
    os << send.getValue().getType();
    Operation *def = send.getValue().getDefiningOp();
    costing.cuts.push_back({s, static_cast<int64_t>(send.getPeer()), forward,
                            def ? pp::getOpName(def) : std::string("input"),
                            type, bytes});
  }

  /// Data parallelism: a ring all-reduce of the stage's gradients over its
  /// replicas, 2 (N - 1) steps of 1/N of the bytes each, on the slowest
  /// link from the stage's device to a counterpart.
  double gradReduceSeconds(int device, uint64_t weightBytes) const {
    int64_t n = replicas.count;
    double bandwidth = 0, latency = 0;
    int here = pipe.clusterIndex[device];
    for (int64_t k = 1; k < n; ++k) {
      int there = counterpartDevice(pipe, replicas, here, k);
      if (there == here)
        continue;
      double b = pipe.cluster.bandwidth(here, there);
      if (bandwidth == 0 || (b > 0 && b < bandwidth))
        bandwidth = b;
      latency = std::max(latency, pipe.cluster.latency(here, there));
    }
    double steps = 2.0 * static_cast<double>(n - 1);
    return steps * latency + (bandwidth > 0
                                  ? steps * static_cast<double>(weightBytes) /
                                        static_cast<double>(n) / bandwidth
                                  : 0);
  }

  const ScheduledPipeline &pipe;
  const Replicas &replicas;
  double stateFactor;
  std::map<std::pair<int64_t, sched::Phase>, Operation *> functions;
  SymbolTable symbols; // One hash table, not a scan per lookup.
  StageCosting costing;
};

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

/// The links of `in` between devices on two cluster devices
/// (`clusterDevices[d]` for device d): the cluster's bandwidth and latency.
void setLinks(sched::SimulationInput &in, const pp::cluster::Cluster &cluster,
              ArrayRef<int> clusterDevices) {
  int p = static_cast<int>(in.bandwidth.size());
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b)
      if (a != b && clusterDevices[a] != clusterDevices[b]) {
        in.bandwidth[a][b] =
            cluster.bandwidth(clusterDevices[a], clusterDevices[b]);
        in.latency[a][b] =
            cluster.latency(clusterDevices[a], clusterDevices[b]);
      }
}

/// Devices of a node whose processors they share (cluster
/// shared_processors) run at the rate the simulator's sharing gives.
void shareProcessors(sched::SimulationInput &in,
                     const pp::cluster::Cluster &cluster,
                     ArrayRef<int> clusterDevices) {
  in.sharing = {};
  const std::vector<double> &shared = cluster.nodeSharedProcessors;
  if (llvm::none_of(shared, [](double n) { return n > 0; }))
    return;
  in.sharing.processors = shared;
  int p = static_cast<int>(in.bandwidth.size());
  for (int a = 0; a < p; ++a) {
    const pp::cluster::Device &device = cluster.devices[clusterDevices[a]];
    bool isShared = static_cast<size_t>(device.node) < shared.size() &&
                    shared[device.node] > 0;
    in.sharing.group.push_back(isShared ? device.node : -1);
    in.sharing.demand.push_back(device.processors);
  }
}

/// The simulator's input for the pipeline on its devices.
sched::SimulationInput buildSimulationInput(const ScheduledPipeline &pipe,
                                            ArrayRef<StageInfo> stages) {
  sched::SimulationInput input;
  for (const StageInfo &info : stages)
    input.stages.push_back(info.costs);
  int p = pipe.numDevices();
  input.bandwidth.assign(p, std::vector<double>(p, 0));
  input.latency.assign(p, std::vector<double>(p, 0));
  setLinks(input, pipe.cluster, pipe.clusterIndex);
  shareProcessors(input, pipe.cluster, pipe.clusterIndex);
  return input;
}

/// VW `k`'s input: the pipeline's with the stages' compute on the VW's own
/// devices, and the links and sharing between those.
sched::SimulationInput workerInput(const sched::SimulationInput &input,
                                   const ScheduledPipeline &pipe,
                                   const Replicas &replicas,
                                   const StageCosting &costing, size_t k) {
  sched::SimulationInput vw = input;
  for (int s = 0; s < pipe.numStages; ++s) {
    sched::StageCosts c = costing.stages[s].costs;
    const sched::StageCosts &there = costing.vwCosts[k][s];
    c.forward = there.forward;
    c.backward = there.backward;
    c.backwardInput = there.backwardInput;
    c.backwardWeight = there.backwardWeight;
    c.optimizer = there.optimizer;
    vw.stages[s] = c;
  }
  setLinks(vw, pipe.cluster, replicas.devices[k]);
  shareProcessors(vw, pipe.cluster, replicas.devices[k]);
  return vw;
}

/// Under WSP or with placements, each VW's step on its own devices; under
/// WSP also the waves of all of them.
struct WorkerPrediction {
  std::vector<double> step;
  std::vector<sched::SimulationResult> results;
  sched::WaveSyncInput waveInput;
  /// Each VW's wave when the pipelines drain every wave (D = 0).
  std::vector<double> drainedWaves;
  sched::WaveSyncResult waves;
};

/// VW `k`'s wave: `drained`, but HetPipe's VWs keep their pipelines full
/// across waves for D >= 1, so theirs is the steady step of their stream.
double workerWaveSeconds(ModuleOp module, const Replicas &replicas, size_t k,
                         const sched::Schedule &schedule,
                         const sched::SimulationInput &vw, double drained) {
  pipeline::PlanAttr plan = replicas.plan;
  double wave = drained;
  if (plan.getSchedule() != sched::ScheduleKind::HetPipe ||
      plan.getStaleness() < 1)
    return wave;
  for (auto streamOp : module.getOps<pipeline::StreamOp>())
    if (static_cast<size_t>(streamOp.getReplica()) == (replicas.placed ? k : 0))
      if (double steady = streamStepSeconds(
              pipeline::toStreamSchedule(streamOp, plan), schedule, vw);
          steady > 0)
        wave = steady;
  return wave;
}

/// Simulates each VW's step, and under WSP the waves of all of them (the
/// push of a wave: every stage's ring all-reduce, side by side).
FailureOr<WorkerPrediction>
simulateWorkers(ModuleOp module, const ScheduledPipeline &pipe,
                const Replicas &replicas, const StageCosting &costing,
                const sched::SimulationInput &input) {
  WorkerPrediction workers;
  for (size_t k = 0; k < costing.vwCosts.size(); ++k) {
    sched::SimulationInput vw = workerInput(input, pipe, replicas, costing, k);
    const sched::Schedule &schedule = replicas.scheduleOf(k, pipe.schedule);
    sched::SimulationResult r = sched::simulate(schedule, vw);
    if (!r.error.empty() || r.deadlock) {
      emitError(pipe.scheduleOp->getLoc())
          << "simulation of virtual worker " << k << ": "
          << (r.error.empty() ? "deadlock" : r.error);
      return failure();
    }
    double wave =
        r.iterationTime * static_cast<double>(replicas.plan.getWave());
    workers.step.push_back(r.iterationTime);
    workers.results.push_back(std::move(r));
    if (!replicas.waveSynchronous)
      continue;
    workers.drainedWaves.push_back(wave);
    workers.waveInput.waveSeconds.push_back(
        workerWaveSeconds(module, replicas, k, schedule, vw, wave));
  }
  if (!replicas.waveSynchronous)
    return workers;
  sched::WaveSyncInput &waveInput = workers.waveInput;
  for (const StageInfo &info : costing.stages)
    waveInput.pushSeconds =
        std::max(waveInput.pushSeconds, info.costs.gradReduce);
  waveInput.staleness = replicas.plan.getStaleness();
  waveInput.waves = kSimulatedWaves;
  workers.waves = sched::simulateWaveSync(waveInput);
  return workers;
}

/// The predicted rates, in samples per second over all replicas.
struct Throughput {
  /// Samples per micro-batch: the first dimension of the first input.
  int64_t microBatchSize = 0;
  /// Of the drained step the simulator ran.
  double samplesPerSecond = 0;
  /// Weight-versioned schedules also run as a stream that drains only at
  /// checkpoints and the end: their steady step (0 for the others).
  double continuousStep = 0;
  double continuousSamplesPerSecond = 0;
  /// WSP: every VW's samples of every simulated wave, and the same VWs
  /// meeting every wave (D = 0) for comparison.
  double wspSamplesPerSecond = 0, lockstepSamplesPerSecond = 0;
};

int64_t getMicroBatchSize(ModuleOp module) {
  int64_t microBatchSize = 0;
  module.walk([&](pipeline::InputOp input) {
    auto type = cast<RankedTensorType>(input.getValue().getType());
    if (input.getIndex() == 0 && type.getRank() > 0)
      microBatchSize = type.getDimSize(0);
  });
  return microBatchSize;
}

/// WSP's rates from the simulated waves (`throughput`'s micro-batch size
/// set).
void predictWaveSyncRates(const sched::Schedule &schedule,
                          const Replicas &replicas,
                          const WorkerPrediction &workers,
                          Throughput &throughput) {
  if (!replicas.waveSynchronous || !(workers.waves.seconds > 0))
    return;
  pipeline::PlanAttr plan = replicas.plan;
  double waveSamples = static_cast<double>(throughput.microBatchSize) *
                       schedule.microBatches *
                       (plan ? static_cast<double>(plan.getWave()) : 1.0) *
                       static_cast<double>(kSimulatedWaves * replicas.count);
  throughput.wspSamplesPerSecond = waveSamples / workers.waves.seconds;
  sched::WaveSyncInput lockstep = workers.waveInput;
  lockstep.staleness = 0;
  lockstep.waveSeconds = workers.drainedWaves;
  double seconds = sched::simulateWaveSync(lockstep).seconds;
  throughput.lockstepSamplesPerSecond = seconds > 0 ? waveSamples / seconds : 0;
}

Throughput predictThroughput(ModuleOp module, const ScheduledPipeline &pipe,
                             const Replicas &replicas,
                             const sched::SimulationInput &input,
                             const sched::SimulationResult &result,
                             const WorkerPrediction &workers) {
  const sched::Schedule &schedule = pipe.schedule;
  pipeline::PlanAttr plan = replicas.plan;
  int64_t n = replicas.count;
  Throughput throughput;
  int64_t microBatchSize = throughput.microBatchSize =
      getMicroBatchSize(module);
  throughput.samplesPerSecond =
      result.iterationTime > 0
          ? microBatchSize * schedule.microBatches * n / result.iterationTime
          : 0;
  double continuousStep = throughput.continuousStep =
      plan && plan.isWeightVersioned() && !replicas.placed &&
              !replicas.waveSynchronous
          ? continuousStepSeconds(schedule, input, plan.getVerticalSync())
          : 0;
  throughput.continuousSamplesPerSecond =
      continuousStep > 0
          ? microBatchSize * schedule.microBatches * n / continuousStep
          : 0;
  predictWaveSyncRates(schedule, replicas, workers, throughput);
  return throughput;
}

/// Everything the report says: the pipeline and its replicas, the stages'
/// costs, and the simulated step of the pipeline and of each VW.
struct Prediction {
  ScheduledPipeline pipe;
  Replicas replicas;
  StageCosting costing;
  sched::SimulationInput input;
  sched::SimulationResult result;
  WorkerPrediction workers;
  Throughput throughput;

  /// The rate the module records: WSP's over its waves, a weight-versioned
  /// run's steady rate (it drains only at checkpoints and its end), else
  /// the drained step's.
  double predictedSamplesPerSecond() const {
    if (replicas.waveSynchronous)
      return throughput.wspSamplesPerSecond;
    return throughput.continuousSamplesPerSecond > 0
               ? throughput.continuousSamplesPerSecond
               : throughput.samplesPerSecond;
  }
};

/// Costs and simulates the scheduled pipeline and its replicas. The
/// pipeline's deadlock is diagnosed after its VWs' failures.
FailureOr<Prediction> predictPlan(ModuleOp module,
                                  const pp::PlanReportPassOptions &options) {
  FailureOr<ScheduledPipeline> pipe = loadPipeline(module, options);
  if (failed(pipe))
    return failure();
  FailureOr<Replicas> replicas = placeReplicas(module, *pipe);
  if (failed(replicas))
    return failure();
  Prediction p;
  p.pipe = std::move(*pipe);
  p.replicas = std::move(*replicas);
  p.costing = StageCoster(module, p.pipe, p.replicas).run();
  p.input = buildSimulationInput(p.pipe, p.costing.stages);
  p.result = sched::simulate(p.pipe.schedule, p.input);
  if (!p.result.error.empty()) {
    emitError(p.pipe.scheduleOp.getLoc()) << "simulation: " << p.result.error;
    return failure();
  }
  FailureOr<WorkerPrediction> workers =
      simulateWorkers(module, p.pipe, p.replicas, p.costing, p.input);
  if (failed(workers))
    return failure();
  p.workers = std::move(*workers);
  if (p.result.deadlock) {
    auto diag = emitError(p.pipe.scheduleOp.getLoc())
                << "the schedule deadlocks:";
    for (const std::string &line : p.result.stuck)
      diag << " " << line << ";";
    return failure();
  }
  p.throughput = predictThroughput(module, p.pipe, p.replicas, p.input,
                                   p.result, p.workers);
  return p;
}

//===----------------------------------------------------------------------===//
// The text summary
//===----------------------------------------------------------------------===//

/// The title, then one row per stage: its device, ops, compute per
/// micro-batch, stash and recomputed ops.
void writeStageTable(llvm::raw_ostream &os, const Prediction &p) {
  const sched::Schedule &schedule = p.pipe.schedule;
  os << llvm::formatv("== predicted step: {0} stages on {1} devices, "
                      "schedule {2}, {3} micro-batches of {4} ==\n",
                      p.pipe.numStages, p.pipe.numDevices(),
                      sched::toString(schedule.kind), schedule.microBatches,
                      p.throughput.microBatchSize);
  os << llvm::formatv("{0,5} {1,-14} {2,-9} {3,5} {4,9} {5,9} {6,11} "
                      "{7,4}\n",
                      "stage", "device", "kind", "ops", "fwd ms", "bwd ms",
                      "stash/mb", "rcmp");
  for (int s = 0; s < p.pipe.numStages; ++s) {
    const StageInfo &info = p.costing.stages[s];
    const pp::cluster::Device &device = p.pipe.device(info.device);
    os << llvm::formatv("{0,5} {1,-14} {2,-9} {3,5} {4,9:f3} {5,9:f3} "
                        "{6,11} {7,4}\n",
                        s, device.name, device.kind, info.ops.size(),
                        info.costs.forward * 1e3, info.costs.backward * 1e3,
                        pp::formatMegabytes(info.costs.stashBytes),
                        info.recomputed);
  }
}

/// One row per device: its busy time and peak memory, next to the buffer
/// plan of --pp-memory-plan when it ran (what generated code allocates,
/// with the temporaries' arena).
void writeDeviceTable(llvm::raw_ostream &os, ModuleOp module,
                      const Prediction &p) {
  const sched::SimulationResult &result = p.result;
  auto planned = pipeline::getPlannedPeakBytes(module);
  for (int d = 0; d < p.pipe.numDevices(); ++d) {
    const pp::cluster::Device &device = p.pipe.device(d);
    std::string plannedText;
    if (planned && d < static_cast<int>(planned.size()))
      plannedText = " (buffer plan " + pp::formatMegabytes(planned[d]) + ")";
    int64_t worst = static_cast<int64_t>(result.peakMemory[d]);
    if (planned && d < static_cast<int>(planned.size()))
      worst = std::max(worst, planned[d]);
    os << llvm::formatv(
        "device {0} {1,-14}: busy {2,8:f3} ms, peak memory {3}{4} of "
        "{5}{6}\n",
        d, device.name, result.busy[d] * 1e3,
        pp::formatMegabytes(result.peakMemory[d]), plannedText,
        pp::formatMegabytes(device.memoryBytes),
        worst > device.memoryBytes ? "  OVER" : "");
  }
}

/// Shared processors stretch the ops that overlap (busy is wall time): what
/// the devices of each such node ask for.
void writeSharedProcessors(llvm::raw_ostream &os, const Prediction &p) {
  const pp::cluster::Cluster &cluster = p.pipe.cluster;
  for (auto [n, processors] : llvm::enumerate(cluster.nodeSharedProcessors)) {
    if (processors <= 0)
      continue;
    double demand = 0;
    int sharing = 0;
    for (int d = 0; d < p.pipe.numDevices(); ++d) {
      const pp::cluster::Device &device = p.pipe.device(d);
      if (device.node == static_cast<int>(n)) {
        demand += device.processors;
        ++sharing;
      }
    }
    if (sharing > 0)
      os << llvm::formatv("shared processors: {0} devices of {1} ask for "
                          "{2} of its {3} processors\n",
                          sharing, cluster.nodes[n], demand, processors);
  }
}

/// The replicas' all-reduce of each stage, per step or under WSP per wave.
void writeDataParallel(llvm::raw_ostream &os, const Prediction &p) {
  int64_t replicas = p.replicas.count;
  if (replicas <= 1)
    return;
  pipeline::PlanAttr plan = p.replicas.plan;
  if (p.replicas.planIsWaveSynchronous())
    // The push of a wave is the same ring all-reduce, of the update, once
    // per wave, off the critical path while the bound allows.
    os << llvm::formatv("data parallel: {0} replicas of this pipeline "
                        "under WSP (D = {1}); push of each wave of {2} "
                        "step(s) (ring all-reduce of the update):",
                        replicas, plan.getStaleness(), plan.getWave());
  else
    os << llvm::formatv("data parallel: {0} replicas of this pipeline; "
                        "grad_reduce (ring all-reduce) per step:",
                        replicas);
  for (int s = 0; s < p.pipe.numStages; ++s)
    os << llvm::formatv(" stage {0} {1:f3} ms", s,
                        p.costing.stages[s].costs.gradReduce * 1e3);
  os << "\n";
}

/// The predicted step, and how much of it a measured profile timed.
void writeIteration(llvm::raw_ostream &os, const Prediction &p,
                    StringRef profileFile) {
  const sched::SimulationResult &result = p.result;
  os << llvm::formatv("iteration {0:f3} ms, bubble {1:f1}%, {2:f0} "
                      "samples/s{3}\n",
                      result.iterationTime * 1e3, result.bubbleFraction * 100,
                      p.throughput.samplesPerSecond,
                      p.replicas.count > 1 ? " (all replicas)" : "");
  if (auto coverage = p.pipe.costModel->getProfileCoverage())
    os << llvm::formatv("cost model: profile {0} measured {1} of {2} op "
                        "times (forward and backward), the roofline the "
                        "rest\n",
                        profileFile, coverage->first,
                        coverage->first + coverage->second);
}

/// The measured step against the predicted one, and per device the busy
/// time of the stages it runs.
void writeMeasured(llvm::raw_ostream &os, const Prediction &p,
                   StringRef measuredLog) {
  const MeasuredRun &measured = *p.pipe.measured;
  const sched::SimulationResult &result = p.result;
  auto relative = [](double predicted, double actual) {
    return actual > 0 ? (predicted - actual) / actual * 100 : 0.0;
  };
  os << llvm::formatv("measured ({0}, median of {1} step(s)): step "
                      "{2:f3} ms, predicted {3:f3} ms ({4}%)\n",
                      measuredLog, measured.steps, measured.stepSeconds * 1e3,
                      result.iterationTime * 1e3,
                      llvm::format("%+.1f", relative(result.iterationTime,
                                                     measured.stepSeconds)));
  for (int d = 0; d < p.pipe.numDevices(); ++d) {
    double busy = 0;
    for (int s = 0; s < p.pipe.numStages; ++s)
      if (p.costing.stages[s].device == d)
        busy += measured.stageBusySeconds[s];
    os << llvm::formatv("  device {0}: busy {1:f3} ms, predicted {2:f3} "
                        "ms ({3}%)\n",
                        d, busy * 1e3, result.busy[d] * 1e3,
                        llvm::format("%+.1f", relative(result.busy[d], busy)));
  }
}

/// TiMePReSt's gap between the version a forward reads and the latest, for
/// `numStages` stages updating every `n` micro-batches.
void writeVersionGap(llvm::raw_ostream &os, int numStages, int n) {
  int gap = sched::timePReStVersionGap(numStages, n);
  os << llvm::formatv("TiMePReSt version gap v = floor((W + n - 2) / "
                      "n) = {0} for W = {1} stages, n = {2}\n",
                      gap, numStages, n);
  if (n < numStages - 1)
    os << llvm::formatv("warning: n = {0} < stages - 1 = {1}: the "
                        "version gap is {2} (> 1); an update-every of at "
                        "least {1} (dividing microbatches) keeps it "
                        "at 1\n",
                        n, numStages - 1, gap);
}

/// A weight-versioned schedule's updates: the versions each stage holds,
/// the staleness of its gradients, and its continuous step.
void writeWeightVersions(llvm::raw_ostream &os, const Prediction &p) {
  const sched::Schedule &schedule = p.pipe.schedule;
  int numStages = p.pipe.numStages;
  int n = schedule.microBatchesPerUpdate;
  os << llvm::formatv("weight versions: an update every {0} "
                      "micro-batch(es), {1} a step per stage; held at "
                      "once:",
                      n, schedule.updatesPerStep());
  std::vector<int64_t> held = sched::peakWeightVersions(schedule);
  for (int s = 0; s < numStages; ++s)
    os << " stage " << s << " " << held[s];
  os << "; staleness of the applied gradients (updates since the "
        "version its mini-batch's forward read), at most:";
  std::vector<std::vector<int>> stale = sched::updateStaleness(schedule);
  for (int s = 0; s < numStages; ++s)
    os << " stage " << s << " "
       << (stale[s].empty() ? 0 : *llvm::max_element(stale[s]));
  os << "\n";
  const Throughput &throughput = p.throughput;
  if (throughput.continuousStep > 0)
    os << llvm::formatv(
        "continuous (train --drain-every 0: steps run as one stream, "
        "drained at checkpoints and the end): {0:f3} ms a step, {1:f0} "
        "samples/s ({2:f2}x the drained step's)\n",
        throughput.continuousStep * 1e3, throughput.continuousSamplesPerSecond,
        p.result.iterationTime / throughput.continuousStep);
  if (schedule.kind == sched::ScheduleKind::NF1B ||
      schedule.kind == sched::ScheduleKind::VTimePReSt ||
      schedule.kind == sched::ScheduleKind::ITimePReSt)
    writeVersionGap(os, numStages, n);
}

/// VW `k`'s devices, as the summary's lists of VWs start.
void writeWorkerDevices(llvm::raw_ostream &os, const Prediction &p, size_t k) {
  os << llvm::formatv("  VW {0}:", k);
  for (int d = 0; d < p.pipe.numDevices(); ++d)
    os << " " << p.pipe.cluster.devices[p.replicas.devices[k][d]].name;
}

/// Virtual workers with partitions of their own: synchronous data
/// parallelism waits for the slowest.
void writePlacedWorkers(llvm::raw_ostream &os, const Prediction &p) {
  const std::vector<double> &vwStep = p.workers.step;
  double slowest = *llvm::max_element(vwStep);
  os << llvm::formatv("virtual workers with their own partitions: the "
                      "slowest paces synchronous training, {0:f3} ms per "
                      "step ({1:f0} samples/s over all)\n",
                      slowest * 1e3,
                      slowest > 0 ? p.throughput.microBatchSize *
                                        p.pipe.schedule.microBatches *
                                        p.replicas.count / slowest
                                  : 0.0);
  for (size_t k = 0; k < vwStep.size(); ++k) {
    writeWorkerDevices(os, p, k);
    os << " stages";
    for (int st = 0; st < p.pipe.numStages; ++st)
      os << " " << st << "@" << p.replicas.plan.getDeviceOf(st, k);
    os << llvm::formatv("; step {0:f3} ms\n", vwStep[k] * 1e3);
  }
}

/// Wave Synchronous Parallel: the rate over the simulated waves against
/// lockstep, and each VW's step, wave, idle time and staleness.
void writeWaveSyncWorkers(llvm::raw_ostream &os, const Prediction &p) {
  pipeline::PlanAttr plan = p.replicas.plan;
  const WorkerPrediction &workers = p.workers;
  os << llvm::formatv(
      "wave synchronous parallel (D = {0}, waves of {1} step(s)), {2} "
      "waves simulated: {3:f0} samples/s over all VWs (D = 0: {4:f0})\n",
      plan.getStaleness(), plan.getWave(), kSimulatedWaves,
      p.throughput.wspSamplesPerSecond, p.throughput.lockstepSamplesPerSecond);
  for (size_t k = 0; k < workers.step.size(); ++k) {
    writeWorkerDevices(os, p, k);
    os << llvm::formatv(
        "; step {0:f3} ms, wave {1:f3} ms, idle {2:f1}%, staleness up "
        "to {3}\n",
        workers.step[k] * 1e3, workers.waveInput.waveSeconds[k] * 1e3,
        100 * workers.waves.idleSeconds[k] / workers.waves.seconds,
        workers.waves.maxStaleness[k]);
  }
}

/// Whether each device pair receives its messages in the order they are
/// sent: NCCL's point-to-point has no tags and matches them by order.
LogicalResult writeMessageOrder(llvm::raw_ostream &os, ModuleOp module) {
  FailureOr<std::optional<std::string>> outOfOrder =
      pipeline::findMessageOutOfOrder(module);
  if (failed(outOfOrder))
    return failure();
  if (!outOfOrder->has_value())
    os << "messages: every device pair receives them in the order they "
          "are sent (NCCL matches them by order, without headers)\n";
  else
    os << "messages: not received in send order (" << **outOfOrder
       << "): NCCL sends a header with each\n";
  return success();
}

/// The one-screen summary, to summary=.
LogicalResult writeSummary(ModuleOp module,
                           const pp::PlanReportPassOptions &options,
                           const Prediction &p) {
  std::string error;
  auto out = pp::openReportFile(options.summaryFile, &error);
  if (!out) {
    emitError(module.getLoc()) << "cannot write summary: " << error;
    return failure();
  }
  llvm::raw_ostream &os = out->os();
  const sched::Schedule &schedule = p.pipe.schedule;
  writeStageTable(os, p);
  writeDeviceTable(os, module, p);
  writeSharedProcessors(os, p);
  writeDataParallel(os, p);
  writeIteration(os, p, options.profileFile);
  if (p.pipe.measured)
    writeMeasured(os, p, options.measuredLog);
  if (sched::usesSplitBackward(schedule.kind) && p.result.iterationTime > 0)
    os << llvm::formatv(
        "steady-state bubble {0:f1}% (the most idle time between a "
        "device's first and last action; the zero-bubble papers' bubble, "
        "when steps follow each other without draining; this runtime "
        "drains each step)\n",
        p.result.steadyBubbleFraction * 100);
  if (sched::isWeightVersioned(schedule.kind))
    writeWeightVersions(os, p);
  // The plan's WSP, with a single replica too.
  bool waveSynchronous = p.replicas.planIsWaveSynchronous();
  if (p.replicas.placed && !waveSynchronous)
    writePlacedWorkers(os, p);
  if (waveSynchronous)
    writeWaveSyncWorkers(os, p);
  if (p.pipe.numDevices() > 1 && failed(writeMessageOrder(os, module)))
    return failure();
  explainPlan(os, p.costing.stages, p.input, schedule.microBatches,
              p.result.iterationTime);
  writeTrainableSet(module, os);
  writePrecision(module, os);
  return pp::keepReportFile(module, *out, options.summaryFile);
}

//===----------------------------------------------------------------------===//
// The output directory: timelines and plan.json
//===----------------------------------------------------------------------===//

std::string pathIn(StringRef dir, StringRef file) {
  SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  return std::string(path);
}

/// Every VW's step on its own devices (under WSP, or with placements of
/// their own) as one Chrome trace, one process each; whether it was
/// written.
bool writeWorkerTrace(const std::string &path, const Prediction &p) {
  std::vector<sched::TracedPipeline> pipelines;
  for (size_t k = 0; k < p.workers.results.size(); ++k) {
    std::vector<std::string> names;
    for (int index : p.replicas.devices[k])
      names.push_back(p.pipe.cluster.devices[index].name);
    pipelines.push_back({"VW " + std::to_string(k),
                         &p.replicas.scheduleOf(k, p.pipe.schedule),
                         &p.workers.results[k], std::move(names)});
  }
  std::ofstream vws(path);
  sched::writeChromeTrace(pipelines, vws);
  vws.close();
  return static_cast<bool>(vws);
}

/// timeline.json (a Chrome trace), timeline.svg and, with VWs,
/// timeline-vws.json in `dir`.
LogicalResult writeTimelines(ModuleOp module, StringRef dir,
                             const Prediction &p) {
  std::ofstream trace(pathIn(dir, "timeline.json"));
  sched::writeChromeTrace(p.pipe.schedule, p.result, p.pipe.deviceNames, trace);
  std::ofstream svg(pathIn(dir, "timeline.svg"));
  sched::writeTimelineSVG(p.pipe.schedule, p.result, p.pipe.deviceNames, svg);
  bool vwsWritten = p.workers.results.empty() ||
                    writeWorkerTrace(pathIn(dir, "timeline-vws.json"), p);
  // close() flushes: a full disk shows there, not in the writes.
  trace.close();
  svg.close();
  if (!trace || !svg || !vwsWritten) {
    emitError(module.getLoc())
        << "cannot write the timeline to '" << dir << "'";
    return failure();
  }
  return success();
}

void writeJsonMeasured(llvm::json::OStream &json, const MeasuredRun &measured,
                       StringRef measuredLog,
                       const sched::SimulationResult &result) {
  json.attributeObject("measured", [&] {
    json.attribute("log", measuredLog);
    json.attribute("steps", measured.steps);
    json.attribute("step_seconds", measured.stepSeconds);
    json.attribute("predicted_step_seconds", result.iterationTime);
  });
}

void writeJsonDevices(llvm::json::OStream &json, ModuleOp module,
                      const Prediction &p) {
  const sched::SimulationResult &result = p.result;
  json.attributeArray("devices", [&] {
    for (int d = 0; d < p.pipe.numDevices(); ++d) {
      const pp::cluster::Device &device = p.pipe.device(d);
      json.object([&] {
        json.attribute("index", d);
        json.attribute("name", device.name);
        json.attribute("kind", device.kind);
        json.attribute("memory_bytes", device.memoryBytes);
        json.attribute("peak_memory_bytes",
                       static_cast<int64_t>(result.peakMemory[d]));
        if (auto planned = pipeline::getPlannedPeakBytes(module);
            planned && d < static_cast<int>(planned.size()))
          json.attribute("planned_peak_bytes", planned[d]);
        json.attribute("busy_seconds", result.busy[d]);
        json.attribute("idle_seconds", result.idle[d]);
      });
    }
  });
}

/// One stage's entry: its tensor-parallel degree `tp`, measured busy time,
/// costs and ops.
void writeJsonStage(llvm::json::OStream &json, const Prediction &p, int s,
                    int64_t tp) {
  const StageInfo &info = p.costing.stages[s];
  json.attribute("stage", s);
  json.attribute("device", info.device);
  json.attribute("tp", tp);
  if (p.pipe.measured)
    json.attribute("measured_busy_seconds",
                   p.pipe.measured->stageBusySeconds[s]);
  json.attribute("forward_seconds", info.costs.forward);
  json.attribute("backward_seconds", info.costs.backward);
  json.attribute("backward_input_seconds", info.costs.backwardInput);
  json.attribute("backward_weight_seconds", info.costs.backwardWeight);
  json.attribute("optimizer_seconds", info.costs.optimizer);
  json.attribute("grad_reduce_seconds", info.costs.gradReduce);
  json.attribute("stash_bytes_per_micro_batch",
                 static_cast<int64_t>(info.costs.stashBytes));
  json.attribute("static_bytes", static_cast<int64_t>(info.costs.staticBytes));
  json.attribute("recomputed_ops", info.recomputed);
  json.attributeArray("ops", [&] {
    for (const std::string &op : info.ops)
      json.value(op);
  });
}

/// The stages, each at its own tensor-parallel degree where the plan gives
/// one, else at the plan's `tensorParallel`.
void writeJsonStages(llvm::json::OStream &json, ModuleOp module,
                     const Prediction &p, int64_t tensorParallel) {
  json.attributeArray("stages", [&] {
    for (int s = 0; s < p.pipe.numStages; ++s)
      json.object([&] {
        DenseI64ArrayAttr degrees = pipeline::getTensorParallelStages(module);
        writeJsonStage(json, p, s,
                       degrees && s < static_cast<int>(degrees.size())
                           ? degrees[s]
                           : tensorParallel);
      });
  });
}

void writeJsonCuts(llvm::json::OStream &json, ArrayRef<Cut> cuts) {
  json.attributeArray("cuts", [&] {
    for (const Cut &cut : cuts)
      json.object([&] {
        json.attribute("from_stage", cut.from);
        json.attribute("to_stage", cut.to);
        json.attribute("direction", cut.forward ? "forward" : "backward");
        json.attribute("tensor", cut.tensor);
        json.attribute("type", cut.type);
        json.attribute("bytes", cut.bytes);
      });
  });
}

void writeJsonPrediction(llvm::json::OStream &json, const Prediction &p) {
  const Throughput &throughput = p.throughput;
  json.attributeObject("prediction", [&] {
    json.attribute("iteration_seconds", p.result.iterationTime);
    json.attribute("bubble_fraction", p.result.bubbleFraction);
    json.attribute("steady_bubble_fraction", p.result.steadyBubbleFraction);
    json.attribute("samples_per_second", throughput.samplesPerSecond);
    if (throughput.continuousStep > 0) {
      json.attribute("continuous_step_seconds", throughput.continuousStep);
      json.attribute("continuous_samples_per_second",
                     throughput.continuousSamplesPerSecond);
    }
    json.attribute("data_parallel", p.replicas.count);
  });
}

void writeJsonWaveSync(llvm::json::OStream &json, const Prediction &p) {
  pipeline::PlanAttr plan = p.replicas.plan;
  const WorkerPrediction &workers = p.workers;
  json.attributeObject("wave_synchronous", [&] {
    json.attribute("staleness", plan.getStaleness());
    json.attribute("wave_steps", plan.getWave());
    json.attribute("simulated_waves", kSimulatedWaves);
    json.attribute("push_seconds", workers.waveInput.pushSeconds);
    json.attribute("samples_per_second", p.throughput.wspSamplesPerSecond);
    json.attribute("samples_per_second_at_staleness_0",
                   p.throughput.lockstepSamplesPerSecond);
    json.attributeArray("virtual_workers", [&] {
      for (size_t k = 0; k < workers.step.size(); ++k)
        json.object([&] {
          json.attributeArray("devices", [&] {
            for (int d = 0; d < p.pipe.numDevices(); ++d)
              json.value(p.pipe.cluster.devices[p.replicas.devices[k][d]].name);
          });
          json.attribute("step_seconds", workers.step[k]);
          json.attribute("wave_seconds", workers.waveInput.waveSeconds[k]);
          json.attribute("idle_seconds", workers.waves.idleSeconds[k]);
          json.attribute("max_staleness", workers.waves.maxStaleness[k]);
        });
    });
  });
}

/// plan.json's members, in their order.
void writePlanJsonMembers(llvm::json::OStream &json, ModuleOp module,
                          StringRef measuredLog, const Prediction &p) {
  const sched::Schedule &schedule = p.pipe.schedule;
  json.attribute("schedule", sched::toString(schedule.kind));
  Precision precision = getPrecision(module);
  json.attribute("precision", precision.compute);
  json.attribute("loss_scale", precision.lossScale);
  json.attribute("micro_batches", schedule.microBatches);
  json.attribute("micro_batch_size", p.throughput.microBatchSize);
  json.attribute("chunks_per_device", schedule.chunksPerDevice);
  // The three dimensions (the plan's largest tensor-parallel degree;
  // each stage's below).
  pipeline::PlanAttr plan = p.replicas.plan;
  int64_t tensorParallel = plan ? plan.getTensorParallel() : 1;
  if (p.pipe.measured)
    writeJsonMeasured(json, *p.pipe.measured, measuredLog, p.result);
  json.attribute("pp", static_cast<int64_t>(p.pipe.numDevices()));
  json.attribute("tp", tensorParallel);
  json.attribute("dp", p.replicas.count);
  writeJsonDevices(json, module, p);
  writeJsonStages(json, module, p, tensorParallel);
  writeJsonCuts(json, p.costing.cuts);
  writeJsonPrediction(json, p);
  if (p.replicas.waveSynchronous)
    writeJsonWaveSync(json, p);
}

/// plan.json in `dir`: the plan's dimensions, devices, stages, cuts and
/// prediction.
LogicalResult writePlanJson(ModuleOp module, StringRef dir,
                            StringRef measuredLog, const Prediction &p) {
  std::string path = pathIn(dir, "plan.json");
  std::error_code ec;
  llvm::raw_fd_ostream planFile(path, ec);
  if (ec) {
    emitError(module.getLoc()) << "cannot write plan.json: " << ec.message();
    return failure();
  }
  llvm::json::OStream json(planFile, 2);
  json.object([&] { writePlanJsonMembers(json, module, measuredLog, p); });
  planFile << "\n";
  if (llvm::Error error = pp::finishWriting(planFile, path)) {
    emitError(module.getLoc()) << llvm::toString(std::move(error));
    return failure();
  }
  return success();
}

} // namespace

LogicalResult
pp::pipeline::writePlanReport(ModuleOp module,
                              const pp::PlanReportPassOptions &options) {
  FailureOr<Prediction> prediction = predictPlan(module, options);
  if (failed(prediction))
    return failure();
  module->setAttr(
      pipeline::PPDialect::PredictedSamplesPerSecondAttrHelper::getNameStr(),
      FloatAttr::get(Float64Type::get(module.getContext()),
                     prediction->predictedSamplesPerSecond()));
  SmallVector<int64_t> busyNanos;
  for (double seconds : prediction->result.busy)
    busyNanos.push_back(static_cast<int64_t>(std::llround(seconds * 1e9)));
  pipeline::setPlannedBusyNanos(module, busyNanos);
  if (!options.summaryFile.empty() &&
      failed(writeSummary(module, options, *prediction)))
    return failure();
  if (options.outputDir.empty())
    return success();
  if (std::error_code ec =
          llvm::sys::fs::create_directories(options.outputDir)) {
    emitError(module.getLoc())
        << "cannot create '" << options.outputDir << "': " << ec.message();
    return failure();
  }
  if (failed(writeTimelines(module, options.outputDir, *prediction)))
    return failure();
  return writePlanJson(module, options.outputDir, options.measuredLog,
                       *prediction);
}
