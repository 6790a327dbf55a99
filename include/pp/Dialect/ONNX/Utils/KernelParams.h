//===- KernelParams.h - Kernel parameters from onnx op attributes -*- C++ -*-//
//
// How an onnx op's attributes (and constant shape operands) become the
// arguments of the runtime kernels. The interpreter and the code generator
// both call these, so they cannot disagree on a window or a slice.
//
//===----------------------------------------------------------------------===//
#ifndef PP_DIALECT_ONNX_UTILS_KERNELPARAMS_H
#define PP_DIALECT_ONNX_UTILS_KERNELPARAMS_H

#include "pp/Runtime/Kernels.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <vector>

namespace pp::onnx {

class ConvTransposeOp;

/// The runtime dtype of an MLIR element type (f32, f64, f16, bf16; i1 ->
/// Bool; ui8, ui32, ui64 -> U8, U32, U64; other i8, i32, i64 -> I8, I32,
/// I64); nullopt for types the kernels do not support.
std::optional<rt::DType> getDType(mlir::Type elementType);

/// A possibly negative axis normalised against `rank`.
mlir::FailureOr<int64_t> normalizeAxis(mlir::Operation *op, int64_t axis,
                                       int64_t rank);
/// Normalised, sorted, unique axes.
mlir::FailureOr<std::vector<int64_t>>
normalizeAxes(mlir::Operation *op, llvm::ArrayRef<int64_t> axes, int64_t rank);

/// Window geometry of a convolution or pooling op. SAME_* padding is
/// resolved from the (static) output size as ONNX specifies.
mlir::FailureOr<rt::WindowParams>
windowParams(mlir::Operation *op, llvm::ArrayRef<int64_t> xShape,
             llvm::ArrayRef<int64_t> yShape, llvm::ArrayRef<int64_t> kernel,
             llvm::StringRef autoPad,
             std::optional<llvm::ArrayRef<int64_t>> pads,
             std::optional<llvm::ArrayRef<int64_t>> strides,
             std::optional<llvm::ArrayRef<int64_t>> dilations);

/// ConvTranspose's window (explicit pads, its group) for rt::convTranspose.
rt::WindowParams convTransposeParams(ConvTransposeOp op);

/// ONNX Slice: per dim of x, the first index, the step and the result size,
/// after clamping as ONNX specifies.
mlir::LogicalResult
sliceParams(mlir::Operation *op, llvm::ArrayRef<int64_t> xShape,
            llvm::ArrayRef<int64_t> starts, llvm::ArrayRef<int64_t> ends,
            llvm::ArrayRef<int64_t> axes, llvm::ArrayRef<int64_t> steps,
            std::vector<int64_t> &first, std::vector<int64_t> &step,
            std::vector<int64_t> &shape);

/// ONNX Pad: the begin then end counts of every dim of x from the pads of
/// `axes` (every dim when empty), and the result shape.
mlir::LogicalResult
padParams(mlir::Operation *op, llvm::ArrayRef<int64_t> xShape,
          llvm::ArrayRef<int64_t> pads, llvm::ArrayRef<int64_t> axes,
          std::vector<int64_t> &resolved, std::vector<int64_t> &shape);

/// The smallest size of a dim that the integer value `arg` indexes (Gather
/// indices, loss labels); 0 when it indexes none. Random inputs draw below
/// it, so they are valid indices.
int64_t indexBound(mlir::Value arg);

} // namespace pp::onnx

#endif // PP_DIALECT_ONNX_UTILS_KERNELPARAMS_H
