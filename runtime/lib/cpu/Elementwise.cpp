//===- Elementwise.cpp - Elementwise CPU kernels ----------------*- C++ -*-===//
//
// Unary maps and their gradients, broadcasting binary ops, where, clip,
// cast, expand and its adjoint reduceSumTo, and fill. Broadcast loops walk
// the output in flat order with per-operand strides (0 on broadcast dims),
// after coalescing dims so most cases become one tight loop.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Dnnl.h"

#include <atomic>
#include <cstring>

namespace pp::rt {

using namespace cpu;

namespace {

/// Elements per thread below which a loop is not worth splitting.
constexpr int64_t kGrain = 1 << 14;

// Constants in double; kernels convert them to T so F32 math stays in F32
// as PyTorch's does.
constexpr double kSqrtHalf = 0.70710678118654752440;    // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1 / sqrt(2 pi)
constexpr double kGeluKappa = 0.044715;

/// y[i] = f(x[i]) over a flat range (x and y may alias).
template <typename TX, typename TY, typename Fn>
void mapFlat(const Context &ctx, const Tensor &x, Tensor &y, Fn f) {
  const TX *px = x.as<const TX>();
  TY *py = y.as<TY>();
  parallelFor(ctx, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      py[i] = f(px[i]);
  });
}

/// c[i] = op(a[..], b[..]) over c's shape with numpy broadcasting.
template <typename TA, typename TB, typename TC, typename Op>
void mapBroadcast2(const Context &ctx, const Tensor &a, const Tensor &b,
                   Tensor &c, Op op) {
  const TA *pa = a.as<const TA>();
  const TB *pb = b.as<const TB>();
  TC *pc = c.as<TC>();
  int64_t n = c.numel();
  if (a.shape == c.shape && b.shape == c.shape) {
    parallelFor(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        pc[i] = op(pa[i], pb[i]);
    });
    return;
  }
  std::vector<int64_t> shape = c.shape;
  std::array<std::vector<int64_t>, 2> strides = {
      broadcastStrides(a.shape, c.shape), broadcastStrides(b.shape, c.shape)};
  coalesceDims(shape, strides);
  // Runs of the innermost dim with a contiguous or a broadcast operand (a
  // bias, a scale, a scalar) get loops the compiler vectorises; a runtime
  // stride of 0 or 1 in the loop would not be.
  int64_t sa = shape.empty() ? 0 : strides[0].back(),
          sb = shape.empty() ? 0 : strides[1].back();
  parallelFor(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
    forEachStridedRow(
        shape, strides, begin, end,
        [&](int64_t i, int64_t count, const std::array<int64_t, 2> &o) {
          const TA *ra = pa + o[0];
          const TB *rb = pb + o[1];
          TC *rc = pc + i;
          if (sa == 1 && sb == 1) {
            for (int64_t j = 0; j < count; ++j)
              rc[j] = op(ra[j], rb[j]);
          } else if (sa == 1 && sb == 0) {
            TB vb = rb[0];
            for (int64_t j = 0; j < count; ++j)
              rc[j] = op(ra[j], vb);
          } else if (sa == 0 && sb == 1) {
            TA va = ra[0];
            for (int64_t j = 0; j < count; ++j)
              rc[j] = op(va, rb[j]);
          } else {
            for (int64_t j = 0; j < count; ++j)
              rc[j] = op(ra[j * sa], rb[j * sb]);
          }
        });
  });
}

/// out[i] = op(a[..], b[..], c[..]) over out's shape with broadcasting.
template <typename TA, typename TB, typename TC, typename TO, typename Op>
void mapBroadcast3(const Context &ctx, const Tensor &a, const Tensor &b,
                   const Tensor &c, Tensor &out, Op op) {
  const TA *pa = a.as<const TA>();
  const TB *pb = b.as<const TB>();
  const TC *pc = c.as<const TC>();
  TO *po = out.as<TO>();
  std::vector<int64_t> shape = out.shape;
  std::array<std::vector<int64_t>, 3> strides = {
      broadcastStrides(a.shape, out.shape),
      broadcastStrides(b.shape, out.shape),
      broadcastStrides(c.shape, out.shape)};
  coalesceDims(shape, strides);
  parallelFor(ctx, out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    forEachStrided(shape, strides, begin, end,
                   [&](int64_t i, const std::array<int64_t, 3> &o) {
                     po[i] = op(pa[o[0]], pb[o[1]], pc[o[2]]);
                   });
  });
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

