//===- PipelineRunner.cpp - Run a split pipeline on the interpreter -------===//

#include "pp/Interpreter/PipelineRunner.h"
#include "pp/Interpreter/TensorParallel.h"
#include "pp/Interpreter/TrainHandlers.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

using namespace mlir;
using namespace pp::interp;
namespace pipeline = pp::pipeline;

namespace {

/// sum += value, element-wise, for f32 and f64 gradient sums; false for
/// other dtypes.
bool addInto(Tensor &sum, const Tensor &value) {
  if (value.dtype() == pp::rt::DType::F32) {
    for (int64_t i = 0, e = sum.numel(); i < e; ++i)
      sum.as<float>()[i] += value.as<float>()[i];
    return true;
  }
  if (value.dtype() == pp::rt::DType::F64) {
    for (int64_t i = 0, e = sum.numel(); i < e; ++i)
      sum.as<double>()[i] += value.as<double>()[i];
    return true;
  }
  return false;
}

/// Messages between stages: sends never block, receives wait. Tracks how
/// many devices run and how many wait, to see a deadlock as it happens.
class Mailbox {
public:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;

  void reset(int devices) {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.clear();
    reductions_.clear();
    running_ = devices;
    waiting_.assign(devices, std::string());
    waitingFor_.assign(devices, Key());
    numWaiting_ = 0;
    aborted_ = false;
    deadlock_ = false;
  }
  void send(Key key, Tensor value) {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_[key] = std::move(value);
    cv_.notify_all();
  }
  /// Waits for `key`; nullopt when the step aborted (failure or deadlock).
  std::optional<Tensor> receive(Key key, int device, std::string waitsFor) {
    std::unique_lock<std::mutex> lock(mutex_);
    waiting_[device] = std::move(waitsFor);
    waitingFor_[device] = key;
    ++numWaiting_;
    while (!aborted_) {
      auto it = messages_.find(key);
      if (it != messages_.end()) {
        Tensor value = std::move(it->second);
        messages_.erase(it);
        --numWaiting_;
        waiting_[device].clear();
        return value;
      }
      checkDeadlockLocked();
      if (aborted_)
        break;
      cv_.wait(lock);
    }
    --numWaiting_;
    return std::nullopt;
  }
  void finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    checkDeadlockLocked();
  }

  using Slots = std::map<int64_t, Tensor>;
  /// The grad_reduce of `stage`: replica `replica` of `replicas` gives its
  /// accumulated gradients and waits for the sum over all replicas (added
  /// in replica order, so every replica gets the same bits). nullopt when
  /// the step aborted; `error` is set when the replicas' slots differ.
  std::optional<Slots> allReduce(int64_t stage, int replica, int replicas,
                                 Slots mine, int device, std::string waitsFor,
                                 std::string &error) {
    std::unique_lock<std::mutex> lock(mutex_);
    Reduction &reduction = reductions_[stage];
    if (reduction.parts.empty())
      reduction.parts.resize(replicas);
    reduction.parts[replica] = std::move(mine);
    if (++reduction.given == replicas) {
      reduction.sum = std::move(reduction.parts[0]);
      for (int r = 1; r < replicas && reduction.error.empty(); ++r) {
        Slots &part = reduction.parts[r];
        if (part.size() != reduction.sum.size())
          reduction.error = "replicas accumulated different gradient slots";
        for (auto &[slot, value] : part) {
          auto it = reduction.sum.find(slot);
          if (it == reduction.sum.end() ||
              it->second.numel() != value.numel() ||
              it->second.dtype() != value.dtype()) {
            reduction.error = "replica " + std::to_string(r) +
                              " has no matching slot " + std::to_string(slot);
            break;
          }
          addInto(it->second, value); // slots were accumulated as f32/f64
        }
      }
      reduction.parts.clear();
      reduction.ready = true;
      cv_.notify_all();
    } else {
      waiting_[device] = std::move(waitsFor);
      waitingFor_[device] = Key(-1, stage, -1, -1);
      ++numWaiting_;
      while (!aborted_ && !reduction.ready) {
        checkDeadlockLocked();
        if (aborted_)
          break;
        cv_.wait(lock);
      }
      --numWaiting_;
      waiting_[device].clear();
      if (!reduction.ready)
        return std::nullopt;
    }
    error = reduction.error;
    Slots result;
    for (auto &[slot, value] : reduction.sum)
      result[slot] = value.clone();
    if (++reduction.taken == replicas)
      reductions_.erase(stage);
    return result;
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }
  bool isDeadlock() const { return deadlock_; }
  /// The stuck devices, when a deadlock ended the step.
  std::vector<std::string> stuck() const {
    std::vector<std::string> lines;
    for (auto [device, what] : llvm::enumerate(waiting_))
      if (!what.empty())
        lines.push_back("device " + std::to_string(device) + " " + what);
    return lines;
  }
  size_t pending() const { return messages_.size(); }

private:
  void checkDeadlockLocked() {
    if (!aborted_ && running_ > 0 && numWaiting_ == running_) {
      // Everybody still running waits. A waiter whose message has arrived
      // (but who has not woken yet) will go on; otherwise nothing can come.
      for (auto [device, what] : llvm::enumerate(waiting_)) {
        if (what.empty())
          continue;
        const Key &key = waitingFor_[device];
        if (messages_.count(key))
          return;
        if (std::get<0>(key) == -1) { // a grad_reduce whose sum is ready
          auto it = reductions_.find(std::get<1>(key));
          if (it != reductions_.end() && it->second.ready)
            return;
        }
      }
      deadlock_ = true;
      aborted_ = true;
      cv_.notify_all();
    }
  }

