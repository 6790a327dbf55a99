//===- Norm.cpp - Layer and batch normalisation -----------------*- C++ -*-===//
//
// LayerNormalization and BatchNormalization with their gradients. Statistics
// accumulate in double whatever the tensor dtype (two passes: mean, then the
// squared deviations), so F32 results do not drift with large reductions.
// Per-channel parameters and statistics may be F32 or F64 independently of
// x, as ONNX allows (stash_type, T1/T2 of BatchNormalization-15). F16 and
// BF16 tensors are widened to f32 and the results rounded back
// (Float16Widening), so a BF16 x may come with F32 statistics.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace pp::rt {
namespace {

using namespace cpu;

/// Reads a small float tensor (parameters, statistics) as doubles.
std::vector<double> readAll(const Tensor &t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = readDouble(t, i);
  return v;
}

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

/// Shapes of a layer norm over dims [axis, rank): `outer` rows of `inner`
/// elements; scale/bias broadcast to the normalised dims, and `paramIndex`
/// maps each of the inner elements to its scale/bias element.
struct LayerNormShape : LayerNormDims {
  std::vector<int64_t> paramIndex;
};

Status resolveLayerNorm(const std::string &what, const Tensor &x,
                        const Tensor &scale, const Tensor *bias, int64_t axis,
                        LayerNormShape &ln) {
  PP_RT_TRY(resolveLayerNormDims(what, x, scale, bias, axis, ln));
  const std::vector<int64_t> &normShape = ln.normShape;
  std::vector<int64_t> strides = broadcastStrides(scale.shape, normShape);
  ln.paramIndex.assign(ln.inner, 0);
  for (int64_t j = 0; j < ln.inner; ++j) {
    int64_t rem = j, off = 0;
    for (int64_t d = static_cast<int64_t>(normShape.size()) - 1; d >= 0; --d) {
      off += (rem % normShape[d]) * strides[d];
      rem /= normShape[d];
    }
    ln.paramIndex[j] = off;
  }
  return Status::success();
}

template <typename T>
void layerNormImpl(const Context &ctx, const LayerNormShape &ln, const T *x,
                   const T *scale, const T *bias, double epsilon, T *y,
                   Tensor &mean, Tensor &invStdDev) {
  int64_t inner = ln.inner;
  std::vector<T> sc(inner), bi(inner, T(0));
  for (int64_t j = 0; j < inner; ++j) {
    sc[j] = scale[ln.paramIndex[j]];
    if (bias)
      bi[j] = bias[ln.paramIndex[j]];
  }
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1));
  parallelFor(ctx, ln.outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = x + r * inner;
      T *yr = y + r * inner;
      double sum = 0, sq = 0;
      for (int64_t j = 0; j < inner; ++j)
        sum += xr[j];
      double mu = sum / double(inner);
      for (int64_t j = 0; j < inner; ++j)
        sq += (xr[j] - mu) * (xr[j] - mu);
      double inv = 1.0 / std::sqrt(sq / double(inner) + epsilon);
      T muT = T(mu), invT = T(inv);
      for (int64_t j = 0; j < inner; ++j)
        yr[j] = (xr[j] - muT) * invT * sc[j] + bi[j];
      writeDouble(mean, r, mu);
      writeDouble(invStdDev, r, inv);
    }
  });
}