template <typename T>
Status unaryFloat(const Context &ctx, UnaryKind kind, const Tensor &x,
                  Tensor &y, float alphaF, float betaF) {
  const T alpha = static_cast<T>(alphaF), beta = static_cast<T>(betaF);
  auto run = [&](auto f) {
    mapFlat<T, T>(ctx, x, y, f);
    return Status::success();
  };
  switch (kind) {
  case UnaryKind::Relu:
    // `x < 0` keeps NaN (as torch.relu does).
    return run([](T v) { return v < T(0) ? T(0) : v; });
  case UnaryKind::LeakyRelu:
    return run([alpha](T v) { return v < T(0) ? alpha * v : v; });
  case UnaryKind::Sigmoid:
    // Stable on both tails: never exponentiates a large positive number.
    return run([](T v) {
      if (v >= T(0))
        return T(1) / (T(1) + std::exp(-v));
      T e = std::exp(v);
      return e / (T(1) + e);
    });
  case UnaryKind::Tanh:
    return run([](T v) { return std::tanh(v); });
  case UnaryKind::Erf:
    return run([](T v) { return std::erf(v); });
  case UnaryKind::GeluErf:
    return run(
        [](T v) { return T(0.5) * v * (T(1) + std::erf(v * T(kSqrtHalf))); });
  case UnaryKind::GeluTanh:
    return run([](T v) {
      T inner = T(kSqrt2OverPi) * (v + T(kGeluKappa) * v * v * v);
      return T(0.5) * v * (T(1) + std::tanh(inner));
    });
  case UnaryKind::Sqrt:
    return run([](T v) { return std::sqrt(v); });
  case UnaryKind::Exp:
    return run([](T v) { return std::exp(v); });
  case UnaryKind::Log:
    return run([](T v) { return std::log(v); });
  case UnaryKind::Neg:
    return run([](T v) { return -v; });
  case UnaryKind::Abs:
    return run([](T v) { return std::abs(v); });
  case UnaryKind::Reciprocal:
    return run([](T v) { return T(1) / v; });
  case UnaryKind::Floor:
    return run([](T v) { return std::floor(v); });
  case UnaryKind::Ceil:
    return run([](T v) { return std::ceil(v); });
  case UnaryKind::HardSigmoid:
    return run([alpha, beta](T v) {
      return std::max(T(0), std::min(T(1), alpha * v + beta));
    });
  case UnaryKind::HardSwish:
    // As torch's hardswish: x * relu6(x + 3) / 6.
    return run([](T v) {
      return v * std::min(std::max(v + T(3), T(0)), T(6)) / T(6);
    });
  case UnaryKind::Elu:
    return run([alpha](T v) { return v > T(0) ? v : alpha * std::expm1(v); });
  case UnaryKind::Selu: // beta is gamma
    return run([alpha, beta](T v) {
      return beta * (v > T(0) ? v : alpha * std::expm1(v));
    });
  case UnaryKind::Celu:
    return run([alpha](T v) {
      return std::max(T(0), v) + std::min(T(0), alpha * std::expm1(v / alpha));
    });
  case UnaryKind::ThresholdedRelu:
    return run([alpha](T v) { return v > alpha ? v : T(0); });
  case UnaryKind::Softplus:
    // log(1 + e^v) without overflow: max(v, 0) + log1p(e^-|v|).
    return run([](T v) {
      return std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
    });
  case UnaryKind::Softsign:
    return run([](T v) { return v / (T(1) + std::abs(v)); });
  case UnaryKind::Sin:
    return run([](T v) { return std::sin(v); });
  case UnaryKind::Cos:
    return run([](T v) { return std::cos(v); });
  case UnaryKind::Round:
    // Halves to even (ONNX Round), the default rounding mode's nearbyint.
    return run([](T v) { return std::nearbyint(v); });
  case UnaryKind::Identity:
  case UnaryKind::Not:
    break;
  }
  return Status::error(std::string("unary ") + unaryName(kind) +
                       ": unsupported dtype " + dtypeName(x.dtype));
}

