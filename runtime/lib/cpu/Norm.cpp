//===- Norm.cpp - Layer and batch normalisation -----------------*- C++ -*-===//
//
// LayerNormalization and BatchNormalization with their gradients. Statistics
// accumulate in double whatever the tensor dtype (two passes: mean, then the
// squared deviations), so F32 results do not drift with large reductions:
// eight lanes, each of which sums 16 of its elements in the tensor's dtype
// before it adds them into double (Lanes, Block). The elementwise passes
// (y, dx) run in the tensor's dtype.
// Per-channel parameters and statistics may be F32 or F64 independently of
// x, as ONNX allows (stash_type, T1/T2 of BatchNormalization-15). F16 and
// BF16 tensors are widened to f32 and the results rounded back
// (Float16Widening), so a BF16 x may come with F32 statistics.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <tuple>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/// Sums over eight independent partial sums (lanes): lane k adds the
/// elements whose offset in the call is k mod 8, in order, and total()
/// combines the lanes pairwise. A single accumulator is one dependent add per
/// element, and the compiler may not reassociate it by itself. Each lane sums
/// up to kBlockSteps of its elements in T (a Block, held in vector registers)
/// and then adds that into double (Lanes): F32 sums of 16 terms lose little
/// (about 16 ulp of their absolute sum at worst), the sums over a long plane
/// or row stay in double, and F32 arithmetic is twice as wide as double. The
/// lanes are 16-byte GCC / Clang vectors in named members: GCC 12 kept an
/// array of them, or a wider vector, on the stack.
using Pair = double __attribute__((vector_size(16)));
using Quad = float __attribute__((vector_size(16)));
constexpr int64_t kBlockSteps = 16;

struct Lanes {
  Pair a = {}, b = {}, c = {}, d = {};
  Lanes &operator+=(const Lanes &o) {
    a += o.a;
    b += o.b;
    c += o.c;
    d += o.d;
    return *this;
  }
  double total() const {
    Pair p = (a + c) + (b + d);
    return p[0] + p[1];
  }
};

/// Eight consecutive elements of T in vector registers.
template <typename T> struct Block;

template <> struct Block<double> {
  Pair a = {}, b = {}, c = {}, d = {};
  static Block load(const double *p) {
    Block r;
    std::memcpy(&r.a, p, sizeof(Pair));
    std::memcpy(&r.b, p + 2, sizeof(Pair));
    std::memcpy(&r.c, p + 4, sizeof(Pair));
    std::memcpy(&r.d, p + 6, sizeof(Pair));
    return r;
  }
  Block operator+(const Block &o) const {
    return {a + o.a, b + o.b, c + o.c, d + o.d};
  }
  Block operator*(const Block &o) const {
    return {a * o.a, b * o.b, c * o.c, d * o.d};
  }
  Block operator-(double s) const { return {a - s, b - s, c - s, d - s}; }
  void addTo(Lanes &l) const { l += Lanes{a, b, c, d}; }
};

template <> struct Block<float> {
  Quad lo = {}, hi = {};
  static Block load(const float *p) {
    Block r;
    std::memcpy(&r.lo, p, sizeof(Quad));
    std::memcpy(&r.hi, p + 4, sizeof(Quad));
    return r;
  }
  Block operator+(const Block &o) const { return {lo + o.lo, hi + o.hi}; }
  Block operator*(const Block &o) const { return {lo * o.lo, hi * o.hi}; }
  Block operator-(float s) const { return {lo - s, hi - s}; }
  void addTo(Lanes &l) const {
#if defined(__SSE2__)
    // GCC 12 lowers a vector conversion of float pairs to scalar ones.
    l.a += Pair(_mm_cvtps_pd(lo));
    l.b += Pair(_mm_cvtps_pd(_mm_movehl_ps(lo, lo)));
    l.c += Pair(_mm_cvtps_pd(hi));
    l.d += Pair(_mm_cvtps_pd(_mm_movehl_ps(hi, hi)));
#else
    l += Lanes{Pair{lo[0], lo[1]}, Pair{lo[2], lo[3]}, Pair{hi[0], hi[1]},
               Pair{hi[2], hi[3]}};
#endif
  }
};

/// The lanes of the last n < 8 elements' terms, term(k) for element k.
template <typename F> Lanes tailLanes(int64_t n, F term) {
  double t[8] = {};
  for (int64_t k = 0; k < n; ++k)
    t[k] = term(k);
  Lanes r;
  Block<double>::load(t).addTo(r);
  return r;
}

