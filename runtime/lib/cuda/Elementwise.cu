//===- Elementwise.cu - Elementwise CUDA kernels --------------------------===//
//
// Unary maps and their gradients, broadcasting binary ops, where, clip,
// cast, expand, reduceSumTo and fill. One kernel template per element type
// takes the op kind as a run-time value (a warp-uniform switch), which keeps
// the number of instantiations, and so the compile time, small. Broadcast
// operands are read through coalesced strides (0 on broadcast dims). F16 and
// BF16 elements are widened to float, computed as F32 ones and rounded once
// on store (Common.cuh), as the CPU backend computes them.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cstring>

namespace pp::rt {

using namespace cuda;

namespace {

// Constants in double, converted to T in the kernels (as the CPU backend).
constexpr double kSqrtHalf = 0.70710678118654752440;    // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1 / sqrt(2 pi)
constexpr double kGeluKappa = 0.044715;

/// Flat views with one shape: coalesces to a single dim, no divisions.
template <int N>
Status flatIndex(const std::string &what, int64_t n, StridedIndex<N> &index) {
  std::array<std::vector<int64_t>, N> strides;
  for (auto &s : strides)
    s = {1};
  return makeIndex<N>(what, {n}, strides, index);
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

template <typename T>
__device__ __forceinline__ T unaryFloatOp(UnaryKind kind, T v, T alpha,
                                          T beta) {
  switch (kind) {
  // std::max and std::min as the CPU backend calls them (same NaN result).
  case UnaryKind::HardSigmoid: {
    T t = alpha * v + beta;
    T upper = t < T(1) ? t : T(1);
    return T(0) < upper ? upper : T(0);
  }
  case UnaryKind::HardSwish: { // as torch: x * relu6(x + 3) / 6
    T shifted = v + T(3);
    T lower = shifted < T(0) ? T(0) : shifted;
    return v * (T(6) < lower ? T(6) : lower) / T(6);
  }
  case UnaryKind::Relu:
    return v < T(0) ? T(0) : v; // keeps NaN, as torch.relu
  case UnaryKind::LeakyRelu:
    return v < T(0) ? alpha * v : v;
  case UnaryKind::Sigmoid:
    if (v >= T(0))
      return T(1) / (T(1) + dm::exp(-v));
    else {
      T e = dm::exp(v);
      return e / (T(1) + e);
    }
  case UnaryKind::Tanh:
    return dm::tanh(v);
  case UnaryKind::Erf:
    return dm::erf(v);
  case UnaryKind::GeluErf:
    return T(0.5) * v * (T(1) + dm::erf(v * T(kSqrtHalf)));
  case UnaryKind::GeluTanh: {
    T inner = T(kSqrt2OverPi) * (v + T(kGeluKappa) * v * v * v);
    return T(0.5) * v * (T(1) + dm::tanh(inner));
  }
  case UnaryKind::Sqrt:
    return dm::sqrt(v);
  case UnaryKind::Exp:
    return dm::exp(v);
  case UnaryKind::Log:
    return dm::log(v);
  case UnaryKind::Neg:
    return -v;
  case UnaryKind::Abs:
    return dm::abs(v);
  case UnaryKind::Reciprocal:
    return T(1) / v;
  case UnaryKind::Floor:
    return dm::floor(v);
  case UnaryKind::Ceil:
    return dm::ceil(v);
  case UnaryKind::Elu:
    return v > T(0) ? v : alpha * dm::expm1(v);
  case UnaryKind::Selu: // beta is gamma
    return beta * (v > T(0) ? v : alpha * dm::expm1(v));
  case UnaryKind::Celu: {
    T neg = alpha * dm::expm1(v / alpha);
    return (v < T(0) ? T(0) : v) + (neg < T(0) ? neg : T(0));
  }
  case UnaryKind::ThresholdedRelu:
    return v > alpha ? v : T(0);
  case UnaryKind::Softplus: // max(v, 0) + log1p(e^-|v|)
    return (v < T(0) ? T(0) : v) + dm::log1p(dm::exp(-dm::abs(v)));
  case UnaryKind::Softsign:
    return v / (T(1) + dm::abs(v));
  case UnaryKind::Sin:
    return dm::sin(v);
  case UnaryKind::Cos:
    return dm::cos(v);
  case UnaryKind::Round: // halves to even, as ONNX Round
    return dm::rint(v);
  default:
    return v;
  }
}

template <typename T> struct UnaryFloatOp {
  const T *x;
  T *y;
  UnaryKind kind;
  Compute<T> alpha, beta;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    y[i] = narrow<T>(unaryFloatOp(kind, widen(x[i]), alpha, beta));
  }
};

struct NotOp {
  const uint8_t *x;
  uint8_t *y;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    y[i] = x[i] == 0;
  }
};

/// Neg, Abs and Relu on signed integers (wrapping).
template <typename T> struct UnaryIntOp {
  const T *x;
  T *y;
  UnaryKind kind;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    T v = x[i];
    switch (kind) {
    case UnaryKind::Neg:
      y[i] = wrapSub(T(0), v);
      break;
    case UnaryKind::Abs:
      y[i] = v < T(0) ? wrapSub(T(0), v) : v;
      break;
    default: // Relu
      y[i] = v < T(0) ? T(0) : v;
      break;
    }
  }
};

