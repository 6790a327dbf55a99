//===- Norm.cu - Layer and batch normalisation CUDA kernels ---------------===//
//
// LayerNormalization and BatchNormalization with their gradients. As on the
// CPU, statistics accumulate in double with two passes (mean, then squared
// deviations). Per-channel statistics are reduced in split partial sums
// (several blocks per channel) that a finishing kernel adds in a fixed
// order, so results are deterministic. Parameters and statistics may be F32
// or F64 independently of x (stash_type, BatchNormalization T1/T2). F16 and
// BF16 tensors compute as the CPU backend's widened f32 kernels: elements
// widened to float, statistics in double, y and dx in float, each 16-bit
// output rounded once; 16-bit per-channel tensors are read and written
// through float alike.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace pp::rt {

using namespace cuda;

namespace {

/// A 16-bit float operand as the shared checks see it (Common.cuh).
const Tensor &asF32(const Tensor &t, Tensor &view) {
  view = checkedAsF32(t);
  return view;
}

/// Threads per block for a row of n elements: a warp for short rows.
int rowThreads(int64_t n) { return n <= 32 ? 32 : n <= 128 ? 128 : kThreads; }

unsigned blocksFor(int64_t items) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(items, int64_t(1) << 20)));
}

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

/// A layer norm over dims [axis, rank): `outer` rows of `inner` elements;
/// `param` maps an inner element to its (broadcast) scale/bias element.
struct LayerNormShape : LayerNormDims {
  StridedIndex<1> param;
};

Status resolveLayerNorm(const std::string &what, const Tensor &x,
                        const Tensor &scale, const Tensor *bias, int64_t axis,
                        LayerNormShape &ln) {
  PP_RT_TRY(resolveLayerNormDims(what, x, scale, bias, axis, ln));
  const std::vector<int64_t> &normShape = ln.normShape;
  return makeIndex<1>(what, normShape,
                      {broadcastStrides(scale.shape, normShape)}, ln.param);
}

__device__ __forceinline__ int64_t paramAt(const StridedIndex<1> &param,
                                           int64_t j) {
  int64_t off[1];
  param.offsets(j, off);
  return off[0];
}

/// One block per row: mean, then the squared deviations, then y.
template <typename T>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias, T *y,
                                void *mean, void *invStd, DType meanType,
                                DType invType, int64_t rows, int64_t inner,
                                double epsilon, StridedIndex<1> param) {
  using C = Compute<T>;
  __shared__ double buf[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * inner;
    T *yr = y + r * inner;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
      sum += double(widen(xr[j]));
    double mu = blockReduce(sum, SumOp{}, buf) / double(inner);
    double sq = 0;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      double d = double(widen(xr[j])) - mu;
      sq += d * d;
    }
    double inv =
        1.0 / ::sqrt(blockReduce(sq, SumOp{}, buf) / double(inner) + epsilon);
    C muC = C(mu), invC = C(inv);
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      int64_t p = paramAt(param, j);
      yr[j] = narrow<T>((widen(xr[j]) - muC) * invC * widen(scale[p]) +
                        (bias ? widen(bias[p]) : C(0)));
    }
    if (threadIdx.x == 0) {
      storeAnyFloat(mean, meanType, r, mu);
      storeAnyFloat(invStd, invType, r, inv);
    }
  }
}

/// dx = inv * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale,
/// one block per row.
template <typename T>
__global__ void
layerNormGradKernel(const T *dy, const T *x, const T *scale, const void *mean,
                    const void *invStd, DType meanType, DType invType, T *dx,
                    int64_t rows, int64_t inner, StridedIndex<1> param) {
  __shared__ double buf[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *dyr = dy + r * inner, *xr = x + r * inner;
    T *dxr = dx + r * inner;
    double mu = loadAnyFloat(mean, meanType, r);
    double inv = loadAnyFloat(invStd, invType, r);
    double sumG = 0, sumGX = 0;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      double g =
          double(widen(dyr[j])) * double(widen(scale[paramAt(param, j)]));
      sumG += g;
      sumGX += g * ((double(widen(xr[j])) - mu) * inv);
    }
    double meanG = blockReduce(sumG, SumOp{}, buf) / double(inner);
    double meanGX = blockReduce(sumGX, SumOp{}, buf) / double(inner);
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      double xhat = (double(widen(xr[j])) - mu) * inv;
      double g =
          double(widen(dyr[j])) * double(widen(scale[paramAt(param, j)]));
      dxr[j] = narrow<T>(inv * (g - meanG - xhat * meanGX));
    }
  }
}

