//===- Memory.h - Buffers of the backend's memory ---------------*- C++ -*-===//
//
// Where tensors live: host memory for the CPU backend, device memory for the
// CUDA backend. The training driver allocates arenas, globals, stashes and
// gradient sums through these, and moves initial values in and results out,
// so it is one source for both backends.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_MEMORY_H
#define PP_RUNTIME_MEMORY_H

#include "pp/Runtime/Kernels.h"

#include <cstdint>

namespace pp::rt {

/// Zero-filled buffer of `bytes` (256-byte aligned); null on failure.
void *allocateBuffer(int64_t bytes);
void freeBuffer(void *buffer);
/// Host -> backend memory, backend -> host, backend -> backend. Each copy
/// has finished on return; a backend error throws std::runtime_error.
void copyToBuffer(void *dst, const void *hostSrc, int64_t bytes);
void copyFromBuffer(void *hostDst, const void *src, int64_t bytes);
void copyBuffer(void *dst, const void *src, int64_t bytes);
/// "cpu" or "cuda".
const char *backendName();

/// Backend devices this process sees (1 on the CPU).
int backendDeviceCount();
/// Prepares `ctx` to run kernels from the calling thread on backend device
/// `device` (CUDA: selects it, creates a stream and library handles; CPU:
/// nothing). Buffers allocated afterwards by this thread live there.
Status createKernelContext(Context &ctx, int device);
Status destroyKernelContext(Context &ctx);
/// Waits for the kernels queued on `ctx` (CPU: returns at once), so their
/// results may be copied or sent.
Status synchronizeKernels(Context &ctx);

} // namespace pp::rt

#endif // PP_RUNTIME_MEMORY_H