template <typename T>
__device__ __forceinline__ T unaryGradOp(UnaryKind kind, T x, T y, T dy,
                                         T alpha, T beta) {
  switch (kind) {
  case UnaryKind::HardSigmoid: {
    T t = alpha * x + beta;
    return t > T(0) && t < T(1) ? alpha * dy : T(0);
  }
  case UnaryKind::HardSwish: // as torch's hardswish_backward
    return x < T(-3) ? T(0) : x <= T(3) ? dy * (x / T(3) + T(0.5)) : dy;
  case UnaryKind::Identity:
    return dy;
  case UnaryKind::Relu:
    return x > T(0) ? dy : T(0);
  case UnaryKind::LeakyRelu:
    return x > T(0) ? dy : alpha * dy; // torch: x == 0 takes alpha
  case UnaryKind::Sigmoid:
    return dy * y * (T(1) - y);
  case UnaryKind::Tanh:
    return dy * (T(1) - y * y);
  case UnaryKind::Erf:
    return dy * T(kTwoOverSqrtPi) * dm::exp(-x * x);
  case UnaryKind::GeluErf: {
    T cdf = T(0.5) * (T(1) + dm::erf(x * T(kSqrtHalf)));
    T pdf = T(kInvSqrt2Pi) * dm::exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
  case UnaryKind::GeluTanh: {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x);
    T t = dm::tanh(inner);
    T dInner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluKappa) * x * x);
    return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dInner);
  }
  case UnaryKind::Sqrt:
    return dy / (T(2) * y);
  case UnaryKind::Exp:
    return dy * y;
  case UnaryKind::Log:
    return dy / x;
  case UnaryKind::Neg:
    return -dy;
  case UnaryKind::Abs:
    return x > T(0) ? dy : x < T(0) ? -dy : T(0); // sign(0) = 0
  case UnaryKind::Reciprocal:
    return -dy * y * y;
  case UnaryKind::Elu: // torch's elu_backward from x: x == 0 takes exp
    return x > T(0) ? dy : dy * alpha * dm::exp(x);
  case UnaryKind::Selu:
    return x > T(0) ? dy * beta : dy * beta * alpha * dm::exp(x);
  case UnaryKind::Celu:
    return x > T(0) ? dy : dy * dm::exp(x / alpha);
  case UnaryKind::ThresholdedRelu:
    return x > alpha ? dy : T(0);
  case UnaryKind::Softplus: {
    T e = dm::exp(-dm::abs(x));
    return dy * (x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e));
  }
  case UnaryKind::Softsign: {
    T d = T(1) + dm::abs(x);
    return dy / (d * d);
  }
  case UnaryKind::Sin:
    return dy * dm::cos(x);
  case UnaryKind::Cos:
    return -dy * dm::sin(x);
  default:
    return T(0);
  }
}

