//===- Reduce.cu - Reduction and softmax CUDA kernels ---------------------===//
//
// Sum / Mean / Max over a set of axes, and softmax / log-softmax with their
// gradient. As on the CPU, float sums accumulate in double and integer sums
// wrap in 64 bits. A reduction runs one block per output when the reduced
// elements are contiguous or few outputs exist, else one thread per output
// (adjacent threads then read adjacent kept elements: coalesced). Long outer
// reductions over contiguous outputs split the reduced range over blocks of
// 32 outputs x 8 lanes and combine the partials in a fixed order. F16 and
// BF16 elements are widened to float and accumulated as F32 ones; each
// output is rounded once.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace pp::rt {

using namespace cuda;

namespace {

/// Accumulation of Sum/Mean, Max or Min (K) over elements of T (computed as
/// C: 16-bit floats as float). Max and Min widen integers to int64 so warp
/// shuffles apply to every dtype.
template <typename T, ReduceKind K> struct Reducer {
  using C = Compute<T>;
  static constexpr bool isFloatT = std::is_floating_point_v<C>;
  static constexpr bool isExtremum =
      K == ReduceKind::Max || K == ReduceKind::Min;
  using Acc = std::conditional_t<
      isExtremum, std::conditional_t<isFloatT, C, int64_t>,
      std::conditional_t<isFloatT, double, unsigned long long>>;

  /// The max of an empty set is -inf (or the type's lowest), the min +inf
  /// (or the highest), as ONNX says.
  __device__ static Acc init() {
    if constexpr (!isExtremum)
      return Acc(0);
    else if constexpr (K == ReduceKind::Max)
      return isFloatT ? Acc(-std::numeric_limits<C>::infinity())
                      : Acc(std::numeric_limits<C>::lowest());
    else
      return isFloatT ? Acc(std::numeric_limits<C>::infinity())
                      : Acc(std::numeric_limits<C>::max());
  }
  __device__ static Acc lift(T v) {
    if constexpr (isExtremum || isFloatT)
      return Acc(widen(v));
    else
      return static_cast<unsigned long long>(static_cast<int64_t>(v));
  }
  /// NaN wins the max and the min, as in torch.amax / torch.amin.
  __device__ static Acc combine(Acc acc, Acc v) {
    if constexpr (K == ReduceKind::Max)
      return (v > acc || isNaN(v)) && !isNaN(acc) ? v : acc;
    else if constexpr (K == ReduceKind::Min)
      return (v < acc || isNaN(v)) && !isNaN(acc) ? v : acc;
    else
      return acc + v;
  }
  __device__ static T finish(Acc acc, int64_t count, bool mean) {
    if constexpr (isExtremum) {
      return narrow<T>(acc);
    } else if constexpr (isFloatT) {
      // 0 / 0 gives NaN for the mean of an empty set, as torch.mean.
      return narrow<T>(mean ? acc / double(count) : acc);
    } else {
      // Integer means truncate toward zero.
      int64_t sum = static_cast<int64_t>(acc);
      if (mean)
        sum = count > 0 ? sum / count : 0;
      return T(sum);
    }
  }
  struct Combine {
    __device__ Acc operator()(Acc a, Acc b) const { return combine(a, b); }
  };
};

/// The reduced elements of output o, accumulated by one thread starting at
/// reduced index `first` with step `step`.
template <typename R, typename T>
__device__ typename R::Acc accumulate(const T *start, int64_t count,
                                      const StridedIndex<1> &red, int64_t first,
                                      int64_t step) {
  typename R::Acc acc = R::init();
  if (red.rank <= 1) {
    int64_t stride = red.rank ? red.strides[0][0] : 0;
    for (int64_t j = first; j < count; j += step)
      acc = R::combine(acc, R::lift(start[j * stride]));
  } else {
    for (int64_t j = first; j < count; j += step) {
      int64_t off[1];
      red.offsets(j, off);
      acc = R::combine(acc, R::lift(start[off[0]]));
    }
  }
  return acc;
}

template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kThreads)
    reduceThreadKernel(const T *x, T *y, int64_t outputs, int64_t count,
                       StridedIndex<1> kept, StridedIndex<1> red, bool mean) {
  using R = Reducer<T, K>;
  PP_GRID_STRIDE(o, outputs) {
    int64_t base[1];
    kept.offsets(o, base);
    y[o] = R::finish(accumulate<R>(x + base[0], count, red, 0, 1), count, mean);
  }
}

