//===- Pool.cu - Pooling CUDA kernels -------------------------------------===//
//
// Max / average pooling with their gradients. Forward kernels run one thread
// per output and walk the window in the CPU backend's order, so ties pick the
// same argmax.
// avgPoolGrad gathers (one thread per input element, no atomics);
// maxPoolGrad scatters through atomics since its windows are unknown. F16
// and BF16 elements are widened to float and computed as F32 ones, each
// output rounded once (maxPoolGrad adds into an f32 copy of dx).
//
//===----------------------------------------------------------------------===//

#include "Window.cuh"

namespace pp::rt {

using namespace cuda;

namespace {

/// Splits a flat position of a [d0, d1, d2] plane.
__device__ __forceinline__ void unflatten(int64_t flat, const int64_t *dims,
                                          int64_t (&p)[3]) {
  p[2] = flat % dims[2];
  flat /= dims[2];
  p[1] = flat % dims[1];
  p[0] = flat / dims[1];
}

/// Only taps inside x compete, so padding never wins; the first maximum
/// wins ties and a NaN propagates (as in PyTorch). A window wholly in
/// padding yields -inf and index -1.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    maxPoolKernel(const T *x, T *y, int64_t *indices, int64_t total,
                  Geometry g) {
  PP_GRID_STRIDE(t, total) {
    int64_t pl = t / g.outSize, flat = t - pl * g.outSize;
    int64_t o[3];
    unflatten(flat, g.out, o);
    const T *xp = x + pl * g.inSize;
    using C = Compute<T>;
    C best = 0;
    int64_t arg = -1;
    forEachTap(g, o, [&](int64_t off) {
      C v = widen(xp[off]);
      if (arg < 0 || v > best || (isNaN(v) && !isNaN(best))) {
        best = v;
        arg = off;
      }
    });
    y[t] = narrow<T>(arg < 0 ? -std::numeric_limits<C>::infinity() : best);
    if (indices)
      indices[t] = arg < 0 ? -1 : pl * g.inSize + arg;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    avgPoolKernel(const T *x, T *y, int64_t total, Geometry g,
                  bool countIncludePad) {
  PP_GRID_STRIDE(t, total) {
    int64_t pl = t / g.outSize, flat = t - pl * g.outSize;
    int64_t o[3];
    unflatten(flat, g.out, o);
    const T *xp = x + pl * g.inSize;
    using C = Compute<T>;
    C sum = 0;
    forEachTap(g, o, [&](int64_t off) { sum += widen(xp[off]); });
    int64_t divisor = avgDivisor(g, o, countIncludePad);
    y[t] = narrow<T>(divisor > 0 ? sum / C(divisor) : C(0));
  }
}

/// dx[i] = sum over the windows o that tap input i of dy[o] / divisor(o).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    avgPoolGradKernel(const T *dy, T *dx, int64_t total, Geometry g,
                      bool countIncludePad) {
  PP_GRID_STRIDE(t, total) {
    int64_t pl = t / g.inSize, flat = t - pl * g.inSize;
    int64_t p[3];
    unflatten(flat, g.in, p);
    const T *dyp = dy + pl * g.outSize;
    using C = Compute<T>;
    C acc = 0;
    int64_t o[3];
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      int64_t nd = p[0] + g.pb[0] - kd * g.d[0];
      if (nd < 0 || nd % g.s[0] != 0 || nd / g.s[0] >= g.out[0])
        continue;
      o[0] = nd / g.s[0];
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        int64_t nh = p[1] + g.pb[1] - kh * g.d[1];
        if (nh < 0 || nh % g.s[1] != 0 || nh / g.s[1] >= g.out[1])
          continue;
        o[1] = nh / g.s[1];
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          int64_t nw = p[2] + g.pb[2] - kw * g.d[2];
          if (nw < 0 || nw % g.s[2] != 0 || nw / g.s[2] >= g.out[2])
            continue;
          o[2] = nw / g.s[2];
          int64_t divisor = avgDivisor(g, o, countIncludePad);
          if (divisor > 0)
            acc += widen(dyp[(o[0] * g.out[1] + o[1]) * g.out[2] + o[2]]) /
                   C(divisor);
        }
      }
    }
    dx[t] = narrow<T>(acc);
  }
}