/// Reads x or y (whichever the kind needs; the other may be absent).
template <typename T> struct UnaryGradOp {
  using C = Compute<T>;
  const T *x;
  const T *y;
  const T *dy;
  T *dx;
  UnaryKind kind;
  C alpha, beta;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    C xv = x ? widen(x[i]) : C(0);
    C yv = y ? widen(y[i]) : C(0);
    dx[i] = narrow<T>(unaryGradOp(kind, xv, yv, widen(dy[i]), alpha, beta));
  }
};

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

/// The remainder of x / y with the dividend's sign (`floored`: with the
/// divisor's); integer y = 0 sets `zero`, MIN % -1 is 0.
template <typename T>
__device__ T remainderOf(T x, T y, bool floored, bool &zero) {
  T r;
  if constexpr (std::is_floating_point_v<T>) {
    r = fmod(x, y);
  } else {
    if (y == T(0)) {
      zero = true;
      return T(0);
    }
    if (std::is_signed_v<T> && y == T(-1))
      return T(0);
    r = static_cast<T>(x % y);
  }
  if (floored && r != T(0) && ((r < T(0)) != (y < T(0))))
    r = static_cast<T>(r + y);
  return r;
}

/// Add, Sub, Mul, Div, Mod, FMod on one dtype S (computed as T); an
/// integer division by zero sets `error`.
template <typename S> struct ArithOp {
  using T = Compute<S>;
  const S *a;
  const S *b;
  S *c;
  BinaryKind kind;
  unsigned long long *error;
  __device__ void operator()(int64_t i, const int64_t (&o)[2]) const {
    T x = widen(a[o[0]]), y = widen(b[o[1]]);
    T r;
    switch (kind) {
    case BinaryKind::Add:
      if constexpr (std::is_floating_point_v<T>)
        r = x + y;
      else
        r = wrapAdd(x, y);
      break;
    case BinaryKind::Sub:
      if constexpr (std::is_floating_point_v<T>)
        r = x - y;
      else
        r = wrapSub(x, y);
      break;
    case BinaryKind::Mul:
      if constexpr (std::is_floating_point_v<T>)
        r = x * y;
      else
        r = wrapMul(x, y);
      break;
    case BinaryKind::Max: // a NaN x wins, a NaN y the false branch
      r = x > y || x != x ? x : y;
      break;
    case BinaryKind::Min:
      r = x < y || x != x ? x : y;
      break;
    case BinaryKind::Mod:
    case BinaryKind::FMod: {
      bool zero = false;
      r = remainderOf(x, y, kind == BinaryKind::Mod, zero);
      if (zero)
        atomicMin(error, static_cast<unsigned long long>(i));
      break;
    }
    default: // Div
      if constexpr (std::is_floating_point_v<T>) {
        r = x / y;
      } else {
        // Truncates toward zero; x / 0 is flagged, MIN / -1 wraps.
        if (y == T(0)) {
          atomicMin(error, static_cast<unsigned long long>(i));
          r = T(0);
        } else if (std::is_signed_v<T> && y == T(-1)) {
          r = wrapSub(T(0), x);
        } else {
          r = static_cast<T>(x / y);
        }
      }
      break;
    }
    c[i] = narrow<S>(r);
  }
};

/// Element i of a tensor of run-time dtype `type`, converted to R.
template <typename R>
__device__ __forceinline__ R loadAs(const void *p, DType type, int64_t i) {
  switch (type) {
  case DType::F32:
    return static_cast<R>(static_cast<const float *>(p)[i]);
  case DType::F64:
    return static_cast<R>(static_cast<const double *>(p)[i]);
  case DType::I64:
    return static_cast<R>(static_cast<const int64_t *>(p)[i]);
  case DType::I32:
    return static_cast<R>(static_cast<const int32_t *>(p)[i]);
  case DType::I8:
    return static_cast<R>(static_cast<const int8_t *>(p)[i]);
  case DType::U32:
    return static_cast<R>(static_cast<const uint32_t *>(p)[i]);
  case DType::U64:
    return static_cast<R>(static_cast<const uint64_t *>(p)[i]);
  case DType::I16:
    return static_cast<R>(static_cast<const int16_t *>(p)[i]);
  case DType::U16:
    return static_cast<R>(static_cast<const uint16_t *>(p)[i]);
  case DType::F16:
    return static_cast<R>(halfToFloat(static_cast<const uint16_t *>(p)[i]));
  case DType::BF16:
    return static_cast<R>(bfloat16ToFloat(static_cast<const uint16_t *>(p)[i]));
  default: // U8, Bool
    return static_cast<R>(static_cast<const uint8_t *>(p)[i]);
  }
}