/// Neg, Abs and Relu on integer tensors (ONNX allows them there).
template <typename T>
Status unaryInt(const Context &ctx, UnaryKind kind, const Tensor &x,
                Tensor &y) {
  switch (kind) {
  case UnaryKind::Neg:
    mapFlat<T, T>(ctx, x, y, [](T v) { return wrapSub(T(0), v); });
    return Status::success();
  case UnaryKind::Abs:
    mapFlat<T, T>(ctx, x, y,
                  [](T v) { return v < T(0) ? wrapSub(T(0), v) : v; });
    return Status::success();
  case UnaryKind::Relu:
    mapFlat<T, T>(ctx, x, y, [](T v) { return v < T(0) ? T(0) : v; });
    return Status::success();
  default:
    return Status::error(std::string("unary ") + unaryName(kind) +
                         ": unsupported dtype " + dtypeName(x.dtype));
  }
}

template <typename T>
Status unaryGradFloat(const Context &ctx, UnaryKind kind, const Tensor &x,
                      const Tensor &y, const Tensor &dy, Tensor &dx,
                      float alphaF, float betaF) {
  const T alpha = static_cast<T>(alphaF), beta = static_cast<T>(betaF);
  const T *px = x.as<const T>();
  const T *py = y.as<const T>();
  const T *pdy = dy.as<const T>();
  T *pdx = dx.as<T>();
  // f(i) gives dx[i]; reads x or y as the kind needs.
  auto run = [&](auto f) {
    parallelFor(ctx, dx.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        pdx[i] = f(i);
    });
    return Status::success();
  };
  switch (kind) {
  case UnaryKind::Identity:
    return run([&](int64_t i) { return pdy[i]; });
  // The gradient is read before the select: a load under the condition is
  // one the compiler does not vectorise (it might fault).
  case UnaryKind::Relu:
    return run([&](int64_t i) {
      T g = pdy[i];
      return px[i] > T(0) ? g : T(0);
    });
  case UnaryKind::LeakyRelu:
    // torch: x > 0 ? dy : alpha * dy (so x == 0 takes the alpha branch).
    return run(
        [&](int64_t i) { return px[i] > T(0) ? pdy[i] : alpha * pdy[i]; });
  case UnaryKind::Sigmoid:
    return run([&](int64_t i) { return pdy[i] * py[i] * (T(1) - py[i]); });
  case UnaryKind::HardSigmoid:
    // Zero where the output is clamped (torch: outside -3 < x < 3).
    return run([&](int64_t i) {
      T t = alpha * px[i] + beta;
      return t > T(0) && t < T(1) ? alpha * pdy[i] : T(0);
    });
  case UnaryKind::HardSwish:
    // As torch's hardswish_backward.
    return run([&](int64_t i) {
      T v = px[i];
      return v < T(-3)   ? T(0)
             : v <= T(3) ? pdy[i] * (v / T(3) + T(0.5))
                         : pdy[i];
    });
  case UnaryKind::Tanh:
    return run([&](int64_t i) { return pdy[i] * (T(1) - py[i] * py[i]); });
  case UnaryKind::Erf:
    return run([&](int64_t i) {
      return pdy[i] * T(kTwoOverSqrtPi) * std::exp(-px[i] * px[i]);
    });
  case UnaryKind::GeluErf:
    return run([&](int64_t i) {
      T v = px[i];
      T cdf = T(0.5) * (T(1) + std::erf(v * T(kSqrtHalf)));
      T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * v * v);
      return pdy[i] * (cdf + v * pdf);
    });
  case UnaryKind::GeluTanh:
    // As torch's gelu_backward(approximate='tanh').
    return run([&](int64_t i) {
      T v = px[i];
      T inner = T(kSqrt2OverPi) * (v + T(kGeluKappa) * v * v * v);
      T t = std::tanh(inner);
      T left = T(0.5) * v;
      T right = T(1) + t;
      T dInner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluKappa) * v * v);
      return pdy[i] * (T(0.5) * right + left * (T(1) - t * t) * dInner);
    });
  case UnaryKind::Sqrt:
    return run([&](int64_t i) { return pdy[i] / (T(2) * py[i]); });
  case UnaryKind::Exp:
    return run([&](int64_t i) { return pdy[i] * py[i]; });
  case UnaryKind::Log:
    return run([&](int64_t i) { return pdy[i] / px[i]; });
  case UnaryKind::Neg:
    return run([&](int64_t i) { return -pdy[i]; });
  case UnaryKind::Abs:
    // sign(0) = 0, as torch's abs backward.
    return run([&](int64_t i) {
      T v = px[i];
      return v > T(0) ? pdy[i] : v < T(0) ? -pdy[i] : T(0);
    });
  case UnaryKind::Reciprocal:
    return run([&](int64_t i) { return -pdy[i] * py[i] * py[i]; });
  // Elu, Selu and Celu as torch's elu_backward from x: x == 0 takes the
  // exponential branch.
  case UnaryKind::Elu:
    return run([&](int64_t i) {
      T v = px[i];
      return v > T(0) ? pdy[i] : pdy[i] * alpha * std::exp(v);
    });
  case UnaryKind::Selu:
    return run([&](int64_t i) {
      T v = px[i];
      return v > T(0) ? pdy[i] * beta : pdy[i] * beta * alpha * std::exp(v);
    });
  case UnaryKind::Celu:
    return run([&](int64_t i) {
      T v = px[i];
      return v > T(0) ? pdy[i] : pdy[i] * std::exp(v / alpha);
    });
  case UnaryKind::ThresholdedRelu:
    return run([&](int64_t i) {
      T g = pdy[i];
      return px[i] > alpha ? g : T(0);
    });
  case UnaryKind::Softplus:
    // The logistic function of x, stable on both tails.
    return run([&](int64_t i) {
      T v = px[i];
      T e = std::exp(-std::abs(v));
      return pdy[i] * (v >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e));
    });
  case UnaryKind::Softsign:
    return run([&](int64_t i) {
      T d = T(1) + std::abs(px[i]);
      return pdy[i] / (d * d);
    });
  case UnaryKind::Sin:
    return run([&](int64_t i) { return pdy[i] * std::cos(px[i]); });
  case UnaryKind::Cos:
    return run([&](int64_t i) { return -pdy[i] * std::sin(px[i]); });
  case UnaryKind::Floor:
  case UnaryKind::Ceil:
  case UnaryKind::Round:
  case UnaryKind::Not:
    break;
  }
  return Status::error("unreachable");
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

