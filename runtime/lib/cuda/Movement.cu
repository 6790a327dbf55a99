//===- Movement.cu - Data movement CUDA kernels ---------------------------===//
//
// Transpose, slice and its adjoint, pad and its adjoint, concat, split, gather
// and its adjoint, and copy. Kernels that only move elements work on any dtype
// through an unsigned type of the element's size. Transposes that swap the
// innermost dim go through shared-memory tiles so reads and writes both
// coalesce; concat and split are strided 2-D copies. Gather indices are checked
// on the device; a bad one is reported after a stream synchronisation.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cstring>

namespace pp::rt {

using namespace cuda;

namespace {

/// Common checks of gather and gatherGrad: `full` is data (or ddata) and
/// `part` is y (or dy).
Status gatherCheck(const char *what, const Tensor &full, const Tensor &part,
                   const Tensor &indices, int64_t &axis) {
  PP_RT_TRY(checkGatherShapes(what, full, part, indices, axis));
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return Status::error(std::string(what) +
                         ": indices: expected dtype i64 or i32, got " +
                         dtypeName(indices.dtype));
  return expectValid(indices, what);
}

/// Reports the first out-of-range index a gather kernel flagged.
Status checkIndices(const char *what, cudaStream_t stream,
                    const unsigned long long *flag, const Tensor &indices,
                    int64_t size) {
  int64_t position;
  PP_RT_TRY(readErrorFlag(what, stream, flag, position));
  if (position < 0)
    return Status::success();
  return Status::error(
      std::string(what) + ": index " +
      std::to_string(readDeviceInt(indices, position, stream)) +
      " at position " + std::to_string(position) +
      " is out of range for size " + std::to_string(size));
}

template <typename T> struct GatherOp {
  const T *x;
  T *y;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    y[i] = x[o[0]];
  }
};

template <typename T> struct ScatterOp {
  const T *x;
  T *y;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    y[o[0]] = x[i];
  }
};

constexpr int kTile = 32, kTileRows = 8;

/// y[b][r][c] = x[b * sb + r + c * sc] (the input is contiguous along the
/// output's rows): 32 x 32 tiles staged in shared memory, padded against
/// bank conflicts.
template <typename T>
__global__ void __launch_bounds__(kTile *kTileRows)
    tiledTransposeKernel(const T *x, T *y, int64_t rows, int64_t cols,
                         int64_t sb, int64_t sc) {
  __shared__ T tile[kTile][kTile + 1];
  int64_t b = blockIdx.z;
  int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  const T *xb = x + b * sb;
  T *yb = y + b * rows * cols;
  // Read: consecutive threads take consecutive rows r (contiguous in x).
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    int64_t r = r0 + threadIdx.x, c = c0 + k;
    if (r < rows && c < cols)
      tile[threadIdx.x][k] = xb[r + c * sc];
  }
  __syncthreads();
  // Write: consecutive threads take consecutive columns c (contiguous in y).
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols)
      yb[r * cols + c] = tile[k][threadIdx.x];
  }
}

/// Strided gather of `index` (y's coalesced dims, x's strides), through
/// tiles when the coalesced space is [batch,] rows x cols with x contiguous
/// along rows.
template <typename T>
Status stridedGather(const char *what, cudaStream_t stream, const T *x, T *y,
                     int64_t n, const StridedIndex<1> &index) {
  int rank = index.rank;
  if ((rank == 2 || rank == 3) && index.strides[0][rank - 2] == 1 &&
      index.strides[0][rank - 1] != 1) {
    int64_t rows = index.shape[rank - 2], cols = index.shape[rank - 1];
    int64_t batch = rank == 3 ? index.shape[0] : 1;
    int64_t sb = rank == 3 ? index.strides[0][0] : 0;
    int64_t sc = index.strides[0][rank - 1];
    int64_t gx = (cols + kTile - 1) / kTile, gy = (rows + kTile - 1) / kTile;
    if (gx <= 0x7fffffff && gy <= 65535 && batch <= 65535) {
      dim3 grid{unsigned(gx), unsigned(gy), unsigned(batch)};
      tiledTransposeKernel<T><<<grid, dim3(kTile, kTileRows), 0, stream>>>(
          x, y, rows, cols, sb, sc);
      PP_CUDA_LAUNCHED(what);
      return Status::success();
    }
  }
  return launchMap(what, stream, n, index, GatherOp<T>{x, y});
}