  struct Reduction {
    std::vector<Slots> parts;
    Slots sum;
    std::string error;
    int given = 0, taken = 0;
    bool ready = false;
  };

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<Key, Tensor> messages_;
  std::map<int64_t, Reduction> reductions_;
  int running_ = 0;
  int numWaiting_ = 0;
  std::vector<std::string> waiting_;
  std::vector<Key> waitingFor_;
  bool aborted_ = false;
  bool deadlock_ = false;
};

int64_t stageOf(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  return func ? pipeline::getStage(func).value_or(0) : 0;
}

std::string describeAction(pipeline::ActionOp action) {
  std::string text = std::string(pp::kinds::toString(action.getKindValue())) +
                     "(stage " + std::to_string(action.getStage());
  if (action.getMicroBatchAttr().getInt() >= 0)
    text += ", mb " + std::to_string(action.getMicroBatchAttr().getInt());
  return text + ")";
}

} // namespace

struct PipelineRunner::Impl {
  /// An action of a window: its op, with the micro-batch and versions it
  /// has in the window (pp.stream moves the body's actions step by step).
  struct WindowAction {
    pipeline::ActionOp op;
    int64_t microBatch;
    int64_t weightVersion;
    int64_t blendVersion; // -1: none
  };
  struct Device {
    std::vector<pipeline::ActionOp> actions;
    /// pp.stream's actions of this device and their split (empty: none).
    std::vector<pipeline::ActionOp> streamActions;
    size_t prologueLength = 0, bodyLength = 0;
    // (stage, slot, micro-batch) -> kept value; (stage, slot) -> sum.
    std::map<std::tuple<int64_t, int64_t, int64_t>, Tensor> stash;
    std::map<std::pair<int64_t, int64_t>, Tensor> sums;
    std::string current;
    bool failed = false;
  };

  ModuleOp module;
  PipelineRunOptions options;
  /// Data-parallel replicas of the pipeline (pp.plan's data_parallel),
  /// each with `tensorParallel` lanes (the devices of a stage's
  /// tensor-parallel group): lane L = r * tensorParallel + t of replica r
  /// runs device d as devices[L * p + d] and stage s on stages[L * S + s],
  /// on the global micro-batches r * m .. r * m + m - 1.
  int64_t replicas = 1;
  int64_t tensorParallel = 1;
  /// The tensor-parallel group of each stage of each replica
  /// (groups[r * S + s]).
  std::vector<std::shared_ptr<DeviceGroup>> groups;
  int64_t devicesPerReplica = 1;
  int64_t stagesPerReplica = 1;
  std::vector<Device> devices;
  /// One interpreter per stage (and replica): a stage owns its copy of the
  /// globals (the step counter, say, advances once per stage even when a
  /// device holds several stages).
  std::vector<std::unique_ptr<Interpreter>> stages;
  Mailbox mailbox;
  // Step data: [input][micro-batch] and [output][micro-batch].
  std::vector<std::vector<Tensor>> microInputs;
  std::vector<std::vector<Tensor>> microOutputs;
  std::vector<std::string> combine;
  std::mutex outputMutex;
  llvm::StringMap<int> globalOwner;
  std::vector<std::string> globalNames;
  /// Steps run so far (the Dropout masks' step).
  int64_t step = 0;
  /// pp.stream's shortest window (0: no stream) and its updates per step.
  int64_t streamMinSteps = 0;
  int64_t updatesPerStep = 1;
  /// Device d's actions for a window of `steps` steps (pp.schedule's for
  /// one, pp.stream's expanded for more).
  std::vector<WindowAction> windowActions(const Device &device, int64_t steps,
                                          int64_t microBatches) const;
  /// Weight-versioned schedules: the trainable globals each stage's
  /// functions read (the ones that have versions).
  bool weightVersioned = false;
  std::vector<std::vector<std::string>> stageTrainables;

  /// Copies (shared, copy-on-write) of `stage`'s trainables in `interp`.
  llvm::StringMap<Tensor> snapshot(Interpreter &interp, int64_t stage) const;
  /// Sets `stage`'s trainables in `interp` to version `version` of
  /// `versions` or, when `blend` >= 0, to W_blend + factor (W_version -
  /// W_blend).
  LogicalResult readVersion(Interpreter &interp, int64_t stage,
                            llvm::ArrayRef<llvm::StringMap<Tensor>> versions,
                            int64_t version, int64_t blend, double factor);

  /// The pipeline ops of a stage running on device `deviceIndex`.
  void registerHandlers(Interpreter &interp, int deviceIndex);
  void registerStepIOHandlers(Interpreter &interp, int deviceIndex);
  void registerStashHandlers(Interpreter &interp, int deviceIndex);
  void registerMessageHandlers(Interpreter &interp, int deviceIndex);