/// The remainder of x / y with the dividend's sign (`floored`: with the
/// divisor's). Integer y = 0 sets `divByZero`; MIN % -1 is 0, not undefined.
template <typename T> T remainder(T x, T y, bool floored, bool &divByZero) {
  T r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::fmod(x, y);
  } else {
    if (y == T(0)) {
      divByZero = true;
      return T(0);
    }
    if constexpr (std::is_signed_v<T>)
      if (y == T(-1))
        return T(0);
    r = static_cast<T>(x % y);
  }
  if (floored && r != T(0) && ((r < T(0)) != (y < T(0))))
    r = static_cast<T>(r + y);
  return r;
}

/// Add, Sub, Mul, Div, Mod, FMod, Max, Min on one dtype T (float or
/// integer).
template <typename T>
Status arithmetic(const Context &ctx, BinaryKind kind, const Tensor &a,
                  const Tensor &b, Tensor &c) {
  switch (kind) {
  case BinaryKind::Add:
    if constexpr (std::is_floating_point_v<T>)
      mapBroadcast2<T, T, T>(ctx, a, b, c, [](T x, T y) { return x + y; });
    else
      mapBroadcast2<T, T, T>(ctx, a, b, c, wrapAdd<T>);
    return Status::success();
  case BinaryKind::Sub:
    if constexpr (std::is_floating_point_v<T>)
      mapBroadcast2<T, T, T>(ctx, a, b, c, [](T x, T y) { return x - y; });
    else
      mapBroadcast2<T, T, T>(ctx, a, b, c, wrapSub<T>);
    return Status::success();
  case BinaryKind::Mul:
    if constexpr (std::is_floating_point_v<T>)
      mapBroadcast2<T, T, T>(ctx, a, b, c, [](T x, T y) { return x * y; });
    else
      mapBroadcast2<T, T, T>(ctx, a, b, c, wrapMul<T>);
    return Status::success();
  case BinaryKind::Div:
    if constexpr (std::is_floating_point_v<T>) {
      mapBroadcast2<T, T, T>(ctx, a, b, c, [](T x, T y) { return x / y; });
    } else {
      // C++ integer division truncates toward zero; x / 0 and MIN / -1 are
      // undefined, so flag the first and wrap the second.
      std::atomic<bool> divByZero{false};
      mapBroadcast2<T, T, T>(ctx, a, b, c, [&](T x, T y) {
        if (y == T(0)) {
          divByZero.store(true, std::memory_order_relaxed);
          return T(0);
        }
        if constexpr (std::is_signed_v<T>)
          if (y == T(-1))
            return wrapSub(T(0), x);
        return static_cast<T>(x / y);
      });
      if (divByZero)
        return Status::error("binary Div: integer division by zero");
    }
    return Status::success();
  case BinaryKind::Mod:
  case BinaryKind::FMod: {
    bool floored = kind == BinaryKind::Mod;
    std::atomic<bool> divByZero{false};
    mapBroadcast2<T, T, T>(ctx, a, b, c, [&](T x, T y) {
      bool zero = false;
      T r = remainder(x, y, floored, zero);
      if (zero)
        divByZero.store(true, std::memory_order_relaxed);
      return r;
    });
    if (divByZero)
      return Status::error(std::string("binary ") + binaryName(kind) +
                           ": integer remainder of a division by zero");
    return Status::success();
  }
  // `x != x`: a NaN x wins; a NaN y wins the comparison's false branch.
  case BinaryKind::Max:
    mapBroadcast2<T, T, T>(ctx, a, b, c,
                           [](T x, T y) { return x > y || x != x ? x : y; });
    return Status::success();
  case BinaryKind::Min:
    mapBroadcast2<T, T, T>(ctx, a, b, c,
                           [](T x, T y) { return x < y || x != x ? x : y; });
    return Status::success();
  default:
    return Status::error("unreachable");
  }
}