/// y[(o * count + j) * inner + c] = data[(o * size + idx[j]) * inner + c];
/// a bad index flags its position and yields 0.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(const T *data, const void *indices, bool idx64, T *y,
                 int64_t total, int64_t count, int64_t inner, int64_t size,
                 unsigned long long *error) {
  PP_GRID_STRIDE(i, total) {
    int64_t c = i % inner, r = i / inner;
    int64_t j = r % count, o = r / count;
    int64_t idx = loadIndex(indices, idx64, j);
    if (idx < 0)
      idx += size;
    if (idx < 0 || idx >= size) {
      atomicMin(error, static_cast<unsigned long long>(j));
      y[i] = T(0);
      continue;
    }
    y[i] = data[(o * size + idx) * inner + c];
  }
}

/// ddata[(o * size + idx[j]) * inner + c] += dy[i]; repeated indices add up
/// through atomics.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    gatherGradKernel(const T *dy, const void *indices, bool idx64, T *ddata,
                     int64_t total, int64_t count, int64_t inner, int64_t size,
                     unsigned long long *error) {
  PP_GRID_STRIDE(i, total) {
    int64_t c = i % inner, r = i / inner;
    int64_t j = r % count, o = r / count;
    int64_t idx = loadIndex(indices, idx64, j);
    if (idx < 0)
      idx += size;
    if (idx < 0 || idx >= size) {
      atomicMin(error, static_cast<unsigned long long>(j));
      continue;
    }
    atomicAdd(ddata + (o * size + idx) * inner + c, dy[i]);
  }
}

/// Copies `rows` rows of `rowBytes` between pitched buffers.
Status copyRows(const char *what, cudaStream_t stream, void *dst,
                int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t rowBytes, int64_t rows) {
  if (rowBytes == 0 || rows == 0)
    return Status::success();
  if (rows == 1 || (dstPitch == rowBytes && srcPitch == rowBytes))
    PP_CUDA_TRY(what, cudaMemcpyAsync(dst, src, rowBytes * rows,
                                      cudaMemcpyDeviceToDevice, stream));
  else
    PP_CUDA_TRY(what,
                cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, rowBytes, rows,
                                  cudaMemcpyDeviceToDevice, stream));
  return Status::success();
}

/// concat (intoWhole: the parts into `whole`) or split (out of it) along
/// axis a: each outer row of `whole` is the parts' rows laid side by side.
template <typename TensorPtr>
Status copyParts(const char *what, cudaStream_t stream, const Tensor &whole,
                 const std::vector<TensorPtr> &parts, int64_t a,
                 bool intoWhole) {
  if (whole.numel() == 0)
    return Status::success();
  int64_t outer = product(whole.shape, 0, a);
  int64_t innerBytes =
      product(whole.shape, a + 1, whole.shape.size()) * dtypeSize(whole.dtype);
  int64_t wholeRow = whole.shape[a] * innerBytes;
  auto *at = static_cast<char *>(whole.data);
  for (TensorPtr part : parts) {
    int64_t row = part->shape[a] * innerBytes;
    if (intoWhole)
      PP_RT_TRY(
          copyRows(what, stream, at, wholeRow, part->data, row, row, outer));
    else
      PP_RT_TRY(
          copyRows(what, stream, part->data, row, at, wholeRow, row, outer));
    at += row;
  }
  return Status::success();
}

} // namespace

Status transpose(Context &ctx, const Tensor &x,
                 const std::vector<int64_t> &perm, Tensor &y) {
  const char *what = "transpose";
  StridedView view;
  PP_RT_TRY(checkTranspose(x, perm, y, view));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>(what, view.shape, view.strides, index));
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return stridedGather<T>(what, streamOf(ctx), x.as<T>(), y.as<T>(), n,
                            index);
  });
}

Status slice(Context &ctx, const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, Tensor &y) {
  const char *what = "slice";
  StridedView view;
  PP_RT_TRY(checkSlice(x, starts, steps, y, view));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>(what, view.shape, view.strides, index));
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return stridedGather<T>(what, streamOf(ctx), x.as<T>() + view.base,
                            y.as<T>(), n, index);
  });
}

