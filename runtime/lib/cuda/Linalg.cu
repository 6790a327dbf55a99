//===- Linalg.cu - matmul and gemm on cuBLAS ------------------------------===//
//
// Row-major products on column-major cuBLAS: a row-major Y = A * B is the
// column-major Y^T = B^T * A^T, so every call passes B before A with the
// dims swapped and no copies. Batched matmul uses one strided-batched call
// when each operand's batch is either full or broadcast whole, and a
// pointer-array batched call for any other numpy broadcast. cuBLAS runs in
// its default math mode (no TF32), matching the CPU backend's FP32 results.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cublas_v2.h>

namespace pp::rt {

using namespace cuda;

namespace {

Status blasFailure(const std::string &what, cublasStatus_t status) {
  return Status::error(what + ": " + cublasGetStatusName(status) + ": " +
                       cublasGetStatusString(status));
}

#define PP_BLAS_TRY(WHAT, EXPR)                                                \
  do {                                                                         \
    cublasStatus_t blasStatus_ = (EXPR);                                       \
    if (blasStatus_ != CUBLAS_STATUS_SUCCESS)                                  \
      return blasFailure(WHAT, blasStatus_);                                   \
  } while (false)

/// Binds ctx's handle to ctx's stream with host scalars.
Status blasHandle(const std::string &what, const Context &ctx,
                  cublasHandle_t &handle) {
  handle = static_cast<cublasHandle_t>(ctx.blasHandle);
  if (!handle)
    return Status::error(what + ": the context has no cuBLAS handle");
  PP_BLAS_TRY(what, cublasSetStream(handle, streamOf(ctx)));
  PP_BLAS_TRY(what, cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
  return Status::success();
}

bool fitsInt(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

Status intCheck(const std::string &what,
                std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (!fitsInt(v))
      return Status::error(what + ": dimension " + std::to_string(v) +
                           " exceeds cuBLAS's 32-bit sizes");
  return Status::success();
}

/// Row-major C[m, n] = alpha * op(A) * op(B) + beta * C, `batch` times with
/// element strides between the matrices (0 broadcasts one matrix).
template <typename T>
cublasStatus_t gemmStrided(cublasHandle_t h, bool transA, bool transB, int m,
                           int n, int k, T alpha, const T *a, int lda,
                           long long strideA, const T *b, int ldb,
                           long long strideB, T beta, T *c, int ldc,
                           long long strideC, int batch) {
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    if constexpr (std::is_same_v<T, float>)
      return cublasSgemm(h, opB, opA, n, m, k, &alpha, b, ldb, a, lda, &beta, c,
                         ldc);
    else
      return cublasDgemm(h, opB, opA, n, m, k, &alpha, b, ldb, a, lda, &beta, c,
                         ldc);
  }
  if constexpr (std::is_same_v<T, float>)
    return cublasSgemmStridedBatched(h, opB, opA, n, m, k, &alpha, b, ldb,
                                     strideB, a, lda, strideA, &beta, c, ldc,
                                     strideC, batch);
  else
    return cublasDgemmStridedBatched(h, opB, opA, n, m, k, &alpha, b, ldb,
                                     strideB, a, lda, strideA, &beta, c, ldc,
                                     strideC, batch);
}

template <typename T>
cublasStatus_t gemmPointers(cublasHandle_t h, bool transA, bool transB, int m,
                            int n, int k, const T *const *a, int lda,
                            const T *const *b, int ldb, T *const *c,
                            int batch) {
  T one = 1, zero = 0;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>)
    return cublasSgemmBatched(h, opB, opA, n, m, k, &one, b, ldb, a, lda, &zero,
                              c, n, batch);
  else
    return cublasDgemmBatched(h, opB, opA, n, m, k, &one, b, ldb, a, lda, &zero,
                              c, n, batch);
}

/// Whether `dims` (padded on the left to batch's rank) is all ones or
/// exactly `batch`: then one stride (0 or the matrix size) walks it.
bool wholeOrBroadcast(const std::vector<int64_t> &dims,
                      const std::vector<int64_t> &batch, bool &broadcast) {
  int64_t count = product(dims, 0, dims.size());
  if (count == 1) {
    broadcast = true;
    return true;
  }
  broadcast = false;
  std::vector<int64_t> padded(batch.size() - dims.size(), 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return padded == batch;
}

template <typename T>
Status matmulImpl(const std::string &what, const Context &ctx, const T *a,
                  const T *b, T *y, const MatmulShape &ms, bool transA,
                  bool transB) {
  const std::vector<int64_t> &aBatch = ms.aBatch, &bBatch = ms.bBatch,
                             &batch = ms.batch;
  int64_t m = ms.m, k = ms.k, n = ms.n;
  cudaStream_t stream = streamOf(ctx);
  int64_t batchCount = product(batch, 0, batch.size());
  if (batchCount == 0 || m == 0 || n == 0)
    return Status::success();
  if (k == 0) {
    PP_CUDA_TRY(what,
                cudaMemsetAsync(y, 0, batchCount * m * n * sizeof(T), stream));
    return Status::success();
  }
  cublasHandle_t h;
  PP_RT_TRY(blasHandle(what, ctx, h));
  // Leading dims of the stored matrices: a is [m, k] or, transposed, [k, m].
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  // b shared by every batch and a not broadcast (nor transposed): fold a's
  // batch into rows and run one large GEMM (the common linear-layer case).
  if (product(bBatch, 0, bBatch.size()) == 1 && aBatch == batch && !transA &&
      fitsInt(batchCount * m) && fitsInt(n) && fitsInt(k)) {
    PP_BLAS_TRY(what, gemmStrided<T>(h, false, transB, int(batchCount * m),
                                     int(n), int(k), T(1), a, int(lda), 0, b,
                                     int(ldb), 0, T(0), y, int(n), 0, 1));
    return Status::success();
  }
  PP_RT_TRY(intCheck(what, {m, n, k, batchCount}));
  bool aBroadcast, bBroadcast;
  if (wholeOrBroadcast(aBatch, batch, aBroadcast) &&
      wholeOrBroadcast(bBatch, batch, bBroadcast)) {
    PP_BLAS_TRY(what, gemmStrided<T>(h, transA, transB, int(m), int(n), int(k),
                                     T(1), a, int(lda), aBroadcast ? 0 : m * k,
                                     b, int(ldb), bBroadcast ? 0 : k * n, T(0),
                                     y, int(n), m * n, int(batchCount)));
    return Status::success();
  }
  // General numpy broadcast: one pointer per matrix.
  std::vector<int64_t> aStrides = broadcastStrides(aBatch, batch);
  std::vector<int64_t> bStrides = broadcastStrides(bBatch, batch);
  std::vector<const T *> pointers(3 * batchCount);
  int64_t rank = static_cast<int64_t>(batch.size());
  for (int64_t i = 0; i < batchCount; ++i) {
    int64_t aOff = 0, bOff = 0, rem = i;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      aOff += idx * aStrides[d];
      bOff += idx * bStrides[d];
    }
    pointers[i] = a + aOff * m * k;
    pointers[batchCount + i] = b + bOff * k * n;
    pointers[2 * batchCount + i] = y + i * m * n;
  }
  Scratch scratch(stream);
  const T **device = nullptr;
  PP_RT_TRY(uploadVector(what, scratch, stream, pointers, &device));
  PP_BLAS_TRY(what,
              gemmPointers<T>(h, transA, transB, int(m), int(n), int(k), device,
                              int(lda), device + batchCount, int(ldb),
                              const_cast<T *const *>(device + 2 * batchCount),
                              int(batchCount)));
  return Status::success();
}

/// y[i, j] = c[i * cs0 + j * cs1] (c broadcast onto y).
template <typename T> struct BroadcastCOp {
  const T *c;
  T *y;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    y[i] = c[o[0]];
  }
};

template <typename T> struct ScaleOp {
  T *y;
  T beta;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    y[i] = beta == T(0) ? T(0) : beta * y[i];
  }
};

} // namespace