template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kThreads)
    reduceBlockKernel(const T *x, T *y, int64_t outputs, int64_t count,
                      StridedIndex<1> kept, StridedIndex<1> red, bool mean) {
  using R = Reducer<T, K>;
  __shared__ typename R::Acc smem[32];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t base[1];
    kept.offsets(o, base);
    auto acc = accumulate<R>(x + base[0], count, red, threadIdx.x, blockDim.x);
    acc = blockReduce(acc, typename R::Combine{}, smem);
    if (threadIdx.x == 0)
      y[o] = R::finish(acc, count, mean);
  }
}

constexpr int kColumns = 32, kLanes = 8;

/// Outer reductions over kept-contiguous outputs: a block covers 32
/// adjacent outputs (coalesced reads) and one split of the reduced range
/// with 8 lanes; with several splits, partials go to `partial` [split]
/// [outputs] and reduceColumnFinishKernel combines them in order.
template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kColumns *kLanes)
    reduceColumnKernel(const T *x, T *y, typename Reducer<T, K>::Acc *partial,
                       int64_t outputs, int64_t count, int64_t splits,
                       StridedIndex<1> kept, StridedIndex<1> red, bool mean) {
  using R = Reducer<T, K>;
  __shared__ typename R::Acc lanes[kLanes][kColumns];
  int64_t o = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  int64_t per = (count + splits - 1) / splits;
  int64_t j0 = blockIdx.y * per, j1 = j0 + per < count ? j0 + per : count;
  typename R::Acc acc = R::init();
  if (o < outputs) {
    int64_t base[1];
    kept.offsets(o, base);
    const T *start = x + base[0];
    for (int64_t j = j0 + threadIdx.y; j < j1; j += kLanes) {
      int64_t off[1];
      red.offsets(j, off);
      acc = R::combine(acc, R::lift(start[off[0]]));
    }
  }
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || o >= outputs)
    return;
  for (int k = 1; k < kLanes; ++k)
    acc = R::combine(acc, lanes[k][threadIdx.x]);
  if (splits == 1)
    y[o] = R::finish(acc, count, mean);
  else
    partial[blockIdx.y * outputs + o] = acc;
}

template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kThreads)
    reduceColumnFinishKernel(const typename Reducer<T, K>::Acc *partial, T *y,
                             int64_t outputs, int64_t count, int64_t splits,
                             bool mean) {
  using R = Reducer<T, K>;
  PP_GRID_STRIDE(o, outputs) {
    typename R::Acc acc = R::init();
    for (int64_t s = 0; s < splits; ++s)
      acc = R::combine(acc, partial[s * outputs + o]);
    y[o] = R::finish(acc, count, mean);
  }
}

template <typename T, ReduceKind K>
Status launchColumnReduce(const char *what, cudaStream_t stream, const T *x,
                          T *y, int64_t outputs, int64_t count,
                          const StridedIndex<1> &kept,
                          const StridedIndex<1> &red, bool mean) {
  using Acc = typename Reducer<T, K>::Acc;
  int64_t columnBlocks = (outputs + kColumns - 1) / kColumns;
  // Enough blocks to fill the GPU, each lane with a few dozen elements.
  int64_t splits = std::min<int64_t>(
      {std::max<int64_t>(1, 1024 / columnBlocks), (count + 255) / 256, 65535});
  splits = std::max<int64_t>(splits, 1);
  Scratch scratch(stream);
  Acc *partial = nullptr;
  if (splits > 1)
    PP_RT_TRY(scratch.alloc(what, splits * outputs, &partial));
  dim3 grid(static_cast<unsigned>(columnBlocks), static_cast<unsigned>(splits));
  reduceColumnKernel<T, K><<<grid, dim3(kColumns, kLanes), 0, stream>>>(
      x, y, partial, outputs, count, splits, kept, red, mean);
  PP_CUDA_LAUNCHED(what);
  if (splits > 1) {
    reduceColumnFinishKernel<T, K><<<gridFor(outputs), kThreads, 0, stream>>>(
        partial, y, outputs, count, splits, mean);
    PP_CUDA_LAUNCHED(what);
  }
  return Status::success();
}

