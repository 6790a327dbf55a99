//===- VerifySchedule.cpp - A schedule's message order, checked -*- C++ -*-===//
//
// Runs a scheduled module the way the pipelined interpreter does, without
// its kernels: every device takes its actions in order, each action the
// pp.send / pp.recv / pp.stash / pp.unstash / pp.accumulate /
// pp.accumulated ops of its stage function in program order. A send never
// waits; a recv waits until its message (sender stage, receiver stage, tag,
// micro-batch) has been sent, by any device; the rest act on the device's
// own state and fail at once when what they take is not there. When every
// device left waits, the schedule deadlocks: each of them is reported with
// its action, the recv it waits in and where the matching send is (later on
// the same device, on a device that is itself stuck, or nowhere).
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;
namespace pipeline = pp::pipeline;

namespace {

enum class EventKind { Send, Recv, Stash, Unstash, Accumulate, Accumulated };

/// One order-sensitive op of a stage function.
struct Event {
  EventKind kind;
  /// The peer stage (send, recv), else unused.
  int64_t peer = 0;
  /// The tag (send, recv) or the slot (the others).
  int64_t id = 0;
  /// The micro-batch: the action's (the function's argument) or a constant.
  bool actionMicroBatch = true;
  int64_t microBatch = 0;
  Operation *op = nullptr;
};

/// (sender stage, receiver stage, tag, micro-batch).
using MessageKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;

std::string describe(pipeline::ActionOp action) {
  std::string text(pp::kinds::toString(action.getKindValue()));
  text += "(stage " + std::to_string(action.getStageAttr().getInt());
  int64_t mb = action.getMicroBatchAttr().getInt();
  if (mb >= 0)
    text += ", mb " + std::to_string(mb);
  return text + ")";
}

class MessageOrderCheck {
public:
  MessageOrderCheck(ModuleOp module, pipeline::ScheduleOp schedule)
      : module(module), schedule(schedule) {}
  LogicalResult run();
  /// Whether every device pair's messages are received in the order they
  /// are sent, so that a transport matching by order alone (NCCL without
  /// tags) delivers each to its receive; else the first that is not.
  std::optional<std::string> firstMessageOutOfOrder();

private:
  struct Device {
    std::vector<pipeline::ActionOp> actions;
    size_t action = 0, event = 0;
    /// (stage, slot, micro-batch) kept; (stage, slot) summed.
    std::map<std::tuple<int64_t, int64_t, int64_t>, int> stashed;
    std::map<std::pair<int64_t, int64_t>, int> sums;
    bool done() const { return action >= actions.size(); }
  };

  /// The events of `func` in program order; failure when a micro-batch
  /// operand is neither the function's argument nor a constant.
  FailureOr<const std::vector<Event> *> eventsOf(func::FuncOp func);
  FailureOr<Event> makeEvent(Operation *op, EventKind kind, Value microBatch,
                             int64_t peer, int64_t id);
  /// Advances `device` as far as it goes; failure on a missing stash or sum.
  FailureOr<bool> advance(int d);
  /// Where the send of `key` runs, for a stuck recv.
  std::string whereSent(const MessageKey &key, int receiverDevice);
  int64_t stageOf(pipeline::ActionOp action) {
    return action.getStageAttr().getInt();
  }
  int64_t microBatchOf(const Event &event, pipeline::ActionOp action) {
    return event.actionMicroBatch ? action.getMicroBatchAttr().getInt()
                                  : event.microBatch;
  }
  func::FuncOp calleeOf(pipeline::ActionOp action) {
    if (!action.getCallee())
      return nullptr;
    return module.lookupSymbol<func::FuncOp>(*action.getCallee());
  }

