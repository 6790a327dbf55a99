//===- Interpreter.h - Reference interpreter on the CPU kernels -*- C++ -*-===//
//
// Executes a `func.func` of a module op by op on the CPU kernels of
// pp_runtime. It is the reference every later stage (autodiff, partitioned
// and pipelined programs, generated code) is checked against, so it favours
// clarity over speed: every op gets freshly allocated result buffers, and
// buffers are freed after their last use.
//
// Ops are dispatched by name through a table of handlers. The onnx dialect
// registers its handlers in the constructor; other dialects (train ops,
// pipeline send/recv) add theirs with `registerHandler` from their own files.
//
// Model state: every `onnx.global` owns a buffer, initialised from its
// initial value (zeros when absent), that persists across `run` calls;
// `onnx.global_read` reads it without copying (buffers are copy-on-write).
//
//===----------------------------------------------------------------------===//

#ifndef PP_INTERPRETER_INTERPRETER_H
#define PP_INTERPRETER_INTERPRETER_H

#include "pp/Dialect/ONNX/Utils/HostTensor.h"
#include "pp/Runtime/Kernels.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pp::interp {

/// The interpreter's values: owning host tensors, copy-on-write (see
/// pp/Dialect/ONNX/Utils/HostTensor.h).
using Tensor = onnx::HostTensor;

/// Why the interpreter will not allocate a `dtype` tensor of `shape` (its
/// bytes overflow int64 or exceed limits::kMaxInterpreterTensorBytes), or
/// std::nullopt.
std::optional<std::string> checkAllocation(rt::DType dtype,
                                           llvm::ArrayRef<int64_t> shape);

/// "tensor<2x3xf32>"-style description for messages.
std::string describe(const Tensor &tensor);

struct InterpreterOptions {
  /// Threads the CPU kernels may use.
  int numThreads = 1;
  /// Run seed of the Dropout masks of ops without a `seed` attribute
  /// (mixed with the op's `stream` and the step: DropoutHash.h).
  uint64_t seed = 0;
  /// Accumulate the time spent in each op kind (see getProfile).
  bool profile = false;
};

/// Time spent in one op kind while profiling.
struct OpProfile {
  std::string opName;
  int64_t calls = 0;
  double milliseconds = 0;
};

/// Time spent in the ops of one ONNX node (by location name): its forward
/// ops, and the backward ops --pp-autodiff built for it (fused<"backward">
/// locations), with the runs of each that were timed.
struct NodeProfile {
  std::string node;
  double forwardMs = 0, backwardMs = 0;
};

/// Sums profiles of several interpreters by op kind, most expensive first.
std::vector<OpProfile>
mergeProfiles(llvm::ArrayRef<std::vector<OpProfile>> profiles);

class Interpreter;

/// Executes one op: reads its operands with `interp.operand`, computes, and
/// defines every result with `interp.setResult` (or `interp.allocResult`).
/// Returns failure after emitting a diagnostic at the op.
using OpHandler = std::function<mlir::LogicalResult(Interpreter &interp,
                                                    mlir::Operation *op)>;

class Interpreter {
public:
  /// Prepares to run functions of `module` (which must outlive the
  /// interpreter) and registers the handlers of the onnx and func dialects.
  /// Globals exist once `initialize` (or the first `run`) has succeeded.
  explicit Interpreter(mlir::ModuleOp module, InterpreterOptions options = {});
  ~Interpreter();

  /// Allocates and initialises the buffers of the module's globals. Emits a
  /// diagnostic and fails on an unsupported type or unreadable initial value.
  mlir::LogicalResult initialize();

  /// Runs `funcName` on `inputs` (checked against its argument types) and
  /// returns its results. Failure comes with a diagnostic at the failing op.
  mlir::FailureOr<std::vector<Tensor>> run(llvm::StringRef funcName,
                                           llvm::ArrayRef<Tensor> inputs);

  //===--------------------------------------------------------------------===//
  // Globals
  //===--------------------------------------------------------------------===//

  /// The current value of a global; null when there is no such global.
  const Tensor *getGlobal(llvm::StringRef name) const;
  /// A global's buffer for an in-place update (made private first, so values
  /// read earlier keep their contents); null when there is no such global.
  Tensor *getGlobalForUpdate(llvm::StringRef name);
  /// Replaces a global's value; fails (with a message in `error`) when the
  /// global does not exist or the dtype or shape differ from its type.
  mlir::LogicalResult setGlobal(llvm::StringRef name, Tensor value,
                                std::string *error = nullptr);
  /// Names of the module's globals, in module order.
  llvm::ArrayRef<std::string> getGlobalNames() const { return globalNames_; }

