//===- Linalg.cpp - Contractions, convolution and pooling -------*- C++ -*-===//
//
// matmul and gemm run on one GEMM primitive: oneDNN's sgemm for F32 where
// the build has oneDNN (Dnnl.h), else OpenBLAS cblas_?gemm when the build
// found it, a plain loop otherwise. Convolution lowers to im2col + GEMM
// over chunks of images (one GEMM per group and chunk), its gradients to GEMM
// + col2im and GEMM against the column matrix; F32 convolutions run on
// oneDNN instead where the build has it and it takes the problem with a JIT
// kernel (Dnnl.h; PP_RUNTIME_CONV=im2col forces im2col), depthwise ones
// that oneDNN does not take so on direct loops (Depthwise.h). Pooling runs
// direct loops over the (n, c) planes. Spatial geometry is normalised to three
// dims (missing leading dims have size 1), so one loop nest serves 1-D, 2-D and
// 3-D. F16 and BF16 operands run this f32 code on widened copies
// (Float16Widening): GEMMs accumulate in f32. A kernel with taps that
// only ever read padding runs cut to its live taps first (DeadTaps.h).
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "DeadTaps.h"
#include "Depthwise.h"
#include "Dnnl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#ifdef PP_RUNTIME_HAVE_CBLAS
#include <cblas.h>
#endif