Status sliceGrad(Context &ctx, const Tensor &dy,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, Tensor &dx) {
  const char *what = "sliceGrad";
  StridedView view;
  PP_RT_TRY(checkSliceGrad(dy, starts, steps, dx, view));
  cudaStream_t stream = streamOf(ctx);
  PP_RT_TRY(zeroTensor(what, dx, stream));
  int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>(what, view.shape, view.strides, index));
  // Non-zero steps make the positions distinct: plain stores, no races.
  return visitElementBytes(dtypeSize(dy.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchMap(what, stream, n, index,
                     ScatterOp<T>{dy.as<T>(), dx.as<T>() + view.base});
  });
}

Status concat(Context &ctx, const std::vector<const Tensor *> &inputs,
              int64_t axis, Tensor &y) {
  int64_t a = 0;
  PP_RT_TRY(checkConcat(inputs, axis, y, a));
  return copyParts("concat", streamOf(ctx), y, inputs, a, /*intoWhole=*/true);
}

Status split(Context &ctx, const Tensor &x, int64_t axis,
             const std::vector<Tensor *> &outputs) {
  int64_t a = 0;
  PP_RT_TRY(checkSplit(x, axis, outputs, a));
  return copyParts("split", streamOf(ctx), x, outputs, a, /*intoWhole=*/false);
}

Status gather(Context &ctx, const Tensor &data, const Tensor &indices,
              int64_t axis, Tensor &y) {
  const char *what = "gather";
  int64_t a = axis;
  PP_RT_TRY(gatherCheck(what, data, y, indices, a));
  int64_t total = y.numel();
  int64_t size = data.shape[a];
  int64_t count = indices.numel();
  int64_t inner = product(data.shape, a + 1, data.shape.size());
  if (total == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  Scratch scratch(stream);
  unsigned long long *flag = nullptr;
  PP_RT_TRY(makeErrorFlag(what, scratch, stream, &flag));
  PP_RT_TRY(visitElementBytes(dtypeSize(data.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    gatherKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        data.as<T>(), indices.data, indices.dtype == DType::I64, y.as<T>(),
        total, count, inner, size, flag);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  }));
  return checkIndices(what, stream, flag, indices, size);
}

Status gatherGrad(Context &ctx, const Tensor &dy, const Tensor &indices,
                  int64_t axis, Tensor &ddata) {
  const char *what = "gatherGrad";
  // 16 bits: repeated indices add (atomics) into an f32 copy, rounded once.
  if (anyFloat16(dy, ddata))
    return gradInF32(ctx, what, dy, ddata,
                     [&](const Tensor &wideDy, Tensor &wideDdata) {
                       return gatherGrad(ctx, wideDy, indices, axis, wideDdata);
                     });
  int64_t a = axis;
  PP_RT_TRY(gatherCheck(what, ddata, dy, indices, a));
  int64_t total = dy.numel();
  int64_t size = ddata.shape[a];
  int64_t count = indices.numel();
  int64_t inner = product(ddata.shape, a + 1, ddata.shape.size());
  cudaStream_t stream = streamOf(ctx);
  return visitFloat(ddata.dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    PP_RT_TRY(zeroTensor(what, ddata, stream));
    if (total == 0)
      return Status::success();
    Scratch scratch(stream);
    unsigned long long *flag = nullptr;
    PP_RT_TRY(makeErrorFlag(what, scratch, stream, &flag));
    gatherGradKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        dy.as<T>(), indices.data, indices.dtype == DType::I64, ddata.as<T>(),
        total, count, inner, size, flag);
    PP_CUDA_LAUNCHED(what);
    return checkIndices(what, stream, flag, indices, size);
  });
}

namespace {

/// The geometry of a pad, passed to the kernels by value.
struct PadIndex {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  int64_t y[kMaxRank] = {};
  int64_t x[kMaxRank] = {};
  int64_t xStrides[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};

  /// The offset in x that flat index i of y reads, or -1.
  __device__ int64_t source(int64_t i) const {
    int64_t offset = 0;
    bool constant = false;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t o = i % y[d];
      i /= y[d];
      int64_t s = padSource(o, begin[d], x[d], mode);
      constant |= s < 0;
      offset += s * xStrides[d];
    }
    return constant ? -1 : offset;
  }
};

