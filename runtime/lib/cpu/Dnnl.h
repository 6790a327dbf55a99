//===- Dnnl.h - oneDNN kernels of the CPU backend ---------------*- C++ -*-===//
//
// The CPU backend runs F32 GEMMs (oneDNN's matmul primitive for large ones
// on one thread, dnnl_sgemm otherwise) and F32 convolutions (forward,
// gradient of the input, gradient of the weight) on oneDNN when the build found
// it (PP_RUNTIME_HAVE_DNNL), over the caller's NCHW / OIHW buffers, and falls
// back to its own im2col + GEMM for F64 and for any problem oneDNN does not
// take. PP_RUNTIME_CONV=im2col in the environment (read once; any other
// value means the default) forces the im2col path; setConvImpl overrides
// both (tests compare the two paths). PP_RUNTIME_GEMM=openblas sends F32
// GEMMs to OpenBLAS instead, PP_RUNTIME_GEMM=sgemm all of them to
// dnnl_sgemm; setGemmImpl overrides it.
//
// With oneDNN, every parallel loop of the backend runs on OpenMP's pool
// (parallelFor, Common.cpp): oneDNN's pool. OpenBLAS's own threads spin
// after each call and would compete with it for the cores, which is why
// F32 GEMMs default to oneDNN's too (bench/README.md).
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_CPU_DNNL_H
#define PP_RUNTIME_CPU_DNNL_H

#include "common/Checks.h"
#include "pp/Runtime/Kernels.h"

#include <cstdint>