template <typename T>
void layerNormGradImpl(const Context &ctx, const LayerNormShape &ln,
                       const T *dy, const T *x, const T *scale,
                       const Tensor &mean, const Tensor &invStdDev, T *dx,
                       T *dscale, int64_t scaleSize, T *dbias) {
  int64_t inner = ln.inner;
  std::vector<double> sc(inner);
  for (int64_t j = 0; j < inner; ++j)
    sc[j] = scale[ln.paramIndex[j]];
  // Parameter gradients: each chunk of rows sums into its own buffer, the
  // buffers merge under a lock.
  std::vector<double> dsAcc(inner, 0.0), dbAcc(inner, 0.0);
  std::mutex merge;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1));
  parallelFor(ctx, ln.outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> ds(inner, 0.0), db(inner, 0.0), xhat(inner);
    for (int64_t r = begin; r < end; ++r) {
      const T *dyr = dy + r * inner, *xr = x + r * inner;
      T *dxr = dx + r * inner;
      double mu = readDouble(mean, r), inv = readDouble(invStdDev, r);
      // dx = inv * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
      double sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < inner; ++j) {
        xhat[j] = (xr[j] - mu) * inv;
        double gj = dyr[j] * sc[j];
        sumG += gj;
        sumGX += gj * xhat[j];
        ds[j] += dyr[j] * xhat[j];
        db[j] += dyr[j];
      }
      double meanG = sumG / double(inner), meanGX = sumGX / double(inner);
      for (int64_t j = 0; j < inner; ++j)
        dxr[j] = T(inv * (dyr[j] * sc[j] - meanG - xhat[j] * meanGX));
    }
    std::lock_guard<std::mutex> lock(merge);
    for (int64_t j = 0; j < inner; ++j) {
      dsAcc[j] += ds[j];
      dbAcc[j] += db[j];
    }
  });
  // Fold the per-element sums onto the (possibly broadcast) parameters.
  std::vector<double> dsFold(scaleSize, 0.0), dbFold(scaleSize, 0.0);
  for (int64_t j = 0; j < inner; ++j) {
    dsFold[ln.paramIndex[j]] += dsAcc[j];
    dbFold[ln.paramIndex[j]] += dbAcc[j];
  }
  for (int64_t i = 0; i < scaleSize; ++i) {
    dscale[i] = T(dsFold[i]);
    if (dbias)
      dbias[i] = T(dbFold[i]);
  }
}

//===----------------------------------------------------------------------===//
// BatchNorm
//===----------------------------------------------------------------------===//

/// Mean and biased variance of channel c.
template <typename T>
void channelMoments(const BatchShape &bs, const T *x, int64_t c, double &mean,
                    double &var) {
  double sum = 0, sq = 0;
  for (int64_t n = 0; n < bs.n; ++n) {
    const T *p = x + (n * bs.c + c) * bs.plane;
    for (int64_t i = 0; i < bs.plane; ++i)
      sum += p[i];
  }
  mean = sum / double(bs.count());
  for (int64_t n = 0; n < bs.n; ++n) {
    const T *p = x + (n * bs.c + c) * bs.plane;
    for (int64_t i = 0; i < bs.plane; ++i)
      sq += (p[i] - mean) * (p[i] - mean);
  }
  var = sq / double(bs.count());
}

/// y = x * a + b on channel c (the folded affine normalisation), and with
/// `Relu` relu of it (as the Relu kernel: `v < 0` keeps NaN and -0).
template <bool Relu, typename T>
void channelAffine(const BatchShape &bs, const T *x, int64_t c, double a,
                   double b, T *y) {
  T aT = T(a), bT = T(b);
  for (int64_t n = 0; n < bs.n; ++n) {
    int64_t off = (n * bs.c + c) * bs.plane;
    const T *xs = x + off;
    T *ys = y + off;
    for (int64_t i = 0; i < bs.plane; ++i) {
      T v = xs[i] * aT + bT;
      ys[i] = Relu && v < T(0) ? T(0) : v;
    }
  }
}

int64_t channelGrain(const BatchShape &bs) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, bs.count()));
}

} // namespace

Status layerNorm(Context &ctx, const Tensor &x, const Tensor &scale,
                 const Tensor *bias, int64_t axis, float epsilon, Tensor &y,
                 Tensor &mean, Tensor &invStdDev) {
  // F16 / BF16 through f32; the statistics may have any float dtype (the
  // stash type), the other tensors x's.
  if (anyFloat16(x, scale, bias, y, mean, invStdDev)) {
    PP_RT_TRY(expectSameDType("layerNorm", {&x, &scale, bias, &y}));
    Float16Widening w(ctx);
    return w.finish(layerNorm(ctx, w.in(x), w.in(scale), w.in(bias), axis,
                              epsilon, w.out(y), w.out(mean),
                              w.out(invStdDev)));
  }
  LayerNormShape ln;
  PP_RT_TRY(resolveLayerNorm("layerNorm", x, scale, bias, axis, ln));
  PP_RT_TRY(checkLayerNormOutputs(x, ln, y, mean, invStdDev));
  PP_RT_FLOAT_DISPATCH(x.dtype, "layerNorm",
                       layerNormImpl<T>(ctx, ln, x.as<T>(), scale.as<T>(),
                                        bias ? bias->as<T>() : nullptr, epsilon,
                                        y.as<T>(), mean, invStdDev));
  return Status::success();
}

