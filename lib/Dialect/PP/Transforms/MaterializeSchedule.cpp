//===- MaterializeSchedule.cpp - Per-device action lists as IR --*- C++ -*-===//
//
// Builds a schedule (pp/Schedule/Schedule.h) for the split module's stages
// and writes it as a `pp.schedule` op: one `pp.device` per device holding
// its `pp.action`s in order, each naming the stage function it runs, its
// micro-batch and the weight version it reads. A device's per-step actions
// run a stage whose update sends another's a message first, and the result
// is checked against the stage functions' message order
// (verifyScheduleMessageOrder) before anything reads it.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"
#include "pp/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <map>
#include <optional>
#include <tuple>

using namespace mlir;
namespace pipeline = pp::pipeline;
namespace sched = pp::schedule;

namespace {

//===----------------------------------------------------------------------===//
// The schedule asked for
//===----------------------------------------------------------------------===//

/// The schedule to build: its kind and chunks from the pass's options, else
/// the plan's, checked against the plan.
struct ScheduleRequest {
  sched::ScheduleKind kind;
  /// A weight-versioned schedule (updates within the step).
  bool versioned = false;
  int64_t numStages = 0;
  /// Chunks per device (v).
  int64_t chunks = 1;
  /// Replicas with placements of their own (heterogeneous virtual workers)
  /// each run their coarse schedule over the shared, finer stages.
  bool placed = false;
  int numDevices = 0;

