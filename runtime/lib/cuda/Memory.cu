//===- Memory.cu - Device buffers of the CUDA backend -----------*- CUDA
//-*-===//
//
// Memory.h on CUDA. Copies use cudaMemcpyDefault (unified addressing), so a
// host pointer is accepted wherever a buffer is, and each copy waits for the
// legacy default stream: callers reuse the source right after.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/CudaContext.h"
#include "pp/Runtime/Memory.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

using namespace pp::rt;

namespace {

void throwOnError(const char *what, cudaError_t error) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorName(error) + ": " +
                             cudaGetErrorString(error));
}

void copyBytes(const char *what, void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0 || dst == src)
    return;
  throwOnError(what, cudaMemcpy(dst, src, static_cast<size_t>(bytes),
                                cudaMemcpyDefault));
  // Device-to-device copies return before they finish.
  throwOnError(what, cudaStreamSynchronize(0));
}

} // namespace

void *pp::rt::allocateBuffer(int64_t bytes) {
  if (bytes < 0)
    return nullptr;
  // cudaMalloc aligns to at least 256 bytes.
  size_t size = bytes == 0 ? 256 : static_cast<size_t>(bytes);
  void *buffer = nullptr;
  if (cudaMalloc(&buffer, size) != cudaSuccess)
    return nullptr;
  if (cudaMemset(buffer, 0, size) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    cudaFree(buffer);
    return nullptr;
  }
  return buffer;
}

void pp::rt::freeBuffer(void *buffer) {
  if (buffer)
    cudaFree(buffer);
}

void pp::rt::copyToBuffer(void *dst, const void *hostSrc, int64_t bytes) {
  copyBytes("copyToBuffer", dst, hostSrc, bytes);
}

void pp::rt::copyFromBuffer(void *hostDst, const void *src, int64_t bytes) {
  copyBytes("copyFromBuffer", hostDst, src, bytes);
}

void pp::rt::copyBuffer(void *dst, const void *src, int64_t bytes) {
  copyBytes("copyBuffer", dst, src, bytes);
}

const char *pp::rt::backendName() { return "cuda"; }

int pp::rt::backendDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess)
    return 0;
  return count;
}

Status pp::rt::createKernelContext(Context &ctx, int device) {
  return cuda::createContext(ctx, device);
}

Status pp::rt::destroyKernelContext(Context &ctx) {
  return cuda::destroyContext(ctx);
}

Status pp::rt::synchronizeKernels(Context &ctx) {
  return cuda::synchronize(ctx);
}
