//===- KernelParams.cpp - Kernel parameters from onnx op attributes ------===//
//
// Shared by the interpreter's handlers and the code generator, so both
// derive windows, axes and slices from an op the same way.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/Utils/KernelParams.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
namespace rt = pp::rt;

namespace pp::onnx {

/// The runtime dtype of an MLIR element type.
std::optional<rt::DType> getDType(Type elementType) {
  if (elementType.isF32())
    return rt::DType::F32;
  if (elementType.isF64())
    return rt::DType::F64;
  if (elementType.isF16())
    return rt::DType::F16;
  if (elementType.isBF16())
    return rt::DType::BF16;
  auto integer = dyn_cast<IntegerType>(elementType);
  if (!integer)
    return std::nullopt;
  switch (integer.getWidth()) {
  case 1:
    return rt::DType::Bool;
  case 8:
    return integer.isUnsigned() ? rt::DType::U8 : rt::DType::I8;
  case 16:
    return integer.isUnsigned() ? rt::DType::U16 : rt::DType::I16;
  case 32:
    return integer.isUnsigned() ? rt::DType::U32 : rt::DType::I32;
  case 64:
    return integer.isUnsigned() ? rt::DType::U64 : rt::DType::I64;
  default:
    return std::nullopt;
  }
}

/// A possibly negative axis normalised against `rank`.
FailureOr<int64_t> normalizeAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return op->emitError() << "axis " << axis << " is out of range for rank "
                           << rank;
  return axis < 0 ? axis + rank : axis;
}

