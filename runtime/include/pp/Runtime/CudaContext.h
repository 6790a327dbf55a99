//===- CudaContext.h - Contexts and memory of the CUDA backend --*- C++ -*-===//
//
// The CUDA backend of Kernels.h runs every kernel on ctx.stream with the
// cuBLAS handle ctx.blasHandle and the cuDNN handle ctx.dnnHandle. These
// helpers create and destroy such a context and move tensors between host
// and device memory. The header needs no CUDA headers; it is implemented by
// pp_runtime_cuda only.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_CUDACONTEXT_H
#define PP_RUNTIME_CUDACONTEXT_H

#include "pp/Runtime/Kernels.h"

namespace pp::rt::cuda {

/// Selects `device`, creates a non-blocking stream and cuBLAS / cuDNN
/// handles bound to it, and stores them in ctx. On failure nothing leaks and
/// ctx is left untouched.
Status createContext(Context &ctx, int device = 0);

/// Waits for ctx's stream, then destroys the handles and the stream and
/// clears them in ctx (a context without them is accepted). Reports the
/// first error met but always releases everything.
Status destroyContext(Context &ctx);

/// Waits until all work queued on ctx.stream has finished; reports any
/// asynchronous error a kernel raised.
Status synchronize(Context &ctx);

/// Stream-ordered device allocation on ctx.stream (cudaMallocAsync); zero
/// bytes gives a null pointer.
Status deviceAlloc(Context &ctx, int64_t bytes, void **ptr);
/// Stream-ordered release of a deviceAlloc pointer (null is accepted).
Status deviceFree(Context &ctx, void *ptr);

/// Copies `bytes` between host and device memory on ctx.stream and waits
/// for the copy, so host buffers may be reused on return.
Status copyToDevice(Context &ctx, void *device, const void *host,
                    int64_t bytes);
Status copyToHost(Context &ctx, void *host, const void *device, int64_t bytes);

} // namespace pp::rt::cuda

#endif // PP_RUNTIME_CUDACONTEXT_H
