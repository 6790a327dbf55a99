//===- Common.h - Shared helpers of the CPU kernels -------------*- C++ -*-===//
#ifndef PP_RUNTIME_CPU_COMMON_H
#define PP_RUNTIME_CPU_COMMON_H

#include "pp/Runtime/Kernels.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pp::rt::cpu {

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

/// numpy broadcast of two shapes; false when incompatible.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out);

/// Strides to read a tensor of `shape` as if broadcast to `target` (0 on
/// broadcast dims). Requires shape to broadcast to target.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target);

/// "shape [2, 3]" for messages.
std::string shapeString(const std::vector<int64_t> &shape);

/// Runs body(begin, end) over [0, n) split across ctx.numThreads threads
/// (inline when small or single-threaded).
void parallelFor(const Context &ctx, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

/// Checks that `t` has `dtype` and a non-null buffer when non-empty.
Status expectDType(const Tensor &t, DType dtype, const char *what);
Status expectShape(const Tensor &t, const std::vector<int64_t> &shape,
                   const char *what);

/// Reads element i of an integer tensor (I64, I32, I8, U8, Bool) as int64.
int64_t readInt(const Tensor &t, int64_t i);
/// Reads element i of any tensor as double.
double readDouble(const Tensor &t, int64_t i);
/// Writes element i of any tensor from double (truncating for integers).
void writeDouble(Tensor &t, int64_t i, double value);

} // namespace pp::rt::cpu

/// Calls `BODY` with `T` bound to the C++ type of a floating dtype, or
/// returns an error for other dtypes.
#define PP_RT_FLOAT_DISPATCH(DTYPE, WHAT, BODY)                                \
  do {                                                                         \
    switch (DTYPE) {                                                           \
    case ::pp::rt::DType::F32: {                                               \
      using T = float;                                                         \
      BODY;                                                                    \
      break;                                                                   \
    }                                                                          \
    case ::pp::rt::DType::F64: {                                               \
      using T = double;                                                        \
      BODY;                                                                    \
      break;                                                                   \
    }                                                                          \
    default:                                                                   \
      return ::pp::rt::Status::error(std::string(WHAT) +                       \
                                     ": unsupported dtype " +                  \
                                     ::pp::rt::dtypeName(DTYPE));              \
    }                                                                          \
  } while (false)

#endif // PP_RUNTIME_CPU_COMMON_H
