//===- KernelTestHelpers.h - Reference-check helpers of kernel tests -*- C++
//-*-===//
//
// Owning buffers with a Tensor view, a seeded random filler, tolerances per
// precision, element-wise comparison with a reference, central finite
// differences and index helpers, shared by the kernel test files (each test
// file is its own executable, so the generator's state is per test program).
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_TEST_KERNELTESTHELPERS_H
#define PP_RUNTIME_TEST_KERNELTESTHELPERS_H

#include "pp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

namespace pp::rt::test {

using Shape = std::vector<int64_t>;

inline int64_t numelOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

template <typename T> DType dtypeOf();
template <> inline DType dtypeOf<float>() { return DType::F32; }
template <> inline DType dtypeOf<double>() { return DType::F64; }
template <> inline DType dtypeOf<int64_t>() { return DType::I64; }
template <> inline DType dtypeOf<int32_t>() { return DType::I32; }

/// An owning buffer with a Tensor view.
template <typename T> struct Buf {
  Shape shape;
  std::vector<T> v;
  explicit Buf(Shape s, T init = T(0))
      : shape(std::move(s)), v(numelOf(shape), init) {}
  Tensor t() { return Tensor{v.data(), dtypeOf<T>(), shape}; }
  T &operator[](int64_t i) { return v[i]; }
};

inline std::mt19937 &rng() {
  static std::mt19937 gen(1234);
  return gen;
}

template <typename T>
Buf<T> randomBuf(Shape shape, double lo = -1, double hi = 1) {
  Buf<T> b(std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (T &x : b.v)
    x = T(dist(rng()));
  return b;
}

template <typename T> double tol() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-11;
}

template <typename T>
void expectNear(const std::vector<T> &got, const std::vector<double> &want,
                double rel, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), want[i], rel * (1 + std::fabs(want[i])))
        << what << " at " << i;
}

/// max|got - want| / max|want| (the difference itself for an all-zero
/// want; non-finite when any difference is).
template <typename T, typename U>
double relError(const std::vector<T> &got, const std::vector<U> &want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  if (!std::isfinite(diff))
    return diff;
  return scale > 0 ? diff / scale : diff;
}

/// Whether a and b hold the same bits.
template <typename T>
bool sameBits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Central differences of `loss` with respect to each element of `x`.
inline std::vector<double> numericGrad(std::vector<double> &x,
                                       const std::function<double()> &loss,
                                       double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + h;
    double up = loss();
    x[i] = keep - h;
    double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// Visits every multi-index of `shape` in row-major order.
inline void forEachIndex(const Shape &shape,
                         const std::function<void(const Shape &)> &fn) {
  if (numelOf(shape) == 0)
    return;
  Shape idx(shape.size(), 0);
  while (true) {
    fn(idx);
    int64_t d = int64_t(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// Row-major offset of `idx` in `shape`.
inline int64_t flatten(const Shape &shape, const Shape &idx) {
  int64_t off = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    off = off * shape[i] + idx[i];
  return off;
}

/// `a` followed by `b`.
inline Shape cat(Shape a, const Shape &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// A convolution problem: batch n, c input and m output channels, spatial
/// input `in`, window geometry (pads: begin pads then end pads).
struct ConvCase {
  int64_t n, c, m, group;
  Shape in, kernel, strides, pads, dilations;
  bool bias = false;
};

/// The spatial output shape of `cc`.
inline Shape convOut(const ConvCase &cc) {
  Shape out;
  size_t s = cc.in.size();
  for (size_t i = 0; i < s; ++i)
    out.push_back((cc.in[i] + cc.pads[i] + cc.pads[i + s] -
                   cc.dilations[i] * (cc.kernel[i] - 1) - 1) /
                      cc.strides[i] +
                  1);
  return out;
}

inline WindowParams paramsOf(const ConvCase &cc) {
  WindowParams p;
  p.kernel = cc.kernel;
  p.strides = cc.strides;
  p.pads = cc.pads;
  p.dilations = cc.dilations;
  p.group = cc.group;
  return p;
}

} // namespace pp::rt::test

#endif // PP_RUNTIME_TEST_KERNELTESTHELPERS_H