/// Pow with base dtype T and exponent dtype E.
template <typename T, typename E>
Status power(const Context &ctx, const Tensor &a, const Tensor &b, Tensor &c) {
  if constexpr (std::is_floating_point_v<T>) {
    mapBroadcast2<T, E, T>(ctx, a, b, c, [](T x, E y) {
      return static_cast<T>(std::pow(x, static_cast<T>(y)));
    });
  } else if constexpr (std::is_floating_point_v<E>) {
    mapBroadcast2<T, E, T>(ctx, a, b, c, [](T x, E y) {
      return convertDouble<T>(
          std::pow(static_cast<double>(x), static_cast<double>(y)));
    });
  } else if constexpr (std::is_unsigned_v<E>) {
    // Unsigned exponents (U8, U32, U64) are never negative, and a U64 one
    // may not fit int64.
    mapBroadcast2<T, E, T>(ctx, a, b, c, [](T x, E y) {
      return intPowUnsigned(x, static_cast<uint64_t>(y));
    });
  } else {
    std::atomic<bool> divByZero{false};
    mapBroadcast2<T, E, T>(ctx, a, b, c, [&](T x, E y) {
      bool zero = false;
      T r = intPow(x, static_cast<int64_t>(y), zero);
      if (zero)
        divByZero.store(true, std::memory_order_relaxed);
      return r;
    });
    if (divByZero)
      return Status::error(
          "binary Pow: zero to a negative integer power (division by zero)");
  }
  return Status::success();
}

/// Equal, Less, Greater on one dtype T; Bool operands compare as truth
/// values.
template <typename T>
Status compare(const Context &ctx, BinaryKind kind, bool isBool,
               const Tensor &a, const Tensor &b, Tensor &c) {
  auto run = [&](auto cmp) {
    if (isBool)
      mapBroadcast2<T, T, uint8_t>(ctx, a, b, c, [cmp](T x, T y) {
        return static_cast<uint8_t>(cmp(x != T(0), y != T(0)));
      });
    else
      mapBroadcast2<T, T, uint8_t>(ctx, a, b, c, [cmp](T x, T y) {
        return static_cast<uint8_t>(cmp(x, y));
      });
    return Status::success();
  };
  switch (kind) {
  case BinaryKind::Equal:
    return run([](auto x, auto y) { return x == y; });
  case BinaryKind::Less:
    return run([](auto x, auto y) { return x < y; });
  case BinaryKind::Greater:
    return run([](auto x, auto y) { return x > y; });
  default:
    return Status::error("unreachable");
  }
}

