//===- Common.cu - Shared helpers and contexts of the CUDA backend --------===//
//
// The dtype helpers Kernels.h declares (a program links either this backend
// or the CPU one), the host-side checks shared by the CUDA kernels, scratch
// memory and error flags, and CudaContext.h.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "pp/Runtime/CudaContext.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cstring>

namespace pp::rt {

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::Bool:
    return "bool";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::U32:
    return "u32";
  case DType::U64:
    return "u64";
  }
  return "?";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace pp::rt

namespace pp::rt::cuda {

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target) {
  std::vector<int64_t> own = stridesOf(shape);
  std::vector<int64_t> result(target.size(), 0);
  size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    result[i + offset] = shape[i] == 1 ? 0 : own[i];
  return result;
}

bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to) {
  std::vector<int64_t> out;
  return from.size() <= to.size() && broadcastShapes(from, to, out) &&
         out == to;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status expectDType(const Tensor &t, DType dtype, const char *what) {
  if (t.dtype != dtype)
    return Status::error(std::string(what) + ": expected dtype " +
                         dtypeName(dtype) + ", got " + dtypeName(t.dtype));
  if (!t.data && t.numel() > 0)
    return Status::error(std::string(what) + ": null data");
  return Status::success();
}

Status expectShape(const Tensor &t, const std::vector<int64_t> &shape,
                   const char *what) {
  if (t.shape != shape)
    return Status::error(std::string(what) + ": expected shape " +
                         shapeString(shape) + ", got " + shapeString(t.shape));
  if (!t.data && t.numel() > 0)
    return Status::error(std::string(what) + ": null data");
  return Status::success();
}

Status expectValid(const Tensor &t, const char *what) {
  for (int64_t d : t.shape)
    if (d < 0)
      return Status::error(std::string(what) + ": negative dim in shape " +
                           shapeString(t.shape));
  if (!t.data && t.numel() > 0)
    return Status::error(std::string(what) + ": null data");
  return Status::success();
}

bool normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d)
    n *= dims[d];
  return n;
}

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
  default:
    return bytes[0];
  }
}

Status zeroTensor(const std::string &what, Tensor &t, cudaStream_t stream) {
  if (t.numel() > 0)
    PP_CUDA_TRY(what, cudaMemsetAsync(t.data, 0, t.bytes(), stream));
  return Status::success();
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
  // Full FP32 precision (no TF32): results are compared with the CPU
  // backend and with finite differences.
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);
  cudnnStatus_t ds = cudnnSetStream(dnn, stream);
  if (bs != CUBLAS_STATUS_SUCCESS || ds != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(dnn);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return bs != CUBLAS_STATUS_SUCCESS ? blasFailure(what, bs)
                                       : dnnFailure(what, ds);
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