/// Whether an exponent of dtype `type` is never negative.
__host__ __device__ __forceinline__ bool isUnsignedDType(DType type) {
  return type == DType::U8 || type == DType::U16 || type == DType::U32 ||
         type == DType::U64;
}

/// Whether an exponent of dtype `type` is a float (read as one).
__host__ __device__ __forceinline__ bool isFloatExponent(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::F16 ||
         type == DType::BF16;
}

/// Pow with base dtype S (computed as T); the exponent's dtype is read at
/// run time (ONNX lets it differ), which avoids an S x E grid of
/// instantiations.
template <typename S> struct PowOp {
  using T = Compute<S>;
  const S *a;
  const void *b;
  DType bType;
  S *c;
  unsigned long long *error;
  __device__ void operator()(int64_t i, const int64_t (&o)[2]) const {
    T x = widen(a[o[0]]);
    if constexpr (std::is_floating_point_v<T>) {
      c[i] = narrow<S>(dm::pow(x, loadAs<T>(b, bType, o[1])));
    } else {
      if (isFloatExponent(bType)) {
        c[i] = convertDouble<T>(
            dm::pow(static_cast<double>(x), loadAs<double>(b, bType, o[1])));
      } else if (isUnsignedDType(bType)) {
        // A U64 exponent may not fit int64.
        c[i] = intPowUnsigned(x, loadAs<uint64_t>(b, bType, o[1]));
      } else {
        bool zero = false;
        c[i] = intPow(x, loadAs<int64_t>(b, bType, o[1]), zero);
        if (zero)
          atomicMin(error, static_cast<unsigned long long>(i));
      }
    }
  }
};

/// Equal, Less, Greater; Bool operands compare as truth values.
template <typename S> struct CompareOp {
  using T = Compute<S>;
  const S *a;
  const S *b;
  uint8_t *c;
  BinaryKind kind;
  bool isBool;
  __device__ void operator()(int64_t i, const int64_t (&o)[2]) const {
    T x = widen(a[o[0]]), y = widen(b[o[1]]);
    if (isBool) {
      x = T(x != T(0));
      y = T(y != T(0));
    }
    bool r = kind == BinaryKind::Equal  ? x == y
             : kind == BinaryKind::Less ? x < y
                                        : x > y;
    c[i] = r;
  }
};

struct LogicOp {
  const uint8_t *a;
  const uint8_t *b;
  uint8_t *c;
  bool isAnd;
  __device__ void operator()(int64_t i, const int64_t (&o)[2]) const {
    bool x = a[o[0]] != 0, y = b[o[1]] != 0;
    c[i] = isAnd ? (x && y) : (x || y);
  }
};

//===----------------------------------------------------------------------===//
// where, clip, cast, expand
//===----------------------------------------------------------------------===//

template <typename T> struct WhereOp {
  const uint8_t *cond;
  const T *x;
  const T *y;
  T *out;
  __device__ void operator()(int64_t i, const int64_t (&o)[3]) const {
    out[i] = cond[o[0]] ? x[o[1]] : y[o[2]];
  }
};

/// min(max(x, lo), hi) written so NaN in x propagates; absent bounds are
/// null and never read.
template <typename T> struct ClipOp {
  const T *x;
  const T *lo;
  const T *hi;
  T *y;
  __device__ void operator()(int64_t i, const int64_t (&o)[3]) const {
    Compute<T> v = widen(x[o[0]]);
    if (lo && v < widen(lo[o[1]]))
      v = widen(lo[o[1]]);
    if (hi && widen(hi[o[2]]) < v)
      v = widen(hi[o[2]]);
    y[i] = narrow<T>(v);
  }
};

template <typename To, typename From>
__device__ __forceinline__ To castValue(From v, bool fromBool) {
  if (fromBool)
    return To(v != From(0));
  if constexpr (std::is_floating_point_v<From> && !std::is_floating_point_v<To>)
    return convertDouble<To>(static_cast<double>(v)); // truncate, saturate
  else
    return static_cast<To>(v); // rounds, or wraps between integers
}

