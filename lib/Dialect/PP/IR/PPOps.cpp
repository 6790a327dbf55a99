//===- PPOps.cpp - The pp dialect and its operations ------------*- C++ -*-===//

#include "pp/Dialect/PP/IR/PPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace pp::pipeline;

#include "pp/Dialect/PP/IR/PPOpsDialect.cpp.inc"

void PPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pp/Dialect/PP/IR/PPOps.cpp.inc"
      >();
}

/// The stage of the function holding `op` (its `pp.stage`), if any.
static std::optional<int64_t> enclosingStage(Operation *op) {
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp())
    if (auto stage = parent->getAttrOfType<IntegerAttr>("pp.stage"))
      return stage.getInt();
  return std::nullopt;
}

template <typename CommOp> static LogicalResult verifyComm(CommOp op) {
  auto mb = cast<RankedTensorType>(op.getMicroBatch().getType());
  if (mb.getRank() != 0)
    return op.emitOpError("micro_batch must be a scalar tensor<i64>");
  int64_t peer = static_cast<int64_t>(op.getPeer());
  if (peer < 0)
    return op.emitOpError("peer must be a stage index >= 0, got ") << peer;
  if (auto stage = enclosingStage(op); stage && *stage == peer)
    return op.emitOpError("peer is the op's own stage ") << peer;
  return success();
}

LogicalResult SendOp::verify() { return verifyComm(*this); }
LogicalResult RecvOp::verify() { return verifyComm(*this); }

LogicalResult OutputOp::verify() {
  StringRef combine = getCombine();
  if (combine != "mean" && combine != "sum" && combine != "concat")
    return emitOpError("combine must be mean, sum or concat, got '")
           << combine << "'";
  auto type = cast<RankedTensorType>(getValue().getType());
  if (combine == "concat" && type.getRank() == 0)
    return emitOpError("cannot concat scalars over micro-batches");
  return success();
}

static bool isKnownScheduleKind(StringRef kind) {
  return llvm::is_contained({"gpipe", "1f1b", "interleaved", "zb-h1"}, kind);
}

LogicalResult ScheduleOp::verify() {
  if (!isKnownScheduleKind(getKind()))
    return emitOpError("unknown schedule kind '") << getKind() << "'";
  if (getMicroBatches() < 1 || getChunks() < 1)
    return emitOpError("micro_batches and chunks must be >= 1");
  int64_t expected = 0;
  for (Operation &op : getBody().front()) {
    auto device = dyn_cast<DeviceOp>(op);
    if (!device)
      return op.emitOpError("is not a pp.device inside pp.schedule");
    if (static_cast<int64_t>(device.getIndex()) != expected++)
      return device.emitOpError("devices must be numbered 0, 1, ... in "
                                "order; expected ")
             << expected - 1;
  }
  return success();
}

LogicalResult ActionOp::verify() {
  StringRef kind = getKind();
  bool perMicroBatch = llvm::is_contained(
      {"forward", "backward", "backward_input", "backward_weight"}, kind);
  if (!perMicroBatch && kind != "grad_reduce" && kind != "optimizer_step")
    return emitOpError("unknown action kind '") << kind << "'";
  if (perMicroBatch && getMicroBatchAttr().getInt() < 0)
    return emitOpError("a ") << kind << " action needs a micro_batch >= 0";
  if (!perMicroBatch && getMicroBatchAttr().getInt() != -1)
    return emitOpError("a ") << kind << " action has micro_batch -1";
  if (getWeightVersionAttr().getInt() < 0)
    return emitOpError("weight_version must be >= 0");
  auto schedule = (*this)->getParentOfType<ScheduleOp>();
  auto device = (*this)->getParentOfType<DeviceOp>();
  int64_t numDevices =
      static_cast<int64_t>(schedule.getBody().front().getOperations().size());
  if (getStageAttr().getInt() < 0 ||
      getStage() >= numDevices * schedule.getChunks())
    return emitOpError("stage ") << getStage() << " is out of range";
  if (getStage() % numDevices != device.getIndex())
    return emitOpError("stage ")
           << getStage() << " belongs on device " << getStage() % numDevices
           << ", not " << device.getIndex();
  if (!getCallee())
    return kind == "grad_reduce"
               ? success()
               : emitOpError("a ") << kind << " action needs a callee";
  auto module = (*this)->getParentOfType<ModuleOp>();
  auto func =
      module ? module.lookupSymbol<func::FuncOp>(*getCallee()) : func::FuncOp();
  if (!func)
    return emitOpError("callee @") << *getCallee() << " is not a function";
  auto stage = func->getAttrOfType<IntegerAttr>("pp.stage");
  if (!stage || stage.getInt() != getStageAttr().getInt())
    return emitOpError("callee @")
           << *getCallee() << " is not a function of stage " << getStage();
  return success();
}

