//===- MemoryPlan.cpp - Buffers of the stage programs -----------*- C++ -*-===//
//
// Plans the memory of a scheduled module as code generation will allocate
// it, per device:
//   - persistent: the globals its stages read or write (weights, optimizer
//     state, step counter), once per device, and the gradient accumulators;
//   - stash: the bytes each micro-batch keeps for its backward, times the
//     most micro-batches in flight on that stage in the schedule's order;
//   - arena: the stage functions' temporaries, placed by live range
//     (pp/Analysis/MemoryPlan.h); functions of one device run one at a
//     time, so they share one arena of the largest size;
//   - messages: the buffers the driver receives into, lent to the function
//     (the running action's and the next one's, which it receives ahead):
//     per size, twice the most any function receives.
// Annotates each stage function with `pp.arena_bytes` and each op of its
// body with the arena offsets of its results (`pp.offsets`, -1 where not
// planned, -2 for an optimizer step's result computed in its global's
// storage, whose train.global_write gets `pp.in_place`), and reports the
// planned peak per device. Code generation allocates exactly this plan (a
// pp.fused kernel's inner values have no buffer: --pp-fuse-elementwise runs
// first).
//
//===----------------------------------------------------------------------===//

#include "pp/Analysis/MemoryPlan.h"
#include "pp/Analysis/CostModel.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "pp/Dialect/PP/Transforms/ReportFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

using namespace mlir;
namespace onnx = pp::onnx;
namespace pipeline = pp::pipeline;

namespace {

struct DeviceMemory {
  int64_t persistent = 0, accumulators = 0, stash = 0, arena = 0;
  /// Weight-versioned schedules: the older versions held at once, and the
  /// blend's two temporaries (I-TiMePReSt).
  int64_t versions = 0;
  /// Bytes of message size -> the most receives of that size one function
  /// makes (the driver's buffers are reused by size).
  std::map<int64_t, int64_t> receivesBySize;
  int64_t messages() const {
    int64_t bytes = 0;
    for (auto [size, count] : receivesBySize)
      bytes += 2 * size * count;
    return bytes;
  }
  int64_t peak() const {
    return persistent + accumulators + stash + arena + versions + messages();
  }
};

} // namespace

/// Adds the devices of `schedule` to `devices` and `names`, with each
/// stage function's arena, the globals, gradient sums and stashes its
/// stages keep; `setOffsets` records the arena offsets on the functions.
static LogicalResult planScheduleMemory(ModuleOp module,
                                        const SymbolTable &symbols,
                                        pipeline::ScheduleOp schedule,
                                        std::vector<DeviceMemory> &allDevices,
                                        std::vector<std::string> &allNames,
                                        bool setOffsets) {
  // Stages of each device, and the most micro-batches each stage holds
  // at once in its device's order (the schedule library's count).
  std::map<int64_t, int64_t> deviceOf;
  std::vector<std::string> names;
  for (auto device : schedule.getBody().front().getOps<pipeline::DeviceOp>()) {
    names.push_back(device.getName().str());
    for (auto action : device.getBody().front().getOps<pipeline::ActionOp>())
      deviceOf[action.getStageAttr().getInt()] = device.getIndex();
  }
  pp::schedule::Schedule library = pipeline::toLibrarySchedule(schedule);
  std::vector<int64_t> inflight = pp::schedule::peakInFlight(library);
  std::vector<int64_t> versionsHeld =
      pp::schedule::peakWeightVersions(library);
  // A stream's steady state can hold more than a drained step (HetPipe's
  // Nm versions): the larger of the two counts.
  for (auto stream : module.getOps<pipeline::StreamOp>())
    if (stream.getReplica() == schedule.getReplicaIndex()) {
      pp::schedule::Schedule window =
          pipeline::toLibrarySchedule(stream, schedule.getPlan());
      std::vector<int64_t> streamInflight = pp::schedule::peakInFlight(window);
      std::vector<int64_t> streamVersions =
          pp::schedule::peakWeightVersions(window);
      for (size_t s = 0; s < inflight.size() && s < streamInflight.size(); ++s)
        inflight[s] = std::max(inflight[s], streamInflight[s]);
      for (size_t s = 0; s < versionsHeld.size() && s < streamVersions.size();
           ++s)
        versionsHeld[s] = std::max(versionsHeld[s], streamVersions[s]);
    }
  std::set<int64_t> blends;
  for (const auto &list : library.actions)
    for (const pp::schedule::Action &action : list)
      if (action.blendVersion >= 0)
        blends.insert(action.stage);
  std::map<int64_t, llvm::StringSet<>> trainablesOf;

  std::vector<DeviceMemory> devices(names.size());
  std::vector<llvm::StringSet<>> globalsOf(names.size());
  for (auto func : module.getOps<func::FuncOp>()) {
    std::optional<int64_t> stage = pipeline::getStage(func);
    if (!stage || func.isExternal())
      continue;
    auto it = deviceOf.find(*stage);
    if (it == deviceOf.end())
      continue; // a stage the schedule never runs
    DeviceMemory &memory = devices[it->second];
    pp::MemoryPlan plan = pp::planMemory(func.getBody().front());
    memory.arena = std::max(memory.arena, plan.arenaBytes);
    // Offsets on the ops of the body (not inside a pp.fused kernel).
    if (setOffsets)
      pipeline::setArenaBytes(func, plan.arenaBytes);
    for (Operation &op : func.getBody().front()) {
      if (!setOffsets)
        break;
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (OpResult result : op.getResults()) {
        auto found = plan.offsets.find(result);
        if (plan.inPlace.contains(result)) {
          offsets.push_back(pipeline::kInPlaceOffset);
          pipeline::setInPlaceWrite(pp::inPlaceGlobalUpdate(result));
          continue;
        }
        offsets.push_back(found == plan.offsets.end() ? -1 : found->second);
      }
      pipeline::setOffsets(&op, offsets);
    }
    std::map<int64_t, int64_t> receives;
    func.walk([&](pipeline::RecvOp recv) {
      ++receives[pp::getTensorBytes(recv.getType())];
    });
    for (auto [size, count] : receives)
      memory.receivesBySize[size] =
          std::max(memory.receivesBySize[size], count);
    func.walk([&](Operation *op) {
      auto addGlobal = [&](FlatSymbolRefAttr symbol) {
        if (!globalsOf[it->second].insert(symbol.getValue()).second)
          return;
        if (auto global = symbols.lookup<onnx::GlobalOp>(symbol.getAttr()))
          memory.persistent += pp::getTensorBytes(global.getType());
      };
      if (auto read = dyn_cast<onnx::GlobalReadOp>(op)) {
        addGlobal(read.getGlobalAttr());
        auto global =
            symbols.lookup<onnx::GlobalOp>(read.getGlobalAttr().getAttr());
        if (global && global.getKind() == onnx::kTrainable &&
            trainablesOf[*stage].insert(global.getSymName()).second) {
          int64_t bytes = pp::getTensorBytes(global.getType());
          int64_t older = *stage < static_cast<int64_t>(versionsHeld.size())
                              ? versionsHeld[*stage] - 1
                              : 0;
          memory.versions +=
              bytes * (older + (blends.count(*stage) ? 2 : 0));
        }
      }
      if (auto write = dyn_cast<pp::train::GlobalWriteOp>(op))
        addGlobal(write.getGlobalAttr());
      if (auto acc = dyn_cast<pipeline::AccumulateOp>(op))
        memory.accumulators += pp::getTensorBytes(acc.getValue().getType());
      if (auto stash = dyn_cast<pipeline::StashOp>(op))
        memory.stash +=
            pp::getTensorBytes(stash.getValue().getType()) *
            (*stage < static_cast<int64_t>(inflight.size()) ? inflight[*stage]
                                                            : 0);
    });
  }

  allDevices.insert(allDevices.end(), devices.begin(), devices.end());
  allNames.insert(allNames.end(), names.begin(), names.end());
  return success();
}

