//===- Movement.cpp - Data movement CPU kernels -----------------*- C++ -*-===//
//
// Transpose, slice and its adjoint, pad and its adjoint, concat, split, gather
// and its adjoint, and copy. Kernels that only move elements work on any dtype
// through an unsigned type of the element's size.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include <cstring>

namespace pp::rt {

using namespace cpu;

namespace {

/// Elements per thread below which a loop is not worth splitting.
constexpr int64_t kGrain = 1 << 14;

/// Validates gather's indices against an axis of `size` and returns them
/// normalised to [0, size).
Status normalizeIndices(const char *what, const Tensor &indices, int64_t size,
                        std::vector<int64_t> &out) {
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return Status::error(std::string(what) +
                         ": indices: expected dtype i64 or i32, got " +
                         dtypeName(indices.dtype));
  if (Status s = expectValid(indices, what); !s.ok())
    return s;
  out.resize(indices.numel());
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t idx = readInt(indices, i);
    int64_t norm = idx < 0 ? idx + size : idx;
    if (norm < 0 || norm >= size)
      return Status::error(std::string(what) + ": index " +
                           std::to_string(idx) + " at position " +
                           std::to_string(i) + " is out of range for size " +
                           std::to_string(size));
    out[i] = norm;
  }
  return Status::success();
}

/// Common checks of gather and gatherGrad: `full` is data (or ddata) and
/// `part` is y (or dy).
Status gatherCheck(const char *what, const Tensor &full, const Tensor &part,
                   const Tensor &indices, int64_t &axis,
                   std::vector<int64_t> &idx) {
  PP_RT_TRY(checkGatherShapes(what, full, part, indices, axis));
  return normalizeIndices(what, indices, full.shape[axis], idx);
}

/// Transposes in kTile x kTile tiles over dims p (x-contiguous) and the last
/// dim q of y; the other dims are walked one tile row at a time. `xs` are
/// x's strides in y's (coalesced) dim order.
template <typename T>
void transposeTiled(const Context &ctx, const T *px, T *py,
                    const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &xs, int64_t p) {
  constexpr int64_t kTile = 32;
  int64_t q = static_cast<int64_t>(shape.size()) - 1;
  std::vector<int64_t> ys = stridesOf(shape);
  std::vector<int64_t> otherShape;
  std::array<std::vector<int64_t>, 2> otherStrides;
  for (int64_t d = 0; d < q; ++d) {
    if (d == p)
      continue;
    otherShape.push_back(shape[d]);
    otherStrides[0].push_back(xs[d]);
    otherStrides[1].push_back(ys[d]);
  }
  int64_t others = product(otherShape, 0, otherShape.size());
  int64_t pTiles = (shape[p] + kTile - 1) / kTile;
  int64_t rowWork = kTile * shape[q];
  parallelFor(
      ctx, others * pTiles, std::max<int64_t>(1, kGrain / rowWork),
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          int64_t o = t / pTiles, i0 = (t % pTiles) * kTile;
          int64_t i1 = std::min(shape[p], i0 + kTile);
          std::array<int64_t, 2> base{};
          forEachStrided(
              otherShape, otherStrides, o, o + 1,
              [&](int64_t, const std::array<int64_t, 2> &off) { base = off; });
          const T *src = px + base[0];
          T *dst = py + base[1];
          for (int64_t j0 = 0; j0 < shape[q]; j0 += kTile) {
            int64_t j1 = std::min(shape[q], j0 + kTile);
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t j = j0; j < j1; ++j)
                dst[i * ys[p] + j] = src[i + j * xs[q]];
          }
        }
      });
}

} // namespace

Status transpose(Context &ctx, const Tensor &x,
                 const std::vector<int64_t> &perm, Tensor &y) {
  StridedView view;
  PP_RT_TRY(checkTranspose(x, perm, y, view));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  std::vector<int64_t> &shape = view.shape;
  std::array<std::vector<int64_t>, 1> &strides = view.strides;
  coalesceDims(shape, strides);
  // When y's innermost dim is strided in x, a flat walk misses the cache on
  // every read: copy square tiles of (x's contiguous dim, y's last dim).
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t contiguous = -1;
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (strides[0][d] == 1)
      contiguous = d;
  bool tiled = rank >= 2 && strides[0][rank - 1] != 1 && contiguous >= 0;
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<const T>();
    T *py = y.as<T>();
    if (tiled) {
      transposeTiled(ctx, px, py, shape, strides[0], contiguous);
      return Status::success();
    }
    parallelFor(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      gatherStrided(shape, strides, px, py, begin, end);
    });
    return Status::success();
  });
}