Status layerNormGrad(Context &ctx, const Tensor &dy, const Tensor &x,
                     const Tensor &scale, const Tensor &mean,
                     const Tensor &invStdDev, int64_t axis, Tensor &dx,
                     Tensor &dscale, Tensor *dbias) {
  // As layerNorm: the statistics may have any float dtype.
  if (anyFloat16(dy, x, scale, mean, invStdDev, dx, dscale, dbias)) {
    PP_RT_TRY(expectSameDType("layerNormGrad",
                              {&x, &dy, &scale, &dx, &dscale, dbias}));
    Float16Widening w(ctx);
    return w.finish(layerNormGrad(ctx, w.in(dy), w.in(x), w.in(scale),
                                  w.in(mean), w.in(invStdDev), axis, w.out(dx),
                                  w.out(dscale), w.out(dbias)));
  }
  LayerNormShape ln;
  PP_RT_TRY(resolveLayerNorm("layerNormGrad", x, scale, nullptr, axis, ln));
  PP_RT_TRY(checkLayerNormGradOutputs(dy, x, scale, mean, invStdDev, ln, dx,
                                      dscale, dbias));
  PP_RT_FLOAT_DISPATCH(
      x.dtype, "layerNormGrad",
      layerNormGradImpl<T>(ctx, ln, dy.as<T>(), x.as<T>(), scale.as<T>(), mean,
                           invStdDev, dx.as<T>(), dscale.as<T>(), scale.numel(),
                           dbias ? dbias->as<T>() : nullptr));
  return Status::success();
}

Status batchNorm(Context &ctx, const Tensor &x, const Tensor &scale,
                 const Tensor &bias, const Tensor &inputMean,
                 const Tensor &inputVar, float epsilon, float momentum,
                 bool training, Tensor &y, Tensor &runningMean,
                 Tensor &runningVar, Tensor *savedMean, Tensor *savedInvStd,
                 bool unbiasedRunningVar, UnaryKind activation) {
  // F16 / BF16 through f32; y has x's dtype, the per-channel tensors any
  // float dtype.
  if (anyFloat16(x, scale, bias, inputMean, inputVar, y, runningMean,
                 runningVar, savedMean, savedInvStd)) {
    PP_RT_TRY(expectSameDType("batchNorm", {&x, &y}));
    Float16Widening w(ctx);
    return w.finish(
        batchNorm(ctx, w.in(x), w.in(scale), w.in(bias), w.in(inputMean),
                  w.in(inputVar), epsilon, momentum, training, w.out(y),
                  w.inout(runningMean), w.inout(runningVar), w.out(savedMean),
                  w.out(savedInvStd), unbiasedRunningVar, activation));
  }
  bool relu = activation == UnaryKind::Relu;
  BatchShape bs;
  PP_RT_TRY(checkBatchNorm(x, scale, bias, inputMean, inputVar, training, y,
                           runningMean, runningVar, savedMean, savedInvStd,
                           unbiasedRunningVar, bs));
  // Read every per-channel input first: the running outputs may alias them.
  std::vector<double> sc = readAll(scale), bi = readAll(bias);
  std::vector<double> inMean = readAll(inputMean), inVar = readAll(inputVar);
  std::vector<double> mean(bs.c), var(bs.c);
  PP_RT_FLOAT_DISPATCH(x.dtype, "batchNorm", {
    const T *xd = x.as<T>();
    T *yd = y.as<T>();
    parallelFor(ctx, bs.c, channelGrain(bs), [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        if (training) {
          channelMoments(bs, xd, c, mean[c], var[c]);
        } else {
          mean[c] = inMean[c];
          var[c] = inVar[c];
        }
        double inv = 1.0 / std::sqrt(var[c] + double(epsilon));
        double a = inv * sc[c], b = bi[c] - mean[c] * inv * sc[c];
        if (relu)
          channelAffine<true>(bs, xd, c, a, b, yd);
        else
          channelAffine<false>(bs, xd, c, a, b, yd);
      }
    });
  });
  double count = double(bs.count());
  for (int64_t c = 0; c < bs.c; ++c) {
    double inv = 1.0 / std::sqrt(var[c] + double(epsilon));
    if (training) {
      // running = momentum * running + (1 - momentum) * batch.
      double batchVar =
          unbiasedRunningVar ? var[c] * count / (count - 1.0) : var[c];
      writeDouble(runningMean, c,
                  momentum * inMean[c] + (1.0 - momentum) * mean[c]);
      writeDouble(runningVar, c,
                  momentum * inVar[c] + (1.0 - momentum) * batchVar);
    } else {
      writeDouble(runningMean, c, inMean[c]);
      writeDouble(runningVar, c, inVar[c]);
    }
    if (savedMean)
      writeDouble(*savedMean, c, mean[c]);
    if (savedInvStd)
      writeDouble(*savedInvStd, c, inv);
  }
  return relu ? Status::success() : applyActivation(ctx, activation, y);
}