constexpr int kColumns = 32, kRowThreads = 8;

/// Partial column sums of dy * xhat and dy over a chunk of rows: block
/// (32 columns x 8 row lanes), written to partial[chunk][inner] (2 arrays).
template <typename T>
__global__ void __launch_bounds__(kColumns *kRowThreads)
    layerNormParamPartialKernel(const T *dy, const T *x, const void *mean,
                                const void *invStd, DType meanType,
                                DType invType, int64_t rows, int64_t inner,
                                int64_t rowsPerChunk, double *partialScale,
                                double *partialBias) {
  __shared__ double ds[kRowThreads][kColumns], db[kRowThreads][kColumns];
  int64_t j = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  int64_t chunk = blockIdx.y;
  int64_t r0 = chunk * rowsPerChunk;
  int64_t r1 = r0 + rowsPerChunk < rows ? r0 + rowsPerChunk : rows;
  double s = 0, b = 0;
  if (j < inner)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      double mu = loadAnyFloat(mean, meanType, r);
      double inv = loadAnyFloat(invStd, invType, r);
      double g = double(widen(dy[r * inner + j]));
      s += g * ((double(widen(x[r * inner + j])) - mu) * inv);
      b += g;
    }
  ds[threadIdx.y][threadIdx.x] = s;
  db[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && j < inner) {
    for (int k = 1; k < kRowThreads; ++k) {
      s += ds[k][threadIdx.x];
      b += db[k][threadIdx.x];
    }
    partialScale[chunk * inner + j] = s;
    partialBias[chunk * inner + j] = b;
  }
}

/// Adds the chunks of column j in order and folds the total onto its
/// (possibly broadcast) parameter element.
__global__ void __launch_bounds__(kThreads)
    layerNormParamFoldKernel(const double *partialScale,
                             const double *partialBias, int64_t chunks,
                             int64_t inner, StridedIndex<1> param,
                             double *foldScale, double *foldBias) {
  PP_GRID_STRIDE(j, inner) {
    double s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partialScale[c * inner + j];
      b += partialBias[c * inner + j];
    }
    int64_t p = paramAt(param, j);
    atomicAdd(foldScale + p, s);
    atomicAdd(foldBias + p, b);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    convertKernel(const double *from, T *to, int64_t n) {
  PP_GRID_STRIDE(i, n) { to[i] = narrow<T>(from[i]); }
}

//===----------------------------------------------------------------------===//
// BatchNorm
//===----------------------------------------------------------------------===//

/// Blocks per channel: enough blocks overall to fill the GPU, each with at
/// least a few thousand elements.
int64_t channelSplits(const BatchShape &bs) {
  int64_t wanted = (1024 + bs.c - 1) / std::max<int64_t>(bs.c, 1);
  int64_t useful = (bs.count() + 4095) / 4096;
  return std::max<int64_t>(1, std::min(wanted, useful));
}

/// What a channel-statistics pass sums per element.
enum class StatPass : int {
  Sum,        // x
  SquaredDev, // (x - mean)^2
  Grad,       // dy and dy * xhat
};

/// Partial sums of channel c (blockIdx.y) over split blockIdx.x of its
/// count = N * plane elements: partial[c][split], one or two arrays.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    channelPartialKernel(StatPass pass, const T *x, const T *dy,
                         const double *mean, const double *inv, int64_t c,
                         int64_t plane, int64_t count, int64_t splits,
                         double *partialA, double *partialB) {
  __shared__ double buf[32];
  int64_t ch = blockIdx.y, split = blockIdx.x;
  int64_t per = (count + splits - 1) / splits;
  int64_t e0 = split * per, e1 = e0 + per < count ? e0 + per : count;
  double mu = pass == StatPass::Sum ? 0.0 : mean[ch];
  double iv = pass == StatPass::Grad ? inv[ch] : 0.0;
  double a = 0, b = 0;
  for (int64_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
    int64_t n = e / plane, i = e - n * plane;
    int64_t off = (n * c + ch) * plane + i;
    double v = double(widen(x[off]));
    switch (pass) {
    case StatPass::Sum:
      a += v;
      break;
    case StatPass::SquaredDev:
      a += (v - mu) * (v - mu);
      break;
    case StatPass::Grad: {
      double g = double(widen(dy[off]));
      a += g;
      b += g * ((v - mu) * iv);
      break;
    }
    }
  }
  a = blockReduce(a, SumOp{}, buf);
  if (pass == StatPass::Grad)
    b = blockReduce(b, SumOp{}, buf);
  if (threadIdx.x == 0) {
    partialA[ch * splits + split] = a;
    if (pass == StatPass::Grad)
      partialB[ch * splits + split] = b;
  }
}