Status makePadIndex(const char *what, const std::vector<int64_t> &x,
                    const std::vector<int64_t> &y,
                    const std::vector<int64_t> &pads, PadMode mode,
                    PadIndex &index) {
  if (x.size() > static_cast<size_t>(kMaxRank))
    return Status::error(std::string(what) + ": more than " +
                         std::to_string(kMaxRank) +
                         " dims are not supported by the CUDA backend");
  std::vector<int64_t> strides = stridesOf(x);
  index.rank = static_cast<int>(x.size());
  index.mode = mode;
  for (size_t d = 0; d < x.size(); ++d) {
    index.y[d] = y[d];
    index.x[d] = x[d];
    index.xStrides[d] = strides[d];
    index.begin[d] = pads[d];
  }
  return Status::success();
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    padKernel(const T *x, T *y, T fill, int64_t n, PadIndex index) {
  PP_GRID_STRIDE(i, n) {
    int64_t s = index.source(i);
    y[i] = s < 0 ? fill : x[s];
  }
}

// Reflected and replicated positions share a source: atomics.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    padGradKernel(const T *dy, T *dx, int64_t n, PadIndex index) {
  PP_GRID_STRIDE(i, n) {
    int64_t s = index.source(i);
    if (s >= 0)
      atomicAdd(dx + s, dy[i]);
  }
}

/// `value` as the bits of one element of `dtype`, converted as fill does.
uint64_t elementBits(DType dtype, double value) {
  uint64_t bits = 0;
  auto store = [&](auto v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (dtype) {
  case DType::F32:
    store(static_cast<float>(value));
    break;
  case DType::F64:
    store(value);
    break;
  case DType::I64:
    store(convertDouble<int64_t>(value));
    break;
  case DType::I32:
    store(convertDouble<int32_t>(value));
    break;
  case DType::I8:
    store(convertDouble<int8_t>(value));
    break;
  case DType::U8:
    store(convertDouble<uint8_t>(value));
    break;
  case DType::Bool:
    store(static_cast<uint8_t>(value != 0));
    break;
  case DType::F16:
    store(doubleToHalf(value));
    break;
  case DType::BF16:
    store(doubleToBFloat16(value));
    break;
  case DType::U32:
    store(convertDouble<uint32_t>(value));
    break;
  case DType::U64:
    store(convertDouble<uint64_t>(value));
    break;
  case DType::I16:
    store(convertDouble<int16_t>(value));
    break;
  case DType::U16:
    store(convertDouble<uint16_t>(value));
    break;
  }
  return bits;
}

} // namespace