namespace pp::rt::cpu {

enum class ConvImpl {
  Auto,   // oneDNN where built and where it takes the problem with a JIT
          // kernel, else the direct depthwise loops (Depthwise.h) where they
          // apply, else im2col
  Im2col, // always im2col + GEMM
  OneDnn, // oneDNN wherever it takes the problem, its own im2col + GEMM
          // included; im2col elsewhere (the behaviour before the direct
          // depthwise loops, kept for benchmarks)
};

enum class GemmImpl {
  Auto,     // oneDNN where built (its matmul primitive for large GEMMs on
            // one thread, sgemm for the others), else OpenBLAS
  OpenBLAS, // OpenBLAS (the plain loop without it)
  Sgemm,    // oneDNN's sgemm for every size (no matmul primitive)
};

/// The implementation in force: setGemmImpl's, else PP_RUNTIME_GEMM's.
GemmImpl gemmImpl();
/// Overrides PP_RUNTIME_GEMM for the whole process; returns the previous
/// implementation in force.
GemmImpl setGemmImpl(GemmImpl impl);

/// The implementation in force: setConvImpl's, else PP_RUNTIME_CONV's.
ConvImpl convImpl();
/// Overrides PP_RUNTIME_CONV for the whole process; returns the previous
/// implementation in force.
ConvImpl setConvImpl(ConvImpl impl);
/// Whether the build has the oneDNN path.
bool dnnlAvailable();
/// Number of convolutions (any of the three) oneDNN has run in this process.
int64_t dnnlConvCalls();
/// Number of GEMMs oneDNN has run in this process.
int64_t dnnlGemmCalls();
/// Of those, the ones its matmul primitive ran (GEMMs of at least 2^22
/// multiply-adds on one thread; the others are sgemm's).
int64_t dnnlMatmulCalls();

/// Number of eltwise calls (GELU forward or gradient, sigmoid or tanh
/// forward) oneDNN has run in this process.
int64_t dnnlEltwiseCalls();

/// Elements below which dnnlEltwise declines (the loop is as fast).
constexpr int64_t kDnnlEltwiseMinElements = 1024;

/// Whether dnnlEltwise runs `kind` (forward, and the gradient too when
/// `gradient`): GELU (erf and tanh) both ways; sigmoid and tanh forward only
/// (their gradients, from y, are plain arithmetic the loop vectorises).
bool dnnlEltwiseTakes(UnaryKind kind, bool gradient);

/// `kind` over n F32 values on oneDNN's eltwise primitive (its vectorised
/// erf, exp and tanh): out = f(x) when dy is null, else the gradient out = dy
/// * f'(x). x and out may alias. False when oneDNN is not built in, the kind
/// is not one dnnlEltwiseTakes, n < kDnnlEltwiseMinElements,
/// PP_RUNTIME_ELTWISE=scalar is in the environment (read once: the
/// benchmarks compare the two), or it fails (out is then untouched).
bool dnnlEltwise(const Context &ctx, UnaryKind kind, int64_t n, const float *x,
                 const float *dy, float *out);

/// Number of softmaxes (forward or gradient) oneDNN has run in this process.
int64_t dnnlSoftmaxCalls();

/// Softmax (log-softmax with `log`) of F32 values laid out [outer, n,
/// inner] along n on oneDNN's primitive (vectorised exp): out = softmax(x)
/// when dy is null (y unused), else the gradient out = dx from the output y
/// and dy (x unused). False when oneDNN is not built in, there are fewer
/// than kDnnlEltwiseMinElements values, oneDNN has only its reference kernel
/// for the layout, PP_RUNTIME_SOFTMAX=loop is in the environment (read
/// once), or it fails (out is then untouched).
bool dnnlSoftmax(const Context &ctx, bool log, int64_t outer, int64_t n,
                 int64_t inner, const float *x, const float *y, const float *dy,
                 float *out);

/// c = alpha * op(a) * op(b) + beta * c on row-major F32 matrices (as
/// gemmRaw) with ctx.numThreads OpenMP threads; false when oneDNN is not
/// built in, gemmImpl() is OpenBLAS, or it fails (c is then untouched).
bool dnnlSgemm(const Context &ctx, bool transA, bool transB, int64_t m,
               int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/// y[i] = op(a[i]) * op(b[i]) for i < batch on row-major F32 matrices in
/// one call of oneDNN's matmul primitive (its batched brgemm kernels, the
/// batch split over ctx.numThreads): a is `batch` m x k matrices (k x m
/// where transA) one after the other, or one matrix every item reads
/// (aShared); the same for b (k x n, n x k where transB); y is `batch`
/// m x n matrices. False when oneDNN is not built in, gemmImpl() is not
/// Auto, or it fails (y is then untouched).
bool dnnlBatchedMatmul(const Context &ctx, int64_t batch, bool transA,
                       bool aShared, bool transB, bool bShared, int64_t m,
                       int64_t n, int64_t k, const float *a, const float *b,
                       float *y);

/// c = relu?(alpha * op(a) * op(b) + bias) on row-major F32 matrices, bias
/// (n values, one per column; may be null) and the Relu applied by oneDNN's
/// matmul primitive as it writes c. Only where dnnlSgemm would run that
/// primitive (one thread, at least 2^22 multiply-adds, gemmImpl() Auto) and
/// alpha is 1 when there is a bias; false otherwise (c is then untouched).
bool dnnlGemmEpilogue(const Context &ctx, bool transA, bool transB, int64_t m,
                      int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb,
                      const float *bias, bool relu, float *c, int64_t ldc);

/// The three F32 convolutions on oneDNN (dw is overwritten, not added to).
/// Each returns false when oneDNN is not built in or does not take the
/// problem (an empty dim, no implementation, an error while running); the
/// caller then runs im2col, which writes the whole output. `rank` is the
/// number of spatial dims (the last `rank` entries of cp.geo's arrays).
/// With `reluPostOp` the forward writes relu(y) (oneDNN's eltwise post-op:
/// one pass over y, not two).
bool dnnlConvForward(const Context &ctx, const common::ConvDims &cp, int rank,
                     const float *x, const float *w, const float *bias,
                     float *y, bool reluPostOp = false);
bool dnnlConvBackwardData(const Context &ctx, const common::ConvDims &cp,
                          int rank, const float *dy, const float *w, float *dx);
bool dnnlConvBackwardWeights(const Context &ctx, const common::ConvDims &cp,
                             int rank, const float *dy, const float *x,
                             float *dw);

} // namespace pp::rt::cpu

#endif // PP_RUNTIME_CPU_DNNL_H
