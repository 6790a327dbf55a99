//===- PipelineRunner.h - Run a split pipeline on the interpreter -*- C++ -*-=//
//
// Executes a module produced by --pp-split-stages and --pp-schedule: one
// thread per device running its `pp.device` actions in order; every stage
// has its own Interpreter, so its own copy of the globals it reads.
// `pp.send` / `pp.recv` go through an in-process mailbox keyed by (sender
// stage, receiver stage, tag, micro-batch); sends never block, receives wait.
// When every running device waits for a message nobody can send any more,
// the step fails with a deadlock report naming each device's stuck action.
//
// With pp.plan's data_parallel = N > 1 it runs N replicas of the pipeline
// (N x devices threads), replica r on micro-batches r m .. r m + m - 1 of
// the global mini-batch; a `grad_reduce` action sums a stage's accumulated
// gradients over the replicas.
//
// A module with a shard.grid of N devices (tensor parallelism) runs N lanes
// of every replica: device t of each stage's group runs the same actions on
// the same micro-batches, sends to device t of the neighbouring stage, and
// meets the rest of its group at the shard collectives (TensorParallel.h).
//
// This is the semantic reference for split programs: a synchronous schedule
// must give what the unsplit training step gives.
//
//===----------------------------------------------------------------------===//
#ifndef PP_INTERPRETER_PIPELINERUNNER_H
#define PP_INTERPRETER_PIPELINERUNNER_H

#include "pp/Interpreter/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>
#include <vector>

namespace pp::interp {

struct PipelineRunOptions {
  /// Kernel threads per device.
  int numThreadsPerDevice = 1;
  uint64_t seed = 0;
  /// Time the ops of every stage (see getProfile).
  bool profile = false;
};

/// A step input as the pipelined step takes it: the whole mini-batch.
struct StepInput {
  std::string name;
  mlir::RankedTensorType type;
  /// A value that reads a micro-batch of it (a `pp.input`), for heuristics.
  mlir::Value reader;
};

class PipelineRunner {
public:
  /// `module` must hold the stage functions and one `pp.schedule`.
  explicit PipelineRunner(mlir::ModuleOp module,
                          PipelineRunOptions options = {});
  ~PipelineRunner();

  /// Checks the module's structure and creates the devices' interpreters.
  mlir::LogicalResult initialize();

  /// The step's inputs (whole mini-batch types) and outputs.
  const std::vector<StepInput> &getInputs() const { return inputs_; }
  const std::vector<std::string> &getOutputNames() const {
    return outputNames_;
  }
  /// Index of the loss among the outputs, if the step has one.
  std::optional<unsigned> getLossIndex() const { return lossIndex_; }
  /// Micro-batches per replica, devices per replica, and the replicas
  /// (data-parallel degree): a step takes getMicroBatches() *
  /// getDataParallel() micro-batches.
  int64_t getMicroBatches() const { return microBatches_; }
  int64_t getNumDevices() const { return numDevices_; }
  int64_t getDataParallel() const { return dataParallel_; }

  /// Runs one step on whole-mini-batch inputs; returns the outputs combined
  /// over micro-batches (mean/sum/concat as `pp.output` says).
  mlir::FailureOr<std::vector<Tensor>> runStep(llvm::ArrayRef<Tensor> inputs);
  /// Runs the steps of `stepInputs` (one entry per step) as one stream that
  /// drains only at its end (pp.stream: weight-versioned schedules; one
  /// step is runStep); returns each step's outputs.
  mlir::FailureOr<std::vector<std::vector<Tensor>>>
  runWindow(llvm::ArrayRef<std::vector<Tensor>> stepInputs);
  /// The shortest window runWindow takes beyond one step (pp.stream's
  /// min_steps); 0 when every step drains.
  int64_t getStreamMinSteps() const;

  /// A global as its owner (the device that writes it, else the first that
  /// reads it) holds it.
  const Tensor *getGlobal(llvm::StringRef name) const;
  llvm::ArrayRef<std::string> getGlobalNames() const;
  /// Replaces a global's value on every device (each holds a copy); fails
  /// as Interpreter::setGlobal does.
  mlir::LogicalResult setGlobal(llvm::StringRef name, Tensor value,
                                std::string *error = nullptr);

  /// Per-op-kind time summed over every stage (empty unless profiling).
  std::vector<OpProfile> getProfile() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<StepInput> inputs_;
  std::vector<std::string> outputNames_;
  std::optional<unsigned> lossIndex_;
  int64_t microBatches_ = 1;
  int64_t numDevices_ = 1;
  int64_t dataParallel_ = 1;
};

} // namespace pp::interp

#endif // PP_INTERPRETER_PIPELINERUNNER_H
