//===- Memory.cpp - Host buffers of the CPU backend -------------*- C++ -*-===//

#include "pp/Runtime/Memory.h"

#include <cstdlib>
#include <cstring>

using namespace pp::rt;

namespace {
constexpr int64_t kAlignment = 256;
} // namespace

void *pp::rt::allocateBuffer(int64_t bytes) {
  if (bytes < 0)
    return nullptr;
  // aligned_alloc wants a multiple of the alignment; a zero-byte buffer is
  // still a distinct non-null pointer.
  int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0)
    rounded = kAlignment;
  void *buffer = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
  if (buffer)
    std::memset(buffer, 0, static_cast<size_t>(rounded));
  return buffer;
}

void pp::rt::freeBuffer(void *buffer) { std::free(buffer); }

void pp::rt::copyToBuffer(void *dst, const void *hostSrc, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(dst, hostSrc, static_cast<size_t>(bytes));
}

void pp::rt::copyFromBuffer(void *hostDst, const void *src, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(hostDst, src, static_cast<size_t>(bytes));
}

void pp::rt::copyBuffer(void *dst, const void *src, int64_t bytes) {
  // memmove: a stage may copy a value onto storage it overlaps.
  if (bytes > 0 && dst != src)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

const char *pp::rt::backendName() { return "cpu"; }

int pp::rt::backendDeviceCount() { return 1; }

#ifdef PP_RUNTIME_HAVE_OPENBLAS_THREADS
extern "C" void openblas_set_num_threads(int);
#endif

Status pp::rt::createKernelContext(Context &ctx, int) {
#ifdef PP_RUNTIME_HAVE_OPENBLAS_THREADS
  // GEMMs use the kernel thread count too (OpenBLAS otherwise takes every
  // core, per process and per device thread): no oversubscription under
  // mpirun, and the same rounding whichever way the job is launched.
  openblas_set_num_threads(ctx.numThreads > 0 ? ctx.numThreads : 1);
#else
  (void)ctx;
#endif
  return Status::success();
}

Status pp::rt::destroyKernelContext(Context &) { return Status::success(); }

Status pp::rt::synchronizeKernels(Context &) { return Status::success(); }