template <typename T, ReduceKind K>
Status launchReduce(const char *what, cudaStream_t stream, const T *x, T *y,
                    int64_t outputs, int64_t count, const StridedIndex<1> &kept,
                    const StridedIndex<1> &red, bool mean) {
  bool innerContiguous = red.rank >= 1 && red.strides[0][red.rank - 1] == 1;
  bool keptContiguous = kept.rank >= 1 && kept.strides[0][kept.rank - 1] == 1;
  if (!innerContiguous && keptContiguous && count >= 64 &&
      (outputs + kColumns - 1) / kColumns <= 0x7fffffff)
    return launchColumnReduce<T, K>(what, stream, x, y, outputs, count, kept,
                                    red, mean);
  bool perBlock = innerContiguous ? count > 32 : outputs < 2048 && count > 64;
  if (perBlock) {
    unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(outputs, int64_t(1) << 20));
    reduceBlockKernel<T, K><<<blocks, kThreads, 0, stream>>>(
        x, y, outputs, count, kept, red, mean);
  } else {
    reduceThreadKernel<T, K><<<gridFor(outputs), kThreads, 0, stream>>>(
        x, y, outputs, count, kept, red, mean);
  }
  PP_CUDA_LAUNCHED(what);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

struct MaxOf {
  /// std::max(acc, v) as the CPU computes it: NaN only wins from the left.
  template <typename T> __device__ T operator()(T acc, T v) const {
    return acc < v ? v : acc;
  }
};

/// Softmax of one line of n elements at stride `inner`, computed by the
/// threads [first, first + step ...) of a group that reduces with `reduce`.
/// Arithmetic follows the CPU backend: exp in C, the sum in double.
template <typename T, typename ReduceFn>
__device__ void softmaxLine(const T *x, T *y, int64_t n, int64_t inner,
                            bool log, int64_t first, int64_t step,
                            ReduceFn reduce) {
  using C = Compute<T>;
  C mx = -std::numeric_limits<C>::infinity();
  for (int64_t j = first; j < n; j += step)
    mx = MaxOf{}(mx, widen(x[j * inner]));
  mx = reduce(mx, MaxOf{});
  double sum = 0;
  for (int64_t j = first; j < n; j += step)
    sum += double(dm::exp(widen(x[j * inner]) - mx));
  sum = reduce(sum, SumOp{});
  // y = (x - max) - log(sum) in C, the order PyTorch uses; softmax scales
  // exp(x - max), recomputed (the same value; y is stored once, so a 16-bit
  // y is rounded once), by the reciprocal of the sum.
  if (log) {
    C lse = C(::log(sum));
    for (int64_t j = first; j < n; j += step)
      y[j * inner] = narrow<T>((widen(x[j * inner]) - mx) - lse);
  } else {
    C inv = C(1.0 / sum);
    for (int64_t j = first; j < n; j += step)
      y[j * inner] = narrow<T>(dm::exp(widen(x[j * inner]) - mx) * inv);
  }
}

/// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) *
/// sum(dy).
template <typename T, typename ReduceFn>
__device__ void softmaxGradLine(const T *y, const T *dy, T *dx, int64_t n,
                                int64_t inner, bool log, int64_t first,
                                int64_t step, ReduceFn reduce) {
  using C = Compute<T>;
  double sum = 0;
  for (int64_t j = first; j < n; j += step) {
    int64_t k = j * inner;
    sum += log ? double(widen(dy[k])) : double(widen(dy[k])) * widen(y[k]);
  }
  sum = reduce(sum, SumOp{});
  C s = C(sum);
  for (int64_t j = first; j < n; j += step) {
    int64_t k = j * inner;
    C yk = widen(y[k]), dyk = widen(dy[k]);
    dx[k] = narrow<T>(log ? dyk - dm::exp(yk) * s : yk * (dyk - s));
  }
}

struct NoReduce {
  template <typename V, typename Op> __device__ V operator()(V v, Op) const {
    return v;
  }
};

/// Reduces across the block; one shared buffer per value type.
struct BlockReduceFn {
  double *sumBuf;
  void *maxBuf;
  template <typename V, typename Op> __device__ V operator()(V v, Op op) const {
    if constexpr (std::is_same_v<Op, SumOp>)
      return blockReduce(v, op, sumBuf);
    else
      return blockReduce(v, op, static_cast<V *>(maxBuf));
  }
};

/// One block per line of contiguous elements (softmax over the last dims).
template <typename T>
__global__ void softmaxRowKernel(const T *x, T *y, int64_t rows, int64_t n,
                                 bool log) {
  __shared__ double sumBuf[32];
  __shared__ Compute<T> maxBuf[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    softmaxLine(x + r * n, y + r * n, n, 1, log, threadIdx.x, blockDim.x,
                BlockReduceFn{sumBuf, maxBuf});
}

/// One thread per (outer, inner) line; neighbours read neighbours.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmaxColumnKernel(const T *x, T *y, int64_t outer, int64_t n,
                        int64_t inner, bool log) {
  PP_GRID_STRIDE(t, outer * inner) {
    int64_t o = t / inner, i = t - o * inner;
    int64_t base = o * n * inner + i;
    softmaxLine(x + base, y + base, n, inner, log, 0, 1, NoReduce{});
  }
}

template <typename T>
__global__ void softmaxGradRowKernel(const T *y, const T *dy, T *dx,
                                     int64_t rows, int64_t n, bool log) {
  __shared__ double sumBuf[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    softmaxGradLine(y + r * n, dy + r * n, dx + r * n, n, 1, log, threadIdx.x,
                    blockDim.x, BlockReduceFn{sumBuf, nullptr});
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmaxGradColumnKernel(const T *y, const T *dy, T *dx, int64_t outer,
                            int64_t n, int64_t inner, bool log) {
  PP_GRID_STRIDE(t, outer * inner) {
    int64_t o = t / inner, i = t - o * inner;
    int64_t base = o * n * inner + i;
    softmaxGradLine(y + base, dy + base, dx + base, n, inner, log, 0, 1,
                    NoReduce{});
  }
}

/// Threads per block for one line of n elements: a warp for short lines.
int rowThreads(int64_t n) { return n <= 32 ? 32 : n <= 128 ? 128 : kThreads; }

unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t(1) << 20));
}

} // namespace