/// Converts one element as `cast` does between dtypes other than the 16-bit
/// floats: to or from Bool tests != 0 (NaN is true, as in numpy and
/// PyTorch), float->int truncates toward zero and saturates instead of
/// being undefined, float<->float and int->float round, int->int wraps.
template <typename From, typename To>
To castElement(From v, bool fromBool, bool toBool) {
  if (fromBool || toBool)
    return To(v != From(0));
  if constexpr (std::is_floating_point_v<From> && !std::is_floating_point_v<To>)
    return convertDouble<To>(static_cast<double>(v));
  else
    return static_cast<To>(v);
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

Status unary(Context &ctx, UnaryKind kind, const Tensor &x, Tensor &y,
             float alpha, float beta) {
  std::string what = std::string("unary ") + unaryName(kind);
  if (Status s = expectValid(x, (what + " x").c_str()); !s.ok())
    return s;
  if (Status s = expectDType(y, x.dtype, (what + " y").c_str()); !s.ok())
    return s;
  if (Status s = expectShape(y, x.shape, (what + " y").c_str()); !s.ok())
    return s;
  if (x.numel() == 0)
    return Status::success();

  if (kind == UnaryKind::Identity) {
    if (x.data != y.data)
      std::memcpy(y.data, x.data, x.bytes());
    return Status::success();
  }
  if (kind == UnaryKind::Not) {
    if (x.dtype != DType::Bool)
      return dtypeError(what, x.dtype);
    mapFlat<uint8_t, uint8_t>(ctx, x, y,
                              [](uint8_t v) { return uint8_t(v == 0); });
    return Status::success();
  }
  // F16 / BF16 (x and y share the dtype, checked above): through f32.
  if (anyFloat16(x)) {
    Float16Widening w(ctx);
    return w.finish(unary(ctx, kind, w.in(x), w.out(y), alpha, beta));
  }
  switch (x.dtype) {
  case DType::F32:
    // GELU's erf and tanh, sigmoid's exp and tanh are scalar libm calls in
    // the loop; oneDNN's are vectorised (maxvit_t: 2.1 s of a 5.3 s step in
    // erf GELU; efficientnet_b0: 45% of its op time in sigmoid).
    if (dnnlEltwise(ctx, kind, x.numel(), x.as<const float>(), nullptr,
                    y.as<float>()))
      return Status::success();
    return unaryFloat<float>(ctx, kind, x, y, alpha, beta);
  case DType::F64:
    return unaryFloat<double>(ctx, kind, x, y, alpha, beta);
  case DType::I64:
    return unaryInt<int64_t>(ctx, kind, x, y);
  case DType::I32:
    return unaryInt<int32_t>(ctx, kind, x, y);
  case DType::I8:
    return unaryInt<int8_t>(ctx, kind, x, y);
  case DType::I16:
    return unaryInt<int16_t>(ctx, kind, x, y);
  default:
    return dtypeError(what, x.dtype);
  }
}

Status unaryGrad(Context &ctx, UnaryKind kind, const Tensor &x, const Tensor &y,
                 const Tensor &dy, Tensor &dx, float alpha, float beta) {
  std::string what = std::string("unaryGrad ") + unaryName(kind);
  if (Status s = expectValid(dy, (what + " dy").c_str()); !s.ok())
    return s;
  if (Status s = expectDType(dx, dy.dtype, (what + " dx").c_str()); !s.ok())
    return s;
  if (Status s = expectShape(dx, dy.shape, (what + " dx").c_str()); !s.ok())
    return s;
  // Floor, Ceil, Round and Not are piecewise constant: their gradient is
  // zero.
  if (kind == UnaryKind::Floor || kind == UnaryKind::Ceil ||
      kind == UnaryKind::Round || kind == UnaryKind::Not) {
    if (dx.numel() > 0)
      std::memset(dx.data, 0, dx.bytes());
    return Status::success();
  }
  if (!isFloat(dy.dtype) && !isFloat16(dy.dtype))
    return dtypeError(what, dy.dtype);
  // y is only read by the kinds whose derivative is cheaper from f(x); the
  // others accept an empty placeholder.
  const Tensor &input = unaryGradReadsOutput(kind) ? y : x;
  const char *inputName = unaryGradReadsOutput(kind) ? " y" : " x";
  if (Status s = expectDType(input, dy.dtype, (what + inputName).c_str());
      !s.ok())
    return s;
  if (Status s = expectShape(input, dy.shape, (what + inputName).c_str());
      !s.ok())
    return s;
  // F16 / BF16 (dy, dx and the input read share the dtype): through f32.
  if (isFloat16(dy.dtype)) {
    Float16Widening w(ctx);
    return w.finish(unaryGrad(ctx, kind, w.in(x), w.in(y), w.in(dy), w.out(dx),
                              alpha, beta));
  }
  if (dy.numel() == 0)
    return Status::success();
  if (dy.dtype == DType::F32) {
    if (dnnlEltwise(ctx, kind, dy.numel(), x.as<const float>(),
                    dy.as<const float>(), dx.as<float>()))
      return Status::success();
    return unaryGradFloat<float>(ctx, kind, x, y, dy, dx, alpha, beta);
  }
  return unaryGradFloat<double>(ctx, kind, x, y, dy, dx, alpha, beta);
}

Status binary(Context &ctx, BinaryKind kind, const Tensor &a, const Tensor &b,
              Tensor &c) {
  BinaryPlan plan;
  PP_RT_TRY(checkBinary(kind, a, b, c, plan));
  const std::string &what = plan.what;
  if (plan.isLogic) {
    if (c.numel() == 0)
      return Status::success();
    if (kind == BinaryKind::And)
      mapBroadcast2<uint8_t, uint8_t, uint8_t>(
          ctx, a, b, c, [](uint8_t x, uint8_t y) { return uint8_t(x && y); });
    else
      mapBroadcast2<uint8_t, uint8_t, uint8_t>(
          ctx, a, b, c, [](uint8_t x, uint8_t y) { return uint8_t(x || y); });
    return Status::success();
  }
  // F16 / BF16 operands (dtypes checked above: a and b alike but for Pow's
  // exponent, c a's or Bool): arithmetic and comparisons through f32.
  if (anyFloat16(a, b)) {
    Float16Widening w(ctx);
    return w.finish(binary(ctx, kind, w.in(a), w.in(b), w.out(c)));
  }
  if (plan.isCompare) {
    if (c.numel() == 0)
      return Status::success();
    return visitDType(a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return compare<T>(ctx, kind, a.dtype == DType::Bool, a, b, c);
    });
  }
  // Arithmetic: numbers only.
  if (a.dtype == DType::Bool)
    return dtypeError(what, a.dtype);
  if (b.dtype == DType::Bool)
    return dtypeError(what + " exponent", b.dtype);
  if (c.numel() == 0)
    return Status::success();
  if (kind == BinaryKind::Pow)
    return visitDType(a.dtype, [&](auto baseTag) {
      using T = typename decltype(baseTag)::type;
      return visitDType(b.dtype, [&](auto expTag) {
        using E = typename decltype(expTag)::type;
        return power<T, E>(ctx, a, b, c);
      });
    });
  return visitDType(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return arithmetic<T>(ctx, kind, a, b, c);
  });
}