  StringRef kindName() const { return sched::toString(kind); }
};

/// schedule= (or the plan's), if it updates as the plan does.
FailureOr<sched::ScheduleKind>
checkScheduleKind(ModuleOp module, pipeline::PlanAttr plan,
                  const pp::MaterializeSchedulePassOptions &options) {
  sched::ScheduleKind scheduleKind = options.kind.value_or(plan.getSchedule());
  bool versioned = sched::isWeightVersioned(scheduleKind);
  if (versioned != plan.isWeightVersioned()) {
    module.emitError()
        << "pp-schedule: schedule " << sched::toString(scheduleKind)
        << (versioned ? " is weight-versioned but the plan updates once a "
                        "step (plan it with --pp-partition=\"schedule="
                      : " updates once a step but the plan is weight-"
                        "versioned (plan it with --pp-partition=\"schedule=")
        << sched::toString(scheduleKind) << "\")";
    return failure();
  }
  // HetPipe's VWs may each have their own partition; the other
  // weight-versioned schedules' replicas share one (their WSP replay and
  // their streams assume it).
  if (versioned && scheduleKind != sched::ScheduleKind::HetPipe &&
      plan.hasPlacements()) {
    module.emitError() << "pp-schedule: " << sched::toString(scheduleKind)
                       << " with virtual workers of their own partitions is "
                          "not built (schedule=hetpipe is)";
    return failure();
  }
  return scheduleKind;
}

/// chunks= (or the plan's), if the stages split into them.
FailureOr<int64_t>
checkChunks(ModuleOp module, pipeline::PlanAttr plan,
            const pp::MaterializeSchedulePassOptions &options) {
  int64_t numStages = plan.getNumStages();
  if (options.chunks.size() > 1) {
    module.emitError() << "pp-schedule: chunks takes one value, got "
                       << options.chunks.size();
    return failure();
  }
  int64_t v = options.chunks.empty() ? plan.getChunks() : options.chunks[0];
  if (v < 1) {
    module.emitError() << "pp-schedule: chunks must be >= 1, got " << v;
    return failure();
  }
  bool placed = plan.hasPlacements();
  if (placed && v != 1) {
    module.emitError() << "pp-schedule: replicas with their own placements "
                          "need one chunk per device, got "
                       << v;
    return failure();
  }
  if (!placed && numStages % v != 0) {
    module.emitError() << numStages << " stages do not split into " << v
                       << " chunks per device";
    return failure();
  }
  return v;
}

FailureOr<ScheduleRequest>
parseRequest(ModuleOp module, pipeline::PlanAttr plan,
             const pp::MaterializeSchedulePassOptions &options) {
  FailureOr<sched::ScheduleKind> kind =
      checkScheduleKind(module, plan, options);
  if (failed(kind))
    return failure();
  FailureOr<int64_t> chunks = checkChunks(module, plan, options);
  if (failed(chunks))
    return failure();
  ScheduleRequest request;
  request.kind = *kind;
  request.versioned = sched::isWeightVersioned(*kind);
  request.numStages = plan.getNumStages();
  request.chunks = *chunks;
  request.placed = plan.hasPlacements();
  request.numDevices = static_cast<int>(
      request.placed ? plan.getNumDevices() : request.numStages / *chunks);
  return request;
}

/// Data-parallel replicas all-reduce each stage's accumulated gradients (a
/// grad_reduce after its last backward, which its update waits for) when
/// the stage has any. Under WSP the replicas exchange updates at wave ends
/// instead (the runtime), not gradients every step.
std::vector<bool> findGradReduceStages(ModuleOp module, pipeline::PlanAttr plan,
                                       int64_t numStages) {
  std::vector<bool> gradReduceStages(numStages, false);
  if (plan.getDataParallel() > 1 && !plan.isWaveSynchronous())
    module.walk([&](pipeline::AccumulateOp accumulate) {
      auto func = accumulate->getParentOfType<func::FuncOp>();
      if (std::optional<int64_t> stage = pipeline::getStage(func);
          stage && *stage >= 0 && *stage < numStages)
        gradReduceStages[*stage] = true;
    });
  return gradReduceStages;
}

//===----------------------------------------------------------------------===//
// Stage functions
//===----------------------------------------------------------------------===//

/// The stage functions by (stage, phase), as --pp-split-stages marked them.
struct StageFunctions {
  std::map<std::pair<int64_t, sched::Phase>, func::FuncOp> byPhase;
  /// Whether the backward is split into input and weight gradients.
  bool splitBackward = false;
};

/// The stage functions, if the schedule `kind` can run them.
FailureOr<StageFunctions> collectStageFunctions(ModuleOp module,
                                                sched::ScheduleKind kind) {
  StageFunctions functions;
  for (auto func : module.getOps<func::FuncOp>()) {
    std::optional<int64_t> stage = pipeline::getStage(func);
    std::optional<sched::Phase> phase = pipeline::getPhase(func);
    if (stage && phase)
      functions.byPhase[{*stage, *phase}] = func;
  }
  if (functions.byPhase.empty()) {
    module.emitError() << "no stage functions (pp.stage and pp.phase): run "
                          "--pp-split-stages first";
    return failure();
  }
  functions.splitBackward =
      llvm::any_of(functions.byPhase, [](const auto &entry) {
        return entry.first.second == sched::Phase::BackwardInput;
      });
  if (sched::usesSplitBackward(kind) && !functions.splitBackward) {
    module.emitError() << "schedule " << sched::toString(kind)
                       << " runs input and weight gradients apart: split "
                          "with --pp-split-stages=\"split-backward=true\"";
    return failure();
  }
  return functions;
}

/// (sender, receiver) stage pairs that must run in this order on one
/// device.
using UpdateOrder = std::vector<std::pair<int, int>>;

/// A stage's update may send another's a message (the new value of a
/// weight both read, from the stage that updates it). Between stages of
/// one device the sender must run first: a recv there waits for its own
/// device.
UpdateOrder findUpdatesSentFirst(const StageFunctions &functions) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, sched::Phase> sendPhase;
  for (const auto &[key, stageFunc] : functions.byPhase) {
    func::FuncOp func = stageFunc;
    func.walk([&, &key = key](pipeline::SendOp send) {
      sendPhase[{key.first, static_cast<int64_t>(send.getPeer()),
                 static_cast<int64_t>(send.getTag())}] = key.second;
    });
  }
  UpdateOrder updateFirst;
  for (const auto &[key, stageFunc] : functions.byPhase) {
    if (key.second != sched::Phase::Update)
      continue;
    func::FuncOp func = stageFunc;
    func.walk([&, &key = key](pipeline::RecvOp recv) {
      auto from = static_cast<int64_t>(recv.getPeer());
      auto it = sendPhase.find(
          {from, key.first, static_cast<int64_t>(recv.getTag())});
      if (it != sendPhase.end() && it->second == sched::Phase::Update)
        updateFirst.push_back(
            {static_cast<int>(from), static_cast<int>(key.first)});
    });
  }
  return updateFirst;
}