namespace pp::rt {
namespace {

using namespace cpu;

int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Runs fn(i, ctx') for i in [0, n): in parallel with single-threaded inner
/// work when there are at least as many items as threads, else one after the
/// other so that each item may use all threads itself (OpenBLAS does).
template <typename Fn>
void forEachItem(const Context &ctx, int64_t n, const Fn &fn) {
  if (ctx.numThreads > 1 && n >= ctx.numThreads) {
    Context serial = ctx;
    serial.numThreads = 1;
    parallelFor(ctx, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        fn(i, serial);
    });
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    fn(i, ctx);
}

//===----------------------------------------------------------------------===//
// GEMM primitive
//===----------------------------------------------------------------------===//

/// c = alpha * op(a) * op(b) + beta * c on row-major matrices with leading
/// dims, op(a) being m x k and op(b) k x n. beta == 0 overwrites c (as BLAS
/// does: NaNs already in c do not propagate).
template <typename T>
void gemmRaw(const Context &ctx, bool transA, bool transB, int64_t m, int64_t n,
             int64_t k, T alpha, const T *a, int64_t lda, const T *b,
             int64_t ldb, T beta, T *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  auto scaleC = [&](int64_t i) {
    T *ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j)
      ci[j] = beta == T(0) ? T(0) : beta * ci[j];
  };
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      scaleC(i);
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    if (dnnlSgemm(ctx, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c,
                  ldc))
      return;
#ifdef PP_RUNTIME_HAVE_CBLAS
  constexpr int64_t intMax = std::numeric_limits<int>::max();
  if (m <= intMax && n <= intMax && k <= intMax && lda <= intMax &&
      ldb <= intMax && ldc <= intMax) {
    CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a,
                  int(lda), b, int(ldb), beta, c, int(ldc));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a,
                  int(lda), b, int(ldb), beta, c, int(ldc));
    return;
  }
#endif
  // Fallback: rows of c in parallel; i-k-j order keeps the inner loop
  // contiguous over b and c when b is not transposed.
  int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / (n * k));
  parallelFor(ctx, m, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      scaleC(i);
      T *ci = c + i * ldc;
      if (!transB) {
        for (int64_t p = 0; p < k; ++p) {
          T aip = alpha * (transA ? a[p * lda + i] : a[i * lda + p]);
          const T *bp = b + p * ldb;
          for (int64_t j = 0; j < n; ++j)
            ci[j] += aip * bp[j];
        }
      } else {
        for (int64_t j = 0; j < n; ++j) {
          const T *bj = b + j * ldb;
          T acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += (transA ? a[p * lda + i] : a[i * lda + p]) * bj[p];
          ci[j] += alpha * acc;
        }
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// matmul / gemm
//===----------------------------------------------------------------------===//

/// Whether an operand's batch dims (padded with ones on the left) are the
/// whole batch: its matrices lie one after the other in batch order.
bool wholeBatch(const std::vector<int64_t> &dims,
                const std::vector<int64_t> &batch) {
  std::vector<int64_t> padded(batch.size() - dims.size(), 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return padded == batch;
}

template <typename T>
void matmulImpl(const Context &ctx, const T *a, const T *b, T *y,
                const MatmulShape &ms, bool transA, bool transB) {
  int64_t m = ms.m, k = ms.k, n = ms.n;
  int64_t batchCount = product(ms.batch);
  // Leading dims of the stored matrices: a is [m, k] or, transposed, [k, m].
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  // b shared by every batch and a not broadcast (nor transposed): fold a's
  // batch into rows and run one large GEMM (the common linear-layer case).
  if (product(ms.bBatch) == 1 && ms.aBatch == ms.batch && !transA) {
    gemmRaw<T>(ctx, false, transB, batchCount * m, n, k, T(1), a, lda, b, ldb,
               T(0), y, n);
    return;
  }
  // Each operand whole or one shared matrix (attention's products): one
  // batched matmul primitive, not a GEMM call per matrix (swin_t's
  // 432 x 49 x 32 x 49 q k^T: 0.61 against 1.04 ms on one thread). With a
  // transposed a, sgemm per matrix was as fast or faster (0.53 against
  // 0.56 ms; bench/README.md).
  if constexpr (std::is_same_v<T, float>) {
    bool aShared = product(ms.aBatch) == 1, bShared = product(ms.bBatch) == 1;
    if (!transA && (aShared || wholeBatch(ms.aBatch, ms.batch)) &&
        (bShared || wholeBatch(ms.bBatch, ms.batch)) &&
        dnnlBatchedMatmul(ctx, batchCount, transA, aShared, transB, bShared, m,
                          n, k, a, b, y))
      return;
  }
  std::vector<int64_t> aStrides = broadcastStrides(ms.aBatch, ms.batch);
  std::vector<int64_t> bStrides = broadcastStrides(ms.bBatch, ms.batch);
  int64_t rank = static_cast<int64_t>(ms.batch.size());
  forEachItem(ctx, batchCount, [&](int64_t i, const Context &inner) {
    int64_t aOff = 0, bOff = 0, rem = i;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t idx = rem % ms.batch[d];
      rem /= ms.batch[d];
      aOff += idx * aStrides[d];
      bOff += idx * bStrides[d];
    }
    gemmRaw<T>(inner, transA, transB, m, n, k, T(1), a + aOff * m * k, lda,
               b + bOff * k * n, ldb, T(0), y + i * m * n, n);
  });
}

} // namespace

Status matmul(Context &ctx, const Tensor &a, const Tensor &b, Tensor &y,
              bool transA, bool transB) {
  // F16 / BF16: sgemm on f32 copies (f32 accumulation), rounded once.
  if (anyFloat16(a, b, y)) {
    PP_RT_TRY(expectSameDType("matmul", {&a, &b, &y}));
    Float16Widening w(ctx);
    return w.finish(matmul(ctx, w.in(a), w.in(b), w.out(y), transA, transB));
  }
  MatmulShape ms;
  PP_RT_TRY(checkMatmul(a, b, y, ms, transA, transB));
  PP_RT_FLOAT_DISPATCH(
      a.dtype, "matmul",
      matmulImpl<T>(ctx, a.as<T>(), b.as<T>(), y.as<T>(), ms, transA, transB));
  return Status::success();
}

Status gemm(Context &ctx, const Tensor &a, const Tensor &b, const Tensor *c,
            float alpha, float beta, bool transA, bool transB, Tensor &y,
            UnaryKind activation) {
  if (anyFloat16(a, b, c, y)) {
    PP_RT_TRY(expectSameDType("gemm", {&a, &b, c, &y}));
    Float16Widening w(ctx);
    return w.finish(gemm(ctx, w.in(a), w.in(b), w.in(c), alpha, beta, transA,
                         transB, w.out(y), activation));
  }
  int64_t m = 0, k = 0, n = 0;
  PP_RT_TRY(checkGemm(a, b, c, transA, transB, y, m, k, n));
  std::vector<int64_t> cStrides;
  if (c)
    cStrides = broadcastStrides(c->shape, {m, n});
  bool useC = c && beta != 0.f;
  // A linear layer (c a bias row, beta 1) and its Relu: oneDNN's matmul adds
  // both as it writes y, where it runs the GEMM, instead of a copy of the
  // bias before and a pass after.
  bool biasRow = useC && beta == 1.f && cStrides[0] == 0 && cStrides[1] == 1;
  bool relu = activation == UnaryKind::Relu;
  if (a.dtype == DType::F32 && k > 0 && (!useC || biasRow) &&
      dnnlGemmEpilogue(ctx, transA, transB, m, n, k, alpha, a.as<float>(),
                       a.shape[1], b.as<float>(), b.shape[1],
                       useC ? c->as<float>() : nullptr, relu, y.as<float>(), n))
    return relu ? Status::success() : applyActivation(ctx, activation, y);
  PP_RT_FLOAT_DISPATCH(a.dtype, "gemm", {
    T *yd = y.as<T>();
    if (useC) {
      const T *cd = c->as<T>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          yd[i * n + j] = cd[i * cStrides[0] + j * cStrides[1]];
    }
    gemmRaw<T>(ctx, transA, transB, m, n, k, T(alpha), a.as<T>(), a.shape[1],
               b.as<T>(), b.shape[1], useC ? T(beta) : T(0), yd, n);
  });
  return applyActivation(ctx, activation, y);
}

//===----------------------------------------------------------------------===//
// Window geometry
//===----------------------------------------------------------------------===//

namespace {

/// Output positions o in [lo, hi) whose tap o * s + off lies in [0, in).
void validRange(int64_t in, int64_t out, int64_t s, int64_t off, int64_t &lo,
                int64_t &hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = in - off <= 0 ? 0 : (in - off + s - 1) / s;
  lo = std::min(lo, out);
  hi = std::max(lo, std::min(hi, out));
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// A convolution x [N, C, in...] * w [M, C / G, k...] -> y [N, M, out...].
struct ConvProblem : ConvDims {
  int64_t rows() const { return cinG * geo.kSize; } // GEMM K per group
};

/// Copies the receptive fields of one input plane x into kSize rows of a
/// column matrix (row stride ld): row r holds, for every output position,
/// the input under kernel tap r (0 where the tap falls into padding).
template <typename T>
void im2colPlane(const Geometry &g, const T *x, T *col, int64_t ld) {
  int64_t outHW = g.out[1] * g.out[2];
  T *row = col;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, row += ld) {
        int64_t offW = kw * g.d[2] - g.pb[2], lo, hi;
        validRange(g.in[2], g.out[2], g.s[2], offW, lo, hi);
        for (int64_t od = 0; od < g.out[0]; ++od) {
          T *rowD = row + od * outHW;
          int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
          if (id < 0 || id >= g.in[0]) {
            std::fill(rowD, rowD + outHW, T(0));
            continue;
          }
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            T *dst = rowD + oh * g.out[2];
            int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih < 0 || ih >= g.in[1]) {
              std::fill(dst, dst + g.out[2], T(0));
              continue;
            }
            const T *src = x + (id * g.in[1] + ih) * g.in[2] + offW;
            std::fill(dst, dst + lo, T(0));
            if (g.s[2] == 1)
              std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(T));
            else
              for (int64_t ow = lo; ow < hi; ++ow)
                dst[ow] = src[ow * g.s[2]];
            std::fill(dst + hi, dst + g.out[2], T(0));
          }
        }
      }
}