  //===--------------------------------------------------------------------===//
  // Op handlers
  //===--------------------------------------------------------------------===//

  /// Registers (or replaces) the handler of the op named `opName`
  /// (e.g. "train.global_write").
  void registerHandler(llvm::StringRef opName, OpHandler handler);
  bool hasHandler(llvm::StringRef opName) const;

  /// The buffer of an operand / any value defined so far in the current
  /// function. Asserts that it is defined (ops run in order).
  const Tensor &lookup(mlir::Value value) const;
  const Tensor &operand(mlir::Operation *op, unsigned index) const {
    return lookup(op->getOperand(index));
  }
  /// The buffer of an optional operand (null when `value` is null).
  const Tensor *lookupOptional(mlir::Value value) const {
    return value ? &lookup(value) : nullptr;
  }
  /// Defines `value`; fails with a diagnostic at `op` when the tensor does
  /// not have the dtype and shape of the value's type.
  mlir::LogicalResult setResult(mlir::Operation *op, mlir::Value value,
                                Tensor tensor);
  /// Allocates a zero-filled buffer of `result`'s type and defines it;
  /// the returned tensor shares that buffer, so a kernel writes the result
  /// through it.
  mlir::FailureOr<Tensor> allocResult(mlir::Operation *op, mlir::Value result);
  /// A fresh zero-filled buffer of `type` (a ranked tensor type).
  mlir::FailureOr<Tensor> allocate(mlir::Operation *op, mlir::Type type);

  /// Emits "<kernel> failed: <message>" at `op` when `status` is an error.
  mlir::LogicalResult check(mlir::Operation *op, const rt::Status &status,
                            llvm::StringRef kernel);

  /// Runs a function of the module from within a handler (func.call).
  mlir::FailureOr<std::vector<Tensor>> call(mlir::Operation *caller,
                                            llvm::StringRef funcName,
                                            llvm::ArrayRef<Tensor> inputs);

  rt::Context &kernelContext() { return kernelContext_; }
  mlir::ModuleOp getModule() { return module_; }

  /// Per-op-kind time of all runs so far, most expensive first (empty unless
  /// InterpreterOptions::profile).
  std::vector<OpProfile> getProfile() const;
  /// Per-node time of all runs so far, in first-run order (empty unless
  /// InterpreterOptions::profile); clearProfile starts both anew (after a
  /// warm-up run).
  std::vector<NodeProfile> getNodeProfile() const;
  void clearProfile();

  /// Where the next runs draw their Dropout masks: training step `step`
  /// (from 0) and, within it, micro-batch `microBatch` (0 when the run
  /// takes the whole mini-batch). Both start at 0; a caller that runs
  /// several steps sets them before each run.
  void setRandomPosition(int64_t step, int64_t microBatch);
  /// The mask seed of Dropout stream `stream` at the current step.
  uint64_t dropoutSeed(uint64_t stream) const;
  /// The micro-batch set by setRandomPosition.
  int64_t getRandomMicroBatch() const { return randomMicroBatch_; }

  /// A decoded constant attribute, cached per attribute.
  mlir::FailureOr<const Tensor *> getConstant(mlir::Operation *op,
                                              mlir::Attribute value);

private:
  struct Frame;
  mlir::LogicalResult runBlock(mlir::Block &block, Frame &frame);
  mlir::LogicalResult execute(mlir::Operation *op);

  mlir::ModuleOp module_;
  InterpreterOptions options_;
  rt::Context kernelContext_;
  llvm::StringMap<OpHandler> handlers_;
  /// Cache of handler lookups by op name.
  llvm::DenseMap<mlir::OperationName, const OpHandler *> handlerCache_;

  llvm::StringMap<Tensor> globals_;
  std::vector<std::string> globalNames_;
  llvm::DenseMap<mlir::Attribute, Tensor> constants_;
  bool initialized_ = false;

  /// The frame of the function being run (innermost call).
  Frame *frame_ = nullptr;
  int callDepth_ = 0;

  int64_t randomStep_ = 0;
  int64_t randomMicroBatch_ = 0;
  llvm::StringMap<OpProfile> profile_;
  /// Per node in first-run order, and where each node is.
  std::vector<NodeProfile> nodeProfile_;
  llvm::StringMap<size_t> nodeIndex_;
};

/// Registers the handlers of the onnx dialect's ops (Interpreter's
/// constructor calls it).
void registerONNXHandlers(Interpreter &interp);

} // namespace pp::interp

#endif // PP_INTERPRETER_INTERPRETER_H