LogicalResult PPDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  if (name == "pp.stage") {
    if (!isa<IntegerAttr>(attribute.getValue()))
      return op->emitError("pp.stage must be an integer");
    return success();
  }
  if (name != "pp.num_stages")
    return success();
  auto numStages = dyn_cast<IntegerAttr>(attribute.getValue());
  if (!numStages || numStages.getInt() < 1)
    return op->emitError("pp.num_stages must be a positive integer");

  // Every send needs exactly one recv: same tag, peers pointing at each
  // other, same type. Key: (sender stage, receiver stage, tag).
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  llvm::MapVector<Key, SmallVector<SendOp>> sends;
  llvm::MapVector<Key, SmallVector<RecvOp>> recvs;
  WalkResult walk = op->walk([&](Operation *nested) {
    auto check = [&](Operation *comm, int64_t peer) -> std::optional<int64_t> {
      std::optional<int64_t> stage = enclosingStage(comm);
      if (!stage) {
        comm->emitOpError("is not inside a function marked pp.stage");
        return std::nullopt;
      }
      if (*stage == peer) {
        comm->emitOpError("peer is the op's own stage ") << peer;
        return std::nullopt;
      }
      if (*stage >= numStages.getInt() || peer >= numStages.getInt()) {
        comm->emitOpError("stage ")
            << *stage << " or peer " << peer << " is out of range for "
            << numStages.getInt() << " stages";
        return std::nullopt;
      }
      return stage;
    };
    if (auto send = dyn_cast<SendOp>(nested)) {
      auto stage = check(send, send.getPeer());
      if (!stage)
        return WalkResult::interrupt();
      sends[{*stage, static_cast<int64_t>(send.getPeer()),
             static_cast<int64_t>(send.getTag())}]
          .push_back(send);
    } else if (auto recv = dyn_cast<RecvOp>(nested)) {
      auto stage = check(recv, recv.getPeer());
      if (!stage)
        return WalkResult::interrupt();
      recvs[{static_cast<int64_t>(recv.getPeer()), *stage,
             static_cast<int64_t>(recv.getTag())}]
          .push_back(recv);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (auto &[key, list] : sends) {
    auto [from, to, tag] = key;
    if (list.size() > 1)
      return list[1].emitOpError("duplicates the send from stage ")
             << from << " to " << to << " with tag " << tag;
    auto it = recvs.find(key);
    if (it == recvs.end())
      return list.front().emitOpError("has no matching pp.recv on stage ")
             << to << " (peer " << from << ", tag " << tag << ")";
    if (it->second.size() > 1)
      return it->second[1].emitOpError("duplicates the recv on stage ")
             << to << " from " << from << " with tag " << tag;
    if (it->second.front().getValue().getType() !=
        list.front().getValue().getType())
      return it->second.front().emitOpError("receives ")
             << it->second.front().getValue().getType() << " but the send has "
             << list.front().getValue().getType();
  }
  // Every unstash (accumulated) takes what a stash (accumulate) of the same
  // stage and slot keeps, with the same type.
  using SlotKey = std::pair<int64_t, int64_t>;
  llvm::DenseMap<SlotKey, Type> stashed, accumulated;
  op->walk([&](Operation *nested) {
    std::optional<int64_t> stage = enclosingStage(nested);
    if (auto stash = dyn_cast<StashOp>(nested); stash && stage)
      stashed[{*stage, static_cast<int64_t>(stash.getSlot())}] =
          stash.getValue().getType();
    if (auto acc = dyn_cast<AccumulateOp>(nested); acc && stage)
      accumulated[{*stage, static_cast<int64_t>(acc.getSlot())}] =
          acc.getValue().getType();
  });
  WalkResult slots = op->walk([&](Operation *nested) {
    std::optional<int64_t> stage = enclosingStage(nested);
    auto checkSlot = [&](auto &map, int64_t slot, Type type,
                         StringRef producer) -> LogicalResult {
      if (!stage)
        return nested->emitOpError("is not inside a function marked pp.stage");
      auto it = map.find(SlotKey{*stage, slot});
      if (it == map.end())
        return nested->emitOpError("has no ")
               << producer << " of slot " << slot << " on stage " << *stage;
      if (it->second != type)
        return nested->emitOpError("takes ")
               << type << " but slot " << slot << " holds " << it->second;
      return success();
    };
    LogicalResult ok = success();
    if (auto unstash = dyn_cast<UnstashOp>(nested))
      ok = checkSlot(stashed, unstash.getSlot(), unstash.getType(), "pp.stash");
    else if (auto acc = dyn_cast<AccumulatedOp>(nested))
      ok =
          checkSlot(accumulated, acc.getSlot(), acc.getType(), "pp.accumulate");
    return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (slots.wasInterrupted())
    return failure();
  for (auto &[key, list] : recvs)
    if (!sends.count(key))
      return list.front().emitOpError("has no matching pp.send on stage ")
             << std::get<0>(key) << " (peer " << std::get<1>(key) << ", tag "
             << std::get<2>(key) << ")";
  return success();
}

ScheduleOp pp::pipeline::lookupSchedule(ModuleOp module, StringRef user) {
  auto schedules = module.getOps<ScheduleOp>();
  if (llvm::hasSingleElement(schedules))
    return *schedules.begin();
  emitError(module.getLoc())
      << user << " needs exactly one pp.schedule (run --pp-schedule), found "
      << llvm::range_size(schedules);
  return nullptr;
}

#define GET_OP_CLASSES
#include "pp/Dialect/PP/IR/PPOps.cpp.inc"