/// The adjoint of im2colPlane: adds every column entry back onto the input
/// position it was copied from (x must be zeroed or hold a partial sum).
template <typename T>
void col2imPlane(const Geometry &g, const T *col, int64_t ld, T *x) {
  int64_t outHW = g.out[1] * g.out[2];
  const T *row = col;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, row += ld) {
        int64_t offW = kw * g.d[2] - g.pb[2], lo, hi;
        validRange(g.in[2], g.out[2], g.s[2], offW, lo, hi);
        for (int64_t od = 0; od < g.out[0]; ++od) {
          int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
          if (id < 0 || id >= g.in[0])
            continue;
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih < 0 || ih >= g.in[1])
              continue;
            const T *src = row + od * outHW + oh * g.out[2];
            T *dst = x + (id * g.in[1] + ih) * g.in[2] + offW;
            for (int64_t ow = lo; ow < hi; ++ow)
              dst[ow * g.s[2]] += src[ow];
          }
        }
      }
}

/// How the images are batched into one GEMM: `images` per chunk; `direct`
/// when a 1x1, stride-1, unpadded kernel lets the GEMM read x itself.
struct ConvPlan {
  int64_t images = 1;
  bool direct = false;
};

ConvPlan planConv(const ConvProblem &cp, int64_t elemBytes) {
  const Geometry &g = cp.geo;
  // Enough columns (images * output positions) for an efficient GEMM, with
  // the column matrix of one chunk bounded in size.
  constexpr int64_t targetCols = 4096, maxColBytes = int64_t(16) << 20;
  int64_t p = std::max<int64_t>(1, g.outSize);
  int64_t perImage = std::max<int64_t>(1, cp.c * g.kSize * p * elemBytes);
  ConvPlan plan;
  plan.images = std::min((targetCols + p - 1) / p,
                         std::max<int64_t>(1, maxColBytes / perImage));
  plan.images = std::max<int64_t>(1, std::min(plan.images, cp.n));
  bool pointwise = g.kSize == 1;
  for (int i = 0; i < 3; ++i)
    pointwise = pointwise && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
  // Without batching, im2col of a pointwise kernel would only copy x.
  plan.direct = pointwise && plan.images == 1;
  return plan;
}

/// Runs fn(n0, count, ctx', scratch) over the chunks of plan.images images,
/// then done(scratch) once per worker. Chunks run in parallel (each with
/// single-threaded GEMMs) when there are enough of them; otherwise one after
/// the other with every thread inside. Each worker owns `scratchSize`
/// elements of scratch, reused across its chunks.
template <typename T, typename Fn, typename Done>
void forEachChunk(const Context &ctx, const ConvProblem &cp,
                  const ConvPlan &plan, int64_t scratchSize, const Fn &fn,
                  const Done &done) {
  int64_t chunks = (cp.n + plan.images - 1) / plan.images;
  auto run = [&](int64_t begin, int64_t end, const Context &inner) {
    std::vector<T> scratch(scratchSize);
    for (int64_t ci = begin; ci < end; ++ci) {
      int64_t n0 = ci * plan.images;
      fn(n0, std::min(plan.images, cp.n - n0), inner, scratch.data());
    }
    done(scratch.data());
  };
  if (ctx.numThreads > 1 && chunks >= ctx.numThreads) {
    Context serial = ctx;
    serial.numThreads = 1;
    parallelFor(ctx, chunks, 1,
                [&](int64_t begin, int64_t end) { run(begin, end, serial); });
  } else {
    run(0, chunks, ctx);
  }
}

/// Fills the column matrix of images [n0, n0 + count): row ch * kSize + r,
/// column (n - n0) * P + p, row stride count * P.
template <typename T>
void im2colChunk(const Context &ctx, const ConvProblem &cp, const T *x,
                 int64_t n0, int64_t count, T *col) {
  const Geometry &g = cp.geo;
  int64_t cols = count * g.outSize;
  parallelFor(ctx, count * cp.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      int64_t n = u / cp.c, ch = u % cp.c;
      im2colPlane(g, x + ((n0 + n) * cp.c + ch) * g.inSize,
                  col + ch * g.kSize * cols + n * g.outSize, cols);
    }
  });
}

/// Calls fn(n, m, src, dst) for the P-element rows that move between an
/// [M][count * P] GEMM layout and the [count][M][P] tensor layout.
template <typename Fn>
void forEachOutputRow(const Context &ctx, const ConvProblem &cp, int64_t count,
                      const Fn &fn) {
  int64_t p = std::max<int64_t>(1, cp.geo.outSize);
  parallelFor(ctx, count * cp.m, std::max<int64_t>(1, 4096 / p),
              [&](int64_t begin, int64_t end) {
                for (int64_t u = begin; u < end; ++u)
                  fn(u / cp.m, u % cp.m);
              });
}