  /// initialize's steps. Device d of lane L (devices[L * p + d]) gets the
  /// actions of pp.device d in its replica's schedule.
  LogicalResult assignActions(pipeline::ScheduleOp schedule, int64_t lanes);
  /// The tensor-parallel groups, and an interpreter with every handler per
  /// stage of each lane.
  LogicalResult createStages(pipeline::PlanAttr plan, int64_t lanes);
  /// pp.stream's shortest window, its updates per step and each device's
  /// actions.
  LogicalResult readStreams(pipeline::PlanAttr plan);
  void collectStageTrainables();
  /// The stage each global is read from by getGlobal.
  void assignGlobalOwners();
  /// runWindow's steps: the actions of every device, each on its own
  /// thread (device 0 on the caller's); device d's, and one action of it.
  void runDevices(int64_t steps, int64_t microBatches);
  void runDevice(int d, int64_t steps, int64_t microBatches);
  /// Weight-versioned schedules: per stage of a device, its trainables
  /// after each update of this step (index 0: the step's start).
  using StageVersions = std::map<int64_t, std::vector<llvm::StringMap<Tensor>>>;
  LogicalResult runAction(int d, const WindowAction &entry,
                          int64_t microBatches, StageVersions &versions);
  /// Sets `stage`'s trainables to the version `entry` reads; true when that
  /// is not the latest, which keepLatestVersion then sets back (and keeps
  /// the version an optimizer step makes).
  FailureOr<bool>
  readActionVersion(Interpreter &interp, int64_t stage,
                    const WindowAction &entry,
                    std::vector<llvm::StringMap<Tensor>> &history);
  void keepLatestVersion(Interpreter &interp, int64_t stage,
                         pipeline::ActionOp action, bool swapped,
                         std::vector<llvm::StringMap<Tensor>> &history);
  /// Fails, reporting a deadlock, unless every device ran all its actions.
  LogicalResult checkDevicesFinished();
  /// Each step's outputs, from the micro-batches' (combined as their
  /// pp.output says).
  FailureOr<std::vector<std::vector<Tensor>>>
  combineOutputs(llvm::ArrayRef<std::string> outputNames, int64_t steps,
                 int64_t totalMicroBatches) const;
  /// Runs grad_reduce(stage) on device `d` of `lane`: its accumulated
  /// sums of the stage become the sums over every replica's same lane.
  LogicalResult gradReduce(int d, int64_t lane, int64_t stage);
  /// Stops the step: wakes every device waiting for a message or a
  /// collective.
  void abort() {
    mailbox.abort();
    for (auto &group : groups)
      group->abort();
  }
};

std::vector<PipelineRunner::Impl::WindowAction>
PipelineRunner::Impl::windowActions(const Device &device, int64_t steps,
                                    int64_t microBatches) const {
  auto entry = [](pipeline::ActionOp op, int64_t shift, int64_t m,
                  int64_t updates) {
    WindowAction a{op, op.getMicroBatchAttr().getInt(),
                   static_cast<int64_t>(op.getWeightVersion()), -1};
    if (auto blend = op.getBlendVersion())
      a.blendVersion = static_cast<int64_t>(*blend);
    if (a.microBatch >= 0)
      a.microBatch += shift * m;
    if (!pp::kinds::isPerStep(op.getKindValue())) {
      a.weightVersion += shift * updates;
      if (a.blendVersion >= 0)
        a.blendVersion += shift * updates;
    }
    return a;
  };
  std::vector<WindowAction> list;
  if (steps == 1) {
    for (pipeline::ActionOp op : device.actions)
      list.push_back(entry(op, 0, microBatches, updatesPerStep));
    return list;
  }
  // The prologue, the body steps - minSteps times, the epilogue moved
  // steps - minSteps - 1 (pp.stream).
  const auto &all = device.streamActions;
  size_t bodyEnd = device.prologueLength + device.bodyLength;
  for (size_t i = 0; i < device.prologueLength; ++i)
    list.push_back(entry(all[i], 0, microBatches, updatesPerStep));
  for (int64_t r = 0; r < steps - streamMinSteps; ++r)
    for (size_t i = device.prologueLength; i < bodyEnd; ++i)
      list.push_back(entry(all[i], r, microBatches, updatesPerStep));
  for (size_t i = bodyEnd; i < all.size(); ++i)
    list.push_back(entry(all[i], steps - streamMinSteps - 1, microBatches,
                         updatesPerStep));
  return list;
}

LogicalResult PipelineRunner::Impl::gradReduce(int d, int64_t lane,
                                               int64_t stage) {
  int64_t replica = lane / tensorParallel;
  // The replicas of one lane reduce together.
  int64_t key = lane % tensorParallel * stagesPerReplica + stage;
  auto &sums = devices[d].sums;
  Mailbox::Slots mine;
  for (auto it = sums.begin(); it != sums.end();) {
    if (it->first.first == stage) {
      mine[it->first.second] = std::move(it->second);
      it = sums.erase(it);
    } else {
      ++it;
    }
  }
  std::string error;
  std::optional<Mailbox::Slots> total = mailbox.allReduce(
      key, static_cast<int>(replica), static_cast<int>(replicas),
      std::move(mine), d,
      "in " + devices[d].current + " waits for the other replicas", error);
  if (!total) {
    devices[d].failed = true;
    return failure(); // the step aborted (reported once by runStep)
  }
  if (!error.empty())
    return module.emitError()
           << "grad_reduce of stage " << stage << ": " << error;
  for (auto &[slot, value] : *total)
    sums[{stage, slot}] = std::move(value);
  return success();
}

llvm::StringMap<Tensor> PipelineRunner::Impl::snapshot(Interpreter &interp,
                                                       int64_t stage) const {
  llvm::StringMap<Tensor> copy;
  for (const std::string &name : stageTrainables[stage])
    if (const Tensor *value = interp.getGlobal(name))
      copy[name] = *value;
  return copy;
}

LogicalResult PipelineRunner::Impl::readVersion(
    Interpreter &interp, int64_t stage,
    llvm::ArrayRef<llvm::StringMap<Tensor>> versions, int64_t version,
    int64_t blend, double factor) {
  auto missing = [&](int64_t v) {
    return module.emitError()
           << "stage " << stage << " reads weight version " << v
           << ", which it has not made (" << versions.size() - 1
           << " updates so far this step)";
  };
  if (version >= static_cast<int64_t>(versions.size()))
    return missing(version);
  if (blend >= static_cast<int64_t>(versions.size()))
    return missing(blend);
  for (const auto &entry : versions[version]) {
    Tensor value = entry.second;
    if (blend >= 0) {
      // W_l + c (W_s - W_l), element-wise in the weight's precision.
      const Tensor &latest = versions[blend].find(entry.getKey())->second;
      Tensor mixed = latest.clone();
      int64_t n = mixed.numel();
      if (mixed.dtype() == rt::DType::F32) {
        auto c = static_cast<float>(factor);
        for (int64_t i = 0; i < n; ++i)
          mixed.as<float>()[i] +=
              c * (value.as<float>()[i] - latest.as<float>()[i]);
      } else if (mixed.dtype() == rt::DType::F64) {
        for (int64_t i = 0; i < n; ++i)
          mixed.as<double>()[i] +=
              factor * (value.as<double>()[i] - latest.as<double>()[i]);
      } else {
        return module.emitError() << "blends only f32 and f64 weights, got '"
                                  << entry.getKey() << "'";
      }
      value = std::move(mixed);
    }
    std::string error;
    if (failed(interp.setGlobal(entry.getKey(), std::move(value), &error)))
      return module.emitError() << error;
  }
  return success();
}