/// Normalised, sorted, unique axes.
FailureOr<std::vector<int64_t>>
normalizeAxes(Operation *op, ArrayRef<int64_t> axes, int64_t rank) {
  std::vector<int64_t> result;
  for (int64_t axis : axes) {
    auto a = normalizeAxis(op, axis, rank);
    if (failed(a))
      return failure();
    result.push_back(*a);
  }
  llvm::sort(result);
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

/// Window geometry of a convolution or pooling op. SAME_* padding is
/// resolved from the (static) output size as ONNX specifies.
FailureOr<rt::WindowParams>
windowParams(Operation *op, ArrayRef<int64_t> xShape, ArrayRef<int64_t> yShape,
             ArrayRef<int64_t> kernel, StringRef autoPad,
             std::optional<ArrayRef<int64_t>> pads,
             std::optional<ArrayRef<int64_t>> strides,
             std::optional<ArrayRef<int64_t>> dilations) {
  size_t n = xShape.size() - 2;
  auto orDefault = [](std::optional<ArrayRef<int64_t>> v, size_t size,
                      int64_t fill) {
    if (v && !v->empty())
      return std::vector<int64_t>(v->begin(), v->end());
    return std::vector<int64_t>(size, fill);
  };
  rt::WindowParams p;
  p.kernel.assign(kernel.begin(), kernel.end());
  p.strides = orDefault(strides, n, 1);
  p.dilations = orDefault(dilations, n, 1);
  p.pads = orDefault(pads, 2 * n, 0);
  if (p.kernel.size() != n || p.strides.size() != n ||
      p.dilations.size() != n || p.pads.size() != 2 * n)
    return op->emitError() << "window attributes do not match the " << n
                           << " spatial dims";
  if (autoPad == "VALID") {
    std::fill(p.pads.begin(), p.pads.end(), 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t effective = p.dilations[i] * (p.kernel[i] - 1) + 1;
      int64_t total = std::max<int64_t>(0, (yShape[i + 2] - 1) * p.strides[i] +
                                               effective - xShape[i + 2]);
      // SAME_UPPER puts the odd pad at the end, SAME_LOWER at the start.
      int64_t small = total / 2, large = total - small;
      p.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      p.pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return op->emitError() << "unsupported auto_pad '" << autoPad << "'";
  }
  return p;
}

rt::WindowParams convTransposeParams(ConvTransposeOp op) {
  ConvTransposeGeometry g = op.getGeometry();
  rt::WindowParams p;
  p.kernel.assign(g.kernel.begin(), g.kernel.end());
  p.strides.assign(g.strides.begin(), g.strides.end());
  p.dilations.assign(g.dilations.begin(), g.dilations.end());
  p.pads.assign(g.pads.begin(), g.pads.end());
  p.group = static_cast<int64_t>(op.getGroup());
  return p;
}

LogicalResult padParams(Operation *op, ArrayRef<int64_t> xShape,
                        ArrayRef<int64_t> pads, ArrayRef<int64_t> axes,
                        std::vector<int64_t> &resolved,
                        std::vector<int64_t> &shape) {
  int64_t rank = xShape.size();
  std::vector<int64_t> all;
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      all.push_back(d);
  else
    all.assign(axes.begin(), axes.end());
  if (pads.size() != 2 * all.size())
    return op->emitError() << "Pad has " << pads.size() << " pads for "
                           << all.size() << " axes";
  resolved.assign(2 * rank, 0);
  for (size_t i = 0; i < all.size(); ++i) {
    auto axis = normalizeAxis(op, all[i], rank);
    if (failed(axis))
      return failure();
    resolved[*axis] = pads[i];
    resolved[*axis + rank] = pads[i + all.size()];
  }
  shape.assign(xShape.begin(), xShape.end());
  for (int64_t d = 0; d < rank; ++d) {
    shape[d] += resolved[d] + resolved[d + rank];
    if (shape[d] < 0)
      return op->emitError() << "Pad crops dim " << d << " below size 0";
  }
  return success();
}

LogicalResult sliceParams(Operation *op, ArrayRef<int64_t> xShape,
                          ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
                          ArrayRef<int64_t> axes, ArrayRef<int64_t> steps,
                          std::vector<int64_t> &first,
                          std::vector<int64_t> &step,
                          std::vector<int64_t> &shape) {
  int64_t rank = xShape.size();
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return op->emitError()
           << "Slice starts, ends, axes and steps differ in length";
  first.assign(rank, 0);
  step.assign(rank, 1);
  shape.assign(xShape.begin(), xShape.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalizeAxis(op, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = xShape[*axis], s = steps[i];
    if (s == 0)
      return op->emitError() << "Slice step must not be 0";
    // Clamp as ONNX does; ends may be INT64_MIN/MAX ("to the end").
    auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < -dim ? -1 : v + dim;
      return std::clamp(v, lo, hi);
    };
    int64_t begin, end;
    if (s > 0) {
      begin = clampIndex(starts[i], 0, dim);
      end = clampIndex(ends[i], 0, dim);
    } else {
      begin = clampIndex(starts[i], 0, dim - 1);
      end = clampIndex(ends[i], -1, dim - 1);
    }
    int64_t size =
        s > 0 ? (end - begin + s - 1) / s : (begin - end + (-s) - 1) / (-s);
    first[*axis] = begin;
    step[*axis] = s;
    shape[*axis] = std::max<int64_t>(size, 0);
  }
  return success();
}

int64_t indexBound(Value arg) {
  int64_t bound = 0;
  auto tighten = [&](int64_t dim) {
    if (dim > 0)
      bound = bound ? std::min(bound, dim) : dim;
  };
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto gather = dyn_cast<GatherOp>(user)) {
      if (use.getOperandNumber() != 1)
        continue;
      auto type = gather.getData().getType();
      int64_t axis = static_cast<int64_t>(gather.getAxis());
      if (axis < 0)
        axis += type.getRank();
      if (axis >= 0 && axis < type.getRank())
        tighten(type.getDimSize(axis));
    } else if (auto loss = dyn_cast<SoftmaxCrossEntropyLossOp>(user)) {
      if (use.getOperandNumber() == 1)
        tighten(loss.getScores().getType().getDimSize(1));
    }
  }
  return bound;
}

} // namespace pp::onnx
