//===- TensorParallel.cpp - Run a tensor-parallel program -------*- C++ -*-===//
//
// The shard dialect's collectives on a DeviceGroup, and SPMDRunner (see
// TensorParallel.h).
//
//===----------------------------------------------------------------------===//

#include "pp/Interpreter/TensorParallel.h"
#include "pp/Interpreter/TrainHandlers.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

#include <cstring>
#include <thread>

using namespace mlir;
using namespace pp::interp;
namespace rt = pp::rt;

//===----------------------------------------------------------------------===//
// DeviceGroup
//===----------------------------------------------------------------------===//

FailureOr<std::vector<Tensor>> DeviceGroup::exchange(int device, Tensor part) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_)
    return failure();
  slots_[device] = std::move(part);
  uint64_t generation = generation_;
  if (++count_ == size_) {
    // The last to arrive publishes. A device that has already gone on to
    // the next exchange only fills slots_, and published_ is replaced only
    // once every device (this round's readers included) has arrived again.
    published_ = std::move(slots_);
    slots_.assign(size_, Tensor());
    count_ = 0;
    ++generation_;
    arrived_.notify_all();
  } else {
    arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation)
      return failure();
  }
  return published_;
}

void DeviceGroup::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  arrived_.notify_all();
}

//===----------------------------------------------------------------------===//
// Handlers
//===----------------------------------------------------------------------===//

namespace {

/// Checks that `op` runs over the whole one-dimensional grid the group is.
template <typename OpTy>
LogicalResult checkGrid(OpTy op, const DeviceGroup &group) {
  auto grid =
      SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, op.getGridAttr());
  if (!grid)
    return op->emitError() << "no shard.grid @" << op.getGrid();
  if (grid.getShape() != ArrayRef<int64_t>{group.size()} ||
      op.getGridAxes() != ArrayRef<shard::GridAxis>{0})
    return op->emitError()
           << "the interpreter runs collectives over a one-dimensional grid "
              "of the "
           << group.size()
           << " devices it was started with; multi-dimensional grids are "
              "not built";
  return success();
}

FailureOr<std::vector<Tensor>> exchange(Interpreter &in, Operation *op,
                                        DeviceGroup &group, int device,
                                        const Tensor &part) {
  FailureOr<std::vector<Tensor>> parts = group.exchange(device, part);
  if (failed(parts))
    return op->emitError() << "another device of the group failed";
  return parts;
}

} // namespace

void pp::interp::registerShardHandlers(Interpreter &interp,
                                       std::shared_ptr<DeviceGroup> group,
                                       int device) {
  interp.registerHandler(
      shard::AllSliceOp::getOperationName(),
      [group, device](Interpreter &in, Operation *operation) -> LogicalResult {
        auto op = cast<shard::AllSliceOp>(operation);
        if (failed(checkGrid(op, *group)))
          return failure();
        const Tensor &x = in.lookup(op.getInput());
        int64_t axis = op.getSliceAxis().getSExtValue();
        auto y = in.allocResult(op, op.getResult());
        if (failed(y))
          return failure();
        std::vector<int64_t> starts(x.rank(), 0), steps(x.rank(), 1);
        starts[axis] = device * y->shape()[axis];
        return in.check(
            op,
            rt::slice(in.kernelContext(), x.view(), starts, steps, y->view()),
            "slice");
      });
  interp.registerHandler(
      shard::AllGatherOp::getOperationName(),
      [group, device](Interpreter &in, Operation *operation) -> LogicalResult {
        auto op = cast<shard::AllGatherOp>(operation);
        if (failed(checkGrid(op, *group)))
          return failure();
        FailureOr<std::vector<Tensor>> parts =
            exchange(in, op, *group, device, in.lookup(op.getInput()));
        if (failed(parts))
          return failure();
        std::vector<const rt::Tensor *> views;
        for (const Tensor &part : *parts)
          views.push_back(&part.view());
        auto y = in.allocResult(op, op.getResult());
        if (failed(y))
          return failure();
        return in.check(op,
                        rt::concat(in.kernelContext(), views,
                                   op.getGatherAxis().getSExtValue(),
                                   y->view()),
                        "concat");
      });
  interp.registerHandler(
      shard::AllReduceOp::getOperationName(),
      [group, device](Interpreter &in, Operation *operation) -> LogicalResult {
        auto op = cast<shard::AllReduceOp>(operation);
        if (failed(checkGrid(op, *group)))
          return failure();
        if (op.getReduction() != shard::ReductionKind::Sum ||
            op.getInput().getType() != op.getType())
          return op->emitError() << "the interpreter only sums, into the "
                                    "operand's type";
        FailureOr<std::vector<Tensor>> parts =
            exchange(in, op, *group, device, in.lookup(op.getInput()));
        if (failed(parts))
          return failure();
        // The same additions in the same order on every device: the sum is
        // bit-identical everywhere.
        Tensor sum = (*parts)[0];
        for (size_t d = 1; d < parts->size(); ++d) {
          Tensor next(sum.dtype(), sum.shape());
          if (failed(in.check(op,
                              rt::binary(in.kernelContext(),
                                         rt::BinaryKind::Add, sum.view(),
                                         (*parts)[d].view(), next.view()),
                              "binary")))
            return failure();
          sum = std::move(next);
        }
        return in.setResult(op, op.getResult(), std::move(sum));
      });
}