/// Gathers dy[n0 .. n0 + count) into [M][count * P] so that one GEMM per
/// group covers the whole chunk; returns dy itself for a single image.
template <typename T>
const T *gatherOutputs(const Context &ctx, const ConvProblem &cp, const T *dy,
                       int64_t n0, int64_t count, T *buffer) {
  int64_t p = cp.geo.outSize, cols = count * p;
  if (count == 1)
    return dy + n0 * cp.m * p;
  forEachOutputRow(ctx, cp, count, [&](int64_t n, int64_t m) {
    std::memcpy(buffer + m * cols + n * p, dy + ((n0 + n) * cp.m + m) * p,
                p * sizeof(T));
  });
  return buffer;
}

template <typename T>
void convForward(const Context &ctx, const ConvProblem &cp, const T *x,
                 const T *w, const T *bias, T *y) {
  const Geometry &g = cp.geo;
  ConvPlan plan = planConv(cp, sizeof(T));
  int64_t p = g.outSize, k = cp.rows();
  int64_t colSize = plan.direct ? 0 : cp.c * g.kSize * plan.images * p;
  int64_t outSize = plan.images > 1 ? cp.m * plan.images * p : 0;
  auto chunk = [&](int64_t n0, int64_t count, const Context &inner,
                   T *scratch) {
    int64_t cols = count * p;
    T *col = scratch;
    if (!plan.direct)
      im2colChunk(inner, cp, x, n0, count, col);
    // y of a single image is already [M][P]: the GEMM writes it in place.
    T *dst = count > 1 ? scratch + colSize : y + n0 * cp.m * p;
    forEachItem(inner, cp.group, [&](int64_t gi, const Context &gemmCtx) {
      const T *b = plan.direct ? x + (n0 * cp.c + gi * cp.cinG) * g.inSize
                               : col + gi * k * cols;
      gemmRaw<T>(gemmCtx, false, false, cp.coutG, cols, k, T(1),
                 w + gi * cp.coutG * k, k, b, cols, T(0),
                 dst + gi * cp.coutG * cols, cols);
    });
    // Scatter [M][count][P] to y[n][M][P] and add the bias.
    forEachOutputRow(inner, cp, count, [&](int64_t n, int64_t m) {
      const T *src = dst + m * cols + n * p;
      T *yd = y + ((n0 + n) * cp.m + m) * p;
      T b = bias ? bias[m] : T(0);
      for (int64_t i = 0; i < p; ++i)
        yd[i] = src[i] + b;
    });
  };
  forEachChunk<T>(ctx, cp, plan, colSize + outSize, chunk, [](T *) {});
}

template <typename T>
void convBackwardInput(const Context &ctx, const ConvProblem &cp, const T *dy,
                       const T *w, T *dx) {
  const Geometry &g = cp.geo;
  ConvPlan plan = planConv(cp, sizeof(T));
  int64_t p = g.outSize, k = cp.rows();
  int64_t colSize = plan.direct ? 0 : cp.c * g.kSize * plan.images * p;
  int64_t dySize = plan.images > 1 ? cp.m * plan.images * p : 0;
  auto chunk = [&](int64_t n0, int64_t count, const Context &inner,
                   T *scratch) {
    int64_t cols = count * p;
    T *dcol = scratch;
    const T *dys = gatherOutputs(inner, cp, dy, n0, count, scratch + colSize);
    // dcol_g = w_g^T * dy_g (directly dx_g for pointwise kernels).
    forEachItem(inner, cp.group, [&](int64_t gi, const Context &gemmCtx) {
      T *dst = plan.direct ? dx + (n0 * cp.c + gi * cp.cinG) * g.inSize
                           : dcol + gi * k * cols;
      gemmRaw<T>(gemmCtx, true, false, k, cols, cp.coutG, T(1),
                 w + gi * cp.coutG * k, k, dys + gi * cp.coutG * cols, cols,
                 T(0), dst, cols);
    });
    if (plan.direct)
      return;
    // Each (n, channel) plane only receives its own rows: race free.
    parallelFor(inner, count * cp.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        int64_t n = u / cp.c, ch = u % cp.c;
        T *plane = dx + ((n0 + n) * cp.c + ch) * g.inSize;
        std::fill(plane, plane + g.inSize, T(0));
        col2imPlane(g, dcol + ch * g.kSize * cols + n * p, cols, plane);
      }
    });
  };
  forEachChunk<T>(ctx, cp, plan, colSize + dySize, chunk, [](T *) {});
}