//===----------------------------------------------------------------------===//
// Building the schedules
//===----------------------------------------------------------------------===//

/// Builds the plan's schedules (one per placed replica, else one for all)
/// and, for weight-versioned ones, their streams. `error` holds the last
/// problem a library builder reported.
class ScheduleBuilder {
public:
  ScheduleBuilder(ModuleOp module, pipeline::PlanAttr plan,
                  const ScheduleRequest &request)
      : module(module), plan(plan), request(request),
        gradReduceStages(
            findGradReduceStages(module, plan, request.numStages)) {}

  int64_t numSchedules() const {
    return request.placed ? plan.getDataParallel() : 1;
  }

  FailureOr<std::vector<sched::Schedule>> buildSchedules() {
    std::vector<sched::Schedule> schedules(numSchedules());
    for (int64_t r = 0; r < numSchedules(); ++r)
      if (failed(build(r, schedules[r])))
        return failure();
    return schedules;
  }

  /// Orders each schedule's per-step actions so that `updateFirst` holds.
  LogicalResult orderUpdates(std::vector<sched::Schedule> &schedules,
                             const UpdateOrder &updateFirst) {
    for (sched::Schedule &schedule : schedules)
      if (!sched::orderStepActions(schedule, updateFirst, error)) {
        module.emitError() << "cannot order the " << request.kindName()
                           << " schedule's updates: " << error;
        return failure();
      }
    return success();
  }

  /// Weight-versioned schedules also run as a stream of steps that drains
  /// only where the run asks (pp.stream): one per placed replica, none
  /// (with a warning) where the order does not repeat from step to step.
  std::vector<std::optional<sched::StreamSchedule>>
  buildStreams(const UpdateOrder &updateFirst) {
    std::vector<std::optional<sched::StreamSchedule>> streams(numSchedules());
    if (!request.versioned)
      return streams;
    int m = microBatches();
    int n = static_cast<int>(plan.getUpdateEvery());
    for (int64_t r = 0; r < numSchedules(); ++r) {
      sched::WindowBuilder window = [&](int steps, sched::Schedule &out,
                                        std::string &message) {
        return buildWindow(r, steps, updateFirst, out, message);
      };
      std::optional<sched::StreamSchedule> &stream = streams[r];
      stream.emplace();
      if (!sched::buildStream(window, m, m / n, *stream, error)) {
        // Still a valid schedule: every step drains.
        module.emitWarning() << "the " << request.kindName()
                             << " schedule drains every step (its order does "
                                "not repeat from step to step: "
                             << error << ")";
        stream.reset();
      }
    }
    return streams;
  }

private:
  int microBatches() const { return static_cast<int>(plan.getMicroBatches()); }

  LogicalResult build(int64_t replica, sched::Schedule &schedule) {
    if (request.versioned)
      return request.placed ? buildPlacedVersioned(replica, schedule)
                            : buildVersioned(schedule);
    return request.placed ? buildPlaced(replica, schedule)
                          : buildShared(schedule);
  }

  /// A placed replica's versioned schedule of `microBatches`: built over
  /// its coarse stages (its devices), then refined to the shared stages.
  bool tryBuildPlacedVersioned(int64_t replica, int microBatches,
                               sched::Schedule &out,
                               std::string &message) const {
    std::vector<int> coarseOf = plan.getPlacement(replica);
    sched::Schedule coarse;
    return sched::buildVersionedSchedule(
               request.kind, request.numDevices, microBatches,
               static_cast<int>(plan.getUpdateEvery()), plan.getVerticalSync(),
               coarse, message, nullptr,
               static_cast<int>(plan.getMicroBatches())) &&
           sched::refineSchedule(coarse, coarseOf, nullptr, out, message);
  }