  ModuleOp module;
  pipeline::ScheduleOp schedule;
  std::vector<Device> devices;
  std::map<Operation *, std::vector<Event>> events;
  std::map<MessageKey, int> inFlight;
  /// (sender stage, receiver stage, tag) -> the send.
  std::map<std::tuple<int64_t, int64_t, int64_t>, Event> sends;
};

FailureOr<Event> MessageOrderCheck::makeEvent(Operation *op, EventKind kind,
                                              Value microBatch, int64_t peer,
                                              int64_t id) {
  Event event{kind, peer, id, true, 0, op};
  if (auto arg = dyn_cast<BlockArgument>(microBatch);
      arg && isa<func::FuncOp>(arg.getOwner()->getParentOp()))
    return event;
  DenseIntElementsAttr constant;
  if (microBatch && matchPattern(microBatch, m_Constant(&constant)) &&
      constant.getNumElements() == 1) {
    event.actionMicroBatch = false;
    event.microBatch = (*constant.begin()).getSExtValue();
    return event;
  }
  return op->emitOpError("has a micro-batch that is neither its function's "
                         "argument nor a constant: the schedule's message "
                         "order cannot be checked");
}

FailureOr<const std::vector<Event> *>
MessageOrderCheck::eventsOf(func::FuncOp func) {
  auto it = events.find(func);
  if (it != events.end())
    return &it->second;
  std::vector<Event> list;
  WalkResult walk = func.walk<WalkOrder::PreOrder>([&](Operation *op) {
    FailureOr<Event> event = failure();
    if (auto send = dyn_cast<pipeline::SendOp>(op))
      event = makeEvent(op, EventKind::Send, send.getMicroBatch(),
                        send.getPeer(), send.getTag());
    else if (auto recv = dyn_cast<pipeline::RecvOp>(op))
      event = makeEvent(op, EventKind::Recv, recv.getMicroBatch(),
                        recv.getPeer(), recv.getTag());
    else if (auto stash = dyn_cast<pipeline::StashOp>(op))
      event = makeEvent(op, EventKind::Stash, stash.getMicroBatch(), 0,
                        stash.getSlot());
    else if (auto unstash = dyn_cast<pipeline::UnstashOp>(op))
      event = makeEvent(op, EventKind::Unstash, unstash.getMicroBatch(), 0,
                        unstash.getSlot());
    else if (auto acc = dyn_cast<pipeline::AccumulateOp>(op))
      event = Event{EventKind::Accumulate,
                    0,
                    static_cast<int64_t>(acc.getSlot()),
                    false,
                    -1,
                    op};
    else if (auto acc = dyn_cast<pipeline::AccumulatedOp>(op))
      event = Event{EventKind::Accumulated,
                    0,
                    static_cast<int64_t>(acc.getSlot()),
                    false,
                    -1,
                    op};
    else
      return WalkResult::advance();
    if (failed(event))
      return WalkResult::interrupt();
    list.push_back(*event);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return &(events[func] = std::move(list));
}

FailureOr<bool> MessageOrderCheck::advance(int d) {
  Device &device = devices[d];
  bool progress = false;
  while (!device.done()) {
    pipeline::ActionOp action = device.actions[device.action];
    func::FuncOp func = calleeOf(action);
    const std::vector<Event> *list = nullptr;
    if (func) {
      FailureOr<const std::vector<Event> *> found = eventsOf(func);
      if (failed(found))
        return failure();
      list = *found;
    }
    if (!list || device.event >= list->size()) {
      ++device.action;
      device.event = 0;
      progress = true;
      continue;
    }
    const Event &event = (*list)[device.event];
    int64_t stage = stageOf(action);
    int64_t mb = microBatchOf(event, action);
    auto stuckAt = [&]() {
      return "device " + std::to_string(d) + " (action " +
             std::to_string(device.action) + ", " + describe(action) + ")";
    };
    switch (event.kind) {
    case EventKind::Send:
      ++inFlight[{stage, event.peer, event.id, mb}];
      break;
    case EventKind::Recv: {
      auto it = inFlight.find({event.peer, stage, event.id, mb});
      if (it == inFlight.end() || it->second == 0)
        return progress; // waits
      if (--it->second == 0)
        inFlight.erase(it);
      break;
    }
    case EventKind::Stash:
      ++device.stashed[{stage, event.id, mb}];
      break;
    case EventKind::Unstash: {
      auto it = device.stashed.find({stage, event.id, mb});
      if (it == device.stashed.end()) {
        InFlightDiagnostic diag =
            schedule.emitError()
            << "the schedule unstashes before it stashes: " << stuckAt()
            << " takes slot " << event.id << " of micro-batch " << mb
            << ", which no earlier action of stage " << stage
            << " on the device stashed";
        diag.attachNote(event.op->getLoc()) << "the pp.unstash";
        return failure();
      }
      if (--it->second == 0)
        device.stashed.erase(it);
      break;
    }
    case EventKind::Accumulate:
      ++device.sums[{stage, event.id}];
      break;
    case EventKind::Accumulated:
      if (!device.sums.erase({stage, event.id})) {
        InFlightDiagnostic diag =
            schedule.emitError()
            << "the schedule reads a gradient sum before any term: "
            << stuckAt() << " takes slot " << event.id << " of stage " << stage
            << ", which no earlier action on the device added to";
        diag.attachNote(event.op->getLoc()) << "the pp.accumulated";
        return failure();
      }
      break;
    }
    ++device.event;
    progress = true;
  }
  return progress;
}

std::string MessageOrderCheck::whereSent(const MessageKey &key,
                                         int receiverDevice) {
  auto [from, to, tag, mb] = key;
  auto send = sends.find({from, to, tag});
  if (send == sends.end())
    return "no stage function sends it";
  auto func = send->second.op->getParentOfType<func::FuncOp>();
  std::string where = "its pp.send is in @" + func.getSymName().str();
  for (auto [d, device] : llvm::enumerate(devices))
    for (auto [i, action] : llvm::enumerate(device.actions)) {
      if (calleeOf(action) != func || microBatchOf(send->second, action) != mb)
        continue;
      std::string ran = describe(action) + " (action " + std::to_string(i) +
                        ") on device " + std::to_string(d);
      if (static_cast<int>(d) == receiverDevice)
        return where + ", which " + ran +
               " runs after the receiver: the schedule runs the receiver "
               "first";
      return where + ", which " + ran + " has not reached";
    }
  return where + ", which no action of the schedule runs for micro-batch " +
         std::to_string(mb);
}

LogicalResult MessageOrderCheck::run() {
  for (auto device : schedule.getBody().front().getOps<pipeline::DeviceOp>()) {
    size_t index = device.getIndex();
    if (devices.size() <= index)
      devices.resize(index + 1);
    for (auto action : device.getBody().front().getOps<pipeline::ActionOp>())
      devices[index].actions.push_back(action);
  }
  // Every send, for the reports.
  for (auto func : module.getOps<func::FuncOp>()) {
    std::optional<int64_t> stage = pipeline::getStage(func);
    if (!stage)
      continue;
    FailureOr<const std::vector<Event> *> list = eventsOf(func);
    if (failed(list))
      return failure();
    for (const Event &event : **list)
      if (event.kind == EventKind::Send)
        sends.try_emplace({*stage, event.peer, event.id}, event);
  }

  bool progress = true;
  while (progress) {
    progress = false;
    for (int d = 0, e = static_cast<int>(devices.size()); d < e; ++d) {
      FailureOr<bool> moved = advance(d);
      if (failed(moved))
        return failure();
      progress |= *moved;
    }
  }
  if (llvm::all_of(devices, [](const Device &d) { return d.done(); })) {
    if (inFlight.empty())
      return success();
    auto [from, to, tag, mb] = inFlight.begin()->first;
    InFlightDiagnostic diag =
        schedule.emitError()
        << "the schedule sends a message nobody receives: from stage " << from
        << " to stage " << to << " (tag " << tag << ", micro-batch " << mb
        << ")";
    if (auto send = sends.find({from, to, tag}); send != sends.end())
      diag.attachNote(send->second.op->getLoc()) << "the pp.send";
    return failure();
  }

  InFlightDiagnostic diag =
      schedule.emitError()
      << "the schedule deadlocks: every device left waits in a pp.recv for a "
         "message that no device can send (the pipelined interpreter would "
         "stop at its first step)";
  for (auto [d, device] : llvm::enumerate(devices)) {
    if (device.done())
      continue;
    pipeline::ActionOp action = device.actions[device.action];
    const Event &event = (**eventsOf(calleeOf(action)))[device.event];
    int64_t mb = microBatchOf(event, action);
    MessageKey key{event.peer, stageOf(action), event.id, mb};
    diag.attachNote(event.op->getLoc())
        << "device " << d << " is stuck at action " << device.action << ", "
        << describe(action) << ": its pp.recv from stage " << event.peer
        << " (tag " << event.id << ", micro-batch " << mb << ") waits; "
        << whereSent(key, static_cast<int>(d));
  }
  return failure();
}

std::optional<std::string> MessageOrderCheck::firstMessageOutOfOrder() {
  std::map<int64_t, int64_t> deviceOfStage;
  for (auto [d, device] : llvm::enumerate(devices))
    for (pipeline::ActionOp action : device.actions)
      deviceOfStage.try_emplace(stageOf(action), static_cast<int64_t>(d));
  struct Message {
    MessageKey key;
    pipeline::ActionOp action;
    Operation *op;
  };
  // (sender device, receiver device) -> the messages in the sender's order,
  // and in the receiver's.
  std::map<std::pair<int64_t, int64_t>, std::vector<Message>> sent, received;
  for (auto [d, device] : llvm::enumerate(devices))
    for (pipeline::ActionOp action : device.actions) {
      func::FuncOp func = calleeOf(action);
      if (!func)
        continue;
      int64_t stage = stageOf(action);
      for (const Event &event : **eventsOf(func)) {
        if (event.kind != EventKind::Send && event.kind != EventKind::Recv)
          continue;
        auto peer = deviceOfStage.find(event.peer);
        if (peer == deviceOfStage.end() ||
            peer->second == static_cast<int64_t>(d))
          continue; // on the device itself: no transport
        int64_t mb = microBatchOf(event, action);
        if (event.kind == EventKind::Send)
          sent[{static_cast<int64_t>(d), peer->second}].push_back(
              {{stage, event.peer, event.id, mb}, action, event.op});
        else
          received[{peer->second, static_cast<int64_t>(d)}].push_back(
              {{event.peer, stage, event.id, mb}, action, event.op});
      }
    }
  for (auto &[link, messages] : sent) {
    const std::vector<Message> &other = received[link];
    for (size_t i = 0; i < messages.size() && i < other.size(); ++i) {
      if (messages[i].key == other[i].key)
        continue;
      auto describeMessage = [](const MessageKey &key) {
        auto [from, to, tag, mb] = key;
        return "stage " + std::to_string(from) + " -> " + std::to_string(to) +
               " (tag " + std::to_string(tag) + ", micro-batch " +
               std::to_string(mb) + ")";
      };
      return "device " + std::to_string(link.first) + " sends " +
             describeMessage(messages[i].key) + " in " +
             describe(messages[i].action) + " as its message " +
             std::to_string(i) + " to device " + std::to_string(link.second) +
             ", which receives " + describeMessage(other[i].key) + " in " +
             describe(other[i].action) + " as its message " +
             std::to_string(i) + " from device " + std::to_string(link.first);
    }
  }
  return std::nullopt;
}

} // namespace

LogicalResult pp::pipeline::verifyScheduleMessageOrder(ModuleOp module) {
  // Every replica's schedule, when the replicas place the stages on their
  // own.
  pipeline::PlanAttr plan = pipeline::getPlan(module);
  int64_t replicas = plan && plan.hasPlacements() ? plan.getDataParallel() : 1;
  for (int64_t r = 0; r < replicas; ++r) {
    pipeline::ScheduleOp schedule =
        pipeline::lookupSchedule(module, "the schedule check", r);
    if (!schedule || failed(MessageOrderCheck(module, schedule).run()))
      return failure();
  }
  return success();
}

FailureOr<std::optional<std::string>>
pp::pipeline::findMessageOutOfOrder(ModuleOp module) {
  pipeline::PlanAttr plan = pipeline::getPlan(module);
  int64_t replicas = plan && plan.hasPlacements() ? plan.getDataParallel() : 1;
  for (int64_t r = 0; r < replicas; ++r) {
    pipeline::ScheduleOp schedule =
        pipeline::lookupSchedule(module, "the message order check", r);
    if (!schedule)
      return failure();
    MessageOrderCheck check(module, schedule);
    if (failed(check.run()))
      return failure();
    if (std::optional<std::string> found = check.firstMessageOutOfOrder())
      return std::optional<std::string>(
          (replicas > 1 ? "replica " + std::to_string(r) + ": " : "") + *found);
  }
  return std::optional<std::string>();
}