/// The value of a pipeline op's micro-batch operand.
static int64_t microBatchOf(Interpreter &in, Value mb) {
  return in.lookup(mb).getInt(0);
}

void PipelineRunner::Impl::registerHandlers(Interpreter &interp,
                                            int deviceIndex) {
  registerStepIOHandlers(interp, deviceIndex);
  registerStashHandlers(interp, deviceIndex);
  registerMessageHandlers(interp, deviceIndex);
}

/// pp.input reads the step's inputs, pp.output fills its outputs, one
/// micro-batch at a time.
void PipelineRunner::Impl::registerStepIOHandlers(Interpreter &interp,
                                                  int deviceIndex) {
  interp.registerHandler(
      pipeline::InputOp::getOperationName(),
      [this](Interpreter &in, Operation *op) -> LogicalResult {
        auto input = cast<pipeline::InputOp>(op);
        int64_t mb = microBatchOf(in, input.getMicroBatch());
        uint64_t index = input.getIndex();
        if (index >= microInputs.size() || mb < 0 ||
            mb >= static_cast<int64_t>(microInputs[index].size()))
          return op->emitError()
                 << "no micro-batch " << mb << " of input " << index;
        return in.setResult(op, input.getValue(), microInputs[index][mb]);
      });
  interp.registerHandler(
      pipeline::OutputOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        // The tensor-parallel lanes of a replica output the same values.
        if (deviceIndex / devicesPerReplica % tensorParallel != 0)
          return success();
        auto output = cast<pipeline::OutputOp>(op);
        int64_t mb = microBatchOf(in, output.getMicroBatch());
        std::lock_guard<std::mutex> lock(outputMutex);
        uint64_t index = output.getIndex();
        if (index >= microOutputs.size() || mb < 0 ||
            mb >= static_cast<int64_t>(microOutputs[index].size()))
          return op->emitError() << "output " << index << " has no slot for "
                                 << "micro-batch " << mb;
        microOutputs[index][mb] = in.lookup(output.getValue());
        combine[index] = output.getCombine().str();
        return success();
      });
}

/// pp.stash / pp.unstash keep a forward's values for its backward, and
/// pp.accumulate / pp.accumulated sum gradients over micro-batches, in the
/// device's own maps.
void PipelineRunner::Impl::registerStashHandlers(Interpreter &interp,
                                                 int deviceIndex) {
  interp.registerHandler(
      pipeline::StashOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        auto stash = cast<pipeline::StashOp>(op);
        int64_t mb = microBatchOf(in, stash.getMicroBatch());
        devices[deviceIndex]
            .stash[{stageOf(op), static_cast<int64_t>(stash.getSlot()), mb}] =
            in.lookup(stash.getValue());
        return success();
      });
  interp.registerHandler(
      pipeline::UnstashOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        auto unstash = cast<pipeline::UnstashOp>(op);
        int64_t mb = microBatchOf(in, unstash.getMicroBatch());
        auto &stash = devices[deviceIndex].stash;
        auto it = stash.find(
            {stageOf(op), static_cast<int64_t>(unstash.getSlot()), mb});
        if (it == stash.end())
          return op->emitError()
                 << "nothing is stashed in slot " << unstash.getSlot()
                 << " for micro-batch " << mb
                 << " (its forward has not run on this device)";
        Tensor value = std::move(it->second);
        stash.erase(it);
        return in.setResult(op, unstash.getValue(), std::move(value));
      });
  interp.registerHandler(
      pipeline::AccumulateOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        auto acc = cast<pipeline::AccumulateOp>(op);
        const Tensor &value = in.lookup(acc.getValue());
        auto key =
            std::make_pair(stageOf(op), static_cast<int64_t>(acc.getSlot()));
        auto &sums = devices[deviceIndex].sums;
        auto it = sums.find(key);
        if (it == sums.end()) {
          sums[key] = value.clone();
          return success();
        }
        if (!addInto(it->second, value))
          return op->emitError() << "accumulates only f32 and f64 gradients";
        return success();
      });
  interp.registerHandler(
      pipeline::AccumulatedOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        auto acc = cast<pipeline::AccumulatedOp>(op);
        auto &sums = devices[deviceIndex].sums;
        auto it = sums.find({stageOf(op), static_cast<int64_t>(acc.getSlot())});
        if (it == sums.end())
          return op->emitError() << "no gradient was accumulated in slot "
                                 << acc.getSlot() << " this step";
        Tensor sum = std::move(it->second);
        sums.erase(it);
        return in.setResult(op, acc.getValue(), std::move(sum));
      });
}

