//===- KernelBench.h - Helpers of the hand-built kernel benchmarks -*- C++ -*-//
//
// Shared by bench/norm_kernels.cpp and bench/depthwise_conv.cpp (each built
// by hand against the runtime library, see their headers): F32 tensors over
// vectors, the deterministic values both use, timing and error exits.
//
//===----------------------------------------------------------------------===//
#ifndef PP_BENCH_KERNEL_BENCH_H
#define PP_BENCH_KERNEL_BENCH_H

#include "pp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace pp::bench {

inline rt::Tensor tensorOf(std::vector<float> &v, std::vector<int64_t> shape) {
  rt::Tensor t;
  t.data = v.data();
  t.dtype = rt::DType::F32;
  t.shape = std::move(shape);
  return t;
}

/// offset + sin(0.37 i) + 0.25 cos(i): the values the PyTorch side of
/// norm_kernels.py builds too.
inline std::vector<float> filled(int64_t n, float offset) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = offset + std::sin(0.37f * float(i)) + 0.25f * std::cos(float(i));
  return v;
}

/// Wall time of one call in ms.
inline double msOf(const std::function<void()> &call) {
  auto t0 = std::chrono::steady_clock::now();
  call();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The median of `reps` calls after a warm-up call (primitive caches,
/// first touch).
inline double medianMs(int reps, const std::function<void()> &call) {
  call();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r)
    ms.push_back(msOf(call));
  return median(ms);
}

inline void check(const rt::Status &s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message.c_str());
    std::exit(1);
  }
}

} // namespace pp::bench

#endif // PP_BENCH_KERNEL_BENCH_H
