//===- Half.h - IEEE half and bfloat16 conversions --------------*- C++ -*-===//
//
// The 16-bit float dtypes (DType::F16, DType::BF16) are storage formats: a
// kernel holds their elements as raw uint16_t bits and converts them with
// these functions; no kernel computes in 16 bits (the CPU backend's
// arithmetic kernels widen them to f32 and round the results back).
//
// - F16 is IEEE 754 binary16 (1 sign, 5 exponent, 10 fraction bits).
// - BF16 is bfloat16 (1 sign, 8 exponent, 7 fraction bits): the upper half
//   of a binary32.
//
// Narrowing rounds to nearest, ties to even, in one step from the source
// value (doubleToHalf does not round through float), as numpy's astype and
// ONNX's Cast do: values beyond the largest finite number become +-inf,
// values below the smallest subnormal become +-0, NaN stays a quiet NaN of
// the same sign carrying the top bits of its payload. Widening is exact.
//
// Everything here is usable from host and device code.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_HALF_H
#define PP_RUNTIME_HALF_H

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define PP_RT_HOST_DEVICE __host__ __device__
#else
#define PP_RT_HOST_DEVICE
#endif

namespace pp::rt {

namespace half_detail {

PP_RT_HOST_DEVICE inline uint32_t floatToBits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

PP_RT_HOST_DEVICE inline float bitsToFloat(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

PP_RT_HOST_DEVICE inline uint64_t doubleToBits(double value) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(value));
#else
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

/// Rounds the IEEE value whose encoding is `bits` (SrcE exponent and SrcM
/// fraction bits) to the 16-bit format with E exponent and M fraction bits
/// (E + M == 15), to nearest with ties to even.
template <int SrcE, int SrcM, int E, int M, typename Bits>
PP_RT_HOST_DEVICE inline uint16_t roundToNarrow(Bits bits) {
  static_assert(E + M == 15, "a 16-bit format has 15 exponent+fraction bits");
  static_assert(SrcM > M + 1, "the source must be wider than the result");
  constexpr int srcBias = (1 << (SrcE - 1)) - 1;
  constexpr int srcMaxExp = (1 << SrcE) - 1;
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr uint32_t inf = ((1u << E) - 1) << M;
  constexpr Bits one = 1;

  const uint32_t sign = static_cast<uint32_t>((bits >> (SrcE + SrcM)) & 1)
                        << 15;
  const int exp = static_cast<int>((bits >> SrcM) & Bits(srcMaxExp));
  const Bits frac = bits & ((one << SrcM) - 1);
  if (exp == srcMaxExp) {
    if (frac == 0)
      return static_cast<uint16_t>(sign | inf);
    // NaN: keep the top payload bits and set the quiet bit.
    return static_cast<uint16_t>(sign | inf | (1u << (M - 1)) |
                                 static_cast<uint32_t>(frac >> (SrcM - M)));
  }
  // The value is sig * 2^(e - SrcM); subnormal sources lack the leading 1.
  const Bits sig = exp ? (frac | (one << SrcM)) : frac;
  const int e = (exp ? exp : 1) - srcBias;
  if (sig == 0)
    return static_cast<uint16_t>(sign);
  if (e > bias) // at least 2^(bias + 1): beyond every finite result
    return static_cast<uint16_t>(sign | inf);
  // Keep M fraction bits of a normal result, fewer of a subnormal one.
  const bool subnormal = e < 1 - bias;
  const int shift = SrcM - M + (subnormal ? 1 - bias - e : 0);
  if (shift > SrcM + 1) // below half the smallest subnormal: rounds to 0
    return static_cast<uint16_t>(sign);
  Bits q = sig >> shift;
  const Bits rem = sig & ((one << shift) - 1);
  const Bits halfway = one << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1)))
    ++q;
  // q keeps the leading 1 of a normal result, so adding it to the exponent
  // field minus one both places it and lets a rounding carry (1.11..1 ->
  // 10.0) bump the exponent; a subnormal q that rounds up to 2^M becomes
  // the smallest normal number the same way.
  const uint32_t expField =
      subnormal ? 0u : static_cast<uint32_t>(e + bias - 1);
  const uint32_t magnitude = (expField << M) + static_cast<uint32_t>(q);
  return static_cast<uint16_t>(sign | (magnitude >= inf ? inf : magnitude));
}

} // namespace half_detail

/// binary32 -> binary16, rounding to nearest even.
PP_RT_HOST_DEVICE inline uint16_t floatToHalf(float value) {
  return half_detail::roundToNarrow<8, 23, 5, 10>(
      half_detail::floatToBits(value));
}

/// binary64 -> binary16, rounding to nearest even (one rounding).
PP_RT_HOST_DEVICE inline uint16_t doubleToHalf(double value) {
  return half_detail::roundToNarrow<11, 52, 5, 10>(
      half_detail::doubleToBits(value));
}

/// binary16 -> binary32 (exact).
PP_RT_HOST_DEVICE inline float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t frac = bits & 0x3ffu;
  if (exp == 0x1f) // inf or NaN (payload kept)
    return half_detail::bitsToFloat(sign | 0x7f800000u | (frac << 13));
  if (exp == 0) {
    // Zero or subnormal: frac * 2^-24, exact in binary32.
    float magnitude = static_cast<float>(frac) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  // Rebias the exponent from 15 to 127.
  return half_detail::bitsToFloat(sign | ((exp + 112u) << 23) | (frac << 13));
}

/// binary32 -> bfloat16, rounding to nearest even.
PP_RT_HOST_DEVICE inline uint16_t floatToBFloat16(float value) {
  return half_detail::roundToNarrow<8, 23, 8, 7>(
      half_detail::floatToBits(value));
}

/// binary64 -> bfloat16, rounding to nearest even (one rounding).
PP_RT_HOST_DEVICE inline uint16_t doubleToBFloat16(double value) {
  return half_detail::roundToNarrow<11, 52, 8, 7>(
      half_detail::doubleToBits(value));
}

/// bfloat16 -> binary32 (exact).
PP_RT_HOST_DEVICE inline float bfloat16ToFloat(uint16_t bits) {
  return half_detail::bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

} // namespace pp::rt

#endif // PP_RUNTIME_HALF_H