template <typename T>
void convBackwardWeight(const Context &ctx, const ConvProblem &cp, const T *dy,
                        const T *x, T *dw) {
  const Geometry &g = cp.geo;
  ConvPlan plan = planConv(cp, sizeof(T));
  int64_t p = g.outSize, k = cp.rows(), dwSize = cp.m * k;
  int64_t colSize = plan.direct ? 0 : cp.c * g.kSize * plan.images * p;
  int64_t dySize = plan.images > 1 ? cp.m * plan.images * p : 0;
  std::fill(dw, dw + dwSize, T(0));
  // Each worker sums its chunks into a private dw (scratch front), merged
  // into dw under a lock when it is done.
  std::mutex merge;
  auto chunk = [&](int64_t n0, int64_t count, const Context &inner,
                   T *scratch) {
    int64_t cols = count * p;
    T *partial = scratch, *col = scratch + dwSize;
    const T *dys =
        gatherOutputs(inner, cp, dy, n0, count, scratch + dwSize + colSize);
    if (!plan.direct)
      im2colChunk(inner, cp, x, n0, count, col);
    // partial_g += dy_g * col_g^T.
    forEachItem(inner, cp.group, [&](int64_t gi, const Context &gemmCtx) {
      const T *b = plan.direct ? x + (n0 * cp.c + gi * cp.cinG) * g.inSize
                               : col + gi * k * cols;
      gemmRaw<T>(gemmCtx, false, true, cp.coutG, k, cols, T(1),
                 dys + gi * cp.coutG * cols, cols, b, cols, T(1),
                 partial + gi * cp.coutG * k, k);
    });
  };
  auto done = [&](T *scratch) {
    std::lock_guard<std::mutex> lock(merge);
    for (int64_t i = 0; i < dwSize; ++i)
      dw[i] += scratch[i];
  };
  forEachChunk<T>(ctx, cp, plan, dwSize + colSize + dySize, chunk, done);
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Walks the windows of one plane: start(flat, o) before the taps of output
/// o (flat index `flat`), tap(offset) for each tap inside the input, then
/// finish(flat, o).
template <typename Start, typename Tap, typename Finish>
void forEachWindow(const Geometry &g, const Start &start, const Tap &tap,
                   const Finish &finish) {
  int64_t o[3], flat = 0;
  for (o[0] = 0; o[0] < g.out[0]; ++o[0])
    for (o[1] = 0; o[1] < g.out[1]; ++o[1])
      for (o[2] = 0; o[2] < g.out[2]; ++o[2], ++flat) {
        start(flat, o);
        forEachTap(g, o, tap);
        finish(flat, o);
      }
}

int64_t planeGrain(const Geometry &g) {
  return std::max<int64_t>(1,
                           16384 / std::max<int64_t>(1, g.outSize * g.kSize));
}

/// Pools of one or two spatial dims without dilation (every CNN's): the
/// in-bounds taps of each window form a rectangle, clamped once per window,
/// where the general walk (forEachWindow) tests every tap (MaxPool: 23% of
/// a squeezenet step; AveragePool: 99 ms of a maxvit_t step).
bool planarWindows(const Geometry &g) {
  return g.out[0] == 1 && g.in[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 &&
         g.d[1] == 1 && g.d[2] == 1;
}

/// Calls fn(flat, oh, ow, h0, h1, w0, w1) for each output of a planar pool
/// in order: rows [h0, h1) and columns [w0, w1) of the input are its
/// window's in-bounds taps (empty for a window wholly in padding), in the
/// order forEachWindow visits them.
template <typename Fn> void forEachPlanarWindow(const Geometry &g, Fn &&fn) {
  for (int64_t oh = 0, flat = 0; oh < g.out[1]; ++oh) {
    int64_t ih0 = oh * g.s[1] - g.pb[1];
    int64_t h0 = std::max<int64_t>(ih0, 0);
    int64_t h1 = std::min<int64_t>(ih0 + g.k[1], g.in[1]);
    for (int64_t ow = 0; ow < g.out[2]; ++ow, ++flat) {
      int64_t iw0 = ow * g.s[2] - g.pb[2];
      int64_t w0 = std::max<int64_t>(iw0, 0);
      int64_t w1 = std::min<int64_t>(iw0 + g.k[2], g.in[2]);
      fn(flat, oh, ow, h0, h1, w0, w1);
    }
  }
}

/// The divisors of a planar average pool: divisor(oh, ow) = rows[oh] *
/// cols[ow], as avgDivisor computes them (its depth factor is 1).
struct PlanarDivisors {
  std::vector<int64_t> rows, cols;
  PlanarDivisors(const Geometry &g, bool countIncludePad)
      : rows(g.out[1]), cols(g.out[2]) {
    for (int i : {1, 2}) {
      std::vector<int64_t> &counts = i == 1 ? rows : cols;
      for (int64_t o = 0; o < g.out[i]; ++o)
        counts[o] = countIncludePad
                        ? countTaps(g, i, o, -g.pb[i], g.in[i] + g.pe[i])
                        : countTaps(g, i, o, 0, g.in[i]);
    }
  }
};

/// A thread's buffer for a cut kernel or its gradient (DeadTaps.h): grown,
/// never shrunk, so that a step's calls do not allocate. The cut problem
/// has no dead taps, so the call it makes never reuses the buffer it holds.
void *cropBuffer(int slot, int64_t bytes) {
  thread_local std::vector<unsigned char> buffers[2];
  std::vector<unsigned char> &buffer = buffers[slot];
  if (buffer.size() < static_cast<size_t>(bytes))
    buffer.resize(static_cast<size_t>(bytes));
  return buffer.data();
}

Tensor cropTensor(int slot, DType dtype, const std::vector<int64_t> &shape) {
  Tensor t{nullptr, dtype, shape};
  t.data = cropBuffer(slot, t.bytes());
  return t;
}

} // namespace

Status conv(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *b,
            const WindowParams &params, Tensor &y, UnaryKind activation) {
  // F16 / BF16: im2col + sgemm on f32 copies, rounded once.
  if (anyFloat16(x, w, b, y)) {
    PP_RT_TRY(expectSameDType("conv", {&x, &w, b, &y}));
    Float16Widening wide(ctx);
    return wide.finish(conv(ctx, wide.in(x), wide.in(w), wide.in(b), params,
                            wide.out(y), activation));
  }
  static const char *const names[3] = {"x", "w", "y"};
  ConvProblem cp;
  PP_RT_TRY(resolveConvDims("conv", x, w, y, params, names, cp));
  if (b) {
    PP_RT_TRY(expectDType(*b, x.dtype, "conv: b"));
    PP_RT_TRY(expectShape(*b, {cp.m}, "conv: b"));
  }
  if (auto crop = cropDeadTaps(cp, static_cast<int>(x.rank()) - 2, params)) {
    Tensor cut = cropTensor(0, w.dtype, crop->weightShape);
    gatherTaps(cp, *crop, w, cut.data);
    return conv(ctx, x, cut, b, crop->params, y, activation);
  }
  bool reluPostOp = activation == UnaryKind::Relu;
  if (x.dtype == DType::F32 && convImpl() != ConvImpl::Im2col &&
      dnnlConvForward(ctx, cp, static_cast<int>(x.rank()) - 2, x.as<float>(),
                      w.as<float>(), b ? b->as<float>() : nullptr,
                      y.as<float>(), reluPostOp))
    return reluPostOp ? Status::success() : applyActivation(ctx, activation, y);
  if (convImpl() == ConvImpl::Auto && isDepthwise(cp)) {
    PP_RT_FLOAT_DISPATCH(x.dtype, "conv",
                         depthwiseForward<T>(ctx, cp, x.as<T>(), w.as<T>(),
                                             b ? b->as<T>() : nullptr,
                                             y.as<T>()));
    return applyActivation(ctx, activation, y);
  }
  PP_RT_FLOAT_DISPATCH(x.dtype, "conv",
                       convForward<T>(ctx, cp, x.as<T>(), w.as<T>(),
                                      b ? b->as<T>() : nullptr, y.as<T>()));
  return applyActivation(ctx, activation, y);
}

Status convGradInput(Context &ctx, const Tensor &dy, const Tensor &w,
                     const WindowParams &params, Tensor &dx) {
  if (anyFloat16(dy, w, dx)) {
    PP_RT_TRY(expectSameDType("convGradInput", {&dx, &w, &dy}));
    Float16Widening wide(ctx);
    return wide.finish(
        convGradInput(ctx, wide.in(dy), wide.in(w), params, wide.out(dx)));
  }
  static const char *const names[3] = {"dx", "w", "dy"};
  ConvProblem cp;
  PP_RT_TRY(resolveConvDims("convGradInput", dx, w, dy, params, names, cp));
  if (auto crop = cropDeadTaps(cp, static_cast<int>(dx.rank()) - 2, params)) {
    Tensor cut = cropTensor(0, w.dtype, crop->weightShape);
    gatherTaps(cp, *crop, w, cut.data);
    return convGradInput(ctx, dy, cut, crop->params, dx);
  }
  if (dx.dtype == DType::F32 && convImpl() != ConvImpl::Im2col &&
      dnnlConvBackwardData(ctx, cp, static_cast<int>(dx.rank()) - 2,
                           dy.as<float>(), w.as<float>(), dx.as<float>()))
    return Status::success();
  if (convImpl() == ConvImpl::Auto && isDepthwise(cp)) {
    PP_RT_FLOAT_DISPATCH(
        dx.dtype, "convGradInput",
        depthwiseBackwardData<T>(ctx, cp, dy.as<T>(), w.as<T>(), dx.as<T>()));
    return Status::success();
  }
  PP_RT_FLOAT_DISPATCH(
      dx.dtype, "convGradInput",
      convBackwardInput<T>(ctx, cp, dy.as<T>(), w.as<T>(), dx.as<T>()));
  return Status::success();
}

Status convGradWeight(Context &ctx, const Tensor &dy, const Tensor &x,
                      const WindowParams &params, Tensor &dw) {
  if (anyFloat16(dy, x, dw)) {
    PP_RT_TRY(expectSameDType("convGradWeight", {&x, &dw, &dy}));
    Float16Widening w(ctx);
    return w.finish(convGradWeight(ctx, w.in(dy), w.in(x), params, w.out(dw)));
  }
  static const char *const names[3] = {"x", "dw", "dy"};
  ConvProblem cp;
  PP_RT_TRY(resolveConvDims("convGradWeight", x, dw, dy, params, names, cp));
  if (auto crop = cropDeadTaps(cp, static_cast<int>(x.rank()) - 2, params)) {
    Tensor cut = cropTensor(1, dw.dtype, crop->weightShape);
    PP_RT_TRY(convGradWeight(ctx, dy, x, crop->params, cut));
    scatterTaps(cp, *crop, cut.data, dw);
    return Status::success();
  }
  if (x.dtype == DType::F32 && convImpl() != ConvImpl::Im2col &&
      dnnlConvBackwardWeights(ctx, cp, static_cast<int>(x.rank()) - 2,
                              dy.as<float>(), x.as<float>(), dw.as<float>()))
    return Status::success();
  if (convImpl() == ConvImpl::Auto && isDepthwise(cp)) {
    PP_RT_FLOAT_DISPATCH(x.dtype, "convGradWeight",
                         depthwiseBackwardWeights<T>(ctx, cp, dy.as<T>(),
                                                     x.as<T>(), dw.as<T>()));
    return Status::success();
  }
  PP_RT_FLOAT_DISPATCH(
      x.dtype, "convGradWeight",
      convBackwardWeight<T>(ctx, cp, dy.as<T>(), x.as<T>(), dw.as<T>()));
  return Status::success();
}

Status maxPool(Context &ctx, const Tensor &x, const WindowParams &params,
               Tensor &y, Tensor *indices) {
  // F16 / BF16: the same maxima (widening is exact); indices pass through.
  if (anyFloat16(x, y)) {
    PP_RT_TRY(expectSameDType("maxPool", {&x, &y}));
    Float16Widening w(ctx);
    return w.finish(maxPool(ctx, w.in(x), params, w.out(y), indices));
  }
  Geometry g;
  PP_RT_TRY(resolvePool("maxPool", x, y, params, "x", "y", g));
  if (indices) {
    PP_RT_TRY(expectDType(*indices, DType::I64, "maxPool: indices"));
    PP_RT_TRY(expectShape(*indices, y.shape, "maxPool: indices"));
  }
  int64_t planes = x.shape[0] * x.shape[1];
  int64_t *idx = indices ? indices->as<int64_t>() : nullptr;
  PP_RT_FLOAT_DISPATCH(x.dtype, "maxPool", {
    const T *xd = x.as<T>();
    T *yd = y.as<T>();
    if (planarWindows(g)) {
      parallelFor(ctx, planes, planeGrain(g), [&](int64_t begin, int64_t end) {
        for (int64_t pl = begin; pl < end; ++pl) {
          const T *xp = xd + pl * g.inSize;
          T *yp = yd + pl * g.outSize;
          int64_t *ip = idx ? idx + pl * g.outSize : nullptr;
          int64_t base = pl * g.inSize;
          forEachPlanarWindow(g, [&](int64_t flat, int64_t, int64_t, int64_t h0,
                                     int64_t h1, int64_t w0, int64_t w1) {
            if (h0 >= h1 || w0 >= w1) { // a window wholly in padding
              yp[flat] = -std::numeric_limits<T>::infinity();
              if (ip)
                ip[flat] = -1;
              return;
            }
            // The maximum first (selects the compiler keeps in registers),
            // then the first tap that holds it: the first maximum wins ties
            // and a NaN propagates (the first NaN).
            T best = xp[h0 * g.in[2] + w0];
            bool nan = false;
            for (int64_t ih = h0; ih < h1; ++ih) {
              const T *row = xp + ih * g.in[2];
              for (int64_t iw = w0; iw < w1; ++iw) {
                T v = row[iw];
                best = v > best ? v : best;
                nan |= v != v;
              }
            }
            int64_t arg = -1;
            for (int64_t ih = h0; ih < h1 && arg < 0; ++ih) {
              const T *row = xp + ih * g.in[2];
              for (int64_t iw = w0; iw < w1; ++iw)
                if (nan ? row[iw] != row[iw] : row[iw] == best) {
                  arg = ih * g.in[2] + iw;
                  break;
                }
            }
            if (nan)
              best = xp[arg];
            yp[flat] = best;
            if (ip)
              ip[flat] = base + arg;
          });
        }
      });
      return Status::success();
    }
    parallelFor(ctx, planes, planeGrain(g), [&](int64_t begin, int64_t end) {
      for (int64_t pl = begin; pl < end; ++pl) {
        const T *xp = xd + pl * g.inSize;
        T *yp = yd + pl * g.outSize;
        T best = 0;
        int64_t arg = -1;
        // Only taps inside x compete, so padding never wins; the first
        // maximum wins ties and a NaN propagates (as in PyTorch).
        forEachWindow(
            g, [&](int64_t, const int64_t *) { arg = -1; },
            [&](int64_t off) {
              T v = xp[off];
              if (arg < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
                best = v;
                arg = off;
              }
            },
            [&](int64_t flat, const int64_t *) {
              // A window wholly in padding (only possible when pads reach
              // past the kernel) yields -inf and index -1.
              yp[flat] = arg < 0 ? -std::numeric_limits<T>::infinity() : best;
              if (idx)
                idx[pl * g.outSize + flat] = arg < 0 ? -1 : pl * g.inSize + arg;
            });
      }
    });
  });
  return Status::success();
}

Status maxPoolGrad(Context &ctx, const Tensor &dy, const Tensor &indices,
                   Tensor &dx) {
  if (anyFloat16(dy, dx)) {
    PP_RT_TRY(expectSameDType("maxPoolGrad", {&dy, &dx}));
    Float16Widening w(ctx);
    return w.finish(maxPoolGrad(ctx, w.in(dy), indices, w.out(dx)));
  }
  PoolPlanes pool;
  PP_RT_TRY(checkMaxPoolGrad(dy, indices, dx, pool));
  int64_t planes = pool.planes, outSize = pool.outSize, inSize = pool.inSize;
  const int64_t *idx = indices.as<int64_t>();
  std::atomic<bool> outOfPlane{false};
  PP_RT_FLOAT_DISPATCH(dy.dtype, "maxPoolGrad", {
    const T *dyd = dy.as<T>();
    T *dxd = dx.as<T>();
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, outSize));
    // An index belongs to its own (n, c) plane, so planes run in parallel.
    parallelFor(ctx, planes, grain, [&](int64_t begin, int64_t end) {
      for (int64_t pl = begin; pl < end; ++pl) {
        T *dxp = dxd + pl * inSize;
        std::fill(dxp, dxp + inSize, T(0));
        for (int64_t o = pl * outSize; o < (pl + 1) * outSize; ++o) {
          if (idx[o] < 0) // a window without any input tap
            continue;
          int64_t local = idx[o] - pl * inSize;
          if (local >= inSize || local < 0) {
            outOfPlane = true;
            continue;
          }
          dxp[local] += dyd[o];
        }
      }
    });
  });
  if (outOfPlane)
    return maxPoolIndexError(dx);
  return Status::success();
}

