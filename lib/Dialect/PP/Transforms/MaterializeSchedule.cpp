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

namespace {} // namespace

LogicalResult pp::pipeline::materializeSchedule(
    ModuleOp module, const pp::MaterializeSchedulePassOptions &options) {
  pipeline::PlanAttr plan = pipeline::getPlan(module);
  if (!plan) {
    module.emitError() << "no pp.plan: run --pp-split-stages first";
    return failure();
  }
  for (auto old :
       llvm::make_early_inc_range(module.getOps<pipeline::ScheduleOp>()))
    old.erase();
  for (auto old :
       llvm::make_early_inc_range(module.getOps<pipeline::StreamOp>()))
    old.erase();
  sched::ScheduleKind scheduleKind = plan.getSchedule();
  if (!options.kind.empty()) {
    std::optional<sched::ScheduleKind> parsed =
        sched::parseScheduleKind(options.kind);
    if (!parsed) {
      module.emitError() << "unknown schedule '" << options.kind
                         << "' (gpipe, 1f1b, interleaved, zb-h1)";
      return failure();
    }
    scheduleKind = *parsed;
  }
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
  StringRef kindName = sched::toString(scheduleKind);
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
  // Replicas with placements of their own (heterogeneous virtual workers)
  // each run their coarse schedule over the shared, finer stages.
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
  int numDevices =
      static_cast<int>(placed ? plan.getNumDevices() : numStages / v);
  // Data-parallel replicas all-reduce each stage's accumulated gradients
  // (a grad_reduce after its last backward, which its update waits for)
  // when the stage has any. Under WSP the replicas exchange updates at wave
  // ends instead (the runtime), not gradients every step.
  std::vector<bool> gradReduceStages(numStages, false);
  if (plan.getDataParallel() > 1 && !plan.isWaveSynchronous())
    module.walk([&](pipeline::AccumulateOp accumulate) {
      auto func = accumulate->getParentOfType<func::FuncOp>();
      if (std::optional<int64_t> stage = pipeline::getStage(func);
          stage && *stage >= 0 && *stage < numStages)
        gradReduceStages[*stage] = true;
    });
  std::string error;
  // A placed replica's versioned schedule of `microBatches`: built over its
  // coarse stages (its devices), then refined to the shared stages.
  auto buildPlacedVersioned = [&](int64_t replica, int microBatches,
                                  sched::Schedule &out, std::string &message) {
    std::vector<int> coarseOf = plan.getPlacement(replica);
    sched::Schedule coarse;
    return sched::buildVersionedSchedule(
               scheduleKind, numDevices, microBatches,
               static_cast<int>(plan.getUpdateEvery()), plan.getVerticalSync(),
               coarse, message, nullptr,
               static_cast<int>(plan.getMicroBatches())) &&
           sched::refineSchedule(coarse, coarseOf, nullptr, out, message);
  };
  auto build = [&](int64_t replica,
                   sched::Schedule &schedule) -> LogicalResult {
    if (versioned && placed) {
      if (buildPlacedVersioned(replica,
                               static_cast<int>(plan.getMicroBatches()),
                               schedule, error))
        return success();
      return module.emitError()
             << "cannot build the " << kindName << " schedule of replica "
             << replica << ": " << error;
    }
    if (versioned) {
      if (v == 1 &&
          sched::buildVersionedSchedule(
              scheduleKind, numDevices,
              static_cast<int>(plan.getMicroBatches()),
              static_cast<int>(plan.getUpdateEvery()), plan.getVerticalSync(),
              schedule, error, &gradReduceStages,
              static_cast<int>(plan.getMicroBatches())))
        return success();
      return module.emitError()
             << "cannot build a " << kindName << " schedule: "
             << (v == 1 ? error : "it runs one chunk per device");
    }
    if (!placed) {
      if (sched::buildSchedule(scheduleKind, numDevices,
                               static_cast<int>(plan.getMicroBatches()),
                               static_cast<int>(v), schedule, error,
                               &gradReduceStages))
        return success();
      return module.emitError()
             << "cannot build a " << kindName << " schedule: " << error;
    }
    std::vector<int> coarseOf = plan.getPlacement(replica);
    std::vector<bool> coarseReduce(numDevices, false);
    for (int64_t s = 0; s < numStages; ++s)
      if (gradReduceStages[s])
        coarseReduce[coarseOf[s]] = true;
    sched::Schedule coarse;
    if (!sched::buildSchedule(scheduleKind, numDevices,
                              static_cast<int>(plan.getMicroBatches()), 1,
                              coarse, error, &coarseReduce) ||
        !sched::refineSchedule(coarse, coarseOf, &gradReduceStages, schedule,
                               error))
      return module.emitError()
             << "cannot build the " << kindName << " schedule of replica "
             << replica << ": " << error;
    return success();
  };
  int64_t numSchedules = placed ? plan.getDataParallel() : 1;
  std::vector<sched::Schedule> schedules(numSchedules);
  for (int64_t r = 0; r < numSchedules; ++r)
    if (failed(build(r, schedules[r])))
      return failure();

  // Stage functions by (stage, phase), as --pp-split-stages marked them.
  std::map<std::pair<int64_t, sched::Phase>, func::FuncOp> functions;
  for (auto func : module.getOps<func::FuncOp>()) {
    std::optional<int64_t> stage = pipeline::getStage(func);
    std::optional<sched::Phase> phase = pipeline::getPhase(func);
    if (stage && phase)
      functions[{*stage, *phase}] = func;
  }
  if (functions.empty()) {
    module.emitError() << "no stage functions (pp.stage and pp.phase): run "
                          "--pp-split-stages first";
    return failure();
  }
  bool splitBackward = llvm::any_of(functions, [](const auto &entry) {
    return entry.first.second == sched::Phase::BackwardInput;
  });
  if (sched::usesSplitBackward(scheduleKind) && !splitBackward) {
    module.emitError() << "schedule " << kindName
                       << " runs input and weight gradients apart: split "
                          "with --pp-split-stages=\"split-backward=true\"";
    return failure();
  }

  // A stage's update may send another's a message (the new value of a
  // weight both read, from the stage that updates it). Between stages of
  // one device the sender must run first: a recv there waits for its own
  // device.
  std::map<std::tuple<int64_t, int64_t, int64_t>, sched::Phase> sendPhase;
  for (auto &[key, func] : functions)
    func.walk([&, &key = key](pipeline::SendOp send) {
      sendPhase[{key.first, static_cast<int64_t>(send.getPeer()),
                 static_cast<int64_t>(send.getTag())}] = key.second;
    });
  std::vector<std::pair<int, int>> updateFirst;
  for (auto &[key, func] : functions) {
    if (key.second != sched::Phase::Update)
      continue;
    func.walk([&, &key = key](pipeline::RecvOp recv) {
      auto from = static_cast<int64_t>(recv.getPeer());
      auto it = sendPhase.find(
          {from, key.first, static_cast<int64_t>(recv.getTag())});
      if (it != sendPhase.end() && it->second == sched::Phase::Update)
        updateFirst.push_back(
            {static_cast<int>(from), static_cast<int>(key.first)});
    });
  }
  for (sched::Schedule &schedule : schedules)
    if (!sched::orderStepActions(schedule, updateFirst, error)) {
      module.emitError() << "cannot order the " << kindName
                         << " schedule's updates: " << error;
      return failure();
    }

  // Weight-versioned schedules also run as a stream of steps that drains
  // only where the run asks (pp.stream): one per placed replica.
  std::vector<std::optional<sched::StreamSchedule>> streams(numSchedules);
  if (versioned) {
    int m = static_cast<int>(plan.getMicroBatches());
    int n = static_cast<int>(plan.getUpdateEvery());
    for (int64_t r = 0; r < numSchedules; ++r) {
      sched::WindowBuilder window = [&](int steps, sched::Schedule &out,
                                        std::string &message) {
        bool built = placed ? buildPlacedVersioned(r, steps * m, out, message)
                            : sched::buildVersionedSchedule(
                                  scheduleKind, numDevices, steps * m, n,
                                  plan.getVerticalSync(), out, message,
                                  &gradReduceStages, m);
        return built && sched::orderStepActions(out, updateFirst, message);
      };
      std::optional<sched::StreamSchedule> &stream = streams[r];
      stream.emplace();
      if (!sched::buildStream(window, m, m / n, *stream, error)) {
        // Still a valid schedule: every step drains.
        module.emitWarning() << "the " << kindName
                             << " schedule drains every step (its order does "
                                "not repeat from step to step: "
                             << error << ")";
        stream.reset();
      }
    }
  }

  // The schedule's kind and chunks become the plan's.
  plan = plan.withSchedule(scheduleKind).withChunks(v);
  pipeline::setPlan(module, plan);
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  ArrayAttr replicaDevices = pipeline::getReplicaDevices(module);
  // One pp.device holding `actions` at the end of `parent`.
  auto emitDevice =
      [&](Block *parent, int d, std::string name,
          const std::vector<sched::Action> &list)
      -> FailureOr<pipeline::DeviceOp> {
    OpBuilder db = OpBuilder::atBlockEnd(parent);
    if (name.empty())
      name = "device" + std::to_string(d);
      auto device = pipeline::DeviceOp::create(
          db, module.getLoc(), db.getI64IntegerAttr(d), db.getStringAttr(name),
          IntegerAttr(), IntegerAttr());
      Block *actions = new Block();
      device.getBody().push_back(actions);
      OpBuilder ab = OpBuilder::atBlockEnd(actions);
      auto emit = [&](sched::ActionKind actionKind,
                      const sched::Action &action) -> LogicalResult {
        FlatSymbolRefAttr callee;
        sched::Phase phase = sched::phaseOf(actionKind);
        if (phase != sched::Phase::None) {
          auto it = functions.find({action.stage, phase});
          if (it == functions.end())
            return module.emitError() << "no " << sched::toString(phase)
                                      << " function of stage " << action.stage;
          callee = FlatSymbolRefAttr::get(it->second.getSymNameAttr());
        }
        // An update is per step in the IR (micro_batch -1); under a
        // weight-versioned schedule the k-th of a stage makes version k + 1.
        int64_t microBatch =
            sched::isPerStep(actionKind) ? -1 : action.microBatch;
        auto op = pipeline::ActionOp::create(
            ab, module.getLoc(),
            pipeline::ActionKindAttr::get(module.getContext(), actionKind),
            callee, ab.getI64IntegerAttr(action.stage),
            ab.getI64IntegerAttr(microBatch),
            ab.getI64IntegerAttr(action.weightVersion), IntegerAttr(),
            FloatAttr(), action.overlapsNext ? ab.getUnitAttr() : UnitAttr());
        if (action.blendVersion >= 0) {
          op.setBlendVersionAttr(ab.getI64IntegerAttr(action.blendVersion));
          op.setBlendFactorAttr(ab.getF64FloatAttr(
              std::exp(-options.blendLambda * action.staleness)));
        }
        return success();
      };
      for (const sched::Action &action : list) {
        LogicalResult ok = success();
        // A split module runs a whole backward as its two halves, back to
        // back.
        if (action.kind == sched::ActionKind::Backward && splitBackward)
          ok = succeeded(emit(sched::ActionKind::BackwardInput, action))
                   ? emit(sched::ActionKind::BackwardWeight, action)
                   : failure();
        else
          ok = emit(action.kind, action);
        if (failed(ok))
          return failure();
      }
      return device;
  };
  for (auto [replica, schedule] : llvm::enumerate(schedules)) {
    auto scheduleOp = pipeline::ScheduleOp::create(
        b, module.getLoc(),
        placed ? b.getI64IntegerAttr(static_cast<int64_t>(replica))
               : IntegerAttr());
    Block *body = new Block();
    scheduleOp.getBody().push_back(body);
    for (int d = 0; d < numDevices; ++d) {
      std::string name;
      if (replica == 0) {
        // The plan names the device of each of replica 0's stages; its
        // first stage on device d is d unless the plan places the stages.
        int64_t first = placed ? 0 : d;
        while (placed && first < numStages && plan.getDeviceOf(first, 0) != d)
          ++first;
        name = plan.getStageDeviceName(first).value_or("").str();
      } else if (replicaDevices) {
        size_t index = (replica - 1) * numDevices + d;
        if (index < replicaDevices.size())
          if (auto text = dyn_cast<StringAttr>(replicaDevices[index]))
            name = text.getValue().str();
      }
      if (failed(emitDevice(body, d, name, schedule.actions[d])))
        return failure();
    }
  }
  for (auto [replica, stream] : llvm::enumerate(streams)) {
    if (!stream)
      continue;
    auto streamOp = pipeline::StreamOp::create(
        b, module.getLoc(), b.getI64IntegerAttr(stream->minSteps),
        b.getI64IntegerAttr(static_cast<int64_t>(replica)));
    Block *body = new Block();
    streamOp.getBody().push_back(body);
    for (int d = 0; d < numDevices; ++d) {
      std::vector<sched::Action> actions = stream->prologue[d];
      size_t prologue = actions.size();
      actions.insert(actions.end(), stream->body[d].begin(),
                     stream->body[d].end());
      actions.insert(actions.end(), stream->epilogue[d].begin(),
                     stream->epilogue[d].end());
      FailureOr<pipeline::DeviceOp> device = emitDevice(
          body, d, plan.getStageDeviceName(d).value_or("").str(), actions);
      if (failed(device))
        return failure();
      // A split backward is two actions: count what was emitted.
      auto emitted = [&](size_t from, size_t to) {
        int64_t count = 0;
        for (size_t i = from; i < to; ++i)
          count += actions[i].kind == sched::ActionKind::Backward &&
                           splitBackward
                       ? 2
                       : 1;
        return count;
      };
      OpBuilder attrs(module.getContext());
      device->setPrologueLengthAttr(
          attrs.getI64IntegerAttr(emitted(0, prologue)));
      device->setBodyLengthAttr(attrs.getI64IntegerAttr(
          emitted(prologue, prologue + stream->body[d].size())));
    }
  }
  // Never a schedule the interpreter or a generated program would deadlock
  // on.
  return pipeline::verifyScheduleMessageOrder(module);
}