/// Runs step(i, sums...) over the blocks of 8 elements in [0, n), each
/// accumulator a Block<T> added into its Lanes every kBlockSteps blocks;
/// returns the offset of the tail (the last n % 8 elements).
template <typename T, typename Step, typename... Sums>
int64_t blockedSums(int64_t n, Step step, Sums &...sums) {
  int64_t full = n - n % 8, i = 0;
  while (i < full) {
    int64_t end = std::min(full, i + 8 * kBlockSteps);
    std::tuple<decltype((void)sums, Block<T>())...> acc;
    for (; i < end; i += 8)
      std::apply([&](auto &...a) { step(i, a...); }, acc);
    std::apply([&](auto &...a) { (a.addTo(sums), ...); }, acc);
  }
  return i;
}

/// Sum of p[0, n).
template <typename T> Lanes sumOf(const T *p, int64_t n) {
  Lanes sum;
  int64_t i = blockedSums<T>(
      n, [&](int64_t at, Block<T> &s) { s = s + Block<T>::load(p + at); }, sum);
  sum += tailLanes(n - i, [&](int64_t k) { return double(p[i + k]); });
  return sum;
}

/// Sum of (p[i] - mean)^2 over [0, n), the mean rounded to T: that adds
/// n * rounding^2 to the sum, as the deviations' own sum is zero.
template <typename T>
Lanes squaredDeviationOf(const T *p, int64_t n, double mean) {
  Lanes sum;
  T meanT = T(mean);
  int64_t i = blockedSums<T>(
      n,
      [&](int64_t at, Block<T> &s) {
        Block<T> d = Block<T>::load(p + at) - meanT;
        s = s + d * d;
      },
      sum);
  sum += tailLanes(n - i, [&](int64_t k) {
    double d = double(p[i + k] - meanT);
    return d * d;
  });
  return sum;
}

/// sumG += sum of g, sumGX += sum of g * (x - mean) over [0, n), with
/// g = dy * w when Weighted (layer norm's scale), else g = dy (w unused).
template <bool Weighted, typename T>
void addGradSums(Lanes &sumG, Lanes &sumGX, const T *dy, const T *w, const T *x,
                 int64_t n, double mean) {
  T meanT = T(mean);
  auto g = [&](int64_t at) {
    if constexpr (Weighted)
      return dy[at] * w[at];
    else
      return dy[at];
  };
  int64_t i = blockedSums<T>(
      n,
      [&](int64_t at, Block<T> &s, Block<T> &sx) {
        Block<T> gb = Block<T>::load(dy + at);
        if constexpr (Weighted)
          gb = gb * Block<T>::load(w + at);
        s = s + gb;
        sx = sx + gb * (Block<T>::load(x + at) - meanT);
      },
      sumG, sumGX);
  sumG += tailLanes(n - i, [&](int64_t k) { return double(g(i + k)); });
  sumGX += tailLanes(
      n - i, [&](int64_t k) { return double(g(i + k) * (x[i + k] - meanT)); });
}

/// One row of the layer norm gradient over [0, n), in T: dx = inv * (dy * w
/// - meanG - xhat * meanGX) with xhat = (x - mean) * inv, and the row's
/// share of the scale and bias gradients, ds += dy * xhat and db += dy (the
/// caller sums a few rows so, then folds them into double). dx may be dy or
/// x; ds and db are the caller's own buffers.
template <typename T>
void rowGradients(const T *dy, const T *x, const T *w, T *dx, T *__restrict ds,
                  T *__restrict db, int64_t n, T mean, T inv, T meanG,
                  T meanGX) {
  for (int64_t j = 0; j < n; ++j) {
    T g = dy[j], xhat = (x[j] - mean) * inv;
    ds[j] += g * xhat;
    db[j] += g;
    dx[j] = inv * (g * w[j] - meanG - xhat * meanGX);
  }
}