/// Sums channel ch's partials in order.
__device__ __forceinline__ double sumSplits(const double *partial, int64_t ch,
                                            int64_t splits) {
  double s = 0;
  for (int64_t k = 0; k < splits; ++k)
    s += partial[ch * splits + k];
  return s;
}

__global__ void __launch_bounds__(kThreads)
    channelMeanKernel(const double *partial, int64_t c, int64_t splits,
                      double count, double *mean) {
  PP_GRID_STRIDE(ch, c) { mean[ch] = sumSplits(partial, ch, splits) / count; }
}

/// Per-channel float tensors of run-time dtype.
struct ChannelTensor {
  void *data;
  DType dtype;
  __device__ double load(int64_t i) const {
    return loadAnyFloat(data, dtype, i);
  }
  __device__ void store(int64_t i, double v) const {
    storeAnyFloat(data, dtype, i, v);
  }
};

/// Finishes the statistics of each channel: running and saved statistics,
/// and the folded affine map y = x * coefA + coefB. Reads every input of a
/// channel before writing its outputs, so running outputs may alias the
/// input statistics.
__global__ void __launch_bounds__(kThreads) batchNormFinishKernel(
    bool training, bool unbiasedRunningVar, const double *batchMean,
    const double *partialVar, int64_t splits, int64_t c, double count,
    double epsilon, double momentum, ChannelTensor scale, ChannelTensor bias,
    ChannelTensor inputMean, ChannelTensor inputVar, ChannelTensor runningMean,
    ChannelTensor runningVar, ChannelTensor savedMean,
    ChannelTensor savedInvStd, double *coefA, double *coefB) {
  PP_GRID_STRIDE(ch, c) {
    double inMean = inputMean.load(ch), inVar = inputVar.load(ch);
    double sc = scale.load(ch), bi = bias.load(ch);
    double mean = training ? batchMean[ch] : inMean;
    double var = training ? sumSplits(partialVar, ch, splits) / count : inVar;
    double inv = 1.0 / ::sqrt(var + epsilon);
    coefA[ch] = inv * sc;
    coefB[ch] = bi - mean * inv * sc;
    if (training) {
      // running = momentum * running + (1 - momentum) * batch, with the
      // biased variance (ONNX) or the unbiased one (PyTorch).
      double batchVar = unbiasedRunningVar ? var * count / (count - 1.0) : var;
      runningMean.store(ch, momentum * inMean + (1.0 - momentum) * mean);
      runningVar.store(ch, momentum * inVar + (1.0 - momentum) * batchVar);
    } else {
      runningMean.store(ch, inMean);
      runningVar.store(ch, inVar);
    }
    if (savedMean.data)
      savedMean.store(ch, mean);
    if (savedInvStd.data)
      savedInvStd.store(ch, inv);
  }
}

/// y = x * coefA + coefB per channel, then Relu when `relu` (as the unary
/// kernel, NaN kept), rounded once.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    channelAffineKernel(const T *x, T *y, int64_t total, int64_t c,
                        int64_t plane, const double *coefA, const double *coefB,
                        bool relu) {
  using C = Compute<T>;
  PP_GRID_STRIDE(e, total) {
    int64_t ch = (e / plane) % c;
    C v = widen(x[e]) * C(coefA[ch]) + C(coefB[ch]);
    y[e] = narrow<T>(relu && v < C(0) ? C(0) : v);
  }
}