Status slice(Context &ctx, const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, Tensor &y) {
  StridedView view;
  PP_RT_TRY(checkSlice(x, starts, steps, y, view));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  std::vector<int64_t> &shape = view.shape;
  std::array<std::vector<int64_t>, 1> &strides = view.strides;
  coalesceDims(shape, strides);
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<const T>() + view.base;
    T *py = y.as<T>();
    parallelFor(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      gatherStrided(shape, strides, px, py, begin, end);
    });
    return Status::success();
  });
}

Status sliceGrad(Context &ctx, const Tensor &dy,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, Tensor &dx) {
  StridedView view;
  PP_RT_TRY(checkSliceGrad(dy, starts, steps, dx, view));
  if (dx.numel() > 0)
    std::memset(dx.data, 0, dx.bytes());
  int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  std::vector<int64_t> &shape = view.shape;
  std::array<std::vector<int64_t>, 1> &strides = view.strides;
  coalesceDims(shape, strides);
  // Non-zero steps make the positions distinct: plain stores, no races.
  return visitElementBytes(dtypeSize(dy.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pdy = dy.as<const T>();
    T *pdx = dx.as<T>() + view.base;
    parallelFor(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      scatterStrided(shape, strides, pdy, pdx, begin, end);
    });
    return Status::success();
  });
}

Status concat(Context &ctx, const std::vector<const Tensor *> &inputs,
              int64_t axis, Tensor &y) {
  int64_t a = 0;
  PP_RT_TRY(checkConcat(inputs, axis, y, a));
  // Each outer row of y is the inputs' rows laid side by side.
  int64_t outer = product(y.shape, 0, a);
  int64_t innerBytes =
      product(y.shape, a + 1, y.shape.size()) * dtypeSize(y.dtype);
  int64_t yRow = y.shape[a] * innerBytes;
  if (y.numel() == 0)
    return Status::success();
  auto *py = static_cast<char *>(y.data);
  parallelFor(ctx, outer, std::max<int64_t>(1, kGrain * 4 / yRow),
              [&](int64_t begin, int64_t end) {
                for (int64_t o = begin; o < end; ++o) {
                  char *dst = py + o * yRow;
                  for (const Tensor *in : inputs) {
                    int64_t row = in->shape[a] * innerBytes;
                    if (row)
                      std::memcpy(dst,
                                  static_cast<const char *>(in->data) + o * row,
                                  row);
                    dst += row;
                  }
                }
              });
  return Status::success();
}

Status split(Context &ctx, const Tensor &x, int64_t axis,
             const std::vector<Tensor *> &outputs) {
  int64_t a = 0;
  PP_RT_TRY(checkSplit(x, axis, outputs, a));
  int64_t outer = product(x.shape, 0, a);
  int64_t innerBytes =
      product(x.shape, a + 1, x.shape.size()) * dtypeSize(x.dtype);
  int64_t xRow = x.shape[a] * innerBytes;
  if (x.numel() == 0)
    return Status::success();
  const auto *px = static_cast<const char *>(x.data);
  parallelFor(ctx, outer, std::max<int64_t>(1, kGrain * 4 / xRow),
              [&](int64_t begin, int64_t end) {
                for (int64_t o = begin; o < end; ++o) {
                  const char *src = px + o * xRow;
                  for (Tensor *out : outputs) {
                    int64_t row = out->shape[a] * innerBytes;
                    if (row)
                      std::memcpy(static_cast<char *>(out->data) + o * row, src,
                                  row);
                    src += row;
                  }
                }
              });
  return Status::success();
}

Status gather(Context &ctx, const Tensor &data, const Tensor &indices,
              int64_t axis, Tensor &y) {
  std::vector<int64_t> idx;
  int64_t a = axis;
  if (Status s = gatherCheck("gather", data, y, indices, a, idx); !s.ok())
    return s;
  if (y.numel() == 0)
    return Status::success();
  int64_t outer = product(data.shape, 0, a);
  int64_t size = data.shape[a];
  int64_t count = static_cast<int64_t>(idx.size());
  int64_t rowBytes =
      product(data.shape, a + 1, data.shape.size()) * dtypeSize(data.dtype);
  const auto *pd = static_cast<const char *>(data.data);
  auto *py = static_cast<char *>(y.data);
  // One task per (outer, index) row of y.
  parallelFor(ctx, outer * count, std::max<int64_t>(1, kGrain * 4 / rowBytes),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r) {
                  int64_t o = r / count, j = r % count;
                  std::memcpy(py + r * rowBytes,
                              pd + (o * size + idx[j]) * rowBytes, rowBytes);
                }
              });
  return Status::success();
}

