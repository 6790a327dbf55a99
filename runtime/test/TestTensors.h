//===- TestTensors.h - Tensor helpers of the kernel tests -------*- C++ -*-===//
//
// Owned tensors for kernel unit tests, a deterministic random filler, an
// inner product for adjoint checks and central finite differences.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_TEST_TESTTENSORS_H
#define PP_RUNTIME_TEST_TESTTENSORS_H

#include "pp/Runtime/Kernels.h"

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace pp::rt::test {

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <> struct DTypeOf<double> {
  static constexpr DType value = DType::F64;
};
template <> struct DTypeOf<int64_t> {
  static constexpr DType value = DType::I64;
};
template <> struct DTypeOf<int32_t> {
  static constexpr DType value = DType::I32;
};
template <> struct DTypeOf<int8_t> {
  static constexpr DType value = DType::I8;
};
template <> struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::U8;
};
template <> struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::U32;
};
template <> struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::U64;
};
template <> struct DTypeOf<int16_t> {
  static constexpr DType value = DType::I16;
};
template <> struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::U16;
};

/// A tensor that owns its storage. Movable (the vector's buffer moves with
/// it), not copyable (the view would alias).
template <typename T> struct Owned {
  std::vector<T> values;
  Tensor t;

  explicit Owned(std::vector<int64_t> shape, std::vector<T> init = {},
                 DType dtype = DTypeOf<T>::value)
      : values(std::move(init)) {
    t.dtype = dtype;
    t.shape = std::move(shape);
    values.resize(t.numel());
    t.data = values.data();
  }
  Owned(const Owned &) = delete;
  Owned &operator=(const Owned &) = delete;
  Owned(Owned &&) = default;

  T &operator[](int64_t i) { return values[i]; }
  const T &operator[](int64_t i) const { return values[i]; }
};

template <typename T>
Owned<T> make(std::vector<int64_t> shape, std::vector<T> init = {}) {
  return Owned<T>(std::move(shape), std::move(init));
}
/// F16 and BF16 tensors hold raw bits (Half.h); pass the dtype.
inline Owned<uint16_t> make16(DType dtype, std::vector<int64_t> shape,
                              std::vector<uint16_t> init = {}) {
  return Owned<uint16_t>(std::move(shape), std::move(init), dtype);
}
/// Bool tensors hold 0/1 bytes.
inline Owned<uint8_t> makeBool(std::vector<int64_t> shape,
                               std::vector<uint8_t> init = {}) {
  return Owned<uint8_t>(std::move(shape), std::move(init), DType::Bool);
}

/// Uniform values in [lo, hi) from a fixed seed.
template <typename T>
Owned<T> random(std::vector<int64_t> shape, unsigned seed, double lo = -1,
                double hi = 1) {
  Owned<T> o(std::move(shape), {});
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (T &v : o.values)
    v = static_cast<T>(dist(gen));
  return o;
}

inline double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// Central differences of the scalar loss(x) at x, one coordinate at a time.
inline std::vector<double>
numericGrad(std::vector<double> x,
            const std::function<double(const std::vector<double> &)> &loss,
            double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + h;
    double up = loss(x);
    x[i] = saved - h;
    double down = loss(x);
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

} // namespace pp::rt::test

#endif // PP_RUNTIME_TEST_TESTTENSORS_H
