//===- Recurrent.h - ONNX RNN, GRU and LSTM unrolled ------------*- C++ -*-===//
//
// The importer's decomposition of the recurrent ops over their static
// sequence length: the input projection of every step is one Gemm, then each
// step (forward, reverse or both) is a Gemm by the recurrence weights, the
// gate activations and the state update, so training differentiates through
// time with the ops' own gradients.
//
//===----------------------------------------------------------------------===//

#ifndef PP_LIB_IMPORT_ONNX_RECURRENT_H
#define PP_LIB_IMPORT_ONNX_RECURRENT_H

#include "mlir/IR/Builders.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pp::onnx {

/// The attributes of RNN, GRU and LSTM.
struct RecurrentAttrs {
  std::vector<std::string> activations;
  bool hasActivationParams = false; // activation_alpha / activation_beta
  bool hasClip = false;
  std::string direction = "forward";
  std::optional<int64_t> hiddenSize;
  int64_t inputForget = 0;
  int64_t layout = 0;
  int64_t linearBeforeReset = 0;
};

/// Whether `opType` is RNN, GRU or LSTM.
bool isRecurrentOp(llvm::StringRef opType);

/// The results (Y, Y_h and, for LSTM, Y_c) of the recurrent op `opType` over
/// `operands` (null for absent optional inputs), built with onnx ops folded
/// by `fold`. Fails with `error` set for what it does not support (clip,
/// input_forget, activations other than Sigmoid, Tanh and Relu, a
/// sequence_lens shorter than the sequence) or operands that do not fit.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildRecurrent(mlir::OpBuilder &builder, mlir::Location loc,
               llvm::StringRef opType, llvm::ArrayRef<mlir::Value> operands,
               const RecurrentAttrs &attrs,
               const std::function<mlir::Value(mlir::Operation *)> &fold,
               std::string &error);

} // namespace pp::onnx

#endif // PP_LIB_IMPORT_ONNX_RECURRENT_H