/// Stores v (of type From) as element i of `y`, of the run-time dtype `to`
/// (NaN is true as a Bool; 16-bit floats round once, from the double).
template <typename From>
__device__ __forceinline__ void storeCast(void *y, DType to, int64_t i, From v,
                                          bool fromBool) {
  switch (to) {
  case DType::F32:
    static_cast<float *>(y)[i] = castValue<float>(v, fromBool);
    break;
  case DType::F64:
    static_cast<double *>(y)[i] = castValue<double>(v, fromBool);
    break;
  case DType::I64:
    static_cast<int64_t *>(y)[i] = castValue<int64_t>(v, fromBool);
    break;
  case DType::I32:
    static_cast<int32_t *>(y)[i] = castValue<int32_t>(v, fromBool);
    break;
  case DType::I8:
    static_cast<int8_t *>(y)[i] = castValue<int8_t>(v, fromBool);
    break;
  case DType::U8:
    static_cast<uint8_t *>(y)[i] = castValue<uint8_t>(v, fromBool);
    break;
  case DType::U32:
    static_cast<uint32_t *>(y)[i] = castValue<uint32_t>(v, fromBool);
    break;
  case DType::U64:
    static_cast<uint64_t *>(y)[i] = castValue<uint64_t>(v, fromBool);
    break;
  case DType::I16:
    static_cast<int16_t *>(y)[i] = castValue<int16_t>(v, fromBool);
    break;
  case DType::U16:
    static_cast<uint16_t *>(y)[i] = castValue<uint16_t>(v, fromBool);
    break;
  case DType::Bool:
    static_cast<uint8_t *>(y)[i] = v != From(0);
    break;
  case DType::F16:
    static_cast<uint16_t *>(y)[i] =
        doubleToHalf(castValue<double>(v, fromBool));
    break;
  case DType::BF16:
    static_cast<uint16_t *>(y)[i] =
        doubleToBFloat16(castValue<double>(v, fromBool));
    break;
  }
}

/// Converts From to the run-time dtype `to`.
template <typename From> struct CastOp {
  const From *x;
  void *y;
  DType to;
  bool fromBool;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    storeCast(y, to, i, x[i], fromBool);
  }
};

/// Converts F16 or BF16 bits through their exact float value.
struct Float16CastOp {
  const uint16_t *x;
  void *y;
  DType to;
  bool fromBF16;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    float v = fromBF16 ? bfloat16ToFloat(x[i]) : halfToFloat(x[i]);
    storeCast(y, to, i, v, false);
  }
};

template <typename T> struct GatherOp {
  const T *x;
  T *y;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    y[i] = x[o[0]];
  }
};

template <typename T> struct FillOp {
  T *y;
  T value;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    y[i] = value;
  }
};

/// Reports an integer division by zero found by a kernel.
Status checkDivision(const std::string &what, cudaStream_t stream,
                     const unsigned long long *flag, const char *message) {
  int64_t position;
  PP_RT_TRY(readErrorFlag(what, stream, flag, position));
  if (position >= 0)
    return Status::error(what + ": " + message + " at flat position " +
                         std::to_string(position));
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

Status unary(Context &ctx, UnaryKind kind, const Tensor &x, Tensor &y,
             float alpha, float beta) {
  std::string what = std::string("unary ") + unaryName(kind);
  PP_RT_TRY(expectValid(x, (what + " x").c_str()));
  PP_RT_TRY(expectDType(y, x.dtype, (what + " y").c_str()));
  PP_RT_TRY(expectShape(y, x.shape, (what + " y").c_str()));
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  if (kind == UnaryKind::Identity) {
    if (x.data != y.data)
      PP_CUDA_TRY(what, cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                        cudaMemcpyDeviceToDevice, stream));
    return Status::success();
  }
  StridedIndex<1> index;
  PP_RT_TRY(flatIndex(what, n, index));
  if (kind == UnaryKind::Not) {
    if (x.dtype != DType::Bool)
      return dtypeError(what, x.dtype);
    return launchMap(what, stream, n, index,
                     NotOp{x.as<uint8_t>(), y.as<uint8_t>()});
  }
  bool intKind = kind == UnaryKind::Neg || kind == UnaryKind::Abs ||
                 kind == UnaryKind::Relu;
  if (isFloat(x.dtype) || isFloat16(x.dtype))
    return visitFloatOr16(x.dtype, what, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = Compute<T>;
      return launchMap(
          what, stream, n, index,
          UnaryFloatOp<T>{x.as<T>(), y.as<T>(), kind, C(alpha), C(beta)});
    });
  switch (x.dtype) {
  case DType::I64:
    if (intKind)
      return launchMap(
          what, stream, n, index,
          UnaryIntOp<int64_t>{x.as<int64_t>(), y.as<int64_t>(), kind});
    break;
  case DType::I32:
    if (intKind)
      return launchMap(
          what, stream, n, index,
          UnaryIntOp<int32_t>{x.as<int32_t>(), y.as<int32_t>(), kind});
    break;
  case DType::I8:
    if (intKind)
      return launchMap(
          what, stream, n, index,
          UnaryIntOp<int8_t>{x.as<int8_t>(), y.as<int8_t>(), kind});
    break;
  default:
    break;
  }
  return dtypeError(what, x.dtype);
}

