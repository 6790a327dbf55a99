//===- Common.h - Shared helpers of the CPU kernels -------------*- C++ -*-===//
#ifndef PP_RUNTIME_CPU_COMMON_H
#define PP_RUNTIME_CPU_COMMON_H

#include "common/Checks.h"
#include "common/KernelMath.h"
#include "pp/Runtime/Half.h"
#include "pp/Runtime/Kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace pp::rt::cpu {

// The checks and shape helpers shared with the CUDA backend.
using namespace ::pp::rt::common;

/// Runs body(begin, end) over [0, n) split across ctx.numThreads threads
/// (inline when small or single-threaded).
void parallelFor(const Context &ctx, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

/// Reads element i of any tensor as int64 (floats truncate toward zero; U64
/// beyond INT64_MAX wraps).
int64_t readInt(const Tensor &t, int64_t i);
/// Reads element i of any tensor as double.
double readDouble(const Tensor &t, int64_t i);
/// Writes element i of any tensor from double (truncating for integers,
/// rounding to nearest even for F16/BF16).
void writeDouble(Tensor &t, int64_t i, double value);

/// The value of 16-bit float bits of dtype F16 (else BF16), exactly.
inline float float16ToFloat(uint16_t bits, bool isBF16) {
  return isBF16 ? bfloat16ToFloat(bits) : halfToFloat(bits);
}
/// `value` rounded to F16 (else BF16) bits, to nearest even.
inline uint16_t doubleToFloat16(double value, bool isBF16) {
  return isBF16 ? doubleToBFloat16(value) : doubleToHalf(value);
}

/// Calls fn(TypeTag<T>{}) with T the storage type of `dtype` and returns its
/// Status. Bool is stored as uint8_t, so kernels that care about truthiness
/// must check `dtype == DType::Bool` themselves. The 16-bit floats have no
/// arithmetic type: they are an error here (arithmetic kernels widen them to
/// f32 first, see Float16Widening; cast and fill handle them before
/// dispatching).
template <typename Fn> Status visitDType(DType dtype, Fn &&fn) {
  return visitCommonDType(dtype, fn, [&](DType other) -> Status {
    switch (other) {
    case DType::U32:
      return fn(TypeTag<uint32_t>{});
    case DType::U64:
      return fn(TypeTag<uint64_t>{});
    case DType::I16:
      return fn(TypeTag<int16_t>{});
    case DType::U16:
      return fn(TypeTag<uint16_t>{});
    default:
      return Status::error(std::string("unsupported dtype ") +
                           dtypeName(other) +
                           " (16-bit floats have no arithmetic type here)");
    }
  });
}

//===----------------------------------------------------------------------===//
// 16-bit floats computed through f32
//===----------------------------------------------------------------------===//

/// Runs an arithmetic kernel on F16 / BF16 tensors through its f32 code:
///
///   if (anyFloat16(x, y)) {
///     Float16Widening w(ctx);
///     return w.finish(unary(ctx, kind, w.in(x), w.out(y), alpha, beta));
///   }
///
/// in() widens a 16-bit float tensor to an f32 temporary (exact), out()
/// gives an f32 temporary that finish() rounds once (to nearest even) into
/// the original tensor when the kernel succeeded, inout() does both. Every
/// other tensor (F32, F64, Bool masks, I64 indices and labels), a null
/// pointer, and a tensor that the kernel's checks must reject (negative
/// dims, null data) pass through as they are, but the latter with dtype F32
/// so the f32 kernel reports them. Outputs are written only by finish(), so
/// an output may alias an input. The temporaries live as long as the object.
class Float16Widening {
public:
  explicit Float16Widening(const Context &ctx) : ctx(ctx) {}
  Float16Widening(const Float16Widening &) = delete;
  Float16Widening &operator=(const Float16Widening &) = delete;

  const Tensor &in(const Tensor &t) {
    return isFloat16(t.dtype) ? widen(t, true, false) : t;
  }
  const Tensor *in(const Tensor *t) { return t ? &in(*t) : nullptr; }
  Tensor &out(Tensor &t) {
    return isFloat16(t.dtype) ? widen(t, false, true) : t;
  }
  Tensor *out(Tensor *t) { return t ? &out(*t) : nullptr; }
  Tensor &inout(Tensor &t) {
    return isFloat16(t.dtype) ? widen(t, true, true) : t;
  }
  Tensor *inout(Tensor *t) { return t ? &inout(*t) : nullptr; }

  /// Narrows the outputs when `status` is ok; returns `status`.
  Status finish(Status status);

private:
  struct Slot {
    Tensor wide;
    Tensor narrow; // the original of an output (data null: none)
    std::unique_ptr<float[]> buffer;
  };
  Tensor &widen(const Tensor &t, bool read, bool write);

  const Context &ctx;
  std::deque<Slot> slots; // stable addresses for the returned references
};

/// Walks the flat indices [begin, end) of a row-major index space `shape`
/// a run of the innermost dim at a time: calls row(i, count, offsets) for
/// indices [i, i + count), where offsets[k] is the element offset of index i
/// in operand k read through strides[k] (0 on broadcast dims); the caller
/// steps operand k by strides[k].back() within the run. An odometer carries
/// into the outer dims.
template <size_t N, typename Row>
void forEachStridedRow(const std::vector<int64_t> &shape,
                       const std::array<std::vector<int64_t>, N> &strides,
                       int64_t begin, int64_t end, Row &&row) {
  if (begin >= end)
    return;
  std::array<int64_t, N> off{};
  int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) {
    row(begin, int64_t(1), off);
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  int64_t rem = begin;
  for (int64_t d = rank - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (size_t k = 0; k < N; ++k)
      off[k] += idx[d] * strides[k][d];
  }
  int64_t inner = shape[rank - 1];
  int64_t i = begin;
  while (true) {
    int64_t count = std::min(inner - idx[rank - 1], end - i);
    row(i, count, off);
    i += count;
    if (i >= end)
      return;
    // The innermost dim is exhausted: rewind it and carry.
    for (size_t k = 0; k < N; ++k)
      off[k] -= strides[k][rank - 1] * idx[rank - 1];
    idx[rank - 1] = 0;
    for (int64_t d = rank - 2; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k)
        off[k] += strides[k][d];
      if (idx[d] < shape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

/// Walks the flat indices [begin, end) of a row-major index space `shape`
/// and calls body(i, offsets), where offsets[k] is the element offset of
/// operand k read through strides[k] (0 on broadcast dims). The innermost
/// dim runs as a tight loop.
template <size_t N, typename Fn>
void forEachStrided(const std::vector<int64_t> &shape,
                    const std::array<std::vector<int64_t>, N> &strides,
                    int64_t begin, int64_t end, Fn &&body) {
  std::array<int64_t, N> innerStride{};
  if (!shape.empty())
    for (size_t k = 0; k < N; ++k)
      innerStride[k] = strides[k].back();
  forEachStridedRow(shape, strides, begin, end,
                    [&](int64_t i, int64_t count, std::array<int64_t, N> off) {
                      for (int64_t j = 0; j < count; ++j) {
                        body(i + j, off);
                        for (size_t k = 0; k < N; ++k)
                          off[k] += innerStride[k];
                      }
                    });
}

/// py[i] = px[offset of i] over [begin, end) of the strided walk (one
/// operand): a contiguous run is one memcpy, a broadcast run one fill.
template <typename T>
void gatherStrided(const std::vector<int64_t> &shape,
                   const std::array<std::vector<int64_t>, 1> &strides,
                   const T *px, T *py, int64_t begin, int64_t end) {
  int64_t step = shape.empty() ? 0 : strides[0].back();
  forEachStridedRow(
      shape, strides, begin, end,
      [&](int64_t i, int64_t count, const std::array<int64_t, 1> &o) {
        const T *src = px + o[0];
        if (step == 1)
          std::memcpy(py + i, src, count * sizeof(T));
        else if (step == 0)
          std::fill(py + i, py + i + count, *src);
        else
          for (int64_t j = 0; j < count; ++j)
            py[i + j] = src[j * step];
      });
}

/// px[offset of i] = py[i] over [begin, end) of the strided walk: the
/// adjoint copy of gatherStrided for walks whose offsets are distinct.
template <typename T>
void scatterStrided(const std::vector<int64_t> &shape,
                    const std::array<std::vector<int64_t>, 1> &strides,
                    const T *py, T *px, int64_t begin, int64_t end) {
  int64_t step = shape.empty() ? 0 : strides[0].back();
  forEachStridedRow(
      shape, strides, begin, end,
      [&](int64_t i, int64_t count, const std::array<int64_t, 1> &o) {
        T *dst = px + o[0];
        if (step == 1)
          std::memcpy(dst, py + i, count * sizeof(T));
        else
          for (int64_t j = 0; j < count; ++j)
            dst[j * step] = py[i + j];
      });
}

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
