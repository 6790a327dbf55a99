//===- Movement.cu - Data movement CUDA kernels ---------------------------===//
//
// Transpose, slice and its adjoint, concat, split, gather and its adjoint,
// and copy. Kernels that only move elements work on any dtype through an
// unsigned type of the element's size. Transposes that swap the innermost
// dim go through shared-memory tiles so reads and writes both coalesce;
// concat and split are strided 2-D copies. Gather indices are checked on
// the device; a bad one is reported after a stream synchronisation.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace pp::rt {

using namespace cuda;

namespace {

/// Checks that slicing a tensor of `full` shape with starts/steps yields
/// `part` (counts) without leaving `full`; computes the first element's
/// offset and the per-dim strides into the full tensor.
Status slicePlan(const char *what, const std::vector<int64_t> &full,
                 const std::vector<int64_t> &part,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, int64_t &base,
                 std::vector<int64_t> &strides) {
  size_t rank = full.size();
  if (part.size() != rank || starts.size() != rank || steps.size() != rank)
    return Status::error(
        std::string(what) + ": expected rank " + std::to_string(rank) +
        " for the sliced shape, " + "starts and steps, got " +
        std::to_string(part.size()) + ", " + std::to_string(starts.size()) +
        " and " + std::to_string(steps.size()));
  std::vector<int64_t> fullStrides = stridesOf(full);
  base = 0;
  strides.assign(rank, 0);
  bool empty = false;
  for (size_t d = 0; d < rank; ++d) {
    if (steps[d] == 0)
      return Status::error(std::string(what) + ": step of dim " +
                           std::to_string(d) + " is 0");
    strides[d] = fullStrides[d] * steps[d];
    if (part[d] == 0) {
      empty = true;
      continue;
    }
    int64_t last = starts[d] + (part[d] - 1) * steps[d];
    if (starts[d] < 0 || starts[d] >= full[d] || last < 0 || last >= full[d])
      return Status::error(
          std::string(what) + ": dim " + std::to_string(d) + " reads [" +
          std::to_string(starts[d]) + ", " + std::to_string(last) +
          "] (start, last) outside size " + std::to_string(full[d]));
    base += starts[d] * fullStrides[d];
  }
  if (empty)
    base = 0;
  return Status::success();
}

/// ONNX Gather's shape: data.shape[:axis] + indices.shape +
/// data.shape[axis+1:].
std::vector<int64_t> gatherShape(const std::vector<int64_t> &data,
                                 const std::vector<int64_t> &indices,
                                 int64_t axis) {
  std::vector<int64_t> shape(data.begin(), data.begin() + axis);
  shape.insert(shape.end(), indices.begin(), indices.end());
  shape.insert(shape.end(), data.begin() + axis + 1, data.end());
  return shape;
}

/// Common checks of gather and gatherGrad: `full` is data (or ddata) and
/// `part` is y (or dy).
Status gatherCheck(const char *what, const Tensor &full, const Tensor &part,
                   const Tensor &indices, int64_t &axis) {
  PP_RT_TRY(expectValid(full, what));
  int64_t a = axis;
  if (!normalizeAxis(a, full.rank()))
    return Status::error(std::string(what) + ": axis " + std::to_string(axis) +
                         " out of range for rank " +
                         std::to_string(full.rank()));
  axis = a;
  PP_RT_TRY(expectDType(part, full.dtype, what));
  PP_RT_TRY(
      expectShape(part, gatherShape(full.shape, indices.shape, axis), what));
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

} // namespace

Status transpose(Context &ctx, const Tensor &x,
                 const std::vector<int64_t> &perm, Tensor &y) {
  const char *what = "transpose";
  PP_RT_TRY(expectValid(x, "transpose x"));
  // An empty perm reverses the dims, as ONNX's default.
  std::vector<int64_t> p = perm;
  if (p.empty())
    for (int64_t d = x.rank() - 1; d >= 0; --d)
      p.push_back(d);
  if (static_cast<int64_t>(p.size()) != x.rank())
    return Status::error("transpose: perm has " + std::to_string(p.size()) +
                         " entries for rank " + std::to_string(x.rank()));
  std::vector<bool> seen(p.size(), false);
  std::vector<int64_t> shape(p.size());
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  std::array<std::vector<int64_t>, 1> strides;
  for (size_t i = 0; i < p.size(); ++i) {
    int64_t d = p[i];
    if (d < 0 || d >= x.rank() || seen[d])
      return Status::error("transpose: perm is not a permutation of [0, " +
                           std::to_string(x.rank()) + ")");
    seen[d] = true;
    shape[i] = x.shape[d];
    strides[0].push_back(xStrides[d]);
  }
  PP_RT_TRY(expectDType(y, x.dtype, "transpose y"));
  PP_RT_TRY(expectShape(y, shape, "transpose y"));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>(what, shape, strides, index));
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return stridedGather<T>(what, streamOf(ctx), x.as<T>(), y.as<T>(), n,
                            index);
  });
}

Status slice(Context &ctx, const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, Tensor &y) {
  const char *what = "slice";
  PP_RT_TRY(expectValid(x, "slice x"));
  PP_RT_TRY(expectDType(y, x.dtype, "slice y"));
  PP_RT_TRY(expectValid(y, "slice y"));
  int64_t base;
  std::array<std::vector<int64_t>, 1> strides;
  PP_RT_TRY(slicePlan(what, x.shape, y.shape, starts, steps, base, strides[0]));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>(what, y.shape, strides, index));
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return stridedGather<T>(what, streamOf(ctx), x.as<T>() + base, y.as<T>(), n,
                            index);
  });
}