/// Finishes the gradient statistics: dscale, dbias, and the coefficient
/// k = scale * inv / count of dx.
__global__ void __launch_bounds__(kThreads)
    batchNormGradFinishKernel(const double *partialDy, const double *partialDyX,
                              int64_t splits, int64_t c, double count,
                              ChannelTensor scale, const double *inv,
                              ChannelTensor dscale, ChannelTensor dbias,
                              double *sumDy, double *sumDyX, double *coefK) {
  PP_GRID_STRIDE(ch, c) {
    double db = sumSplits(partialDy, ch, splits);
    double ds = sumSplits(partialDyX, ch, splits);
    sumDy[ch] = db;
    sumDyX[ch] = ds;
    coefK[ch] = scale.load(ch) * inv[ch] / count;
    dscale.store(ch, ds);
    dbias.store(ch, db);
  }
}

/// dx = scale * inv / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    batchNormGradInputKernel(const T *dy, const T *x, T *dx, int64_t total,
                             int64_t c, int64_t plane, double count,
                             const double *mean, const double *inv,
                             const double *sumDy, const double *sumDyX,
                             const double *coefK) {
  PP_GRID_STRIDE(e, total) {
    int64_t ch = (e / plane) % c;
    double xhat = (double(widen(x[e])) - mean[ch]) * inv[ch];
    dx[e] = narrow<T>(coefK[ch] * (count * double(widen(dy[e])) - sumDy[ch] -
                                   xhat * sumDyX[ch]));
  }
}

__global__ void __launch_bounds__(kThreads)
    loadChannelsKernel(ChannelTensor from, double *to, int64_t c) {
  PP_GRID_STRIDE(ch, c) { to[ch] = from.load(ch); }
}

ChannelTensor channel(const Tensor *t) {
  return ChannelTensor{t ? t->data : nullptr, t ? t->dtype : DType::F32};
}

} // namespace

Status layerNorm(Context &ctx, const Tensor &x, const Tensor &scale,
                 const Tensor *bias, int64_t axis, float epsilon, Tensor &y,
                 Tensor &mean, Tensor &invStdDev) {
  const char *what = "layerNorm";
  // The statistics may have any float dtype (the stash type), the other
  // tensors x's.
  if (anyFloat16(x, scale, bias, y, mean, invStdDev))
    PP_RT_TRY(expectSameDType(what, {&x, &scale, bias, &y}));
  Tensor xv, sv, bv, yv, mv, iv;
  LayerNormShape ln;
  PP_RT_TRY(resolveLayerNorm(what, asF32(x, xv), asF32(scale, sv),
                             bias ? &asF32(*bias, bv) : nullptr, axis, ln));
  PP_RT_TRY(checkLayerNormOutputs(xv, ln, asF32(y, yv), asF32(mean, mv),
                                  asF32(invStdDev, iv)));
  if (ln.outer == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    layerNormKernel<T>
        <<<blocksFor(ln.outer), rowThreads(ln.inner), 0, stream>>>(
            x.as<T>(), scale.as<T>(), bias ? bias->as<T>() : nullptr, y.as<T>(),
            mean.data, invStdDev.data, mean.dtype, invStdDev.dtype, ln.outer,
            ln.inner, double(epsilon), ln.param);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status layerNormGrad(Context &ctx, const Tensor &dy, const Tensor &x,
                     const Tensor &scale, const Tensor &mean,
                     const Tensor &invStdDev, int64_t axis, Tensor &dx,
                     Tensor &dscale, Tensor *dbias) {
  const std::string what = "layerNormGrad";
  // As layerNorm: the statistics may have any float dtype.
  if (anyFloat16(dy, x, scale, mean, invStdDev, dx, dscale, dbias))
    PP_RT_TRY(expectSameDType(what, {&x, &dy, &scale, &dx, &dscale, dbias}));
  Tensor dyv, xv, sv, mv, iv, dxv, dsv, dbv;
  LayerNormShape ln;
  PP_RT_TRY(resolveLayerNorm(what, asF32(x, xv), asF32(scale, sv), nullptr,
                             axis, ln));
  PP_RT_TRY(checkLayerNormGradOutputs(asF32(dy, dyv), xv, sv, asF32(mean, mv),
                                      asF32(invStdDev, iv), ln, asF32(dx, dxv),
                                      asF32(dscale, dsv),
                                      dbias ? &asF32(*dbias, dbv) : nullptr));
  cudaStream_t stream = streamOf(ctx);
  int64_t scaleSize = scale.numel();
  // Row chunks of the parameter reduction: enough blocks to fill the GPU,
  // with the partial sums (chunks x inner doubles) kept under 128 MiB.
  int64_t chunks =
      std::min<int64_t>({(ln.outer + 63) / 64, 512,
                         (int64_t(1) << 24) / std::max<int64_t>(ln.inner, 1)});
  chunks = std::max<int64_t>(chunks, 1);
  int64_t rowsPerChunk = std::max<int64_t>(1, (ln.outer + chunks - 1) / chunks);
  Scratch scratch(stream);
  double *partial = nullptr, *fold = nullptr;
  PP_RT_TRY(scratch.alloc(what, 2 * chunks * ln.inner, &partial));
  PP_RT_TRY(scratch.alloc(what, 2 * scaleSize, &fold));
  if (scaleSize > 0)
    PP_CUDA_TRY(
        what, cudaMemsetAsync(fold, 0, 2 * scaleSize * sizeof(double), stream));
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (ln.outer > 0 && ln.inner > 0) {
      layerNormGradKernel<T>
          <<<blocksFor(ln.outer), rowThreads(ln.inner), 0, stream>>>(
              dy.as<T>(), x.as<T>(), scale.as<T>(), mean.data, invStdDev.data,
              mean.dtype, invStdDev.dtype, dx.as<T>(), ln.outer, ln.inner,
              ln.param);
      PP_CUDA_LAUNCHED(what);
      int64_t columnBlocks = (ln.inner + kColumns - 1) / kColumns;
      if (columnBlocks > 0x7fffffff)
        return Status::error(what + ": normalised size too large");
      dim3 grid(static_cast<unsigned>(columnBlocks),
                static_cast<unsigned>(chunks));
      layerNormParamPartialKernel<T>
          <<<grid, dim3(kColumns, kRowThreads), 0, stream>>>(
              dy.as<T>(), x.as<T>(), mean.data, invStdDev.data, mean.dtype,
              invStdDev.dtype, ln.outer, ln.inner, rowsPerChunk, partial,
              partial + chunks * ln.inner);
      PP_CUDA_LAUNCHED(what);
      layerNormParamFoldKernel<<<gridFor(ln.inner), kThreads, 0, stream>>>(
          partial, partial + chunks * ln.inner, chunks, ln.inner, ln.param,
          fold, fold + scaleSize);
      PP_CUDA_LAUNCHED(what);
    }
    if (scaleSize > 0) {
      convertKernel<T><<<gridFor(scaleSize), kThreads, 0, stream>>>(
          fold, dscale.as<T>(), scaleSize);
      PP_CUDA_LAUNCHED(what);
      if (dbias) {
        convertKernel<T><<<gridFor(scaleSize), kThreads, 0, stream>>>(
            fold + scaleSize, dbias->as<T>(), scaleSize);
        PP_CUDA_LAUNCHED(what);
      }
    }
    return Status::success();
  });
}

