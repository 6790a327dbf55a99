//===- Common.cu - Shared helpers and contexts of the CUDA backend --------===//
//
// CUDA error translation, scratch memory and error flags, and CudaContext.h.
// The dtype helpers and host-side checks are shared with the CPU backend
// (common/Checks.cpp).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "pp/Runtime/CudaContext.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cstring>

namespace pp::rt::cuda {

Status cudaFailure(const std::string &what, cudaError_t error) {
  return Status::error(what + ": " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

//===----------------------------------------------------------------------===//
// Scratch memory and error flags
//===----------------------------------------------------------------------===//

Scratch::~Scratch() {
  // Errors here surface at the next checked call on the stream.
  for (void *block : blocks)
    cudaFreeAsync(block, stream);
}

Status Scratch::alloc(const std::string &what, size_t bytes, void **ptr) {
  *ptr = nullptr;
  if (bytes == 0)
    return Status::success();
  PP_CUDA_TRY(what + ": scratch allocation of " + std::to_string(bytes) +
                  " bytes",
              cudaMallocAsync(ptr, bytes, stream));
  blocks.push_back(*ptr);
  return Status::success();
}

Status makeErrorFlag(const std::string &what, Scratch &scratch,
                     cudaStream_t stream, unsigned long long **flag) {
  PP_RT_TRY(scratch.alloc(what, 1, flag));
  PP_CUDA_TRY(what,
              cudaMemsetAsync(*flag, 0xff, sizeof(unsigned long long), stream));
  return Status::success();
}

Status readErrorFlag(const std::string &what, cudaStream_t stream,
                     const unsigned long long *flag, int64_t &position) {
  unsigned long long host = kNoError;
  PP_CUDA_TRY(what, cudaMemcpyAsync(&host, flag, sizeof(host),
                                    cudaMemcpyDeviceToHost, stream));
  PP_CUDA_TRY(what, cudaStreamSynchronize(stream));
  position = host == kNoError ? -1 : static_cast<int64_t>(host);
  return Status::success();
}

int64_t readDeviceInt(const Tensor &t, int64_t i, cudaStream_t stream) {
  int64_t size = dtypeSize(t.dtype);
  unsigned char bytes[8] = {};
  if (cudaMemcpyAsync(bytes, static_cast<const char *>(t.data) + i * size, size,
                      cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return 0;
  switch (t.dtype) {
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, bytes, 8);
    return v;
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, bytes, 4);
    return v;
  }
  case DType::U32: {
    uint32_t v;
    std::memcpy(&v, bytes, 4);
    return v;
  }
  case DType::U64: {
    uint64_t v;
    std::memcpy(&v, bytes, 8);
    return static_cast<int64_t>(v);
  }
  case DType::I8:
    return static_cast<int8_t>(bytes[0]);
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, bytes, 2);
    return v;
  }
  case DType::U16: {
    uint16_t v;
    std::memcpy(&v, bytes, 2);
    return v;
  }
  default:
    return bytes[0];
  }
}

Status zeroTensor(const std::string &what, Tensor &t, cudaStream_t stream) {
  if (t.numel() > 0)
    PP_CUDA_TRY(what, cudaMemsetAsync(t.data, 0, t.bytes(), stream));
  return Status::success();
}

Status Float16Widening::widen(const Tensor &t, bool read, Tensor &wide) {
  wide = t;
  if (!isFloat16(t.dtype))
    return Status::success();
  wide.dtype = DType::F32;
  bool valid = std::none_of(t.shape.begin(), t.shape.end(),
                            [](int64_t d) { return d < 0; });
  int64_t n = valid ? t.numel() : 0;
  if (n == 0 || !t.data)
    return Status::success();
  float *data = nullptr;
  PP_RT_TRY(scratch.alloc("16-bit float widening", n, &data));
  wide.data = data;
  return read ? cast(ctx, t, wide) : Status::success();
}

Status Float16Widening::out(const Tensor &t, Tensor &wide) {
  PP_RT_TRY(widen(t, false, wide));
  if (wide.data != t.data)
    outputs.emplace_back(t, wide);
  return Status::success();
}

Status Float16Widening::finish(Status status) {
  if (!status.ok()) {
    status.message += " (16-bit float operands computed as f32)";
    return status;
  }
  for (auto &[original, wide] : outputs)
    PP_RT_TRY(cast(ctx, wide, original));
  return status;
}

//===----------------------------------------------------------------------===//
// CudaContext.h
//===----------------------------------------------------------------------===//

namespace {

Status blasFailure(const std::string &what, cublasStatus_t status) {
  return Status::error(what + ": " + cublasGetStatusName(status) + ": " +
                       cublasGetStatusString(status));
}

Status dnnFailure(const std::string &what, cudnnStatus_t status) {
  return Status::error(what + ": " + cudnnGetErrorString(status));
}

} // namespace

