//===- Fused.h - Fused elementwise kernels of generated code ----*- C++ -*-===//
//
// Code generation fuses chains of elementwise ops into one generated
// per-element function (PP_FUSED_INLINE: host and device code) and runs it
// with forEach: a loop on the CPU backend, a grid-stride kernel on CUDA when
// the generated source is compiled by nvcc. The scalar functions below are
// the formulas of the CPU kernels (runtime/lib/cpu/Elementwise.cpp), so a
// fused chain computes what the separate kernels compute.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_FUSED_H
#define PP_RUNTIME_FUSED_H

#include "pp/Runtime/Kernels.h"

#include <cmath>
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define PP_FUSED_INLINE __host__ __device__ inline
#else
#define PP_FUSED_INLINE inline
#endif

namespace pp::rt::fused {

template <typename T> PP_FUSED_INLINE T add(T a, T b) { return a + b; }
template <typename T> PP_FUSED_INLINE T sub(T a, T b) { return a - b; }
template <typename T> PP_FUSED_INLINE T mul(T a, T b) { return a * b; }
template <typename T> PP_FUSED_INLINE T div(T a, T b) { return a / b; }
// `v < 0` keeps NaN, as the kernel (and torch.relu) do.
template <typename T> PP_FUSED_INLINE T relu(T v) {
  return v < T(0) ? T(0) : v;
}
template <typename T> PP_FUSED_INLINE T sigmoid(T v) {
  // Stable on both tails: never exponentiates a large positive number.
  if (v >= T(0))
    return T(1) / (T(1) + exp(-v));
  T e = exp(v);
  return e / (T(1) + e);
}
template <typename T> PP_FUSED_INLINE T tanh(T v) { return ::tanh(v); }
template <typename T> PP_FUSED_INLINE T erf(T v) { return ::erf(v); }
template <typename T> PP_FUSED_INLINE T sqrt(T v) { return ::sqrt(v); }
template <typename T> PP_FUSED_INLINE T exp(T v) { return ::exp(v); }
template <typename T> PP_FUSED_INLINE T log(T v) { return ::log(v); }
template <typename T> PP_FUSED_INLINE T neg(T v) { return -v; }
template <typename T> PP_FUSED_INLINE T abs(T v) { return v < T(0) ? -v : v; }
template <typename T> PP_FUSED_INLINE T reciprocal(T v) { return T(1) / v; }
/// Gradients from (x, y = f(x), dy), as unaryGrad.
template <typename T> PP_FUSED_INLINE T reluGrad(T x, T y, T dy) {
  return x > T(0) ? dy : T(0);
}
template <typename T> PP_FUSED_INLINE T sigmoidGrad(T x, T y, T dy) {
  return dy * y * (T(1) - y);
}
template <typename T> PP_FUSED_INLINE T tanhGrad(T x, T y, T dy) {
  return dy * (T(1) - y * y);
}

// The float overloads of the C math functions, on host and device.
PP_FUSED_INLINE float exp(float v) { return ::expf(v); }
PP_FUSED_INLINE float tanh(float v) { return ::tanhf(v); }
PP_FUSED_INLINE float erf(float v) { return ::erff(v); }
PP_FUSED_INLINE float sqrt(float v) { return ::sqrtf(v); }
PP_FUSED_INLINE float log(float v) { return ::logf(v); }

#if defined(__CUDACC__)
template <auto F, typename... Args>
__global__ void forEachKernel(int64_t n, Args... args) {
  int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    F(i, args...);
}
#endif

/// Runs F(i, args...) for i in [0, n): F computes one element.
template <auto F, typename... Args>
Status forEach(Context &ctx, int64_t n, Args... args) {
#if defined(__CUDACC__)
  if (n <= 0)
    return Status::success();
  int64_t blocks = (n + 255) / 256;
  if (blocks > 65535)
    blocks = 65535;
  forEachKernel<F>
      <<<unsigned(blocks), 256, 0, static_cast<cudaStream_t>(ctx.stream)>>>(
          n, args...);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess)
    return Status::error(std::string("fused kernel: ") +
                         cudaGetErrorString(error));
#else
  (void)ctx;
  for (int64_t i = 0; i < n; ++i)
    F(i, args...);
#endif
  return Status::success();
}

/// The element pointer of a tensor of the fused kernel's type.
template <typename T> T *data(const Tensor &t) {
  return static_cast<T *>(t.data);
}

} // namespace pp::rt::fused

#endif // PP_RUNTIME_FUSED_H