Status batchNormStatistics(Context &ctx, const Tensor &x, double epsilon,
                           Tensor &mean, Tensor &invStd) {
  if (anyFloat16(x, mean, invStd)) {
    PP_RT_TRY(expectSameDType("batchNormStatistics", {&x, &mean, &invStd}));
    Float16Widening w(ctx);
    return w.finish(
        batchNormStatistics(ctx, w.in(x), epsilon, w.out(mean), w.out(invStd)));
  }
  if (x.rank() < 2)
    return Status::error("batchNormStatistics: x needs rank >= 2");
  int64_t n = x.shape[0], c = x.shape[1];
  int64_t plane = n * c != 0 ? x.numel() / (n * c) : 0;
  if (mean.numel() != c || invStd.numel() != c || mean.dtype != x.dtype ||
      invStd.dtype != x.dtype)
    return Status::error("batchNormStatistics: mean and invStd must hold " +
                         std::to_string(c) + " values of x's dtype");
  PP_RT_FLOAT_DISPATCH(x.dtype, "batchNormStatistics", {
    const T *data = x.as<T>();
    parallelFor(ctx, c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ch = begin; ch < end; ++ch) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < plane; ++i)
            sum += data[(b * c + ch) * plane + i];
        double m = sum / double(n * plane);
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < plane; ++i) {
            double d = data[(b * c + ch) * plane + i] - m;
            sq += d * d;
          }
        mean.as<T>()[ch] = static_cast<T>(m);
        invStd.as<T>()[ch] =
            static_cast<T>(1.0 / std::sqrt(sq / double(n * plane) + epsilon));
      }
    });
  });
  return Status::success();
}

Status batchNormGrad(Context &ctx, const Tensor &dy, const Tensor &x,
                     const Tensor &scale, const Tensor &savedMean,
                     const Tensor &savedInvStd, Tensor &dx, Tensor &dscale,
                     Tensor &dbias) {
  // F16 / BF16 through f32; dy and dx have x's dtype, the per-channel
  // tensors any float dtype.
  if (anyFloat16(dy, x, scale, savedMean, savedInvStd, dx, dscale, dbias)) {
    PP_RT_TRY(expectSameDType("batchNormGrad", {&x, &dy, &dx}));
    Float16Widening w(ctx);
    return w.finish(batchNormGrad(ctx, w.in(dy), w.in(x), w.in(scale),
                                  w.in(savedMean), w.in(savedInvStd), w.out(dx),
                                  w.out(dscale), w.out(dbias)));
  }
  BatchShape bs;
  PP_RT_TRY(checkBatchNormGrad(dy, x, scale, savedMean, savedInvStd, dx, dscale,
                               dbias, bs));
  std::vector<double> sc = readAll(scale), mean = readAll(savedMean),
                      inv = readAll(savedInvStd);
  std::vector<double> ds(bs.c), db(bs.c);
  double count = double(bs.count());
  PP_RT_FLOAT_DISPATCH(x.dtype, "batchNormGrad", {
    const T *dyd = dy.as<T>();
    const T *xd = x.as<T>();
    T *dxd = dx.as<T>();
    parallelFor(ctx, bs.c, channelGrain(bs), [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double sumDy = 0, sumDyX = 0;
        for (int64_t n = 0; n < bs.n; ++n) {
          int64_t off = (n * bs.c + c) * bs.plane;
          for (int64_t i = 0; i < bs.plane; ++i) {
            sumDy += dyd[off + i];
            sumDyX += dyd[off + i] * ((xd[off + i] - mean[c]) * inv[c]);
          }
        }
        db[c] = sumDy;
        ds[c] = sumDyX;
        // dx = scale * inv / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)).
        double k = sc[c] * inv[c] / count;
        for (int64_t n = 0; n < bs.n; ++n) {
          int64_t off = (n * bs.c + c) * bs.plane;
          for (int64_t i = 0; i < bs.plane; ++i) {
            double xhat = (xd[off + i] - mean[c]) * inv[c];
            dxd[off + i] =
                T(k * (count * dyd[off + i] - sumDy - xhat * sumDyX));
          }
        }
      }
    });
  });
  for (int64_t c = 0; c < bs.c; ++c) {
    writeDouble(dscale, c, ds[c]);
    writeDouble(dbias, c, db[c]);
  }
  return Status::success();
}

} // namespace pp::rt