Status sliceGrad(Context &ctx, const Tensor &dy,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, Tensor &dx) {
  const char *what = "sliceGrad";
  PP_RT_TRY(expectValid(dy, "sliceGrad dy"));
  PP_RT_TRY(expectDType(dx, dy.dtype, "sliceGrad dx"));
  PP_RT_TRY(expectValid(dx, "sliceGrad dx"));
  int64_t base;
  std::array<std::vector<int64_t>, 1> strides;
  PP_RT_TRY(
      slicePlan(what, dx.shape, dy.shape, starts, steps, base, strides[0]));
  cudaStream_t stream = streamOf(ctx);
  PP_RT_TRY(zeroTensor(what, dx, stream));
  int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>(what, dy.shape, strides, index));
  // Non-zero steps make the positions distinct: plain stores, no races.
  return visitElementBytes(dtypeSize(dy.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchMap(what, stream, n, index,
                     ScatterOp<T>{dy.as<T>(), dx.as<T>() + base});
  });
}

Status concat(Context &ctx, const std::vector<const Tensor *> &inputs,
              int64_t axis, Tensor &y) {
  if (inputs.empty())
    return Status::error("concat: no inputs");
  PP_RT_TRY(expectValid(y, "concat y"));
  int64_t a = axis;
  if (!normalizeAxis(a, y.rank()))
    return Status::error("concat: axis " + std::to_string(axis) +
                         " out of range for rank " + std::to_string(y.rank()));
  int64_t total = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string name = "concat input " + std::to_string(k);
    if (!inputs[k])
      return Status::error(name + ": null");
    const Tensor &in = *inputs[k];
    PP_RT_TRY(expectDType(in, y.dtype, name.c_str()));
    PP_RT_TRY(expectValid(in, name.c_str()));
    std::vector<int64_t> expected = y.shape;
    if (in.rank() == y.rank())
      expected[a] = in.shape[a];
    PP_RT_TRY(expectShape(in, expected, name.c_str()));
    total += in.shape[a];
  }
  if (total != y.shape[a])
    return Status::error("concat: inputs sum to " + std::to_string(total) +
                         " along axis " + std::to_string(a) + ", y has " +
                         std::to_string(y.shape[a]));
  if (y.numel() == 0)
    return Status::success();
  // Each outer row of y is the inputs' rows laid side by side.
  int64_t outer = product(y.shape, 0, a);
  int64_t innerBytes =
      product(y.shape, a + 1, y.shape.size()) * dtypeSize(y.dtype);
  int64_t yRow = y.shape[a] * innerBytes;
  cudaStream_t stream = streamOf(ctx);
  auto *dst = static_cast<char *>(y.data);
  for (const Tensor *in : inputs) {
    int64_t row = in->shape[a] * innerBytes;
    PP_RT_TRY(copyRows("concat", stream, dst, yRow, in->data, row, row, outer));
    dst += row;
  }
  return Status::success();
}

Status split(Context &ctx, const Tensor &x, int64_t axis,
             const std::vector<Tensor *> &outputs) {
  if (outputs.empty())
    return Status::error("split: no outputs");
  PP_RT_TRY(expectValid(x, "split x"));
  int64_t a = axis;
  if (!normalizeAxis(a, x.rank()))
    return Status::error("split: axis " + std::to_string(axis) +
                         " out of range for rank " + std::to_string(x.rank()));
  int64_t total = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::string name = "split output " + std::to_string(k);
    if (!outputs[k])
      return Status::error(name + ": null");
    const Tensor &out = *outputs[k];
    PP_RT_TRY(expectDType(out, x.dtype, name.c_str()));
    PP_RT_TRY(expectValid(out, name.c_str()));
    std::vector<int64_t> expected = x.shape;
    if (out.rank() == x.rank())
      expected[a] = out.shape[a];
    PP_RT_TRY(expectShape(out, expected, name.c_str()));
    total += out.shape[a];
  }
  if (total != x.shape[a])
    return Status::error("split: outputs sum to " + std::to_string(total) +
                         " along axis " + std::to_string(a) + ", x has " +
                         std::to_string(x.shape[a]));
  if (x.numel() == 0)
    return Status::success();
  int64_t outer = product(x.shape, 0, a);
  int64_t innerBytes =
      product(x.shape, a + 1, x.shape.size()) * dtypeSize(x.dtype);
  int64_t xRow = x.shape[a] * innerBytes;
  cudaStream_t stream = streamOf(ctx);
  const auto *src = static_cast<const char *>(x.data);
  for (Tensor *out : outputs) {
    int64_t row = out->shape[a] * innerBytes;
    PP_RT_TRY(copyRows("split", stream, out->data, row, src, xRow, row, outer));
    src += row;
  }
  return Status::success();
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

Status copy(Context &ctx, const Tensor &x, Tensor &y) {
  PP_RT_TRY(expectValid(x, "copy x"));
  PP_RT_TRY(expectDType(y, x.dtype, "copy y"));
  PP_RT_TRY(expectValid(y, "copy y"));
  if (y.numel() != x.numel())
    return Status::error("copy: x " + shapeString(x.shape) + " has " +
                         std::to_string(x.numel()) + " elements, y " +
                         shapeString(y.shape) + " has " +
                         std::to_string(y.numel()));
  if (x.numel() > 0 && x.data != y.data)
    PP_CUDA_TRY("copy",
                cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                cudaMemcpyDeviceToDevice, streamOf(ctx)));
  return Status::success();
}

} // namespace pp::rt