Status unaryGrad(Context &ctx, UnaryKind kind, const Tensor &x, const Tensor &y,
                 const Tensor &dy, Tensor &dx, float alpha, float beta) {
  std::string what = std::string("unaryGrad ") + unaryName(kind);
  PP_RT_TRY(expectValid(dy, (what + " dy").c_str()));
  PP_RT_TRY(expectDType(dx, dy.dtype, (what + " dx").c_str()));
  PP_RT_TRY(expectShape(dx, dy.shape, (what + " dx").c_str()));
  cudaStream_t stream = streamOf(ctx);
  // Floor, Ceil, Round and Not are piecewise constant: their gradient is
  // zero.
  if (kind == UnaryKind::Floor || kind == UnaryKind::Ceil ||
      kind == UnaryKind::Round || kind == UnaryKind::Not)
    return zeroTensor(what, dx, stream);
  if (!isFloat(dy.dtype) && !isFloat16(dy.dtype))
    return dtypeError(what, dy.dtype);
  // Only the operand the kind reads is checked; the other may be empty.
  bool usesY = unaryGradReadsOutput(kind);
  const Tensor &input = usesY ? y : x;
  const char *inputName = usesY ? " y" : " x";
  PP_RT_TRY(expectDType(input, dy.dtype, (what + inputName).c_str()));
  PP_RT_TRY(expectShape(input, dy.shape, (what + inputName).c_str()));
  int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(flatIndex(what, n, index));
  return visitFloatOr16(dy.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    UnaryGradOp<T> op{usesY ? nullptr : x.as<T>(),
                      usesY ? y.as<T>() : nullptr,
                      dy.as<T>(),
                      dx.as<T>(),
                      kind,
                      Compute<T>(alpha),
                      Compute<T>(beta)};
    return launchMap(what, stream, n, index, op);
  });
}