Status batchNorm(Context &ctx, const Tensor &x, const Tensor &scale,
                 const Tensor &bias, const Tensor &inputMean,
                 const Tensor &inputVar, float epsilon, float momentum,
                 bool training, Tensor &y, Tensor &runningMean,
                 Tensor &runningVar, Tensor *savedMean, Tensor *savedInvStd,
                 bool unbiasedRunningVar, UnaryKind activation) {
  const std::string what = "batchNorm";
  // y has x's dtype, the per-channel tensors any float dtype.
  if (anyFloat16(x, scale, bias, inputMean, inputVar, y, runningMean,
                 runningVar, savedMean, savedInvStd))
    PP_RT_TRY(expectSameDType(what, {&x, &y}));
  Tensor xv, sv, bv, imv, ivv, yv, rmv, rvv, smv, sisv;
  BatchShape bs;
  PP_RT_TRY(checkBatchNorm(
      asF32(x, xv), asF32(scale, sv), asF32(bias, bv), asF32(inputMean, imv),
      asF32(inputVar, ivv), training, asF32(y, yv), asF32(runningMean, rmv),
      asF32(runningVar, rvv), savedMean ? &asF32(*savedMean, smv) : nullptr,
      savedInvStd ? &asF32(*savedInvStd, sisv) : nullptr, unbiasedRunningVar,
      bs));
  if (bs.c == 0)
    return visitFloatOr16(x.dtype, what,
                          [](auto) { return Status::success(); });
  cudaStream_t stream = streamOf(ctx);
  int64_t splits = training ? channelSplits(bs) : 1;
  double count = double(bs.count());
  Scratch scratch(stream);
  double *work = nullptr;
  // [mean C][partial C * splits][coefA C][coefB C]
  PP_RT_TRY(scratch.alloc(what, bs.c * (3 + splits), &work));
  double *batchMean = work, *partial = work + bs.c;
  double *coefA = partial + bs.c * splits, *coefB = coefA + bs.c;
  // Relu runs as y is written; other activations after.
  bool relu = activation == UnaryKind::Relu;
  PP_RT_TRY(visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(bs.c));
    if (training) {
      if (bs.c > 65535)
        return Status::error(what + ": more than 65535 channels");
      channelPartialKernel<T><<<grid, kThreads, 0, stream>>>(
          StatPass::Sum, x.as<T>(), nullptr, nullptr, nullptr, bs.c, bs.plane,
          bs.count(), splits, partial, nullptr);
      PP_CUDA_LAUNCHED(what);
      channelMeanKernel<<<gridFor(bs.c), kThreads, 0, stream>>>(
          partial, bs.c, splits, count, batchMean);
      PP_CUDA_LAUNCHED(what);
      channelPartialKernel<T><<<grid, kThreads, 0, stream>>>(
          StatPass::SquaredDev, x.as<T>(), nullptr, batchMean, nullptr, bs.c,
          bs.plane, bs.count(), splits, partial, nullptr);
      PP_CUDA_LAUNCHED(what);
    }
    batchNormFinishKernel<<<gridFor(bs.c), kThreads, 0, stream>>>(
        training, unbiasedRunningVar, batchMean, partial, splits, bs.c, count,
        double(epsilon), double(momentum), channel(&scale), channel(&bias),
        channel(&inputMean), channel(&inputVar), channel(&runningMean),
        channel(&runningVar), channel(savedMean), channel(savedInvStd), coefA,
        coefB);
    PP_CUDA_LAUNCHED(what);
    int64_t total = x.numel();
    if (total > 0) {
      channelAffineKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
          x.as<T>(), y.as<T>(), total, bs.c, bs.plane, coefA, coefB, relu);
      PP_CUDA_LAUNCHED(what);
    }
    return Status::success();
  }));
  return relu ? Status::success() : applyActivation(ctx, activation, y);
}