Status matmul(Context &ctx, const Tensor &a, const Tensor &b, Tensor &y,
              bool transA, bool transB) {
  const std::string what = "matmul";
  MatmulShape ms;
  PP_RT_TRY(checkMatmul(a, b, y, ms, transA, transB));
  return visitFloat(a.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return matmulImpl<T>(what, ctx, a.as<T>(), b.as<T>(), y.as<T>(), ms, transA,
                         transB);
  });
}

Status gemm(Context &ctx, const Tensor &a, const Tensor &b, const Tensor *c,
            float alpha, float beta, bool transA, bool transB, Tensor &y,
            UnaryKind activation) {
  const std::string what = "gemm";
  int64_t m = 0, k = 0, n = 0;
  PP_RT_TRY(checkGemm(a, b, c, transA, transB, y, m, k, n));
  bool useC = c && beta != 0.f;
  if (m == 0 || n == 0)
    return visitFloat(a.dtype, what, [](auto) { return Status::success(); });
  cudaStream_t stream = streamOf(ctx);
  PP_RT_TRY(visitFloat(a.dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T *yd = y.as<T>();
    StridedIndex<1> flat;
    if (useC) {
      StridedIndex<1> index;
      PP_RT_TRY(makeIndex<1>(what, {m, n}, {broadcastStrides(c->shape, {m, n})},
                             index));
      PP_RT_TRY(launchMap(what, stream, m * n, index,
                          BroadcastCOp<T>{c->as<T>(), yd}));
    }
    if (k == 0) {
      // No products: y = beta * c, or 0 (beta == 0 never reads y).
      PP_RT_TRY(makeIndex<1>(what, {m * n}, {std::vector<int64_t>{1}}, flat));
      return launchMap(what, stream, m * n, flat,
                       ScaleOp<T>{yd, useC ? T(beta) : T(0)});
    }
    PP_RT_TRY(intCheck(what, {m, n, k}));
    cublasHandle_t h;
    PP_RT_TRY(blasHandle(what, ctx, h));
    PP_BLAS_TRY(what, gemmStrided<T>(h, transA, transB, int(m), int(n), int(k),
                                     T(alpha), a.as<T>(), int(a.shape[1]), 0,
                                     b.as<T>(), int(b.shape[1]), 0,
                                     useC ? T(beta) : T(0), yd, int(n), 0, 1));
    return Status::success();
  }));
  return applyActivation(ctx, activation, y);
}

} // namespace pp::rt