/// dx = dy * a + (x - mean) * b + c over [0, n), in T as the forward's
/// affine pass (the sums above carry the precision; this is one rounding per
/// term); dx may be dy or x (each element is read before it is written).
template <typename T>
void gradAffine(const T *dy, const T *x, T *dx, int64_t n, double mean,
                double a, double b, double c) {
  T meanT = T(mean), aT = T(a), bT = T(b), cT = T(c);
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * aT + (x[i] - meanT) * bT + cT;
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
      double mu = sumOf(xr, inner).total() / double(inner);
      double sq = squaredDeviationOf(xr, inner, mu).total();
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
  std::vector<T> scT(inner);
  for (int64_t j = 0; j < inner; ++j)
    scT[j] = scale[ln.paramIndex[j]];
  // Parameter gradients: each chunk of rows sums into its own buffer, the
  // buffers merge under a lock.
  std::vector<double> dsAcc(inner, 0.0), dbAcc(inner, 0.0);
  std::mutex merge;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1));
  parallelFor(ctx, ln.outer, grain, [&](int64_t begin, int64_t end) {
    // Rows add their parameter gradients in T for kRowsPerFold rows at a
    // time, then into double: T sums of a few terms lose little, and a
    // double update per element and row cost as much as the rest.
    constexpr int64_t kRowsPerFold = 16;
    std::vector<double> ds(inner, 0.0), db(inner, 0.0);
    std::vector<T> dsRows(inner, T(0)), dbRows(inner, T(0));
    auto fold = [&] {
      for (int64_t j = 0; j < inner; ++j) {
        ds[j] += double(dsRows[j]);
        db[j] += double(dbRows[j]);
        dsRows[j] = dbRows[j] = T(0);
      }
    };
    for (int64_t r = begin; r < end; ++r) {
      const T *dyr = dy + r * inner, *xr = x + r * inner;
      T *dxr = dx + r * inner;
      double mu = readDouble(mean, r), inv = readDouble(invStdDev, r);
      // dx = inv * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
      Lanes sumG, sumGX;
      addGradSums</*Weighted=*/true>(sumG, sumGX, dyr, scT.data(), xr, inner,
                                     mu);
      double meanG = sumG.total() / double(inner),
             meanGX = sumGX.total() * inv / double(inner);
      rowGradients(dyr, xr, scT.data(), dxr, dsRows.data(), dbRows.data(),
                   inner, T(mu), T(inv), T(meanG), T(meanGX));
      if ((r - begin) % kRowsPerFold == kRowsPerFold - 1 || r + 1 == end)
        fold();
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
  Lanes sum, sq;
  for (int64_t n = 0; n < bs.n; ++n)
    sum += sumOf(x + (n * bs.c + c) * bs.plane, bs.plane);
  mean = sum.total() / double(bs.count());
  for (int64_t n = 0; n < bs.n; ++n)
    sq += squaredDeviationOf(x + (n * bs.c + c) * bs.plane, bs.plane, mean);
  var = sq.total() / double(bs.count());
}

/// y = (x - mean) * a + b on channel c (the folded affine normalisation),
/// and with `Relu` relu of it (as the Relu kernel: `v < 0` keeps NaN and
/// -0). Centred before the scaling: x * a + (b - mean * a) cancels when the
/// mean is large against the spread.
template <bool Relu, typename T>
void channelAffine(const BatchShape &bs, const T *x, int64_t c, double mean,
                   double a, double b, T *y) {
  T meanT = T(mean), aT = T(a), bT = T(b);
  for (int64_t n = 0; n < bs.n; ++n) {
    int64_t off = (n * bs.c + c) * bs.plane;
    const T *xs = x + off;
    T *ys = y + off;
    for (int64_t i = 0; i < bs.plane; ++i) {
      T v = (xs[i] - meanT) * aT + bT;
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
        double a = inv * sc[c];
        if (relu)
          channelAffine<true>(bs, xd, c, mean[c], a, bi[c], yd);
        else
          channelAffine<false>(bs, xd, c, mean[c], a, bi[c], yd);
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
  BatchShape bs{n, c, plane};
  PP_RT_FLOAT_DISPATCH(x.dtype, "batchNormStatistics", {
    parallelFor(ctx, c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ch = begin; ch < end; ++ch) {
        double m, var;
        channelMoments(bs, x.as<const T>(), ch, m, var);
        mean.as<T>()[ch] = static_cast<T>(m);
        invStd.as<T>()[ch] = static_cast<T>(1.0 / std::sqrt(var + epsilon));
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
        Lanes dySum, dyXSum;
        for (int64_t n = 0; n < bs.n; ++n) {
          int64_t off = (n * bs.c + c) * bs.plane;
          addGradSums</*Weighted=*/false>(dySum, dyXSum, dyd + off,
                                          static_cast<const T *>(nullptr),
                                          xd + off, bs.plane, mean[c]);
        }
        double sumDy = dySum.total(), sumDyX = dyXSum.total() * inv[c];
        db[c] = sumDy;
        ds[c] = sumDyX;
        // dx = scale * inv / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)),
        // as dy * a + (x - mean) * b + c.
        double k = sc[c] * inv[c] / count;
        double a = k * count, b = -k * sumDyX * inv[c], cOff = -k * sumDy;
        for (int64_t n = 0; n < bs.n; ++n) {
          int64_t off = (n * bs.c + c) * bs.plane;
          gradAffine(dyd + off, xd + off, dxd + off, bs.plane, mean[c], a, b,
                     cOff);
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
