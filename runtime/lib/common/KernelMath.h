//===- KernelMath.h - Element arithmetic shared by the backends -*- C++ -*-===//
//
// The per-element rules that the CPU loops and the CUDA kernels compute
// identically: wrapping integer arithmetic, the saturating double
// conversion of `cast`, integer powers, class weights of cross-entropy
// labels, one element of the SGD and Adam updates, and the taps of a pooling
// window. Each is a host function for the CPU and a host-device one under
// nvcc, so both backends run the same code and give the same results.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_COMMON_KERNELMATH_H
#define PP_RUNTIME_COMMON_KERNELMATH_H

#include "common/Checks.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

/// Inlined into both the host and (under nvcc) the device code.
#ifdef __CUDACC__
#define PP_RT_HD_INLINE __host__ __device__ __forceinline__
#else
#define PP_RT_HD_INLINE inline
#endif

namespace pp::rt::common {

//===----------------------------------------------------------------------===//
// Integers and conversions
//===----------------------------------------------------------------------===//

/// Signed integer arithmetic wraps (as PyTorch's does) instead of being
/// undefined: compute in an unsigned type at least as wide as T and as
/// `unsigned` (a uint16_t product would otherwise promote to a signed int
/// and overflow).
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                    std::make_unsigned_t<T>>;
template <typename T> PP_RT_HD_INLINE T wrapAdd(T a, T b) {
  using U = WrapType<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T> PP_RT_HD_INLINE T wrapSub(T a, T b) {
  using U = WrapType<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T> PP_RT_HD_INLINE T wrapMul(T a, T b) {
  using U = WrapType<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

/// Converts a double to T the way `cast` does: floats round, integers
/// truncate toward zero and saturate (NaN gives 0), so the conversion is
/// never undefined behaviour. Bool callers must use `value != 0` instead.
template <typename T> PP_RT_HD_INLINE T convertDouble(double value) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(value);
  } else {
    if (value != value) // NaN
      return 0;
    if (value <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    // max() of a 64-bit type rounds up to 2^63 as a double: compare >=.
    if (value >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(value);
  }
}

/// Integer power by squaring (wrapping) for a non-negative exponent.
template <typename T> PP_RT_HD_INLINE T intPowUnsigned(T base, uint64_t exp) {
  T result = T(1);
  while (exp) {
    if (exp & 1)
      result = wrapMul(result, base);
    base = wrapMul(base, base);
    exp >>= 1;
  }
  return result;
}

/// Integer power by squaring (wrapping). Negative exponents truncate toward
/// zero like integer Div: only bases 1 and -1 give a non-zero result, and a
/// zero base is a division by zero.
template <typename T>
PP_RT_HD_INLINE T intPow(T base, int64_t exp, bool &divByZero) {
  if (exp < 0) {
    if (base == T(0)) {
      divByZero = true;
      return T(0);
    }
    if (base == T(1))
      return T(1);
    if constexpr (std::is_signed_v<T>)
      if (base == T(-1))
        return (exp & 1) ? T(-1) : T(1);
    return T(0);
  }
  return intPowUnsigned(base, static_cast<uint64_t>(exp));
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

/// The weight of a cross-entropy label: 0 for the ignore index, else its
/// class weight (1 without `weights`); false when the label lies outside
/// [0, classes).
template <typename T>
PP_RT_HD_INLINE bool labelClassWeight(int64_t label, const T *weights,
                                      int64_t classes, bool hasIgnoreIndex,
                                      int64_t ignoreIndex, double &weight) {
  if (hasIgnoreIndex && label == ignoreIndex) {
    weight = 0;
    return true;
  }
  if (label < 0 || label >= classes)
    return false;
  weight = weights ? double(weights[label]) : 1.0;
  return true;
}

/// The square root of T in T (sqrtf for float on the device, as std::sqrt
/// on the host).
template <typename T> PP_RT_HD_INLINE T sqrtOf(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>)
    return ::sqrtf(x);
  else
    return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}

/// One element of torch.optim.SGD: the gradient g of parameter p with the
/// weight decay wd added, through the momentum buffer element `buf` (null
/// without momentum; `first` initialises it with the gradient), Nesterov's
/// look-ahead or not. Returns the updated parameter.
template <typename T>
PP_RT_HD_INLINE T sgdUpdate(T p, T g, T *buf, bool first, T lr, T mu, T damp,
                            T wd, bool nesterov) {
  T d = g;
  if (wd != T(0))
    d += wd * p;
  if (buf) {
    *buf = first ? d : mu * *buf + damp * d;
    d = nesterov ? d + mu * *buf : *buf;
  }
  return p - lr * d;
}

/// torch.optim.Adam's coefficients of one step, each computed in double and
/// rounded once to T, as PyTorch hands its Python floats to the kernels: 1 -
/// beta2 rounded from double differs from 1 - float(beta2) by 1.3e-5
/// relative for beta2 = 0.999, a bias in every second moment.
template <typename T> struct AdamCoefficients {
  T b1, oneMinusB1, b2, oneMinusB2, eps, wd;
  T stepSize; // lr / (1 - beta1^t)
  T bc2;      // sqrt(1 - beta2^t)
  T decay;    // AdamW's 1 - lr * weightDecay
};

/// One element of torch.optim.Adam / AdamW: updates the moments m and v
/// with the gradient g of parameter p and returns the updated parameter,
/// in PyTorch's order of operations.
template <typename T>
PP_RT_HD_INLINE T adamUpdate(T p, T g, T &m, T &v, const AdamCoefficients<T> &c,
                             bool decoupled) {
  if (decoupled)
    p *= c.decay; // AdamW: decay the weight itself
  else if (c.wd != T(0))
    g += c.wd * p; // Adam: L2 term in the gradient
  m = c.b1 * m + c.oneMinusB1 * g;
  v = c.b2 * v + c.oneMinusB2 * g * g;
  T denom = sqrtOf(v) / c.bc2 + c.eps;
  return p - c.stepSize * m / denom;
}

//===----------------------------------------------------------------------===//
// Pooling windows
//===----------------------------------------------------------------------===//

/// Number of taps of kernel dim i at output o whose position lies in
/// [lo, hi) (the input, or the input with its declared pads).
PP_RT_HD_INLINE int64_t countTaps(const Geometry &g, int i, int64_t o,
                                  int64_t lo, int64_t hi) {
  int64_t count = 0;
  for (int64_t kk = 0; kk < g.k[i]; ++kk) {
    int64_t pos = o * g.s[i] - g.pb[i] + kk * g.d[i];
    count += pos >= lo && pos < hi;
  }
  return count;
}

/// Divisor of average pooling at output o: the taps inside the input, or
/// with countIncludePad also those inside the declared pads (taps of a
/// ceil-mode overhang beyond the pads never count, as in PyTorch).
PP_RT_HD_INLINE int64_t avgDivisor(const Geometry &g, const int64_t *o,
                                   bool countIncludePad) {
  int64_t divisor = 1;
  for (int i = 0; i < 3; ++i)
    divisor *= countIncludePad
                   ? countTaps(g, i, o[i], -g.pb[i], g.in[i] + g.pe[i])
                   : countTaps(g, i, o[i], 0, g.in[i]);
  return divisor;
}

/// Calls tap(offset) for each tap of output o that lies inside the input
/// (its offset in the input plane), depth, then height, then width: the
/// order that picks the argmax among ties.
#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
template <typename Tap>
PP_RT_HD_INLINE void forEachTap(const Geometry &g, const int64_t *o,
                                Tap &&tap) {
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    int64_t id = o[0] * g.s[0] - g.pb[0] + kd * g.d[0];
    if (id < 0 || id >= g.in[0])
      continue;
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      int64_t ih = o[1] * g.s[1] - g.pb[1] + kh * g.d[1];
      if (ih < 0 || ih >= g.in[1])
        continue;
      int64_t rowOff = (id * g.in[1] + ih) * g.in[2];
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        int64_t iw = o[2] * g.s[2] - g.pb[2] + kw * g.d[2];
        if (iw >= 0 && iw < g.in[2])
          tap(rowOff + iw);
      }
    }
  }
}

} // namespace pp::rt::common

#endif // PP_RUNTIME_COMMON_KERNELMATH_H