Status reduce(Context &ctx, ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &y) {
  const char *what = reduceName(kind);
  PP_RT_TRY(expectValid(x, what));
  if (x.dtype == DType::Bool || isStorageOnlyInt(x.dtype))
    return Status::error(std::string(what) + ": unsupported dtype " +
                         dtypeName(x.dtype));
  PP_RT_TRY(expectDType(y, x.dtype, what));
  std::vector<bool> reduced;
  if (Status s = checkReduceAxes(what, x, axes, y, reduced); !s.ok())
    return s;
  PP_RT_TRY(expectValid(y, what));
  // Split x's index space into kept dims (output order) and reduced dims.
  std::vector<int64_t> strides = stridesOf(x.shape);
  std::vector<int64_t> keptShape, redShape;
  std::array<std::vector<int64_t>, 1> keptStrides, redStrides;
  int64_t outputs = 1, count = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (reduced[d]) {
      redShape.push_back(x.shape[d]);
      redStrides[0].push_back(strides[d]);
      count *= x.shape[d];
    } else {
      keptShape.push_back(x.shape[d]);
      keptStrides[0].push_back(strides[d]);
      outputs *= x.shape[d];
    }
  }
  if (outputs == 0)
    return Status::success();
  StridedIndex<1> kept, red;
  PP_RT_TRY(makeIndex<1>(what, keptShape, keptStrides, kept));
  PP_RT_TRY(makeIndex<1>(what, redShape, redStrides, red));
  cudaStream_t stream = streamOf(ctx);
  bool mean = kind == ReduceKind::Mean;
  return visitDTypeOr16(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (kind) {
    case ReduceKind::Max:
      return launchReduce<T, ReduceKind::Max>(
          what, stream, x.as<T>(), y.as<T>(), outputs, count, kept, red, mean);
    case ReduceKind::Min:
      return launchReduce<T, ReduceKind::Min>(
          what, stream, x.as<T>(), y.as<T>(), outputs, count, kept, red, mean);
    default: // Sum and Mean
      return launchReduce<T, ReduceKind::Sum>(
          what, stream, x.as<T>(), y.as<T>(), outputs, count, kept, red, mean);
    }
  });
}

Status softmax(Context &ctx, const Tensor &x, int64_t axis, bool log,
               Tensor &y) {
  const char *what = log ? "logSoftmax" : "softmax";
  PP_RT_TRY(expectValid(x, what));
  PP_RT_TRY(expectDType(y, x.dtype, what));
  PP_RT_TRY(expectShape(y, x.shape, what));
  int64_t a = axis;
  if (!normalizeAxis(a, x.rank()))
    return Status::error(std::string(what) + ": axis " + std::to_string(axis) +
                         " out of range for rank " + std::to_string(x.rank()));
  int64_t outer, n, inner;
  splitAtAxis(x.shape, a, outer, n, inner);
  if (x.numel() == 0)
    return visitFloatOr16(x.dtype, what,
                          [](auto) { return Status::success(); });
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1)
      softmaxRowKernel<T><<<rowBlocks(outer), rowThreads(n), 0, stream>>>(
          x.as<T>(), y.as<T>(), outer, n, log);
    else
      softmaxColumnKernel<T><<<gridFor(outer * inner), kThreads, 0, stream>>>(
          x.as<T>(), y.as<T>(), outer, n, inner, log);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status softmaxGrad(Context &ctx, const Tensor &y, const Tensor &dy,
                   int64_t axis, bool log, Tensor &dx) {
  const char *what = log ? "logSoftmaxGrad" : "softmaxGrad";
  PP_RT_TRY(expectValid(y, what));
  PP_RT_TRY(expectDType(dy, y.dtype, what));
  PP_RT_TRY(expectShape(dy, y.shape, what));
  PP_RT_TRY(expectDType(dx, y.dtype, what));
  PP_RT_TRY(expectShape(dx, y.shape, what));
  int64_t a = axis;
  if (!normalizeAxis(a, y.rank()))
    return Status::error(std::string(what) + ": axis " + std::to_string(axis) +
                         " out of range for rank " + std::to_string(y.rank()));
  int64_t outer, n, inner;
  splitAtAxis(y.shape, a, outer, n, inner);
  if (y.numel() == 0)
    return visitFloatOr16(y.dtype, what,
                          [](auto) { return Status::success(); });
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(y.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1)
      softmaxGradRowKernel<T><<<rowBlocks(outer), rowThreads(n), 0, stream>>>(
          y.as<T>(), dy.as<T>(), dx.as<T>(), outer, n, log);
    else
      softmaxGradColumnKernel<T>
          <<<gridFor(outer * inner), kThreads, 0, stream>>>(
              y.as<T>(), dy.as<T>(), dx.as<T>(), outer, n, inner, log);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

} // namespace pp::rt