/// mean and 1 / sqrt(var + eps) per channel from the two partial passes.
template <typename T>
__global__ void batchStatisticsFinishKernel(const double *batchMean,
                                            const double *partial,
                                            int64_t splits, int64_t c,
                                            double count, double epsilon,
                                            T *mean, T *invStd) {
  int64_t ch = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (ch >= c)
    return;
  double sq = 0;
  for (int64_t s = 0; s < splits; ++s)
    sq += partial[ch * splits + s];
  mean[ch] = narrow<T>(batchMean[ch]);
  invStd[ch] = narrow<T>(1.0 / ::sqrt(sq / count + epsilon));
}

Status batchNormStatistics(Context &ctx, const Tensor &x, double epsilon,
                           Tensor &mean, Tensor &invStd) {
  const std::string what = "batchNormStatistics";
  if (anyFloat16(x, mean, invStd))
    PP_RT_TRY(expectSameDType(what, {&x, &mean, &invStd}));
  if (x.rank() < 2)
    return Status::error(what + ": x needs rank >= 2");
  BatchShape bs;
  bs.n = x.shape[0];
  bs.c = x.shape[1];
  bs.plane = bs.n * bs.c ? x.numel() / (bs.n * bs.c) : 1;
  if (mean.numel() != bs.c || invStd.numel() != bs.c ||
      mean.dtype != x.dtype || invStd.dtype != x.dtype)
    return Status::error(what + ": mean and invStd must hold " +
                         std::to_string(bs.c) + " values of x's dtype");
  if (bs.c == 0)
    return visitFloatOr16(x.dtype, what,
                          [](auto) { return Status::success(); });
  if (bs.c > 65535)
    return Status::error(what + ": more than 65535 channels");
  cudaStream_t stream = streamOf(ctx);
  int64_t splits = channelSplits(bs);
  Scratch scratch(stream);
  double *work = nullptr;
  PP_RT_TRY(scratch.alloc(what, bs.c * (1 + splits), &work));
  double *batchMean = work, *partial = work + bs.c;
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(bs.c));
    channelPartialKernel<T><<<grid, kThreads, 0, stream>>>(
        StatPass::Sum, x.as<T>(), nullptr, nullptr, nullptr, bs.c, bs.plane,
        bs.count(), splits, partial, nullptr);
    PP_CUDA_LAUNCHED(what);
    channelMeanKernel<<<gridFor(bs.c), kThreads, 0, stream>>>(
        partial, bs.c, splits, double(bs.count()), batchMean);
    PP_CUDA_LAUNCHED(what);
    channelPartialKernel<T><<<grid, kThreads, 0, stream>>>(
        StatPass::SquaredDev, x.as<T>(), nullptr, batchMean, nullptr, bs.c,
        bs.plane, bs.count(), splits, partial, nullptr);
    PP_CUDA_LAUNCHED(what);
    batchStatisticsFinishKernel<T><<<gridFor(bs.c), kThreads, 0, stream>>>(
        batchMean, partial, splits, bs.c, double(bs.count()), epsilon,
        mean.as<T>(), invStd.as<T>());
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status batchNormGrad(Context &ctx, const Tensor &dy, const Tensor &x,
                     const Tensor &scale, const Tensor &savedMean,
                     const Tensor &savedInvStd, Tensor &dx, Tensor &dscale,
                     Tensor &dbias) {
  const std::string what = "batchNormGrad";
  // dy and dx have x's dtype, the per-channel tensors any float dtype.
  if (anyFloat16(dy, x, scale, savedMean, savedInvStd, dx, dscale, dbias))
    PP_RT_TRY(expectSameDType(what, {&x, &dy, &dx}));
  Tensor dyv, xv, sv, smv, sisv, dxv, dsv, dbv;
  BatchShape bs;
  PP_RT_TRY(checkBatchNormGrad(asF32(dy, dyv), asF32(x, xv), asF32(scale, sv),
                               asF32(savedMean, smv), asF32(savedInvStd, sisv),
                               asF32(dx, dxv), asF32(dscale, dsv),
                               asF32(dbias, dbv), bs));
  if (bs.c == 0)
    return visitFloatOr16(x.dtype, what,
                          [](auto) { return Status::success(); });
  if (bs.c > 65535)
    return Status::error(what + ": more than 65535 channels");
  cudaStream_t stream = streamOf(ctx);
  int64_t splits = channelSplits(bs);
  double count = double(bs.count());
  Scratch scratch(stream);
  double *work = nullptr;
  // [mean][inv][sumDy][sumDyX][k] (C each), then two partial arrays.
  PP_RT_TRY(scratch.alloc(what, bs.c * (5 + 2 * splits), &work));
  double *mean = work, *inv = work + bs.c, *sumDy = work + 2 * bs.c;
  double *sumDyX = work + 3 * bs.c, *coefK = work + 4 * bs.c;
  double *partialDy = work + 5 * bs.c, *partialDyX = partialDy + bs.c * splits;
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    loadChannelsKernel<<<gridFor(bs.c), kThreads, 0, stream>>>(
        channel(&savedMean), mean, bs.c);
    PP_CUDA_LAUNCHED(what);
    loadChannelsKernel<<<gridFor(bs.c), kThreads, 0, stream>>>(
        channel(&savedInvStd), inv, bs.c);
    PP_CUDA_LAUNCHED(what);
    dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(bs.c));
    channelPartialKernel<T><<<grid, kThreads, 0, stream>>>(
        StatPass::Grad, x.as<T>(), dy.as<T>(), mean, inv, bs.c, bs.plane,
        bs.count(), splits, partialDy, partialDyX);
    PP_CUDA_LAUNCHED(what);
    batchNormGradFinishKernel<<<gridFor(bs.c), kThreads, 0, stream>>>(
        partialDy, partialDyX, splits, bs.c, count, channel(&scale), inv,
        channel(&dscale), channel(&dbias), sumDy, sumDyX, coefK);
    PP_CUDA_LAUNCHED(what);
    int64_t total = x.numel();
    if (total > 0) {
      batchNormGradInputKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
          dy.as<T>(), x.as<T>(), dx.as<T>(), total, bs.c, bs.plane, count, mean,
          inv, sumDy, sumDyX, coefK);
      PP_CUDA_LAUNCHED(what);
    }
    return Status::success();
  });
}

} // namespace pp::rt
