//===- Linalg.cu - matmul and gemm on cuBLAS ------------------------------===//
//
// Row-major products on column-major cuBLAS: a row-major Y = A * B is the
// column-major Y^T = B^T * A^T, so every call passes B before A with the
// dims swapped and no copies. Batched matmul uses one strided-batched call
// when each operand's batch is either full or broadcast whole, and a
// pointer-array batched call for any other numpy broadcast. Every call is
// cuBLAS's mixed-precision GEMM (cublasGemmEx and its batched forms): F64
// in double; F32 in full FP32, matching the CPU backend, or in TF32 on
// tensor cores where the context allows it (Context::allowTF32); F16 and
// BF16 on tensor cores with f32 accumulation and one rounding of each
// result, the CPU backend's semantics (Kernels.h). The context's handle
// disallows reduced-precision split-K reductions (Common.cu), so no partial
// sum is rounded to 16 bits.
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

/// How cuBLAS runs a dtype: the element type of A, B and C, the compute
/// type, and the scalars' type (double for F64, else float).
struct BlasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool doubleScalars = false;
};

/// F64 in double, F32 in float (TF32 tensor ops where ctx allows them),
/// F16 and BF16 on tensor cores with float accumulation: one rounding of
/// each result to the 16-bit dtype, as the CPU backend's widened sgemm.
Status blasTypes(const std::string &what, const Context &ctx, DType dtype,
                 BlasTypes &types) {
  switch (dtype) {
  case DType::F64:
    types = {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    return Status::success();
  case DType::F32:
    types = {CUDA_R_32F,
             ctx.allowTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    return Status::success();
  case DType::F16:
    types = {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    return Status::success();
  case DType::BF16:
    types = {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    return Status::success();
  default:
    return Status::error(what + ": unsupported dtype " + dtypeName(dtype));
  }
}

/// alpha or beta in the scalar type of a BlasTypes.
struct BlasScalar {
  float f;
  double d;
  explicit BlasScalar(double v) : f(static_cast<float>(v)), d(v) {}
  const void *of(const BlasTypes &types) const {
    return types.doubleScalars ? static_cast<const void *>(&d) : &f;
  }
};

/// Row-major C[m, n] = alpha * op(A) * op(B) + beta * C, `batch` times with
/// element strides between the matrices (0 broadcasts one matrix). C's
/// element type is `cType` (A's and B's is types.data).
cublasStatus_t gemmStrided(cublasHandle_t h, const BlasTypes &types,
                           cudaDataType_t cType, bool transA, bool transB,
                           int m, int n, int k, const BlasScalar &alpha,
                           const void *a, int lda, long long strideA,
                           const void *b, int ldb, long long strideB,
                           const BlasScalar &beta, void *c, int ldc,
                           long long strideC, int batch) {
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1)
    return cublasGemmEx(h, opB, opA, n, m, k, alpha.of(types), b, types.data,
                        ldb, a, types.data, lda, beta.of(types), c, cType, ldc,
                        types.compute, CUBLAS_GEMM_DEFAULT);
  return cublasGemmStridedBatchedEx(
      h, opB, opA, n, m, k, alpha.of(types), b, types.data, ldb, strideB, a,
      types.data, lda, strideA, beta.of(types), c, cType, ldc, strideC, batch,
      types.compute, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t gemmPointers(cublasHandle_t h, const BlasTypes &types,
                            bool transA, bool transB, int m, int n, int k,
                            const void *const *a, int lda, const void *const *b,
                            int ldb, void *const *c, int batch) {
  BlasScalar one(1), zero(0);
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  return cublasGemmBatchedEx(h, opB, opA, n, m, k, one.of(types), b, types.data,
                             ldb, a, types.data, lda, zero.of(types), c,
                             types.data, n, batch, types.compute,
                             CUBLAS_GEMM_DEFAULT);
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

Status matmulImpl(const std::string &what, const Context &ctx, DType dtype,
                  const void *a, const void *b, void *y, const MatmulShape &ms,
                  bool transA, bool transB) {
  const std::vector<int64_t> &aBatch = ms.aBatch, &bBatch = ms.bBatch,
                             &batch = ms.batch;
  int64_t m = ms.m, k = ms.k, n = ms.n;
  cudaStream_t stream = streamOf(ctx);
  BlasTypes types;
  PP_RT_TRY(blasTypes(what, ctx, dtype, types));
  int64_t size = dtypeSize(dtype);
  int64_t batchCount = product(batch, 0, batch.size());
  if (batchCount == 0 || m == 0 || n == 0)
    return Status::success();
  if (k == 0) {
    PP_CUDA_TRY(what, cudaMemsetAsync(y, 0, batchCount * m * n * size, stream));
    return Status::success();
  }
  cublasHandle_t h;
  PP_RT_TRY(blasHandle(what, ctx, h));
  BlasScalar one(1), zero(0);
  // Leading dims of the stored matrices: a is [m, k] or, transposed, [k, m].
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  // b shared by every batch and a not broadcast (nor transposed): fold a's
  // batch into rows and run one large GEMM (the common linear-layer case).
  if (product(bBatch, 0, bBatch.size()) == 1 && aBatch == batch && !transA &&
      fitsInt(batchCount * m) && fitsInt(n) && fitsInt(k)) {
    PP_BLAS_TRY(what, gemmStrided(h, types, types.data, false, transB,
                                  int(batchCount * m), int(n), int(k), one, a,
                                  int(lda), 0, b, int(ldb), 0, zero, y, int(n),
                                  0, 1));
    return Status::success();
  }
  PP_RT_TRY(intCheck(what, {m, n, k, batchCount}));
  bool aBroadcast, bBroadcast;
  if (wholeOrBroadcast(aBatch, batch, aBroadcast) &&
      wholeOrBroadcast(bBatch, batch, bBroadcast)) {
    PP_BLAS_TRY(what, gemmStrided(h, types, types.data, transA, transB, int(m),
                                  int(n), int(k), one, a, int(lda),
                                  aBroadcast ? 0 : m * k, b, int(ldb),
                                  bBroadcast ? 0 : k * n, zero, y, int(n),
                                  m * n, int(batchCount)));
    return Status::success();
  }
  // General numpy broadcast: one pointer per matrix.
  std::vector<int64_t> aStrides = broadcastStrides(aBatch, batch);
  std::vector<int64_t> bStrides = broadcastStrides(bBatch, batch);
  std::vector<const void *> pointers(3 * batchCount);
  int64_t rank = static_cast<int64_t>(batch.size());
  const char *aBytes = static_cast<const char *>(a);
  const char *bBytes = static_cast<const char *>(b);
  char *yBytes = static_cast<char *>(y);
  for (int64_t i = 0; i < batchCount; ++i) {
    int64_t aOff = 0, bOff = 0, rem = i;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      aOff += idx * aStrides[d];
      bOff += idx * bStrides[d];
    }
    pointers[i] = aBytes + aOff * m * k * size;
    pointers[batchCount + i] = bBytes + bOff * k * n * size;
    pointers[2 * batchCount + i] = yBytes + i * m * n * size;
  }
  Scratch scratch(stream);
  const void **device = nullptr;
  PP_RT_TRY(uploadVector(what, scratch, stream, pointers, &device));
  PP_BLAS_TRY(what,
              gemmPointers(h, types, transA, transB, int(m), int(n), int(k),
                           device, int(lda), device + batchCount, int(ldb),
                           const_cast<void *const *>(device + 2 * batchCount),
                           int(batchCount)));
  return Status::success();
}

/// y[i, j] = c[i * cs0 + j * cs1] (c broadcast onto y, converted to Y).
template <typename T, typename Y> struct BroadcastCOp {
  const T *c;
  Y *y;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    y[i] = narrow<Y>(widen(c[o[0]]));
  }
};

/// y = beta * y, computed as the F32 kernel does for 16-bit y.
template <typename T> struct ScaleOp {
  T *y;
  Compute<T> beta;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    y[i] = beta == Compute<T>(0) ? narrow<T>(0) : narrow<T>(beta * widen(y[i]));
  }
};

} // namespace

Status matmul(Context &ctx, const Tensor &a, const Tensor &b, Tensor &y,
              bool transA, bool transB) {
  const std::string what = "matmul";
  MatmulShape ms;
  PP_RT_TRY(checkMatmul(a, b, y, ms, transA, transB));
  return matmulImpl(what, ctx, a.dtype, a.data, b.data, y.data, ms, transA,
                    transB);
}

namespace {

/// y (of type Y: T, or float for a 16-bit T whose activation runs before
/// the rounding) = alpha * op(a) * op(b) + beta * c.
template <typename T, typename Y>
Status gemmInto(const std::string &what, Context &ctx, const Tensor &a,
                const Tensor &b, const Tensor *c, float alpha, float beta,
                bool transA, bool transB, int64_t m, int64_t k, int64_t n,
                Y *yd) {
  bool useC = c && beta != 0.f;
  cudaStream_t stream = streamOf(ctx);
  if (useC) {
    StridedIndex<1> index;
    PP_RT_TRY(makeIndex<1>(what, {m, n}, {broadcastStrides(c->shape, {m, n})},
                           index));
    PP_RT_TRY(launchMap(what, stream, m * n, index,
                        BroadcastCOp<T, Y>{c->as<T>(), yd}));
  }
  if (k == 0) {
    // No products: y = beta * c, or 0 (beta == 0 never reads y).
    StridedIndex<1> flat;
    PP_RT_TRY(makeIndex<1>(what, {m * n}, {std::vector<int64_t>{1}}, flat));
    return launchMap(what, stream, m * n, flat,
                     ScaleOp<Y>{yd, useC ? Compute<Y>(beta) : Compute<Y>(0)});
  }
  PP_RT_TRY(intCheck(what, {m, n, k}));
  BlasTypes types;
  PP_RT_TRY(blasTypes(what, ctx, a.dtype, types));
  cudaDataType_t yType = std::is_same_v<T, Y> ? types.data : CUDA_R_32F;
  cublasHandle_t h;
  PP_RT_TRY(blasHandle(what, ctx, h));
  PP_BLAS_TRY(what,
              gemmStrided(h, types, yType, transA, transB, int(m), int(n),
                          int(k), BlasScalar(alpha), a.data, int(a.shape[1]), 0,
                          b.data, int(b.shape[1]), 0,
                          BlasScalar(useC ? beta : 0.f), yd, int(n), 0, 1));
  return Status::success();
}

} // namespace

Status gemm(Context &ctx, const Tensor &a, const Tensor &b, const Tensor *c,
            float alpha, float beta, bool transA, bool transB, Tensor &y,
            UnaryKind activation) {
  const std::string what = "gemm";
  int64_t m = 0, k = 0, n = 0;
  PP_RT_TRY(checkGemm(a, b, c, transA, transB, y, m, k, n));
  if (m == 0 || n == 0)
    return visitFloatOr16(a.dtype, what,
                          [](auto) { return Status::success(); });
  if (isFloat16(a.dtype) && activation != UnaryKind::Identity) {
    // As the CPU's widened kernel: the activation runs on the f32 result,
    // which is rounded once after it.
    Scratch scratch(streamOf(ctx));
    Tensor wide{nullptr, DType::F32, {m, n}};
    float *wideData = nullptr;
    PP_RT_TRY(scratch.alloc(what, m * n, &wideData));
    wide.data = wideData;
    PP_RT_TRY(visitFloatOr16(a.dtype, what, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return gemmInto<T, float>(what, ctx, a, b, c, alpha, beta, transA, transB,
                                m, k, n, wideData);
    }));
    PP_RT_TRY(applyActivation(ctx, activation, wide));
    return cast(ctx, wide, y);
  }
  PP_RT_TRY(visitFloatOr16(a.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return gemmInto<T, T>(what, ctx, a, b, c, alpha, beta, transA, transB, m, k,
                          n, y.as<T>());
  }));
  return applyActivation(ctx, activation, y);
}

} // namespace pp::rt
