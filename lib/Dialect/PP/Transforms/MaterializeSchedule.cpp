//===- MaterializeSchedule.cpp - Per-device action lists as IR --*- C++ -*-===//
//
// Builds a schedule (pp/Schedule/Schedule.h) for the split module's stages
// and writes it as a `pp.schedule` op: one `pp.device` per device holding
// its `pp.action`s in order, each naming the stage function it runs, its
// micro-batch and the weight version it reads.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Schedule/Schedule.h"
#include "pp/Dialect/PP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace pp {
#define GEN_PASS_DEF_MATERIALIZESCHEDULEPASS
#include "pp/Dialect/PP/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;
namespace pipeline = pp::pipeline;
namespace sched = pp::schedule;

namespace {

struct MaterializeSchedulePass
    : public pp::impl::MaterializeSchedulePassBase<MaterializeSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto stagesAttr = module->getAttrOfType<IntegerAttr>("pp.num_stages");
    auto mbAttr = module->getAttrOfType<IntegerAttr>("pp.micro_batches");
    if (!stagesAttr || !mbAttr) {
      module.emitError() << "no pp.num_stages / pp.micro_batches: run "
                            "--pp-split-stages first";
      return signalPassFailure();
    }
    for (auto old :
         llvm::make_early_inc_range(module.getOps<pipeline::ScheduleOp>()))
      old.erase();
    std::string kindName = kind;
    if (kindName.empty())
      if (auto attr = module->getAttrOfType<StringAttr>("pp.schedule_kind"))
        kindName = attr.str();
    if (kindName.empty())
      kindName = "1f1b";
    std::optional<sched::ScheduleKind> scheduleKind =
        sched::parseScheduleKind(kindName);
    if (!scheduleKind) {
      module.emitError() << "unknown schedule '" << kindName
                         << "' (gpipe, 1f1b, interleaved, zb-h1)";
      return signalPassFailure();
    }
    int64_t numStages = stagesAttr.getInt();
    int64_t v = chunks;
    if (v < 1 || numStages % v != 0) {
      module.emitError() << numStages << " stages do not split into " << v
                         << " chunks per device";
      return signalPassFailure();
    }
    int numDevices = static_cast<int>(numStages / v);
    sched::Schedule schedule;
    std::string error;
    if (!sched::buildSchedule(*scheduleKind, numDevices,
                              static_cast<int>(mbAttr.getInt()),
                              static_cast<int>(v), schedule, error)) {
      module.emitError() << "cannot build a " << kindName
                         << " schedule: " << error;
      return signalPassFailure();
    }

    // Stage functions by (stage, phase).
    auto lookup = [&](int64_t stage, StringRef phase) {
      return module.lookupSymbol<func::FuncOp>(
          ("stage" + Twine(stage) + "_" + phase).str());
    };
    bool splitBackward = static_cast<bool>(lookup(0, "backward_input"));
    if (sched::usesSplitBackward(*scheduleKind) && !splitBackward) {
      module.emitError() << "schedule " << kindName
                         << " runs input and weight gradients apart: split "
                            "with --pp-split-stages=\"split-backward=true\"";
      return signalPassFailure();
    }

    auto names = module->getAttrOfType<ArrayAttr>("pp.device_order");
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    auto scheduleOp = pipeline::ScheduleOp::create(
        b, module.getLoc(), b.getStringAttr(sched::toString(*scheduleKind)),
        b.getI64IntegerAttr(schedule.microBatches), b.getI64IntegerAttr(v));
    Block *body = new Block();
    scheduleOp.getBody().push_back(body);
    for (int d = 0; d < numDevices; ++d) {
      OpBuilder db = OpBuilder::atBlockEnd(body);
      std::string name = "device" + std::to_string(d);
      if (names && d < static_cast<int>(names.size()))
        if (auto s = dyn_cast<StringAttr>(names[d]))
          name = s.str();
      auto device = pipeline::DeviceOp::create(
          db, module.getLoc(), db.getI64IntegerAttr(d), db.getStringAttr(name));
      Block *actions = new Block();
      device.getBody().push_back(actions);
      OpBuilder ab = OpBuilder::atBlockEnd(actions);
      auto emit = [&](StringRef actionKind, StringRef phase,
                      const sched::Action &action) -> LogicalResult {
        FlatSymbolRefAttr callee;
        if (!phase.empty()) {
          auto func = lookup(action.stage, phase);
          if (!func)
            return module.emitError()
                   << "no function @stage" << action.stage << "_" << phase;
          callee = FlatSymbolRefAttr::get(func.getSymNameAttr());
        }
        pipeline::ActionOp::create(ab, module.getLoc(),
                                   ab.getStringAttr(actionKind), callee,
                                   ab.getI64IntegerAttr(action.stage),
                                   ab.getI64IntegerAttr(action.microBatch),
                                   ab.getI64IntegerAttr(action.weightVersion));
        return success();
      };
      for (const sched::Action &action : schedule.actions[d]) {
        LogicalResult ok = success();
        switch (action.kind) {
        case sched::ActionKind::Forward:
          ok = emit("forward", "forward", action);
          break;
        case sched::ActionKind::Backward:
          // A split module runs its two halves back to back.
          if (splitBackward)
            ok = succeeded(emit("backward_input", "backward_input", action))
                     ? emit("backward_weight", "backward_weight", action)
                     : failure();
          else
            ok = emit("backward", "backward", action);
          break;
        case sched::ActionKind::BackwardInput:
          ok = emit("backward_input", "backward_input", action);
          break;
        case sched::ActionKind::BackwardWeight:
          ok = emit("backward_weight", "backward_weight", action);
          break;
        case sched::ActionKind::GradReduce:
          ok = emit("grad_reduce", "", action);
          break;
        case sched::ActionKind::OptimizerStep:
          ok = emit("optimizer_step", "update", action);
          break;
        }
        if (failed(ok))
          return signalPassFailure();
      }
    }
    module->setAttr("pp.schedule_kind",
                    b.getStringAttr(sched::toString(*scheduleKind)));
  }
};

} // namespace