  LogicalResult buildPlacedVersioned(int64_t replica,
                                     sched::Schedule &schedule) {
    if (tryBuildPlacedVersioned(replica, microBatches(), schedule, error))
      return success();
    return module.emitError()
           << "cannot build the " << request.kindName()
           << " schedule of replica " << replica << ": " << error;
  }

  LogicalResult buildVersioned(sched::Schedule &schedule) {
    int64_t v = request.chunks;
    if (v == 1 &&
        sched::buildVersionedSchedule(
            request.kind, request.numDevices, microBatches(),
            static_cast<int>(plan.getUpdateEvery()), plan.getVerticalSync(),
            schedule, error, &gradReduceStages, microBatches()))
      return success();
    return module.emitError()
           << "cannot build a " << request.kindName() << " schedule: "
           << (v == 1 ? error : "it runs one chunk per device");
  }

  /// The one schedule of replicas that share their placement.
  LogicalResult buildShared(sched::Schedule &schedule) {
    if (sched::buildSchedule(request.kind, request.numDevices, microBatches(),
                             static_cast<int>(request.chunks), schedule, error,
                             &gradReduceStages))
      return success();
    return module.emitError()
           << "cannot build a " << request.kindName() << " schedule: " << error;
  }

  /// A placed replica's schedule: built over its coarse stages (its
  /// devices, each all-reducing if one of its stages does), then refined.
  LogicalResult buildPlaced(int64_t replica, sched::Schedule &schedule) {
    std::vector<int> coarseOf = plan.getPlacement(replica);
    std::vector<bool> coarseReduce(request.numDevices, false);
    for (int64_t s = 0; s < request.numStages; ++s)
      if (gradReduceStages[s])
        coarseReduce[coarseOf[s]] = true;
    sched::Schedule coarse;
    if (!sched::buildSchedule(request.kind, request.numDevices, microBatches(),
                              1, coarse, error, &coarseReduce) ||
        !sched::refineSchedule(coarse, coarseOf, &gradReduceStages, schedule,
                               error))
      return module.emitError()
             << "cannot build the " << request.kindName()
             << " schedule of replica " << replica << ": " << error;
    return success();
  }

  /// Replica `replica`'s window of `steps` steps, for its stream.
  bool buildWindow(int64_t replica, int steps, const UpdateOrder &updateFirst,
                   sched::Schedule &out, std::string &message) const {
    int m = microBatches();
    int n = static_cast<int>(plan.getUpdateEvery());
    bool built =
        request.placed
            ? tryBuildPlacedVersioned(replica, steps * m, out, message)
            : sched::buildVersionedSchedule(
                  request.kind, request.numDevices, steps * m, n,
                  plan.getVerticalSync(), out, message, &gradReduceStages, m);
    return built && sched::orderStepActions(out, updateFirst, message);
  }

  ModuleOp module;
  pipeline::PlanAttr plan;
  const ScheduleRequest &request;
  std::vector<bool> gradReduceStages;
  std::string error;
};

//===----------------------------------------------------------------------===//
// Emitting the IR
//===----------------------------------------------------------------------===//

/// Writes the schedules and streams as pp.schedule and pp.stream ops at the
/// end of the module, each device's actions as a pp.device.
class ScheduleEmitter {
public:
  ScheduleEmitter(ModuleOp module, pipeline::PlanAttr plan,
                  const ScheduleRequest &request,
                  const StageFunctions &functions, double blendLambda)
      : module(module), plan(plan), request(request), functions(functions),
        blendLambda(blendLambda),
        replicaDevices(pipeline::getReplicaDevices(module)),
        b(OpBuilder::atBlockEnd(module.getBody())) {}

  /// One pp.schedule per schedule (with its replica when placed).
  LogicalResult emitSchedules(ArrayRef<sched::Schedule> schedules) {
    for (auto [replica, schedule] : llvm::enumerate(schedules)) {
      auto scheduleOp = pipeline::ScheduleOp::create(
          b, module.getLoc(),
          request.placed ? b.getI64IntegerAttr(static_cast<int64_t>(replica))
                         : IntegerAttr());
      Block *body = new Block();
      scheduleOp.getBody().push_back(body);
      for (int d = 0; d < request.numDevices; ++d)
        if (failed(emitDevice(body, d, deviceName(replica, d),
                              schedule.actions[d])))
          return failure();
    }
    return success();
  }

