//===- Composite.cpp - Kernels built from other kernels ---------*- C++ -*-===//
//
// Kernels whose work is another kernel of the same library, so one host-side
// definition serves the CPU and the CUDA backend (this file is compiled into
// each).
//
//===----------------------------------------------------------------------===//

#include "common/Checks.h"

namespace pp::rt {

using namespace common;

Status reduceSumTo(Context &ctx, const Tensor &x, Tensor &y) {
  PP_RT_TRY(expectValid(x, "reduceSumTo x"));
  PP_RT_TRY(expectDType(y, x.dtype, "reduceSumTo y"));
  PP_RT_TRY(expectValid(y, "reduceSumTo y"));
  if (!broadcastsTo(y.shape, x.shape))
    return Status::error("reduceSumTo: y's shape " + shapeString(y.shape) +
                         " does not broadcast to x's shape " +
                         shapeString(x.shape));
  // Sum over the dims broadcasting added (leading) or stretched (y has 1),
  // then view y as x's rank with those dims kept as 1: the same layout.
  size_t lead = x.shape.size() - y.shape.size();
  std::vector<int64_t> axes;
  std::vector<int64_t> keptShape = x.shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (d < lead || (y.shape[d - lead] == 1 && x.shape[d] != 1)) {
      axes.push_back(static_cast<int64_t>(d));
      keptShape[d] = 1;
    }
  }
  Tensor view = y;
  view.shape = keptShape;
  return reduce(ctx, ReduceKind::Sum, x, axes, view);
}

Status convTranspose(Context &ctx, const Tensor &x, const Tensor &w,
                     const Tensor *b, const WindowParams &params, Tensor &y) {
  PP_RT_TRY(convGradInput(ctx, x, w, params, y));
  if (!b)
    return Status::success();
  PP_RT_TRY(expectDType(*b, y.dtype, "convTranspose b"));
  if (b->rank() != 1 || y.rank() < 2 || b->shape[0] != y.shape[1])
    return Status::error("convTranspose: b's shape " + shapeString(b->shape) +
                         " is not [M] of y's shape " + shapeString(y.shape));
  // b as [M, 1, ...] broadcasts over y's batch and spatial dims.
  Tensor perChannel = *b;
  perChannel.shape.assign(y.rank() - 1, 1);
  perChannel.shape[0] = b->shape[0];
  return binary(ctx, BinaryKind::Add, y, perChannel, y);
}

namespace common {

Status applyActivation(Context &ctx, UnaryKind activation, Tensor &y) {
  if (activation == UnaryKind::Identity)
    return Status::success();
  return unary(ctx, activation, y, y);
}

} // namespace common

} // namespace pp::rt