LogicalResult
pp::pipeline::planStageMemory(ModuleOp module,
                              const pp::MemoryPlanPassOptions &options) {
  if (failed(pp::verifyPlannableSizes(module, "pp-memory-plan")))
    return failure();
  // With per-replica placements every replica's devices get their own
  // peak (replica-major); otherwise one schedule serves all replicas.
  pipeline::PlanAttr planAttr = pipeline::getPlan(module);
  int64_t numSchedules =
      planAttr && planAttr.hasPlacements() ? planAttr.getDataParallel() : 1;
  std::vector<DeviceMemory> devices;
  std::vector<std::string> names;
  // One table for every lookup (module.lookupSymbol scans the module).
  SymbolTable symbols(module);
  for (int64_t replica = 0; replica < numSchedules; ++replica) {
    pipeline::ScheduleOp schedule =
        pipeline::lookupSchedule(module, "pp-memory-plan", replica);
    if (!schedule)
      return failure();
    if (failed(planScheduleMemory(module, symbols, schedule, devices, names,
                                  /*setOffsets=*/replica == 0)))
      return failure();
  }

  SmallVector<int64_t> peaks;
  for (const DeviceMemory &memory : devices)
    peaks.push_back(memory.peak());
  pipeline::setPlannedPeakBytes(module, peaks);

  if (options.reportFile.empty())
    return success();
  return pp::writeReportFile(
      module, options.reportFile, [&](llvm::raw_ostream &os) {
        os << "== memory plan per device (persistent = globals, accumulators = "
              "gradient sums, stash = kept activations x micro-batches in "
              "flight, arena = temporaries, messages = receive buffers) ==\n";
        for (auto [d, memory] : llvm::enumerate(devices))
          os << llvm::formatv(
              "device {0} {1,-14}: persistent {2}, accumulators "
              "{3}, stash {4}, arena {5}{6}{7}: peak {8}\n",
              d, names[d], pp::formatMegabytes(memory.persistent),
              pp::formatMegabytes(memory.accumulators),
              pp::formatMegabytes(memory.stash),
              pp::formatMegabytes(memory.arena),
              memory.versions ? ", older weight versions " +
                                    pp::formatMegabytes(memory.versions)
                              : std::string(),
              memory.messages()
                  ? ", messages " + pp::formatMegabytes(memory.messages())
                  : std::string(),
              pp::formatMegabytes(memory.peak()));
      });
}