Status avgPool(Context &ctx, const Tensor &x, const WindowParams &params,
               bool countIncludePad, Tensor &y) {
  if (anyFloat16(x, y)) {
    PP_RT_TRY(expectSameDType("avgPool", {&x, &y}));
    Float16Widening w(ctx);
    return w.finish(avgPool(ctx, w.in(x), params, countIncludePad, w.out(y)));
  }
  Geometry g;
  PP_RT_TRY(resolvePool("avgPool", x, y, params, "x", "y", g));
  int64_t planes = x.shape[0] * x.shape[1];
  PP_RT_FLOAT_DISPATCH(x.dtype, "avgPool", {
    const T *xd = x.as<T>();
    T *yd = y.as<T>();
    if (planarWindows(g)) {
      PlanarDivisors div(g, countIncludePad);
      parallelFor(ctx, planes, planeGrain(g), [&](int64_t begin, int64_t end) {
        for (int64_t pl = begin; pl < end; ++pl) {
          const T *xp = xd + pl * g.inSize;
          T *yp = yd + pl * g.outSize;
          forEachPlanarWindow(g, [&](int64_t flat, int64_t oh, int64_t ow,
                                     int64_t h0, int64_t h1, int64_t w0,
                                     int64_t w1) {
            T sum = 0;
            for (int64_t ih = h0; ih < h1; ++ih)
              for (int64_t iw = w0; iw < w1; ++iw)
                sum += xp[ih * g.in[2] + iw];
            int64_t divisor = div.rows[oh] * div.cols[ow];
            yp[flat] = divisor > 0 ? sum / T(divisor) : T(0);
          });
        }
      });
      return Status::success();
    }
    parallelFor(ctx, planes, planeGrain(g), [&](int64_t begin, int64_t end) {
      for (int64_t pl = begin; pl < end; ++pl) {
        const T *xp = xd + pl * g.inSize;
        T *yp = yd + pl * g.outSize;
        T sum = 0;
        forEachWindow(
            g, [&](int64_t, const int64_t *) { sum = 0; },
            [&](int64_t off) { sum += xp[off]; },
            [&](int64_t flat, const int64_t *o) {
              int64_t divisor = avgDivisor(g, o, countIncludePad);
              yp[flat] = divisor > 0 ? sum / T(divisor) : T(0);
            });
      }
    });
  });
  return Status::success();
}