Status where(Context &ctx, const Tensor &cond, const Tensor &x, const Tensor &y,
             Tensor &out) {
  std::vector<int64_t> shape;
  PP_RT_TRY(checkWhere(cond, x, y, out, shape));
  if (out.numel() == 0)
    return Status::success();
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapBroadcast3<uint8_t, T, T, T>(
        ctx, cond, x, y, out,
        [](uint8_t c, T vx, T vy) { return c ? vx : vy; });
    return Status::success();
  });
}

Status clip(Context &ctx, const Tensor &x, const Tensor *lo, const Tensor *hi,
            Tensor &y) {
  if (Status s = expectValid(x, "clip x"); !s.ok())
    return s;
  if (x.dtype == DType::Bool)
    return dtypeError("clip", x.dtype);
  if (Status s = expectDType(y, x.dtype, "clip y"); !s.ok())
    return s;
  if (Status s = expectShape(y, x.shape, "clip y"); !s.ok())
    return s;
  for (const Tensor *bound : {lo, hi}) {
    if (!bound)
      continue;
    const char *name = bound == lo ? "clip lo" : "clip hi";
    if (Status s = expectDType(*bound, x.dtype, name); !s.ok())
      return s;
    if (Status s = expectValid(*bound, name); !s.ok())
      return s;
    if (!broadcastsTo(bound->shape, x.shape))
      return Status::error(
          std::string(name) + ": shape " + shapeString(bound->shape) +
          " does not broadcast to x's shape " + shapeString(x.shape));
  }
  // F16 / BF16 (y and the bounds share x's dtype, checked above): exact.
  if (anyFloat16(x)) {
    Float16Widening w(ctx);
    return w.finish(clip(ctx, w.in(x), w.in(lo), w.in(hi), w.out(y)));
  }
  if (x.numel() == 0)
    return Status::success();
  // An absent bound reads a dummy scalar and is skipped by a flag, so that
  // -inf/+inf and NaN pass through untouched.
  return visitDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T dummy = T(0);
    Tensor dummyT{&dummy, x.dtype, {}};
    const Tensor &l = lo ? *lo : dummyT;
    const Tensor &h = hi ? *hi : dummyT;
    bool hasLo = lo, hasHi = hi;
    mapBroadcast3<T, T, T, T>(ctx, x, l, h, y, [=](T v, T vl, T vh) {
      // min(max(x, lo), hi), written so a NaN x propagates.
      if (hasLo && v < vl)
        v = vl;
      if (hasHi && vh < v)
        v = vh;
      return v;
    });
    return Status::success();
  });
}