/// pp.send and pp.recv between stages, through the mailbox.
void PipelineRunner::Impl::registerMessageHandlers(Interpreter &interp,
                                                   int deviceIndex) {
  interp.registerHandler(
      pipeline::SendOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        auto send = cast<pipeline::SendOp>(op);
        int64_t mb = microBatchOf(in, send.getMicroBatch());
        // Stages are numbered per lane: a per-step message (micro-batch
        // 0) of replica 0 must not meet replica 1's, and a tensor-parallel
        // device sends to the same device of the next stage's group.
        int64_t base = deviceIndex / devicesPerReplica * stagesPerReplica;
        mailbox.send({base + stageOf(op),
                      base + static_cast<int64_t>(send.getPeer()),
                      static_cast<int64_t>(send.getTag()), mb},
                     in.lookup(send.getValue()));
        return success();
      });
  interp.registerHandler(
      pipeline::RecvOp::getOperationName(),
      [this, deviceIndex](Interpreter &in, Operation *op) -> LogicalResult {
        auto recv = cast<pipeline::RecvOp>(op);
        int64_t mb = microBatchOf(in, recv.getMicroBatch());
        int64_t stage = stageOf(op);
        std::string waitsFor = llvm::formatv(
            "in {0} waits for pp.recv from stage {1} (tag {2}, micro-batch "
            "{3})",
            devices[deviceIndex].current, recv.getPeer(), recv.getTag(), mb);
        int64_t base = deviceIndex / devicesPerReplica * stagesPerReplica;
        auto value = mailbox.receive(
            {base + static_cast<int64_t>(recv.getPeer()), base + stage,
             static_cast<int64_t>(recv.getTag()), mb},
            deviceIndex, waitsFor);
        if (!value) {
          devices[deviceIndex].failed = true;
          return failure(); // reported once by runStep
        }
        return in.setResult(op, recv.getValue(), std::move(*value));
      });
}

PipelineRunner::PipelineRunner(ModuleOp module, PipelineRunOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->module = module;
  impl_->options = options;
}

PipelineRunner::~PipelineRunner() = default;

