//===- CostModel.h - Time and memory of ops on devices ----------*- C++ -*-===//
//
// What the partitioner and the simulator ask of an op: its work (FLOPs and
// bytes moved, forward and backward), the activation bytes its backward
// needs, and its parameter bytes; and how long it runs on a device. The
// analytic model is a roofline over the device's peak FLOP/s and memory
// bandwidth; a measured profile overrides it per op and device kind.
//
//===----------------------------------------------------------------------===//

#ifndef PP_ANALYSIS_COSTMODEL_H
#define PP_ANALYSIS_COSTMODEL_H

#include "pp/Cluster/Cluster.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>

namespace pp {

/// Work of one op for one micro-batch.
struct OpWork {
  double forwardFlops = 0, backwardFlops = 0;
  /// Bytes read and written by the forward and by the backward.
  double forwardBytes = 0, backwardBytes = 0;
  /// Bytes of the op's results that the backward reads (kept between the
  /// forward and the backward of a micro-batch unless recomputed).
  int64_t activationBytes = 0;
  /// Bytes of the trainable globals the op reads (weights; the gradient has
  /// the same size).
  int64_t parameterBytes = 0;
};

/// Bytes of a statically shaped tensor type (0 otherwise).
int64_t getTensorBytes(mlir::Type type);
/// Bytes of a static shaped type, or std::nullopt when they overflow int64
/// or exceed limits::kMaxTensorBytes.
std::optional<int64_t> getCheckedTensorBytes(mlir::Type type);
/// Fails, with an error at the op, when a value under `root` is too large
/// to plan (getCheckedTensorBytes), so the planners' sums of bytes, FLOPs
/// and times cannot overflow.
mlir::LogicalResult verifyPlannableSizes(mlir::Operation *root,
                                         llvm::StringRef pass);

/// The forward values that the backward (as the GradientOpInterface rules
/// build it) reads: found by building each op's backward in place and
/// inspecting its operands. Parameters (global reads) and constants excluded.
/// The train dialect must be loaded (a pass using this declares it as a
/// dependent dialect).
llvm::DenseSet<mlir::Value> findValuesSavedForBackward(mlir::Block &forward);

class CostModel {
public:
  virtual ~CostModel();
  /// Records which values the backward reads (see findValuesSavedForBackward);
  /// until then activationBytes counts every float result.
  void setSavedValues(llvm::DenseSet<mlir::Value> values) {
    savedValues = std::move(values);
    haveSavedValues = true;
  }
  /// Work of `op` (an onnx op of the forward function).
  virtual OpWork getWork(mlir::Operation *op) const;
  /// With a measured profile: the op times asked so far that it answered,
  /// and those left to the roofline (for reports).
  virtual std::optional<std::pair<int64_t, int64_t>>
  getProfileCoverage() const {
    return std::nullopt;
  }
  /// Seconds of the forward / backward of `op` on `device`.
  virtual double getForwardTime(mlir::Operation *op,
                                const cluster::Device &device) const;
  virtual double getBackwardTime(mlir::Operation *op,
                                 const cluster::Device &device) const;
  /// Seconds of one optimizer update of `parameterBytes` of weights on
  /// `device`: memory-bound, it reads the weights and their gradient and
  /// writes the weights, and reads and writes `stateFactor` bytes of
  /// optimizer state per weight byte (the roofline of a train.sgd_step or
  /// train.adam_step of that size).
  virtual double getUpdateTime(int64_t parameterBytes, double stateFactor,
                               const cluster::Device &device) const;
  /// Optimizer-state bytes per parameter byte (SGD with momentum 1, Adam 2).
  double optimizerStateFactor = 0;

protected:
  llvm::DenseSet<mlir::Value> savedValues;
  bool haveSavedValues = false;
  /// Symbol tables of the modules queried, built on first use (a linear
  /// lookup per operand per query made planning quadratic in the globals).
  /// A cost model lives for one pass, which adds no globals while asking.
  mutable mlir::SymbolTableCollection symbolTables;
};

/// Roofline: max(FLOPs / peak, bytes / bandwidth) at the op's element type.
class AnalyticCostModel : public CostModel {};

/// Measured times override the analytic model: a JSON object
/// {"<device kind>": {"<op name>": {"forward_ms": .., "backward_ms": ..}}},
/// where the op name is its location name (the ONNX node name). The
/// optimizer's ops share one name; their entry's "parameter_bytes_per_ms"
/// (the bytes of weights they updated per ms) times each update by the
/// size of its weights rather than as the mean op.
class ProfiledCostModel : public CostModel {
public:
  static llvm::Expected<std::unique_ptr<ProfiledCostModel>>
  fromJSON(llvm::StringRef text, llvm::StringRef fileName);

  double getForwardTime(mlir::Operation *op,
                        const cluster::Device &device) const override;
  double getBackwardTime(mlir::Operation *op,
                         const cluster::Device &device) const override;
  double getUpdateTime(int64_t parameterBytes, double stateFactor,
                       const cluster::Device &device) const override;
  std::optional<std::pair<int64_t, int64_t>>
  getProfileCoverage() const override {
    return std::make_pair(hits, misses);
  }
  /// Ops the profile covered / missed so far (for the plan report).
  mutable int64_t hits = 0, misses = 0;

private:
  struct Times {
    double forward = -1, backward = -1;
    /// Update ops: weight bytes updated per second (0: not measured).
    double parameterBytesPerSecond = 0;
  };
  llvm::StringMap<llvm::StringMap<Times>> times_;
  /// Per device kind: the measured update rate, where the profile has one.
  llvm::StringMap<double> updateRates_;
  const Times *lookup(mlir::Operation *op, const cluster::Device &device) const;
};

/// The location name of an op (its ONNX node name), or "" when it has none.
std::string getOpName(mlir::Operation *op);

/// The roofline cost model, or, with a profile file, the measured times on
/// top of it; the error names the file and what is wrong with it.
llvm::Expected<std::unique_ptr<CostModel>>
createCostModel(llvm::StringRef profileFile);

/// "12.3 MB" (decimal megabytes, one decimal) for reports.
std::string formatMegabytes(uint64_t bytes);

} // namespace pp

#endif // PP_ANALYSIS_COSTMODEL_H