Status cast(Context &ctx, const Tensor &x, Tensor &y) {
  if (Status s = expectValid(x, "cast x"); !s.ok())
    return s;
  if (Status s = expectShape(y, x.shape, "cast y"); !s.ok())
    return s;
  if (x.numel() == 0)
    return Status::success();
  if (x.dtype == y.dtype) {
    if (x.data != y.data)
      std::memcpy(y.data, x.data, x.bytes());
    return Status::success();
  }
  bool fromBool = x.dtype == DType::Bool, toBool = y.dtype == DType::Bool;
  bool fromBF16 = x.dtype == DType::BF16, toBF16 = y.dtype == DType::BF16;
  // The 16-bit floats convert through their exact float value, and to them
  // from a double with one rounding.
  if (isFloat16(x.dtype) && isFloat16(y.dtype)) {
    mapFlat<uint16_t, uint16_t>(ctx, x, y, [=](uint16_t v) {
      return doubleToFloat16(float16ToFloat(v, fromBF16), toBF16);
    });
    return Status::success();
  }
  if (isFloat16(x.dtype))
    return visitDType(y.dtype, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      mapFlat<uint16_t, To>(ctx, x, y, [=](uint16_t v) {
        return castElement<float, To>(float16ToFloat(v, fromBF16), false,
                                      toBool);
      });
      return Status::success();
    });
  if (isFloat16(y.dtype))
    return visitDType(x.dtype, [&](auto fromTag) {
      using From = typename decltype(fromTag)::type;
      mapFlat<From, uint16_t>(ctx, x, y, [=](From v) {
        double value = fromBool ? double(v != From(0)) : static_cast<double>(v);
        return doubleToFloat16(value, toBF16);
      });
      return Status::success();
    });
  return visitDType(x.dtype, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    return visitDType(y.dtype, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      mapFlat<From, To>(ctx, x, y, [=](From v) {
        return castElement<From, To>(v, fromBool, toBool);
      });
      return Status::success();
    });
  });
}

Status expand(Context &ctx, const Tensor &x, Tensor &y) {
  if (Status s = expectValid(x, "expand x"); !s.ok())
    return s;
  if (Status s = expectDType(y, x.dtype, "expand y"); !s.ok())
    return s;
  if (Status s = expectValid(y, "expand y"); !s.ok())
    return s;
  if (!broadcastsTo(x.shape, y.shape))
    return Status::error("expand: x's shape " + shapeString(x.shape) +
                         " does not broadcast to y's shape " +
                         shapeString(y.shape));
  if (y.numel() == 0)
    return Status::success();
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<const T>();
    T *py = y.as<T>();
    std::vector<int64_t> shape = y.shape;
    std::array<std::vector<int64_t>, 1> strides = {
        broadcastStrides(x.shape, y.shape)};
    coalesceDims(shape, strides);
    parallelFor(ctx, y.numel(), kGrain, [&](int64_t begin, int64_t end) {
      gatherStrided(shape, strides, px, py, begin, end);
    });
    return Status::success();
  });
}

Status fill(Context &ctx, Tensor &y, double value) {
  if (Status s = expectValid(y, "fill y"); !s.ok())
    return s;
  if (isFloat16(y.dtype)) {
    uint16_t bits = doubleToFloat16(value, y.dtype == DType::BF16);
    uint16_t *py = y.as<uint16_t>();
    parallelFor(ctx, y.numel(), kGrain, [&](int64_t begin, int64_t end) {
      std::fill(py + begin, py + end, bits);
    });
    return Status::success();
  }
  bool isBool = y.dtype == DType::Bool;
  return visitDType(y.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = isBool ? T(value != 0) : convertDouble<T>(value);
    T *py = y.as<T>();
    parallelFor(ctx, y.numel(), kGrain, [&](int64_t begin, int64_t end) {
      std::fill(py + begin, py + end, v);
    });
    return Status::success();
  });
}

} // namespace pp::rt