Status createContext(Context &ctx, int device) {
  const char *what = "createContext";
  PP_CUDA_TRY(what, cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  PP_CUDA_TRY(what, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  if (cublasStatus_t s = cublasCreate(&blas); s != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return blasFailure(what, s);
  }
  cudnnHandle_t dnn = nullptr;
  if (cudnnStatus_t s = cudnnCreate(&dnn); s != CUDNN_STATUS_SUCCESS) {
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return dnnFailure(what, s);
  }
  cublasStatus_t bs = cublasSetStream(blas, stream);
  // No TF32 from the handle: each GEMM names its compute type, TF32 only
  // where the context allows it (Context::allowTF32; the cross-check and
  // the tests compare full FP32 with the CPU backend). And no split-K
  // partial sums rounded to a 16-bit output type: F16 / BF16 results are
  // rounded once, from the f32 accumulator, as on the CPU.
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasSetMathMode(
        blas, static_cast<cublasMath_t>(
                  CUBLAS_DEFAULT_MATH |
                  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  cudnnStatus_t ds = cudnnSetStream(dnn, stream);
  if (bs != CUBLAS_STATUS_SUCCESS || ds != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(dnn);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return bs != CUBLAS_STATUS_SUCCESS ? blasFailure(what, bs)
                                       : dnnFailure(what, ds);
  }
  // Scratch and cuDNN workspaces come from the stream-ordered pool on every
  // call: keep what it holds instead of returning it at each synchronisation
  // (the default threshold, 0), which made each allocation a driver call.
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
    uint64_t keep = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  }
  ctx.stream = stream;
  ctx.blasHandle = blas;
  ctx.dnnHandle = dnn;
  return Status::success();
}

Status destroyContext(Context &ctx) {
  const char *what = "destroyContext";
  Status first;
  auto note = [&](Status s) {
    if (first.ok() && !s.ok())
      first = std::move(s);
  };
  if (cudaError_t e = cudaStreamSynchronize(streamOf(ctx)); e != cudaSuccess)
    note(cudaFailure(what, e));
  if (ctx.dnnHandle)
    if (cudnnStatus_t s =
            cudnnDestroy(static_cast<cudnnHandle_t>(ctx.dnnHandle));
        s != CUDNN_STATUS_SUCCESS)
      note(dnnFailure(what, s));
  if (ctx.blasHandle)
    if (cublasStatus_t s =
            cublasDestroy(static_cast<cublasHandle_t>(ctx.blasHandle));
        s != CUBLAS_STATUS_SUCCESS)
      note(blasFailure(what, s));
  if (ctx.stream)
    if (cudaError_t e = cudaStreamDestroy(streamOf(ctx)); e != cudaSuccess)
      note(cudaFailure(what, e));
  ctx.stream = ctx.blasHandle = ctx.dnnHandle = nullptr;
  return first;
}

Status synchronize(Context &ctx) {
  PP_CUDA_TRY("synchronize", cudaStreamSynchronize(streamOf(ctx)));
  PP_CUDA_TRY("synchronize", cudaGetLastError());
  return Status::success();
}

Status deviceAlloc(Context &ctx, int64_t bytes, void **ptr) {
  *ptr = nullptr;
  if (bytes < 0)
    return Status::error("deviceAlloc: negative size " + std::to_string(bytes));
  if (bytes == 0)
    return Status::success();
  PP_CUDA_TRY("deviceAlloc of " + std::to_string(bytes) + " bytes",
              cudaMallocAsync(ptr, static_cast<size_t>(bytes), streamOf(ctx)));
  return Status::success();
}

Status deviceFree(Context &ctx, void *ptr) {
  if (ptr)
    PP_CUDA_TRY("deviceFree", cudaFreeAsync(ptr, streamOf(ctx)));
  return Status::success();
}

Status copyToDevice(Context &ctx, void *device, const void *host,
                    int64_t bytes) {
  if (bytes <= 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  PP_CUDA_TRY("copyToDevice",
              cudaMemcpyAsync(device, host, static_cast<size_t>(bytes),
                              cudaMemcpyHostToDevice, stream));
  PP_CUDA_TRY("copyToDevice", cudaStreamSynchronize(stream));
  return Status::success();
}

Status copyToHost(Context &ctx, void *host, const void *device, int64_t bytes) {
  if (bytes <= 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  PP_CUDA_TRY("copyToHost",
              cudaMemcpyAsync(host, device, static_cast<size_t>(bytes),
                              cudaMemcpyDeviceToHost, stream));
  PP_CUDA_TRY("copyToHost", cudaStreamSynchronize(stream));
  return Status::success();
}

} // namespace pp::rt::cuda