  /// One pp.stream per replica that has a stream.
  LogicalResult
  emitStreams(ArrayRef<std::optional<sched::StreamSchedule>> streams) {
    for (auto [replica, stream] : llvm::enumerate(streams)) {
      if (!stream)
        continue;
      auto streamOp = pipeline::StreamOp::create(
          b, module.getLoc(), b.getI64IntegerAttr(stream->minSteps),
          b.getI64IntegerAttr(static_cast<int64_t>(replica)));
      Block *body = new Block();
      streamOp.getBody().push_back(body);
      for (int d = 0; d < request.numDevices; ++d)
        if (failed(emitStreamDevice(body, d, *stream)))
          return failure();
    }
    return success();
  }

private:
  /// The name of device `d` of `replica`'s schedule; empty when the plan
  /// gives none.
  std::string deviceName(size_t replica, int d) const {
    if (replica == 0) {
      // The plan names the device of each of replica 0's stages; its first
      // stage on device d is d unless the plan places the stages.
      int64_t first = request.placed ? 0 : d;
      while (request.placed && first < request.numStages &&
             plan.getDeviceOf(first, 0) != d)
        ++first;
      return plan.getStageDeviceName(first).value_or("").str();
    }
    if (replicaDevices) {
      size_t index = (replica - 1) * request.numDevices + d;
      if (index < replicaDevices.size())
        if (auto text = dyn_cast<StringAttr>(replicaDevices[index]))
          return text.getValue().str();
    }
    return "";
  }

  /// One pp.device holding `list` at the end of `parent`.
  FailureOr<pipeline::DeviceOp> emitDevice(Block *parent, int d,
                                           std::string name,
                                           ArrayRef<sched::Action> list) {
    OpBuilder db = OpBuilder::atBlockEnd(parent);
    if (name.empty())
      name = "device" + std::to_string(d);
    auto device = pipeline::DeviceOp::create(
        db, module.getLoc(), db.getI64IntegerAttr(d), db.getStringAttr(name),
        IntegerAttr(), IntegerAttr());
    Block *actions = new Block();
    device.getBody().push_back(actions);
    OpBuilder ab = OpBuilder::atBlockEnd(actions);
    for (const sched::Action &action : list) {
      // A split module runs a whole backward as its two halves, back to
      // back.
      if (action.kind == sched::ActionKind::Backward &&
          functions.splitBackward) {
        if (failed(emitAction(ab, sched::ActionKind::BackwardInput, action)) ||
            failed(emitAction(ab, sched::ActionKind::BackwardWeight, action)))
          return failure();
        continue;
      }
      if (failed(emitAction(ab, action.kind, action)))
        return failure();
    }
    return device;
  }

  /// `action` as a pp.action of kind `actionKind`, calling its stage's
  /// function of that phase.
  LogicalResult emitAction(OpBuilder &ab, sched::ActionKind actionKind,
                           const sched::Action &action) {
    FlatSymbolRefAttr callee;
    sched::Phase phase = sched::phaseOf(actionKind);
    if (phase != sched::Phase::None) {
      auto it = functions.byPhase.find({action.stage, phase});
      if (it == functions.byPhase.end())
        return module.emitError() << "no " << sched::toString(phase)
                                  << " function of stage " << action.stage;
      func::FuncOp func = it->second;
      callee = FlatSymbolRefAttr::get(func.getSymNameAttr());
    }
    // An update is per step in the IR (micro_batch -1); under a
    // weight-versioned schedule the k-th of a stage makes version k + 1.
    int64_t microBatch = sched::isPerStep(actionKind) ? -1 : action.microBatch;
    auto op = pipeline::ActionOp::create(
        ab, module.getLoc(),
        pipeline::ActionKindAttr::get(module.getContext(), actionKind), callee,
        ab.getI64IntegerAttr(action.stage), ab.getI64IntegerAttr(microBatch),
        ab.getI64IntegerAttr(action.weightVersion), IntegerAttr(), FloatAttr(),
        action.overlapsNext ? ab.getUnitAttr() : UnitAttr());
    if (action.blendVersion >= 0) {
      op.setBlendVersionAttr(ab.getI64IntegerAttr(action.blendVersion));
      op.setBlendFactorAttr(
          ab.getF64FloatAttr(std::exp(-blendLambda * action.staleness)));
    }
    return success();
  }