/// One element of a ScatterND reduction (integers wrap, as Add does).
template <typename T> T scatterCombine(ScatterReduction reduction, T x, T u) {
  switch (reduction) {
  case ScatterReduction::Add:
    if constexpr (std::is_integral_v<T>)
      return wrapAdd(x, u);
    return x + u;
  case ScatterReduction::Mul:
    if constexpr (std::is_integral_v<T>)
      return wrapMul(x, u);
    return x * u;
  case ScatterReduction::Max:
    return x < u ? u : x;
  case ScatterReduction::Min:
    return u < x ? u : x;
  case ScatterReduction::None:
    break;
  }
  return u;
}

Status scatterND(Context &ctx, const Tensor &data, const Tensor &indices,
                 const Tensor &updates, ScatterReduction reduction, Tensor &y) {
  int64_t tuples = 0, k = 0, slice = 0;
  PP_RT_TRY(
      checkScatterND(data, indices, updates, reduction, y, tuples, k, slice));
  std::vector<int64_t> values(static_cast<size_t>(indices.numel())), offsets;
  for (int64_t i = 0; i < indices.numel(); ++i)
    values[i] = readInt(indices, i);
  PP_RT_TRY(scatterNDOffsets(data.shape, values, k, slice, offsets));
  if (reduction != ScatterReduction::None && isFloat16(data.dtype)) {
    Float16Widening w(ctx);
    return w.finish(scatterND(ctx, w.in(data), indices, w.in(updates),
                              reduction, w.out(y)));
  }
  size_t bytes = static_cast<size_t>(dtypeSize(data.dtype));
  if (y.data != data.data && data.numel() > 0)
    std::memcpy(y.data, data.data, static_cast<size_t>(data.numel()) * bytes);
  if (reduction == ScatterReduction::None) {
    // Tuple after tuple: a repeated index keeps the last update.
    for (int64_t n = 0; n < tuples; ++n)
      std::memcpy(static_cast<char *>(y.data) + offsets[n] * bytes,
                  static_cast<const char *>(updates.data) + n * slice * bytes,
                  static_cast<size_t>(slice) * bytes);
    return Status::success();
  }
  return visitDType(data.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *py = y.as<T>();
    const T *pu = updates.as<const T>();
    // Threads split a slice's columns, never the tuples (a repeated index
    // combines in order).
    parallelFor(ctx, slice,
                std::max<int64_t>(1, kGrain / std::max<int64_t>(1, tuples)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t n = 0; n < tuples; ++n)
                    for (int64_t s = begin; s < end; ++s)
                      py[offsets[n] + s] = scatterCombine(
                          reduction, py[offsets[n] + s], pu[n * slice + s]);
                });
    return Status::success();
  });
}

Status gatherGrad(Context &ctx, const Tensor &dy, const Tensor &indices,
                  int64_t axis, Tensor &ddata) {
  // F16 / BF16: repeated indices accumulate in f32, rounded once.
  if (anyFloat16(dy, ddata)) {
    PP_RT_TRY(expectSameDType("gatherGrad", {&ddata, &dy}));
    Float16Widening w(ctx);
    return w.finish(gatherGrad(ctx, w.in(dy), indices, axis, w.out(ddata)));
  }
  std::vector<int64_t> idx;
  int64_t a = axis;
  if (Status s = gatherCheck("gatherGrad", ddata, dy, indices, a, idx); !s.ok())
    return s;
  int64_t outer = product(ddata.shape, 0, a);
  int64_t size = ddata.shape[a];
  int64_t count = static_cast<int64_t>(idx.size());
  int64_t inner = product(ddata.shape, a + 1, ddata.shape.size());
  PP_RT_FLOAT_DISPATCH(ddata.dtype, "gatherGrad", {
    T *pdd = ddata.as<T>();
    const T *pdy = dy.as<const T>();
    std::fill(pdd, pdd + ddata.numel(), T(0));
    // Repeated indices accumulate into one row, so threads split either the
    // outer rows or the columns, never the indices.
    auto body = [&](int64_t o0, int64_t o1, int64_t c0, int64_t c1) {
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t j = 0; j < count; ++j) {
          T *dst = pdd + (o * size + idx[j]) * inner;
          const T *src = pdy + (o * count + j) * inner;
          for (int64_t c = c0; c < c1; ++c)
            dst[c] += src[c];
        }
    };
    int64_t work = std::max<int64_t>(1, count * inner);
    if (outer >= inner)
      parallelFor(ctx, outer, std::max<int64_t>(1, kGrain / work),
                  [&](int64_t b, int64_t e) { body(b, e, 0, inner); });
    else
      parallelFor(
          ctx, inner,
          std::max<int64_t>(1, kGrain / std::max<int64_t>(1, outer * count)),
          [&](int64_t b, int64_t e) { body(0, outer, b, e); });
  });
  return Status::success();
}