/// Adds dy[o] onto dx at indices[o] (a flat offset into dx); an index
/// outside o's own (n, c) plane is flagged.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    maxPoolGradKernel(const T *dy, const int64_t *indices, T *dx, int64_t total,
                      int64_t outSize, int64_t inSize,
                      unsigned long long *error) {
  PP_GRID_STRIDE(o, total) {
    int64_t idx = indices[o];
    if (idx < 0) // a window without any input tap
      continue;
    int64_t pl = o / outSize;
    int64_t local = idx - pl * inSize;
    if (local < 0 || local >= inSize) {
      atomicMin(error, static_cast<unsigned long long>(o));
      continue;
    }
    atomicAdd(dx + idx, dy[o]);
  }
}

} // namespace

Status maxPool(Context &ctx, const Tensor &x, const WindowParams &params,
               Tensor &y, Tensor *indices) {
  const char *what = "maxPool";
  if (anyFloat16(x, y))
    PP_RT_TRY(expectSameDType(what, {&x, &y}));
  Geometry g;
  PP_RT_TRY(
      resolvePool(what, checkedAsF32(x), checkedAsF32(y), params, "x", "y", g));
  if (indices) {
    PP_RT_TRY(expectDType(*indices, DType::I64, "maxPool: indices"));
    PP_RT_TRY(expectShape(*indices, y.shape, "maxPool: indices"));
  }
  int64_t total = y.numel();
  if (total == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  int64_t *idx = indices ? indices->as<int64_t>() : nullptr;
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    maxPoolKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        x.as<T>(), y.as<T>(), idx, total, g);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status maxPoolGrad(Context &ctx, const Tensor &dy, const Tensor &indices,
                   Tensor &dx) {
  const char *what = "maxPoolGrad";
  // 16 bits: the atomics add into an f32 dx, rounded once at the end.
  if (anyFloat16(dy, dx))
    return gradInF32(ctx, what, dy, dx,
                     [&](const Tensor &wideDy, Tensor &wideDx) {
                       return maxPoolGrad(ctx, wideDy, indices, wideDx);
                     });
  PoolPlanes pool;
  PP_RT_TRY(checkMaxPoolGrad(dy, indices, dx, pool));
  cudaStream_t stream = streamOf(ctx);
  return visitFloat(dy.dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    PP_RT_TRY(zeroTensor(what, dx, stream));
    int64_t total = dy.numel();
    if (total == 0)
      return Status::success();
    Scratch scratch(stream);
    unsigned long long *flag = nullptr;
    PP_RT_TRY(makeErrorFlag(what, scratch, stream, &flag));
    maxPoolGradKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        dy.as<T>(), indices.as<int64_t>(), dx.as<T>(), total, pool.outSize,
        pool.inSize, flag);
    PP_CUDA_LAUNCHED(what);
    int64_t position;
    PP_RT_TRY(readErrorFlag(what, stream, flag, position));
    if (position >= 0)
      return maxPoolIndexError(dx);
    return Status::success();
  });
}

Status avgPool(Context &ctx, const Tensor &x, const WindowParams &params,
               bool countIncludePad, Tensor &y) {
  const char *what = "avgPool";
  if (anyFloat16(x, y))
    PP_RT_TRY(expectSameDType(what, {&x, &y}));
  Geometry g;
  PP_RT_TRY(
      resolvePool(what, checkedAsF32(x), checkedAsF32(y), params, "x", "y", g));
  int64_t total = y.numel();
  if (total == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    avgPoolKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        x.as<T>(), y.as<T>(), total, g, countIncludePad);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status avgPoolGrad(Context &ctx, const Tensor &dy, const WindowParams &params,
                   bool countIncludePad, Tensor &dx) {
  const char *what = "avgPoolGrad";
  if (anyFloat16(dy, dx))
    PP_RT_TRY(expectSameDType(what, {&dx, &dy}));
  Geometry g;
  PP_RT_TRY(resolvePool(what, checkedAsF32(dx), checkedAsF32(dy), params, "dx",
                        "dy", g));
  int64_t total = dx.numel();
  if (total == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(dx.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    avgPoolGradKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        dy.as<T>(), dx.as<T>(), total, g, countIncludePad);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

} // namespace pp::rt