  /// The pp.actions that `actions` become: a split backward is two.
  int64_t countEmitted(ArrayRef<sched::Action> actions) const {
    int64_t count = 0;
    for (const sched::Action &action : actions)
      count +=
          action.kind == sched::ActionKind::Backward && functions.splitBackward
              ? 2
              : 1;
    return count;
  }

  /// Device `d` of `stream`: its prologue, body and epilogue in a row, with
  /// the lengths of the first two.
  LogicalResult emitStreamDevice(Block *parent, int d,
                                 const sched::StreamSchedule &stream) {
    std::vector<sched::Action> actions = stream.prologue[d];
    size_t prologue = actions.size();
    actions.insert(actions.end(), stream.body[d].begin(), stream.body[d].end());
    actions.insert(actions.end(), stream.epilogue[d].begin(),
                   stream.epilogue[d].end());
    FailureOr<pipeline::DeviceOp> device = emitDevice(
        parent, d, plan.getStageDeviceName(d).value_or("").str(), actions);
    if (failed(device))
      return failure();
    ArrayRef<sched::Action> emitted = actions;
    OpBuilder attrs(module.getContext());
    device->setPrologueLengthAttr(
        attrs.getI64IntegerAttr(countEmitted(emitted.take_front(prologue))));
    device->setBodyLengthAttr(attrs.getI64IntegerAttr(
        countEmitted(emitted.slice(prologue, stream.body[d].size()))));
    return success();
  }

  ModuleOp module;
  pipeline::PlanAttr plan;
  const ScheduleRequest &request;
  const StageFunctions &functions;
  double blendLambda;
  ArrayAttr replicaDevices;
  OpBuilder b;
};

/// Removes the schedules and streams of an earlier run.
void eraseSchedules(ModuleOp module) {
  for (auto old :
       llvm::make_early_inc_range(module.getOps<pipeline::ScheduleOp>()))
    old.erase();
  for (auto old :
       llvm::make_early_inc_range(module.getOps<pipeline::StreamOp>()))
    old.erase();
}

} // namespace

LogicalResult pp::pipeline::materializeSchedule(
    ModuleOp module, const pp::MaterializeSchedulePassOptions &options) {
  pipeline::PlanAttr plan = pipeline::getPlan(module);
  if (!plan) {
    module.emitError() << "no pp.plan: run --pp-split-stages first";
    return failure();
  }
  eraseSchedules(module);
  FailureOr<ScheduleRequest> request = parseRequest(module, plan, options);
  if (failed(request))
    return failure();
  ScheduleBuilder builder(module, plan, *request);
  FailureOr<std::vector<sched::Schedule>> schedules = builder.buildSchedules();
  if (failed(schedules))
    return failure();
  FailureOr<StageFunctions> functions =
      collectStageFunctions(module, request->kind);
  if (failed(functions))
    return failure();
  UpdateOrder updateFirst = findUpdatesSentFirst(*functions);
  if (failed(builder.orderUpdates(*schedules, updateFirst)))
    return failure();
  std::vector<std::optional<sched::StreamSchedule>> streams =
      builder.buildStreams(updateFirst);

  // The schedule's kind and chunks become the plan's.
  plan = plan.withSchedule(request->kind).withChunks(request->chunks);
  pipeline::setPlan(module, plan);
  ScheduleEmitter emitter(module, plan, *request, *functions,
                          options.blendLambda);
  if (failed(emitter.emitSchedules(*schedules)) ||
      failed(emitter.emitStreams(streams)))
    return failure();
  // Never a schedule the interpreter or a generated program would deadlock
  // on.
  return pipeline::verifyScheduleMessageOrder(module);
}