Status pad(Context &ctx, const Tensor &x, const std::vector<int64_t> &pads,
           PadMode mode, double value, Tensor &y) {
  const char *what = "pad";
  PP_RT_TRY(checkPad(what, x, y, pads, mode));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  PadIndex index;
  PP_RT_TRY(makePadIndex(what, x.shape, y.shape, pads, mode, index));
  uint64_t bits = elementBits(y.dtype, value);
  cudaStream_t stream = streamOf(ctx);
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T fill;
    std::memcpy(&fill, &bits, sizeof(T));
    padKernel<T><<<gridFor(n), kThreads, 0, stream>>>(x.as<T>(), y.as<T>(),
                                                      fill, n, index);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status padGrad(Context &ctx, const Tensor &dy, const std::vector<int64_t> &pads,
               PadMode mode, Tensor &dx) {
  const char *what = "padGrad";
  // 16 bits: shared sources add (atomics) into an f32 copy, rounded once.
  if (anyFloat16(dy, dx))
    return gradInF32(ctx, what, dy, dx,
                     [&](const Tensor &wideDy, Tensor &wideDx) {
                       return padGrad(ctx, wideDy, pads, mode, wideDx);
                     });
  PP_RT_TRY(checkPad(what, dx, dy, pads, mode));
  cudaStream_t stream = streamOf(ctx);
  return visitFloat(dy.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    PP_RT_TRY(zeroTensor(what, dx, stream));
    int64_t n = dy.numel();
    if (n == 0)
      return Status::success();
    PadIndex index;
    PP_RT_TRY(makePadIndex(what, dx.shape, dy.shape, pads, mode, index));
    padGradKernel<T>
        <<<gridFor(n), kThreads, 0, stream>>>(dy.as<T>(), dx.as<T>(), n, index);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

/// One thread per element s of a slice walks the index tuples in order, so a
/// repeated index combines (or, without a reduction, keeps the last update)
/// as on the CPU, without atomics.
template <typename T>
__global__ void scatterNDKernel(T *y, const T *updates, const int64_t *offsets,
                                int64_t tuples, int64_t slice,
                                ScatterReduction reduction) {
  PP_GRID_STRIDE(s, slice) {
    for (int64_t n = 0; n < tuples; ++n) {
      T &x = y[offsets[n] + s];
      T u = updates[n * slice + s];
      switch (reduction) {
      case ScatterReduction::Add:
        x = static_cast<T>(x + u);
        break;
      case ScatterReduction::Mul:
        x = static_cast<T>(x * u);
        break;
      case ScatterReduction::Max:
        x = x < u ? u : x;
        break;
      case ScatterReduction::Min:
        x = u < x ? u : x;
        break;
      default:
        x = u;
      }
    }
  }
}

Status scatterND(Context &ctx, const Tensor &data, const Tensor &indices,
                 const Tensor &updates, ScatterReduction reduction, Tensor &y) {
  const char *what = "scatterND";
  int64_t tuples = 0, k = 0, slice = 0;
  PP_RT_TRY(
      checkScatterND(data, indices, updates, reduction, y, tuples, k, slice));
  // 16-bit reductions: repeated indices combine in f32, rounded once.
  if (reduction != ScatterReduction::None && isFloat16(data.dtype)) {
    Float16Widening w(ctx);
    Tensor wideData, wideUpdates, wideY;
    PP_RT_TRY(w.in(data, wideData));
    PP_RT_TRY(w.in(updates, wideUpdates));
    PP_RT_TRY(w.out(y, wideY));
    return w.finish(
        scatterND(ctx, wideData, indices, wideUpdates, reduction, wideY));
  }
  cudaStream_t stream = streamOf(ctx);
  // The index tuples are checked and turned into offsets on the host (a
  // wait on the stream: ScatterND builds masks, it is not on a hot path).
  std::vector<int64_t> values(static_cast<size_t>(indices.numel())), offsets;
  std::vector<int32_t> narrow(indices.dtype == DType::I32 ? values.size() : 0);
  void *host = narrow.empty() ? static_cast<void *>(values.data())
                              : static_cast<void *>(narrow.data());
  if (!values.empty()) {
    PP_CUDA_TRY(what, cudaMemcpyAsync(host, indices.data, indices.bytes(),
                                      cudaMemcpyDeviceToHost, stream));
    PP_CUDA_TRY(what, cudaStreamSynchronize(stream));
  }
  for (size_t i = 0; i < narrow.size(); ++i)
    values[i] = narrow[i];
  PP_RT_TRY(scatterNDOffsets(data.shape, values, k, slice, offsets));
  if (data.numel() > 0 && y.data != data.data)
    PP_CUDA_TRY(what, cudaMemcpyAsync(y.data, data.data, data.bytes(),
                                      cudaMemcpyDeviceToDevice, stream));
  if (tuples == 0 || slice == 0)
    return Status::success();
  Scratch scratch(stream);
  int64_t *deviceOffsets = nullptr;
  PP_RT_TRY(uploadVector(what, scratch, stream, offsets, &deviceOffsets));
  auto launch = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    scatterNDKernel<T><<<gridFor(slice), kThreads, 0, stream>>>(
        y.as<T>(), updates.as<const T>(), deviceOffsets, tuples, slice,
        reduction);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  };
  if (reduction == ScatterReduction::None) // any dtype: moved as bits
    return visitElementBytes(dtypeSize(data.dtype), launch);
  return visitDType(data.dtype, launch);
}

Status copy(Context &ctx, const Tensor &x, Tensor &y) {
  PP_RT_TRY(checkCopy(x, y));
  if (x.numel() > 0 && x.data != y.data)
    PP_CUDA_TRY("copy",
                cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                cudaMemcpyDeviceToDevice, streamOf(ctx)));
  return Status::success();
}

} // namespace pp::rt