Status binary(Context &ctx, BinaryKind kind, const Tensor &a, const Tensor &b,
              Tensor &c) {
  BinaryPlan plan;
  PP_RT_TRY(checkBinary(kind, a, b, c, plan));
  const std::string &what = plan.what;
  const std::vector<int64_t> &shape = plan.shape;
  bool isCompare = plan.isCompare, isLogic = plan.isLogic;
  // U32 / U64 / I16 / U16 are only Pow exponents here.
  if (isStorageOnlyInt(a.dtype))
    return dtypeError(what, a.dtype);
  if (!isCompare && !isLogic) {
    if (a.dtype == DType::Bool)
      return dtypeError(what, a.dtype);
    if (b.dtype == DType::Bool)
      return dtypeError(what + " exponent", b.dtype);
  }
  int64_t n = c.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<2> index;
  PP_RT_TRY(makeIndex<2>(
      what, shape,
      {broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape)},
      index));
  cudaStream_t stream = streamOf(ctx);

  if (isLogic)
    return launchMap(what, stream, n, index,
                     LogicOp{a.as<uint8_t>(), b.as<uint8_t>(), c.as<uint8_t>(),
                             kind == BinaryKind::And});
  if (isCompare)
    return visitDTypeOr16(a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return launchMap(what, stream, n, index,
                       CompareOp<T>{a.as<T>(), b.as<T>(), c.as<uint8_t>(), kind,
                                    a.dtype == DType::Bool});
    });
  // Integer Div, Mod and Pow can divide by zero: those report it via a flag.
  bool mayFlag = !isFloat(a.dtype) && !isFloat16(a.dtype) &&
                 (kind == BinaryKind::Div || kind == BinaryKind::Mod ||
                  kind == BinaryKind::FMod ||
                  (kind == BinaryKind::Pow && !isFloatExponent(b.dtype) &&
                   !isUnsignedDType(b.dtype)));
  Scratch scratch(stream);
  unsigned long long *flag = nullptr;
  if (mayFlag)
    PP_RT_TRY(makeErrorFlag(what, scratch, stream, &flag));
  PP_RT_TRY(visitDTypeOr16(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kind == BinaryKind::Pow)
      return launchMap(what, stream, n, index,
                       PowOp<T>{a.as<T>(), b.data, b.dtype, c.as<T>(), flag});
    return launchMap(what, stream, n, index,
                     ArithOp<T>{a.as<T>(), b.as<T>(), c.as<T>(), kind, flag});
  }));
  if (!mayFlag)
    return Status::success();
  return checkDivision(what, stream, flag,
                       kind == BinaryKind::Div ? "integer division by zero"
                       : kind != BinaryKind::Pow
                           ? "integer remainder of a division by zero"
                           : "zero to a negative integer power (division by "
                             "zero)");
}

Status where(Context &ctx, const Tensor &cond, const Tensor &x, const Tensor &y,
             Tensor &out) {
  std::vector<int64_t> shape;
  PP_RT_TRY(checkWhere(cond, x, y, out, shape));
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<3> index;
  PP_RT_TRY(makeIndex<3>("where", shape,
                         {broadcastStrides(cond.shape, shape),
                          broadcastStrides(x.shape, shape),
                          broadcastStrides(y.shape, shape)},
                         index));
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchMap(
        "where", streamOf(ctx), n, index,
        WhereOp<T>{cond.as<uint8_t>(), x.as<T>(), y.as<T>(), out.as<T>()});
  });
}

Status clip(Context &ctx, const Tensor &x, const Tensor *lo, const Tensor *hi,
            Tensor &y) {
  PP_RT_TRY(expectValid(x, "clip x"));
  if (x.dtype == DType::Bool || isStorageOnlyInt(x.dtype))
    return dtypeError("clip", x.dtype);
  PP_RT_TRY(expectDType(y, x.dtype, "clip y"));
  PP_RT_TRY(expectShape(y, x.shape, "clip y"));
  for (const Tensor *bound : {lo, hi}) {
    if (!bound)
      continue;
    const char *name = bound == lo ? "clip lo" : "clip hi";
    PP_RT_TRY(expectDType(*bound, x.dtype, name));
    PP_RT_TRY(expectValid(*bound, name));
    if (!broadcastsTo(bound->shape, x.shape))
      return Status::error(
          std::string(name) + ": shape " + shapeString(bound->shape) +
          " does not broadcast to x's shape " + shapeString(x.shape));
  }
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  std::vector<int64_t> none;
  StridedIndex<3> index;
  PP_RT_TRY(makeIndex<3>("clip", x.shape,
                         {stridesOf(x.shape),
                          broadcastStrides(lo ? lo->shape : none, x.shape),
                          broadcastStrides(hi ? hi->shape : none, x.shape)},
                         index));
  return visitDTypeOr16(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchMap("clip", streamOf(ctx), n, index,
                     ClipOp<T>{x.as<T>(), lo ? lo->as<T>() : nullptr,
                               hi ? hi->as<T>() : nullptr, y.as<T>()});
  });
}