Status avgPoolGrad(Context &ctx, const Tensor &dy, const WindowParams &params,
                   bool countIncludePad, Tensor &dx) {
  if (anyFloat16(dy, dx)) {
    PP_RT_TRY(expectSameDType("avgPoolGrad", {&dx, &dy}));
    Float16Widening w(ctx);
    return w.finish(
        avgPoolGrad(ctx, w.in(dy), params, countIncludePad, w.out(dx)));
  }
  Geometry g;
  PP_RT_TRY(resolvePool("avgPoolGrad", dx, dy, params, "dx", "dy", g));
  int64_t planes = dx.shape[0] * dx.shape[1];
  PP_RT_FLOAT_DISPATCH(dx.dtype, "avgPoolGrad", {
    const T *dyd = dy.as<T>();
    T *dxd = dx.as<T>();
    if (planarWindows(g)) {
      PlanarDivisors div(g, countIncludePad);
      parallelFor(ctx, planes, planeGrain(g), [&](int64_t begin, int64_t end) {
        for (int64_t pl = begin; pl < end; ++pl) {
          const T *dyp = dyd + pl * g.outSize;
          T *dxp = dxd + pl * g.inSize;
          std::fill(dxp, dxp + g.inSize, T(0));
          forEachPlanarWindow(g, [&](int64_t flat, int64_t oh, int64_t ow,
                                     int64_t h0, int64_t h1, int64_t w0,
                                     int64_t w1) {
            int64_t divisor = div.rows[oh] * div.cols[ow];
            T share = divisor > 0 ? dyp[flat] / T(divisor) : T(0);
            for (int64_t ih = h0; ih < h1; ++ih)
              for (int64_t iw = w0; iw < w1; ++iw)
                dxp[ih * g.in[2] + iw] += share;
          });
        }
      });
      return Status::success();
    }
    parallelFor(ctx, planes, planeGrain(g), [&](int64_t begin, int64_t end) {
      for (int64_t pl = begin; pl < end; ++pl) {
        const T *dyp = dyd + pl * g.outSize;
        T *dxp = dxd + pl * g.inSize;
        std::fill(dxp, dxp + g.inSize, T(0));
        T share = 0;
        forEachWindow(
            g,
            [&](int64_t flat, const int64_t *o) {
              int64_t divisor = avgDivisor(g, o, countIncludePad);
              share = divisor > 0 ? dyp[flat] / T(divisor) : T(0);
            },
            [&](int64_t off) { dxp[off] += share; },
            [](int64_t, const int64_t *) {});
      }
    });
  });
  return Status::success();
}

} // namespace pp::rt
