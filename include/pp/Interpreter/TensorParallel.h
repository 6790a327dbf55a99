//===- TensorParallel.h - Run a tensor-parallel program ---------*- C++ -*-===//
//
// A module partitioned by --pp-tensor-parallel is one SPMD program: every
// device of its shard.grid runs the same function on its part of the split
// tensors and meets the others at the shard dialect's collectives
// (all_slice, all_gather, all_reduce). Here each device is an Interpreter
// with its own copy of the globals, run in a thread of its own; the
// collectives exchange tensors through a DeviceGroup in memory.
//
// A collective combines the parts in device order on every device, so the
// values the program keeps whole (the loss, the weights) are bit-identical
// on every device; SPMDRunner checks that of the outputs, and
// verifyReplicatedGlobals of the globals.
//
//===----------------------------------------------------------------------===//
#ifndef PP_INTERPRETER_TENSORPARALLEL_H
#define PP_INTERPRETER_TENSORPARALLEL_H

#include "pp/Interpreter/Interpreter.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pp::interp {

/// The devices of one grid axis, meeting in memory.
class DeviceGroup {
public:
  explicit DeviceGroup(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }

  /// Deposits `part` as device `device`'s, waits until every device has
  /// deposited, and returns all parts in device order. Fails (without
  /// waiting) once abort() has been called.
  mlir::FailureOr<std::vector<Tensor>> exchange(int device, Tensor part);
  /// Wakes and fails every waiting and later exchange (a device failed).
  void abort();

private:
  int size_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<Tensor> slots_, published_;
  int count_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

/// Registers the handlers of shard.all_slice, shard.all_gather and
/// shard.all_reduce (sum) for `interp` as device `device` of `group`. Only
/// one-dimensional grids whose size is the group's are taken.
void registerShardHandlers(Interpreter &interp,
                           std::shared_ptr<DeviceGroup> group, int device);

/// The size of the module's one shard.grid (one-dimensional), or
/// std::nullopt when it has none; fails with a diagnostic on any other grid.
mlir::FailureOr<std::optional<int64_t>>
getTensorParallelSize(mlir::ModuleOp module);

/// Runs functions of a tensor-parallel module on one interpreter per device.
class SPMDRunner {
public:
  SPMDRunner(mlir::ModuleOp module, int64_t devices,
             InterpreterOptions options = {});
  ~SPMDRunner();

  /// Creates and initialises the devices' interpreters (with the train
  /// dialect's handlers).
  mlir::LogicalResult initialize();

  /// Runs `funcName` on every device at once and returns device 0's
  /// results; fails when a device fails or when the devices' results differ
  /// (a function that returns split values is not run here).
  mlir::FailureOr<std::vector<Tensor>> run(llvm::StringRef funcName,
                                           llvm::ArrayRef<Tensor> inputs);

  void setRandomPosition(int64_t step, int64_t microBatch);
  /// Device 0's value of a global.
  const Tensor *getGlobal(llvm::StringRef name) const;
  llvm::ArrayRef<std::string> getGlobalNames() const;
  /// Sets a global on every device.
  mlir::LogicalResult setGlobal(llvm::StringRef name, Tensor value,
                                std::string *error = nullptr);
  /// The first global whose value differs between devices, or std::nullopt.
  std::optional<std::string> findDivergedGlobal() const;
  /// Per-op-kind time summed over the devices.
  std::vector<OpProfile> getProfile() const;

private:
  mlir::ModuleOp module_;
  int64_t numDevices_;
  InterpreterOptions options_;
  std::shared_ptr<DeviceGroup> group_;
  std::vector<std::unique_ptr<Interpreter>> devices_;
};

} // namespace pp::interp

#endif // PP_INTERPRETER_TENSORPARALLEL_H