/// The step's inputs, named by `names`: whole mini-batches (`perStep`
/// micro-batches) of the micro-batches the pp.input ops read.
static FailureOr<std::vector<StepInput>>
collectStepInputs(ModuleOp module, ArrayAttr names, int64_t perStep) {
  std::vector<StepInput> inputs(names.size(), StepInput());
  for (auto [i, name] : llvm::enumerate(names))
    inputs[i].name = cast<StringAttr>(name).str();
  WalkResult walk = module.walk([&](pipeline::InputOp input) {
    uint64_t index = input.getIndex();
    if (index >= inputs.size()) {
      input.emitError() << "reads input " << index << " of " << inputs.size();
      return WalkResult::interrupt();
    }
    auto type = cast<RankedTensorType>(input.getValue().getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= perStep;
    auto whole = RankedTensorType::get(shape, type.getElementType());
    if (inputs[index].type && inputs[index].type != whole) {
      input.emitError() << "reads input " << index << " as " << type
                        << " elsewhere it is " << inputs[index].type;
      return WalkResult::interrupt();
    }
    inputs[index].type = whole;
    if (!inputs[index].reader)
      inputs[index].reader = input.getValue();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (auto &input : inputs)
    if (!input.type)
      return module.emitError()
             << "no stage reads input '" << input.name << "'";
  return inputs;
}

LogicalResult PipelineRunner::Impl::assignActions(pipeline::ScheduleOp schedule,
                                                  int64_t lanes) {
  int64_t numDevices = devicesPerReplica;
  devices.resize(numDevices * lanes);
  // Heterogeneous virtual workers place the shared stages each their own
  // way, with a schedule per replica.
  pipeline::PlanAttr plan = schedule.getPlan();
  for (int64_t lane = 0; lane < lanes; ++lane) {
    int64_t r = lane / tensorParallel;
    pipeline::ScheduleOp own =
        plan.hasPlacements()
            ? pipeline::lookupSchedule(module, "a pipelined module", r)
            : schedule;
    if (!own)
      return failure();
    for (auto device : own.getBody().front().getOps<pipeline::DeviceOp>())
      for (auto action : device.getBody().front().getOps<pipeline::ActionOp>())
        devices[lane * numDevices + device.getIndex()].actions.push_back(
            action);
  }
  return success();
}

LogicalResult PipelineRunner::Impl::createStages(pipeline::PlanAttr plan,
                                                 int64_t lanes) {
  int64_t numStages = stagesPerReplica = plan.getNumStages();
  int64_t tp = tensorParallel;
  for (int64_t g = 0; g < numStages * replicas; ++g)
    groups.push_back(std::make_shared<DeviceGroup>(tp));
  for (int64_t g = 0; g < numStages * lanes; ++g) {
    int64_t lane = g / numStages, s = g % numStages;
    int64_t r = lane / tp;
    InterpreterOptions interpOptions;
    interpOptions.numThreads = options.numThreadsPerDevice;
    // One seed for all stages: Dropout masks follow the op, not the stage.
    interpOptions.seed = options.seed;
    interpOptions.profile = options.profile;
    auto interp = std::make_unique<Interpreter>(module, interpOptions);
    registerTrainHandlers(*interp);
    registerHandlers(*interp, static_cast<int>(lane * devicesPerReplica +
                                               plan.getDeviceOf(s, r)));
    if (tp > 1)
      registerShardHandlers(*interp, groups[r * numStages + s],
                            static_cast<int>(lane % tp));
    if (failed(interp->initialize()))
      return failure();
    stages.push_back(std::move(interp));
  }
  return success();
}

LogicalResult PipelineRunner::Impl::readStreams(pipeline::PlanAttr plan) {
  for (auto stream : module.getOps<pipeline::StreamOp>()) {
    streamMinSteps = static_cast<int64_t>(stream.getMinSteps());
    updatesPerStep = plan.getUpdateEvery() > 0
                         ? plan.getMicroBatches() / plan.getUpdateEvery()
                         : 1;
    for (auto device : stream.getBody().front().getOps<pipeline::DeviceOp>()) {
      if (device.getIndex() >= devices.size())
        return device.emitError() << "pp.stream has more devices than the "
                                     "schedule";
      Device &mine = devices[device.getIndex()];
      for (auto action : device.getBody().front().getOps<pipeline::ActionOp>())
        mine.streamActions.push_back(action);
      mine.prologueLength =
          static_cast<size_t>(device.getPrologueLength().value_or(0));
      mine.bodyLength = static_cast<size_t>(device.getBodyLength().value_or(0));
    }
  }
  return success();
}

void PipelineRunner::Impl::collectStageTrainables() {
  int64_t numStages = stagesPerReplica;
  stageTrainables.assign(numStages, {});
  module.walk([&](pp::onnx::GlobalReadOp read) {
    auto func = read->getParentOfType<func::FuncOp>();
    std::optional<int64_t> stage =
        func ? pipeline::getStage(func) : std::nullopt;
    auto global = SymbolTable::lookupNearestSymbolFrom<pp::onnx::GlobalOp>(
        read, read.getGlobalAttr());
    if (!stage || *stage < 0 || *stage >= numStages || !global ||
        global.getKind() != pp::onnx::kTrainable)
      return;
    auto &names = stageTrainables[*stage];
    if (!llvm::is_contained(names, global.getSymName().str()))
      names.push_back(global.getSymName().str());
  });
}

void PipelineRunner::Impl::assignGlobalOwners() {
  // The first stage that writes a global, else the first that reads it.
  llvm::StringMap<int> reader;
  module.walk([&](Operation *op) {
    auto func = op->getParentOfType<func::FuncOp>();
    std::optional<int64_t> stage =
        func ? pipeline::getStage(func) : std::nullopt;
    if (!stage)
      return;
    int device = static_cast<int>(*stage);
    if (auto write = dyn_cast<pp::train::GlobalWriteOp>(op))
      globalOwner.try_emplace(write.getGlobal(), device);
    else if (auto read = dyn_cast<pp::onnx::GlobalReadOp>(op))
      reader.try_emplace(read.getGlobal(), device);
  });
  for (auto &entry : reader)
    globalOwner.try_emplace(entry.getKey(), entry.getValue());
}

LogicalResult PipelineRunner::initialize() {
  ModuleOp module = impl_->module;
  pipeline::ScheduleOp schedule =
      pipeline::lookupSchedule(module, "a pipelined module");
  if (!schedule)
    return failure();
  pipeline::PlanAttr plan = schedule.getPlan();
  if (plan.isWaveSynchronous())
    return emitError(module.getLoc())
           << "the interpreter runs synchronous data parallelism only; "
              "Wave Synchronous Parallel (staleness = "
           << plan.getStaleness()
           << ") runs in generated programs (--pp-compile emit-dir=)";
  microBatches_ = plan.getMicroBatches();
  dataParallel_ = plan.getDataParallel();
  impl_->replicas = dataParallel_;
  FailureOr<std::optional<int64_t>> tensorParallel =
      getTensorParallelSize(module);
  if (failed(tensorParallel))
    return failure();
  int64_t tp = impl_->tensorParallel = tensorParallel->value_or(1);
  if (tp > 1 && plan.isWeightVersioned())
    return emitError(module.getLoc())
           << "the interpreter runs tensor parallelism with synchronous "
              "schedules only";
  int64_t lanes = dataParallel_ * tp;

  ArrayAttr inputNames = pipeline::getInputNames(module);
  ArrayAttr outputNames = pipeline::getOutputNames(module);
  if (!inputNames || !outputNames)
    return module.emitError() << "not a split module (no pp.input_names): "
                                 "run --pp-split-stages";
  FailureOr<std::vector<StepInput>> inputs =
      collectStepInputs(module, inputNames, microBatches_ * dataParallel_);
  if (failed(inputs))
    return failure();
  inputs_ = std::move(*inputs);
  for (auto [i, name] : llvm::enumerate(outputNames)) {
    outputNames_.push_back(cast<StringAttr>(name).str());
    if (outputNames_.back() == "loss")
      lossIndex_ = i;
  }

  numDevices_ =
      static_cast<int64_t>(schedule.getBody().front().getOperations().size());
  impl_->devicesPerReplica = numDevices_;
  if (failed(impl_->assignActions(schedule, lanes)) ||
      failed(impl_->createStages(plan, lanes)))
    return failure();
  impl_->weightVersioned = plan.isWeightVersioned();
  // One pipeline: its steps may run as a stream (pp.stream).
  if (lanes == 1 && failed(impl_->readStreams(plan)))
    return failure();
  if (impl_->weightVersioned)
    impl_->collectStageTrainables();
  impl_->assignGlobalOwners();
  return success();
}

FailureOr<std::vector<Tensor>>
PipelineRunner::runStep(llvm::ArrayRef<Tensor> inputs) {
  FailureOr<std::vector<std::vector<Tensor>>> outputs =
      runWindow({std::vector<Tensor>(inputs.begin(), inputs.end())});
  if (failed(outputs))
    return failure();
  return std::move(outputs->front());
}

/// Where micro-batch `mb` of a window's action (-1: none) falls, with `m`
/// micro-batches per replica and `replicas` replicas: replica r's
/// micro-batch j of step k is the window's micro-batch k (m R) + r m + j.
struct WindowMicroBatch {
  /// The micro-batch the action's function takes.
  int64_t window;
  /// Its step in the window and its micro-batch in that step (r m + j), as
  /// the Dropout masks count them.
  int64_t step, local;
};

static WindowMicroBatch placeMicroBatch(int64_t mb, int64_t replica, int64_t m,
                                        int64_t replicas) {
  if (mb < 0)
    return {mb, 0, mb};
  int64_t step = mb / m;
  int64_t local = replica * m + mb % m;
  return {step * m * replicas + local, step, local};
}

FailureOr<bool> PipelineRunner::Impl::readActionVersion(
    Interpreter &interp, int64_t stage, const WindowAction &entry,
    std::vector<llvm::StringMap<Tensor>> &history) {
  if (history.empty())
    history.push_back(snapshot(interp, stage));
  pipeline::ActionOp action = entry.op;
  int64_t version = entry.weightVersion;
  bool blend = entry.blendVersion >= 0;
  bool swapped = !pp::kinds::isPerStep(action.getKindValue()) &&
                 (blend || version != static_cast<int64_t>(history.size()) - 1);
  if (swapped &&
      failed(readVersion(interp, stage, history, version, entry.blendVersion,
                         action.getBlendFactorAttr()
                             ? action.getBlendFactorAttr().getValueAsDouble()
                             : 0.0)))
    return failure();
  return swapped;
}

void PipelineRunner::Impl::keepLatestVersion(
    Interpreter &interp, int64_t stage, pipeline::ActionOp action, bool swapped,
    std::vector<llvm::StringMap<Tensor>> &history) {
  // Back to the latest; an update makes the next version.
  if (swapped)
    (void)readVersion(interp, stage, history, history.size() - 1, -1, 0);
  if (action.getKindValue() == pp::kinds::ActionKind::OptimizerStep)
    history.push_back(snapshot(interp, stage));
}

LogicalResult PipelineRunner::Impl::runAction(int d, const WindowAction &entry,
                                              int64_t microBatches,
                                              StageVersions &versions) {
  pipeline::ActionOp action = entry.op;
  int64_t lane = d / devicesPerReplica;
  int64_t stage = action.getStageAttr().getInt();
  if (action.getKindValue() == pp::kinds::ActionKind::GradReduce)
    return gradReduce(d, lane, stage);
  if (!action.getCallee())
    return success(); // a reduction with nothing to reduce
  // Replica r's micro-batch j is the global micro-batch r m + j: the
  // slice of the inputs it reads, and its Dropout masks.
  WindowMicroBatch mb = placeMicroBatch(entry.microBatch, lane / tensorParallel,
                                        microBatches, replicas);
  std::vector<Tensor> args;
  if (mb.window >= 0)
    args.push_back(
        Tensor::fromValues<int64_t>(rt::DType::I64, {}, {mb.window}));
  Interpreter &interp = *stages[lane * stagesPerReplica + stage];
  interp.setRandomPosition(step + mb.step, mb.local);
  bool swapped = false;
  if (weightVersioned) {
    FailureOr<bool> read =
        readActionVersion(interp, stage, entry, versions[stage]);
    if (failed(read))
      return failure();
    swapped = *read;
  }
  if (failed(interp.run(*action.getCallee(), args)))
    return failure();
  if (weightVersioned)
    keepLatestVersion(interp, stage, action, swapped, versions[stage]);
  return success();
}

void PipelineRunner::Impl::runDevice(int d, int64_t steps,
                                     int64_t microBatches) {
  Device &device = devices[d];
  device.failed = false;
  int64_t replica = d / devicesPerReplica / tensorParallel;
  StageVersions versions;
  for (const WindowAction &entry : windowActions(device, steps, microBatches)) {
    device.current = describeAction(entry.op);
    if (replicas > 1)
      device.current += " of replica " + std::to_string(replica);
    if (failed(runAction(d, entry, microBatches, versions))) {
      device.failed = true;
      abort();
      break;
    }
  }
  mailbox.finished();
}

void PipelineRunner::Impl::runDevices(int64_t steps, int64_t microBatches) {
  auto run = [&](int d) { runDevice(d, steps, microBatches); };
  std::vector<std::thread> threads;
  for (int d = 1; d < static_cast<int>(devices.size()); ++d)
    threads.emplace_back(run, d);
  run(0);
  for (auto &thread : threads)
    thread.join();
}

LogicalResult PipelineRunner::Impl::checkDevicesFinished() {
  if (mailbox.isDeadlock()) {
    auto diag = module.emitError() << "deadlock: every device waits for a "
                                      "message nobody sends;";
    for (const std::string &line : mailbox.stuck())
      diag << " " << line << ";";
    return failure();
  }
  for (auto &device : devices)
    if (device.failed)
      return failure();
  return success();
}

/// Cuts each step's inputs (whole mini-batches, as `expected` says) into
/// the window's micro-batches, [input][micro-batch]: `m` per replica of
/// `replicas`, every replica's in replica order, step after step.
static FailureOr<std::vector<std::vector<Tensor>>>
splitIntoMicroBatches(ModuleOp module, llvm::ArrayRef<StepInput> expected,
                      llvm::ArrayRef<std::vector<Tensor>> stepInputs, int64_t m,
                      int64_t replicas) {
  int64_t totalMicroBatches = m * replicas;
  std::vector<std::vector<Tensor>> microInputs(expected.size());
  for (llvm::ArrayRef<Tensor> inputs : stepInputs) {
    if (inputs.size() != expected.size())
      return module.emitError() << "the step takes " << expected.size()
                                << " inputs, got " << inputs.size();
    for (auto [i, input] : llvm::enumerate(inputs)) {
      auto type = expected[i].type;
      if (input.shape() != type.getShape()) {
        auto diag = module.emitError()
                    << "input '" << expected[i].name << "' must be " << type
                    << " (" << m << " micro-batches";
        if (replicas > 1)
          diag << " x " << replicas << " data-parallel replicas";
        return diag << "), got " << describe(input);
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] /= totalMicroBatches;
      int64_t chunk = input.bytes() / totalMicroBatches;
      for (int64_t mb = 0; mb < totalMicroBatches; ++mb)
        microInputs[i].push_back(Tensor::fromBytes(
            input.dtype(), shape,
            static_cast<const char *>(input.data()) + mb * chunk));
    }
  }
  return microInputs;
}

/// Output `name` of a step from its micro-batches' `parts`, combined as
/// `how` says: "concat" along dim 0, else summed in f64 ("mean": then
/// divided by the micro-batches).
static FailureOr<Tensor> combineParts(ModuleOp module, StringRef name,
                                      StringRef how,
                                      llvm::ArrayRef<Tensor> parts) {
  int64_t totalMicroBatches = static_cast<int64_t>(parts.size());
  for (auto [mb, part] : llvm::enumerate(parts))
    if (!part.hasStorage())
      return module.emitError() << "output '" << name
                                << "' was not produced for micro-batch " << mb;
  if (how == "concat") {
    SmallVector<int64_t> shape(parts.front().shape());
    shape[0] *= totalMicroBatches;
    Tensor whole(parts.front().dtype(), shape);
    int64_t chunk = parts.front().bytes();
    for (auto [mb, part] : llvm::enumerate(parts))
      std::memcpy(static_cast<char *>(whole.data()) + mb * chunk, part.data(),
                  chunk);
    return whole;
  }
  Tensor result = parts.front().clone();
  for (int64_t i = 0, e = result.numel(); i < e; ++i) {
    double total = 0;
    for (const Tensor &part : parts)
      total += part.getDouble(i);
    if (how == "mean")
      total /= static_cast<double>(totalMicroBatches);
    if (result.dtype() == pp::rt::DType::F32)
      result.as<float>()[i] = static_cast<float>(total);
    else if (result.dtype() == pp::rt::DType::F64)
      result.as<double>()[i] = total;
    else
      return module.emitError() << "cannot combine output '" << name << "' of "
                                << describe(result);
  }
  return result;
}

FailureOr<std::vector<std::vector<Tensor>>>
PipelineRunner::Impl::combineOutputs(llvm::ArrayRef<std::string> outputNames,
                                     int64_t steps,
                                     int64_t totalMicroBatches) const {
  std::vector<std::vector<Tensor>> windowOutputs;
  for (int64_t k = 0; k < steps; ++k) {
    std::vector<Tensor> &outputs = windowOutputs.emplace_back();
    for (auto [index, all] : llvm::enumerate(microOutputs)) {
      FailureOr<Tensor> output = combineParts(
          module, outputNames[index], combine[index],
          llvm::ArrayRef(all).slice(k * totalMicroBatches, totalMicroBatches));
      if (failed(output))
        return failure();
      outputs.push_back(std::move(*output));
    }
  }
  return windowOutputs;
}

FailureOr<std::vector<std::vector<Tensor>>>
PipelineRunner::runWindow(llvm::ArrayRef<std::vector<Tensor>> stepInputs) {
  Impl &impl = *impl_;
  ModuleOp module = impl.module;
  auto steps = static_cast<int64_t>(stepInputs.size());
  if (impl.weightVersioned && dataParallel_ > 1)
    return module.emitError()
           << "the interpreter runs one pipeline of a weight-versioned "
              "schedule (data_parallel = 1); data parallelism with it runs "
              "in generated programs (--pp-compile emit-dir=)";
  if (steps < 1 || (steps > 1 && steps < impl.streamMinSteps) ||
      (steps > 1 && impl.streamMinSteps == 0))
    return module.emitError()
           << "cannot run " << steps << " steps as one window: "
           << (impl.streamMinSteps ? "pp.stream's shortest is " +
                                         std::to_string(impl.streamMinSteps)
                                   : std::string("the module has no "
                                                 "pp.stream"));
  FailureOr<std::vector<std::vector<Tensor>>> microInputs =
      splitIntoMicroBatches(module, inputs_, stepInputs, microBatches_,
                            dataParallel_);
  if (failed(microInputs))
    return failure();
  impl.microInputs = std::move(*microInputs);
  int64_t totalMicroBatches = microBatches_ * dataParallel_;
  impl.microOutputs.assign(outputNames_.size(),
                           std::vector<Tensor>(totalMicroBatches * steps));
  impl.combine.assign(outputNames_.size(), std::string());
  impl.mailbox.reset(static_cast<int>(impl.devices.size()));

  impl.runDevices(steps, microBatches_);
  if (failed(impl.checkDevicesFinished()))
    return failure();
  impl.step += steps;
  for (auto &device : impl.devices)
    if (!device.stash.empty())
      return module.emitError() << "the step left " << device.stash.size()
                                << " stashed value(s) that no backward took";
  return impl.combineOutputs(outputNames_, steps, totalMicroBatches);
}

int64_t PipelineRunner::getStreamMinSteps() const {
  return impl_->streamMinSteps;
}

const Tensor *PipelineRunner::getGlobal(llvm::StringRef name) const {
  auto it = impl_->globalOwner.find(name);
  int stage = it == impl_->globalOwner.end() ? 0 : it->second;
  if (impl_->stages.empty())
    return nullptr;
  return impl_->stages[stage]->getGlobal(name);
}

LogicalResult PipelineRunner::setGlobal(llvm::StringRef name, Tensor value,
                                        std::string *error) {
  for (auto &stage : impl_->stages)
    if (failed(stage->setGlobal(name, value, error)))
      return failure();
  return success();
}

llvm::ArrayRef<std::string> PipelineRunner::getGlobalNames() const {
  if (impl_->stages.empty())
    return {};
  return impl_->stages.front()->getGlobalNames();
}

std::vector<OpProfile> PipelineRunner::getProfile() const {
  std::vector<std::vector<OpProfile>> profiles;
  for (const auto &stage : impl_->stages)
    profiles.push_back(stage->getProfile());
  return mergeProfiles(profiles);
}