namespace {

/// Per dim of a padded tensor, the source index in x of every output index
/// (-1 for the constant).
std::vector<std::vector<int64_t>> padSources(const std::vector<int64_t> &x,
                                             const std::vector<int64_t> &y,
                                             const std::vector<int64_t> &pads,
                                             PadMode mode) {
  size_t rank = x.size();
  std::vector<std::vector<int64_t>> sources(rank);
  for (size_t d = 0; d < rank; ++d)
    for (int64_t o = 0; o < y[d]; ++o)
      sources[d].push_back(padSource(o, pads[d], x[d], mode));
  return sources;
}

/// Calls body(yRow, xRow) for each row (all dims but the last) of y, with
/// xRow the offset of x's row it reads or -1 for a constant row.
template <typename Fn>
void forEachPadRow(const std::vector<int64_t> &yShape,
                   const std::vector<int64_t> &xShape,
                   const std::vector<std::vector<int64_t>> &sources,
                   int64_t beginRow, int64_t endRow, Fn &&body) {
  int64_t rank = static_cast<int64_t>(yShape.size());
  std::vector<int64_t> xStrides = stridesOf(xShape);
  for (int64_t row = beginRow; row < endRow; ++row) {
    int64_t rem = row, xRow = 0;
    for (int64_t d = rank - 2; d >= 0; --d) {
      int64_t o = rem % yShape[d];
      rem /= yShape[d];
      int64_t s = sources[d][o];
      if (s < 0 || xRow < 0)
        xRow = -1;
      else
        xRow += s * xStrides[d];
    }
    body(row, xRow);
  }
}

} // namespace

Status pad(Context &ctx, const Tensor &x, const std::vector<int64_t> &pads,
           PadMode mode, double value, Tensor &y) {
  PP_RT_TRY(checkPad("pad", x, y, pads, mode));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  if (y.rank() == 0)
    return copy(ctx, x, y);
  // The constant as one element of y's dtype.
  uint64_t fillBits = 0;
  Tensor one{&fillBits, y.dtype, {1}};
  writeDouble(one, 0, value);
  auto sources = padSources(x.shape, y.shape, pads, mode);
  int64_t inner = y.shape.back();
  const std::vector<int64_t> &innerSources = sources.back();
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<const T>();
    T *py = y.as<T>();
    T fill;
    std::memcpy(&fill, &fillBits, sizeof(T));
    int64_t rows = n / inner;
    parallelFor(ctx, rows, std::max<int64_t>(1, kGrain / inner),
                [&](int64_t begin, int64_t end) {
                  forEachPadRow(y.shape, x.shape, sources, begin, end,
                                [&](int64_t row, int64_t xRow) {
                                  T *out = py + row * inner;
                                  if (xRow < 0) {
                                    std::fill(out, out + inner, fill);
                                    return;
                                  }
                                  for (int64_t o = 0; o < inner; ++o) {
                                    int64_t s = innerSources[o];
                                    out[o] = s < 0 ? fill : px[xRow + s];
                                  }
                                });
                });
    return Status::success();
  });
}

Status padGrad(Context &ctx, const Tensor &dy, const std::vector<int64_t> &pads,
               PadMode mode, Tensor &dx) {
  // F16 / BF16: shared sources accumulate in f32, rounded once.
  if (anyFloat16(dy, dx)) {
    PP_RT_TRY(expectSameDType("padGrad", {&dx, &dy}));
    Float16Widening w(ctx);
    return w.finish(padGrad(ctx, w.in(dy), pads, mode, w.out(dx)));
  }
  PP_RT_TRY(checkPad("padGrad", dx, dy, pads, mode));
  if (dx.numel() > 0)
    std::memset(dx.data, 0, dx.bytes());
  int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  if (dy.rank() == 0)
    return copy(ctx, dy, dx);
  auto sources = padSources(dx.shape, dy.shape, pads, mode);
  int64_t inner = dy.shape.back();
  const std::vector<int64_t> &innerSources = sources.back();
  // Reflected and replicated positions share a source: one thread scatters.
  PP_RT_FLOAT_DISPATCH(dy.dtype, "padGrad", {
    const T *pdy = dy.as<const T>();
    T *pdx = dx.as<T>();
    forEachPadRow(dy.shape, dx.shape, sources, 0, n / inner,
                  [&](int64_t row, int64_t xRow) {
                    if (xRow < 0)
                      return;
                    const T *in = pdy + row * inner;
                    for (int64_t o = 0; o < inner; ++o)
                      if (int64_t s = innerSources[o]; s >= 0)
                        pdx[xRow + s] += in[o];
                  });
  });
  (void)ctx;
  return Status::success();
}

Status copy(Context &ctx, const Tensor &x, Tensor &y) {
  PP_RT_TRY(checkCopy(x, y));
  if (x.numel() > 0 && x.data != y.data)
    std::memmove(y.data, x.data, x.bytes());
  return Status::success();
}

} // namespace pp::rt