FailureOr<std::optional<int64_t>>
pp::interp::getTensorParallelSize(ModuleOp module) {
  std::optional<int64_t> size;
  for (auto grid : module.getOps<shard::GridOp>()) {
    if (size || grid.getShape().size() != 1 ||
        ShapedType::isDynamic(grid.getShape()[0]) || grid.getShape()[0] < 1)
      return grid.emitError()
             << "the interpreter runs modules with one one-dimensional "
                "shard.grid of static size (a tensor-parallel group); "
                "others are not built";
    size = grid.getShape()[0];
  }
  return size;
}

//===----------------------------------------------------------------------===//
// SPMDRunner
//===----------------------------------------------------------------------===//

SPMDRunner::SPMDRunner(ModuleOp module, int64_t devices,
                       InterpreterOptions options)
    : module_(module), numDevices_(devices), options_(options),
      group_(std::make_shared<DeviceGroup>(devices)) {}

SPMDRunner::~SPMDRunner() = default;

LogicalResult SPMDRunner::initialize() {
  for (int64_t d = 0; d < numDevices_; ++d) {
    auto interp = std::make_unique<Interpreter>(module_, options_);
    registerTrainHandlers(*interp);
    registerShardHandlers(*interp, group_, d);
    if (failed(interp->initialize()))
      return failure();
    devices_.push_back(std::move(interp));
  }
  return success();
}

FailureOr<std::vector<Tensor>> SPMDRunner::run(StringRef funcName,
                                               ArrayRef<Tensor> inputs) {
  std::vector<FailureOr<std::vector<Tensor>>> results(numDevices_, failure());
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < numDevices_; ++d)
    threads.emplace_back([&, d] {
      results[d] = devices_[d]->run(funcName, inputs);
      if (failed(results[d]))
        group_->abort();
    });
  for (std::thread &thread : threads)
    thread.join();
  for (auto &result : results)
    if (failed(result))
      return failure();
  const std::vector<Tensor> &first = *results[0];
  for (int64_t d = 1; d < numDevices_; ++d)
    for (size_t i = 0; i < first.size(); ++i) {
      const Tensor &other = (*results[d])[i];
      if (other.dtype() != first[i].dtype() ||
          other.shape() != first[i].shape() ||
          std::memcmp(other.data(), first[i].data(), first[i].bytes()) != 0)
        return mlir::emitError(module_.getLoc())
               << "result #" << i << " of @" << funcName << " differs between "
               << "device 0 and device " << d
               << " of the tensor-parallel group: a result must be whole "
                  "(not split) on every device to be run here";
    }
  return first;
}

void SPMDRunner::setRandomPosition(int64_t step, int64_t microBatch) {
  for (auto &device : devices_)
    device->setRandomPosition(step, microBatch);
}

const Tensor *SPMDRunner::getGlobal(StringRef name) const {
  return devices_.front()->getGlobal(name);
}

ArrayRef<std::string> SPMDRunner::getGlobalNames() const {
  return devices_.front()->getGlobalNames();
}

LogicalResult SPMDRunner::setGlobal(StringRef name, Tensor value,
                                    std::string *error) {
  for (auto &device : devices_)
    if (failed(device->setGlobal(name, value, error)))
      return failure();
  return success();
}

std::optional<std::string> SPMDRunner::findDivergedGlobal() const {
  for (const std::string &name : getGlobalNames()) {
    const Tensor *first = devices_[0]->getGlobal(name);
    for (int64_t d = 1; d < numDevices_; ++d) {
      const Tensor *other = devices_[d]->getGlobal(name);
      if (other->bytes() != first->bytes() ||
          std::memcmp(other->data(), first->data(), first->bytes()) != 0)
        return name;
    }
  }
  return std::nullopt;
}

std::vector<OpProfile> SPMDRunner::getProfile() const {
  std::vector<std::vector<OpProfile>> profiles;
  for (const auto &device : devices_)
    profiles.push_back(device->getProfile());
  return mergeProfiles(profiles);
}