Status cast(Context &ctx, const Tensor &x, Tensor &y) {
  PP_RT_TRY(expectValid(x, "cast x"));
  PP_RT_TRY(expectShape(y, x.shape, "cast y"));
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  if (x.dtype == y.dtype) {
    if (x.data != y.data)
      PP_CUDA_TRY("cast", cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                          cudaMemcpyDeviceToDevice, stream));
    return Status::success();
  }
  StridedIndex<1> index;
  PP_RT_TRY(flatIndex("cast", n, index));
  switch (x.dtype) {
  case DType::F16:
  case DType::BF16:
    return launchMap("cast", stream, n, index,
                     Float16CastOp{x.as<uint16_t>(), y.data, y.dtype,
                                   x.dtype == DType::BF16});
  case DType::U32:
    return launchMap(
        "cast", stream, n, index,
        CastOp<uint32_t>{x.as<uint32_t>(), y.data, y.dtype, false});
  case DType::U64:
    return launchMap(
        "cast", stream, n, index,
        CastOp<uint64_t>{x.as<uint64_t>(), y.data, y.dtype, false});
  case DType::I16:
    return launchMap("cast", stream, n, index,
                     CastOp<int16_t>{x.as<int16_t>(), y.data, y.dtype, false});
  case DType::U16:
    return launchMap(
        "cast", stream, n, index,
        CastOp<uint16_t>{x.as<uint16_t>(), y.data, y.dtype, false});
  default:
    break;
  }
  bool fromBool = x.dtype == DType::Bool;
  return visitDType(x.dtype, [&](auto tag) {
    using From = typename decltype(tag)::type;
    return launchMap("cast", stream, n, index,
                     CastOp<From>{x.as<From>(), y.data, y.dtype, fromBool});
  });
}

Status expand(Context &ctx, const Tensor &x, Tensor &y) {
  PP_RT_TRY(expectValid(x, "expand x"));
  PP_RT_TRY(expectDType(y, x.dtype, "expand y"));
  PP_RT_TRY(expectValid(y, "expand y"));
  if (!broadcastsTo(x.shape, y.shape))
    return Status::error("expand: x's shape " + shapeString(x.shape) +
                         " does not broadcast to y's shape " +
                         shapeString(y.shape));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  StridedIndex<1> index;
  PP_RT_TRY(makeIndex<1>("expand", y.shape,
                         {broadcastStrides(x.shape, y.shape)}, index));
  return visitElementBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchMap("expand", streamOf(ctx), n, index,
                     GatherOp<T>{x.as<T>(), y.as<T>()});
  });
}

Status fill(Context &ctx, Tensor &y, double value) {
  PP_RT_TRY(expectValid(y, "fill y"));
  int64_t n = y.numel();
  if (n == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  bool isBool = y.dtype == DType::Bool;
  StridedIndex<1> index;
  PP_RT_TRY(flatIndex("fill", n, index));
  switch (y.dtype) {
  case DType::F16:
    return launchMap("fill", stream, n, index,
                     FillOp<uint16_t>{y.as<uint16_t>(), doubleToHalf(value)});
  case DType::BF16:
    return launchMap(
        "fill", stream, n, index,
        FillOp<uint16_t>{y.as<uint16_t>(), doubleToBFloat16(value)});
  case DType::U32:
    return launchMap(
        "fill", stream, n, index,
        FillOp<uint32_t>{y.as<uint32_t>(), convertDouble<uint32_t>(value)});
  case DType::U64:
    return launchMap(
        "fill", stream, n, index,
        FillOp<uint64_t>{y.as<uint64_t>(), convertDouble<uint64_t>(value)});
  case DType::I16:
    return launchMap(
        "fill", stream, n, index,
        FillOp<int16_t>{y.as<int16_t>(), convertDouble<int16_t>(value)});
  case DType::U16:
    return launchMap(
        "fill", stream, n, index,
        FillOp<uint16_t>{y.as<uint16_t>(), convertDouble<uint16_t>(value)});
  default:
    break;
  }
  return visitDType(y.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = isBool ? T(value != 0) : convertDouble<T>(value);
    if constexpr (sizeof(T) == 1) {
      unsigned char byte;
      std::memcpy(&byte, &v, 1);
      PP_CUDA_TRY("fill", cudaMemsetAsync(y.data, byte, n, stream));
      return Status::success();
    } else {
      return launchMap("fill", stream, n, index, FillOp<T>{y.as<T>(), v});
    }
  });
}

} // namespace pp::rt
