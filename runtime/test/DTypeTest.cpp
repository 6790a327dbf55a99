//===- DTypeTest.cpp - Tests of the 16-bit float and unsigned dtypes ------===//
//
// The conversions of Half.h (exact values, exhaustive round trips, every
// rounding tie of both formats, against an independent rounding reference),
// and the kernels on F16, BF16, U32 and U64: cast between every pair of
// dtypes, Pow with unsigned exponents, unsigned arithmetic, reductions and
// comparisons, and data movement on 16-bit elements (their arithmetic, done
// through f32, is Float16ComputeTest.cpp's).
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"

#include "pp/Runtime/Half.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
/// The largest finite bfloat16, (2 - 2^-7) * 2^127.
const double kBF16Max = std::ldexp(255.0, 120);

bool isHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool isBF16NaN(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// Rounds x to a binary format with `fracBits` fraction bits, smallest
/// normal exponent `minExp` and largest finite value `maxFinite`, to nearest
/// even, computed in double with nearbyint: an independent reference of
/// the bit-level conversions.
double referenceRound(double x, int fracBits, int minExp, double maxFinite) {
  if (std::isnan(x) || std::isinf(x) || x == 0)
    return x;
  int e;
  std::frexp(std::fabs(x), &e); // |x| = m * 2^e, m in [0.5, 1)
  double ulp = std::ldexp(1.0, std::max(e - 1, minExp) - fracBits);
  double r = std::nearbyint(x / ulp) * ulp;
  if (std::fabs(r) > maxFinite)
    return std::copysign(HUGE_VAL, x);
  return std::copysign(r, x); // keeps the sign of a result rounded to 0
}
double referenceHalf(double x) { return referenceRound(x, 10, -14, 65504); }
double referenceBF16(double x) { return referenceRound(x, 7, -126, kBF16Max); }

/// The value of half bits from the format's definition.
double halfValue(uint16_t h) {
  int exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double sign = (h & 0x8000) ? -1 : 1;
  if (exp == 0x1f)
    return frac ? std::nan("") : sign * HUGE_VAL;
  if (exp == 0)
    return sign * std::ldexp(frac, -24);
  return sign * std::ldexp(1024 + frac, exp - 25);
}

//===----------------------------------------------------------------------===//
// Half.h
//===----------------------------------------------------------------------===//

TEST(Half, ExactValues) {
  EXPECT_EQ(floatToHalf(0.f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.f), 0x8000);
  EXPECT_EQ(floatToHalf(1.f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.f), 0xc000);
  EXPECT_EQ(floatToHalf(0.5f), 0x3800);
  EXPECT_EQ(floatToHalf(65504.f), 0x7bff); // largest finite
  EXPECT_EQ(floatToHalf(-65504.f), 0xfbff);
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400); // smallest normal
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalf(-0x1p-24f), 0x8001);
  EXPECT_EQ(floatToHalf(3 * 0x1p-24f), 0x0003);
  EXPECT_EQ(floatToHalf(1023 * 0x1p-24f), 0x03ff); // largest subnormal
  EXPECT_EQ(floatToHalf(1.f / 3), 0x3555);
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(floatToHalf(3.14159265f), 0x4248);

  EXPECT_EQ(halfToFloat(0x3c00), 1.f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.f);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0xfc00), -kInfF);
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
  EXPECT_EQ(halfToFloat(0x8000), 0.f);
}

TEST(Half, OverflowAndUnderflow) {
  // 65520 is halfway between 65504 and 65536 (= inf): ties to even, inf.
  EXPECT_EQ(floatToHalf(65519.f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.f), 0x7c00);
  EXPECT_EQ(floatToHalf(-65520.f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(floatToHalf(FLT_MAX), 0x7c00);
  EXPECT_EQ(floatToHalf(kInfF), 0x7c00);
  EXPECT_EQ(floatToHalf(-kInfF), 0xfc00);
  EXPECT_EQ(doubleToHalf(1e300), 0x7c00);
  // Half the smallest subnormal is a tie: to even, 0; above it, 2^-24.
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);
  EXPECT_EQ(floatToHalf(-0x1p-25f), 0x8000);
  EXPECT_EQ(floatToHalf(std::nextafter(0x1p-25f, 1.f)), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-26f), 0x0000);
  EXPECT_EQ(floatToHalf(FLT_TRUE_MIN), 0x0000);
  EXPECT_EQ(floatToHalf(-FLT_TRUE_MIN), 0x8000);
  EXPECT_EQ(doubleToHalf(1e-300), 0x0000);
  EXPECT_EQ(doubleToHalf(-5e-324), 0x8000);
}

TEST(Half, RoundingTiesToEven) {
  // 1 + 2^-11 lies halfway between 1 (even) and 1 + 2^-10 (odd).
  EXPECT_EQ(floatToHalf(1.f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(floatToHalf(1.f + 0x1p-11f + 0x1p-20f), 0x3c01);
  // A carry out of the fraction bumps the exponent: 2 - 2^-12 -> 2.
  EXPECT_EQ(floatToHalf(2.f - 0x1p-12f), 0x4000);
  // The largest subnormal plus half an ulp rounds to the smallest normal.
  EXPECT_EQ(floatToHalf(1023.5f * 0x1p-24f), 0x0400);
  EXPECT_EQ(floatToHalf(1.5f * 0x1p-24f), 0x0002);
  EXPECT_EQ(floatToHalf(2.5f * 0x1p-24f), 0x0002);
  // Integers: the ulp at 2048 is 2.
  EXPECT_EQ(floatToHalf(2049.f), 0x6800);
  EXPECT_EQ(floatToHalf(2051.f), 0x6802);
}

TEST(Half, EveryTieAndItsNeighbours) {
  // For every pair of adjacent non-negative finite halves (the last pair
  // being 65504 and inf), the midpoint rounds to the even one and the
  // floats and doubles next to it round to the nearer one.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    double lo = halfValue(h);
    double hi = h + 1 == 0x7c00 ? 65536.0 : halfValue(h + 1);
    double mid = (lo + hi) / 2;
    uint16_t even = (h & 1) ? h + 1 : h;
    float midF = static_cast<float>(mid);
    ASSERT_EQ(double(midF), mid);
    ASSERT_EQ(floatToHalf(midF), even) << "tie above " << h;
    ASSERT_EQ(floatToHalf(std::nextafter(midF, 0.f)), h);
    ASSERT_EQ(floatToHalf(std::nextafter(midF, kInfF)), h + 1);
    ASSERT_EQ(doubleToHalf(mid), even);
    // One rounding: a double just off the tie would round to the tie as a
    // float first.
    ASSERT_EQ(doubleToHalf(std::nextafter(mid, 0.0)), h);
    ASSERT_EQ(doubleToHalf(std::nextafter(mid, HUGE_VAL)), h + 1);
    ASSERT_EQ(floatToHalf(-midF), even | 0x8000);
  }
}

TEST(Half, RoundTripsEveryBitPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = halfToFloat(h);
    if (isHalfNaN(h)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_EQ(std::signbit(f), bool(h & 0x8000));
      ASSERT_TRUE(isHalfNaN(floatToHalf(f)));
      continue;
    }
    ASSERT_EQ(double(f), halfValue(h)) << h;
    ASSERT_EQ(floatToHalf(f), h) << h;
    ASSERT_EQ(doubleToHalf(f), h) << h;
  }
}

TEST(Half, MatchesReferenceOnRandomValues) {
  std::mt19937 gen(7);
  for (int i = 0; i < 1000000; ++i) {
    // Random sign and fraction; exponents from below the subnormals to
    // beyond the overflow threshold.
    uint32_t exp = 127 - 27 + gen() % 46;
    uint32_t bits = (gen() & 0x80000000u) | (exp << 23) | (gen() & 0x7fffff);
    float f = bitsToFloat(bits);
    double expected = referenceHalf(f);
    ASSERT_EQ(double(halfToFloat(floatToHalf(f))), expected) << f;
    double d = double(f) + std::ldexp(double(gen() % 1024) - 512, -40) *
                               std::fabs(double(f));
    ASSERT_EQ(double(halfToFloat(doubleToHalf(d))), referenceHalf(d)) << d;
  }
}

TEST(Half, NaN) {
  EXPECT_TRUE(isHalfNaN(floatToHalf(kNaNF)));
  EXPECT_TRUE(isHalfNaN(doubleToHalf(std::nan(""))));
  EXPECT_EQ(floatToHalf(-kNaNF) & 0x8000, 0x8000);
  // A NaN whose payload lies below the kept bits stays a (quiet) NaN.
  EXPECT_EQ(floatToHalf(bitsToFloat(0x7f800001u)), 0x7e00);
  EXPECT_EQ(floatToHalf(bitsToFloat(0xff800001u)), 0xfe00);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7c01)));
}

TEST(BFloat16, ExactValuesAndRounding) {
  EXPECT_EQ(floatToBFloat16(1.f), 0x3f80);
  EXPECT_EQ(floatToBFloat16(-2.f), 0xc000);
  EXPECT_EQ(floatToBFloat16(3.14159265f), 0x4049);
  EXPECT_EQ(floatToBFloat16(0.1f), 0x3dcd);    // 0x3dcccccd rounds up
  EXPECT_EQ(floatToBFloat16(65504.f), 0x4780); // 65536
  EXPECT_EQ(floatToBFloat16(0x1p-24f), 0x3380);
  // Ties to even: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(floatToBFloat16(1.f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(floatToBFloat16(1.f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBFloat16(1.f + 0x1p-8f + 0x1p-20f), 0x3f81);
  // Overflow: FLT_MAX rounds up to inf; the largest finite stays.
  EXPECT_EQ(floatToBFloat16(FLT_MAX), 0x7f80);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(floatToBFloat16(-kInfF), 0xff80);
  EXPECT_EQ(doubleToBFloat16(1e39), 0x7f80);
  // Float subnormals are bfloat16 subnormals.
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x00008000u)), 0x0000);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x00008001u)), 0x0001);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x807fffffu)), 0x8080);
  // NaN stays NaN with its sign.
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0xffc00000u)), 0xffc0);
  EXPECT_TRUE(isBF16NaN(doubleToBFloat16(std::nan(""))));
  EXPECT_EQ(bfloat16ToFloat(0x3f80), 1.f);
  EXPECT_EQ(bfloat16ToFloat(0x0001), bitsToFloat(0x00010000u));
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(0x7fc0)));
}

TEST(BFloat16, EveryTieAndRoundTrip) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    double lo = bfloat16ToFloat(b);
    double hi = b + 1 == 0x7f80 ? std::ldexp(1.0, 128) : bfloat16ToFloat(b + 1);
    double mid = (lo + hi) / 2;
    uint16_t even = (b & 1) ? b + 1 : b;
    ASSERT_EQ(floatToBFloat16(bfloat16ToFloat(b)), b);
    ASSERT_EQ(doubleToBFloat16(mid), even) << "tie above " << b;
    ASSERT_EQ(doubleToBFloat16(std::nextafter(mid, 0.0)), b);
    ASSERT_EQ(doubleToBFloat16(std::nextafter(mid, HUGE_VAL)), b + 1);
    if (mid < FLT_MAX) {
      float midF = static_cast<float>(mid);
      ASSERT_EQ(double(midF), mid);
      ASSERT_EQ(floatToBFloat16(midF), even);
      ASSERT_EQ(floatToBFloat16(std::nextafter(midF, 0.f)), b);
      ASSERT_EQ(floatToBFloat16(-std::nextafter(midF, kInfF)),
                0x8000 | (b + 1));
    }
  }
  std::mt19937 gen(11);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = gen();
    float f = bitsToFloat(bits);
    if (std::isnan(f))
      continue;
    ASSERT_EQ(double(bfloat16ToFloat(floatToBFloat16(f))), referenceBF16(f))
        << f;
  }
}

//===----------------------------------------------------------------------===//
// Dtype helpers and cast
//===----------------------------------------------------------------------===//

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtypeSize(DType::F16), 2);
  EXPECT_EQ(dtypeSize(DType::BF16), 2);
  EXPECT_EQ(dtypeSize(DType::U32), 4);
  EXPECT_EQ(dtypeSize(DType::U64), 8);
  EXPECT_STREQ(dtypeName(DType::F16), "f16");
  EXPECT_STREQ(dtypeName(DType::BF16), "bf16");
  EXPECT_STREQ(dtypeName(DType::U32), "u32");
  EXPECT_STREQ(dtypeName(DType::U64), "u64");
  EXPECT_EQ(dtypeSize(DType::I16), 2);
  EXPECT_EQ(dtypeSize(DType::U16), 2);
  EXPECT_STREQ(dtypeName(DType::I16), "i16");
  EXPECT_STREQ(dtypeName(DType::U16), "u16");
  // Appended: the older values keep their numbers.
  EXPECT_EQ(static_cast<int>(DType::Bool), 6);
  EXPECT_EQ(static_cast<int>(DType::F16), 7);
  EXPECT_EQ(static_cast<int>(DType::U64), 10);
  EXPECT_EQ(static_cast<int>(DType::U16), 12);
}

TEST(Cast, FloatToHalfAndBack) {
  Context ctx;
  Owned<float> x(
      {9}, {1, 65504, 65520, -1e6f, 0x1p-24f, 0x1p-25f, 1.f / 3, kNaNF, -0.f});
  Owned<uint16_t> h = make16(DType::F16, {9});
  ASSERT_TRUE(cast(ctx, x.t, h.t).ok());
  std::vector<uint16_t> expected = {0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x0001,
                                    0x0000, 0x3555, 0,      0x8000};
  for (int i = 0; i < 9; ++i)
    if (i == 7)
      EXPECT_TRUE(isHalfNaN(h[i]));
    else
      EXPECT_EQ(h[i], expected[i]) << i;
  Owned<float> back({9});
  ASSERT_TRUE(cast(ctx, h.t, back.t).ok());
  EXPECT_EQ(back[1], 65504.f);
  EXPECT_EQ(back[2], kInfF);
  EXPECT_EQ(back[4], 0x1p-24f);
  EXPECT_EQ(back[6], 0.333251953125f);
  EXPECT_TRUE(std::isnan(back[7]));
  EXPECT_TRUE(std::signbit(back[8]));
  Owned<double> back64({9});
  ASSERT_TRUE(cast(ctx, h.t, back64.t).ok());
  EXPECT_EQ(back64[6], 0.333251953125);
  // F64 -> F16 rounds once (through float it would hit the tie).
  Owned<double> d({1}, {1 + 0x1p-11 + 0x1p-40});
  Owned<uint16_t> hd = make16(DType::F16, {1});
  ASSERT_TRUE(cast(ctx, d.t, hd.t).ok());
  EXPECT_EQ(hd[0], 0x3c01);
}

TEST(Cast, HalfToIntegersAndBool) {
  Context ctx;
  // 1.5, -2.5, 65504, inf, NaN, 300
  Owned<uint16_t> h =
      make16(DType::F16, {6}, {0x3e00, 0xc100, 0x7bff, 0x7c00, 0x7e00, 0x5cb0});
  Owned<int32_t> i({6});
  ASSERT_TRUE(cast(ctx, h.t, i.t).ok());
  EXPECT_EQ(i.values,
            (std::vector<int32_t>{
                1, -2, 65504, std::numeric_limits<int32_t>::max(), 0, 300}));
  Owned<uint8_t> u({6});
  ASSERT_TRUE(cast(ctx, h.t, u.t).ok());
  EXPECT_EQ(u.values, (std::vector<uint8_t>{1, 0, 255, 255, 0, 255}));
  Owned<uint16_t> z =
      make16(DType::BF16, {4}, {0x0000, 0x8000, 0x0001, 0x7fc0});
  Owned<uint8_t> b = makeBool({4});
  ASSERT_TRUE(cast(ctx, z.t, b.t).ok());
  EXPECT_EQ(b.values, (std::vector<uint8_t>{0, 0, 1, 1}));
  Owned<uint8_t> flags = makeBool({2}, {0, 1});
  Owned<uint16_t> fb = make16(DType::BF16, {2});
  ASSERT_TRUE(cast(ctx, flags.t, fb.t).ok());
  EXPECT_EQ(fb.values, (std::vector<uint16_t>{0x0000, 0x3f80}));
}

TEST(Cast, IntegersToHalf) {
  Context ctx;
  Owned<int64_t> x({4}, {70000, -3, 2049, 2051});
  Owned<uint16_t> h = make16(DType::F16, {4});
  ASSERT_TRUE(cast(ctx, x.t, h.t).ok());
  EXPECT_EQ(h.values, (std::vector<uint16_t>{0x7c00, 0xc200, 0x6800, 0x6802}));
  Owned<uint32_t> u({2}, {65519, 65520});
  EXPECT_FALSE(cast(ctx, u.t, h.t).ok()); // shapes differ
  Owned<uint16_t> h2 = make16(DType::F16, {2});
  ASSERT_TRUE(cast(ctx, u.t, h2.t).ok());
  EXPECT_EQ(h2.values, (std::vector<uint16_t>{0x7bff, 0x7c00}));
  Owned<uint64_t> big({1}, {(uint64_t(1) << 63) + 1});
  Owned<uint16_t> b = make16(DType::BF16, {1});
  ASSERT_TRUE(cast(ctx, big.t, b.t).ok());
  EXPECT_EQ(b[0], 0x5f00); // 2^63
}

TEST(Cast, BetweenHalfAndBFloat16) {
  Context ctx;
  // 1, 65504, inf, -NaN, 2^-24
  Owned<uint16_t> h =
      make16(DType::F16, {5}, {0x3c00, 0x7bff, 0x7c00, 0xfe00, 0x0001});
  Owned<uint16_t> b = make16(DType::BF16, {5});
  ASSERT_TRUE(cast(ctx, h.t, b.t).ok());
  EXPECT_EQ(b[0], 0x3f80);
  EXPECT_EQ(b[1], 0x4780); // 65504 rounds to 65536 in bfloat16
  EXPECT_EQ(b[2], 0x7f80);
  EXPECT_TRUE(isBF16NaN(b[3]));
  EXPECT_EQ(b[3] & 0x8000, 0x8000);
  EXPECT_EQ(b[4], 0x3380);
  // 65536 overflows F16; 2^-25 ties to 0; -1.5 * 2^-24 ties to -2^-23.
  Owned<uint16_t> b2 =
      make16(DType::BF16, {5}, {0x4780, 0x3f80, 0x3380, 0x3300, 0xb3c0});
  ASSERT_TRUE(cast(ctx, b2.t, h.t).ok());
  EXPECT_EQ(h.values,
            (std::vector<uint16_t>{0x7c00, 0x3c00, 0x0001, 0x0000, 0x8002}));
}

TEST(Cast, UnsignedIntegers) {
  Context ctx;
  Owned<float> f({4}, {-1, 4e9f, 3.7f, kNaNF});
  Owned<uint32_t> u({4});
  ASSERT_TRUE(cast(ctx, f.t, u.t).ok());
  EXPECT_EQ(u.values, (std::vector<uint32_t>{0, 4000000000u, 3, 0}));
  Owned<double> d({3}, {1e19, 2e19, -5});
  Owned<uint64_t> u64({3});
  ASSERT_TRUE(cast(ctx, d.t, u64.t).ok());
  EXPECT_EQ(u64.values,
            (std::vector<uint64_t>{10000000000000000000ull, kU64Max, 0}));
  Owned<uint64_t> m({2}, {kU64Max, 1});
  Owned<double> md({2});
  ASSERT_TRUE(cast(ctx, m.t, md.t).ok());
  EXPECT_EQ(md.values, (std::vector<double>{18446744073709551616.0, 1}));
  Owned<int64_t> mi({2});
  ASSERT_TRUE(cast(ctx, m.t, mi.t).ok());
  EXPECT_EQ(mi.values, (std::vector<int64_t>{-1, 1}));
  Owned<int32_t> neg({1}, {-1});
  Owned<uint32_t> wrapped({1});
  ASSERT_TRUE(cast(ctx, neg.t, wrapped.t).ok());
  EXPECT_EQ(wrapped[0], 4294967295u);
  Owned<uint32_t> wide({1}, {300});
  Owned<uint8_t> narrow({1});
  ASSERT_TRUE(cast(ctx, wide.t, narrow.t).ok());
  EXPECT_EQ(narrow[0], 44);
}

TEST(Cast, EveryPairOfDTypes) {
  // 0, 1 and 2 survive every conversion.
  const std::vector<DType> all = {
      DType::F32, DType::F64,  DType::I64, DType::I32, DType::I8,  DType::U8,
      DType::F16, DType::BF16, DType::U32, DType::U64, DType::I16, DType::U16};
  Context ctx;
  for (DType from : all) {
    Owned<uint64_t> src({3});
    Tensor x{src.values.data(), from, {3}};
    Owned<double> init({3}, {0, 1, 2});
    ASSERT_TRUE(cast(ctx, init.t, x).ok()) << dtypeName(from);
    for (DType to : all) {
      Owned<uint64_t> dst({3});
      Tensor y{dst.values.data(), to, {3}};
      Status s = cast(ctx, x, y);
      ASSERT_TRUE(s.ok()) << dtypeName(from) << "->" << dtypeName(to) << ": "
                          << s.message;
      Owned<double> back({3});
      ASSERT_TRUE(cast(ctx, y, back.t).ok());
      EXPECT_EQ(back.values, (std::vector<double>{0, 1, 2}))
          << dtypeName(from) << "->" << dtypeName(to);
    }
  }
}

//===----------------------------------------------------------------------===//
// Pow and arithmetic on unsigned integers
//===----------------------------------------------------------------------===//

TEST(Pow, UnsignedExponents) {
  Context ctx;
  Owned<float> base({4}, {2, 3, 0.5f, -2});
  Owned<uint32_t> e32({4}, {10, 0, 2, 3});
  Owned<float> y({4});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, base.t, e32.t, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{1024, 1, 0.25f, -8}));

  Owned<double> base64({2}, {2, -1});
  Owned<uint64_t> e64({}, {3});
  Owned<double> y64({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, base64.t, e64.t, y64.t).ok());
  EXPECT_EQ(y64.values, (std::vector<double>{8, -1}));

  // Integer bases wrap; a U64 exponent beyond INT64_MAX stays positive.
  Owned<int64_t> ib({4}, {2, -1, 1, 3});
  Owned<uint64_t> ie({4}, {64, (uint64_t(1) << 63) + 1, kU64Max, 4});
  Owned<int64_t> iy({4});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, ib.t, ie.t, iy.t).ok());
  EXPECT_EQ(iy.values, (std::vector<int64_t>{0, -1, 1, 81}));

  Owned<uint32_t> ub({2}, {3, 2});
  Owned<uint32_t> ue({2}, {5, 32});
  Owned<uint32_t> uy({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, ub.t, ue.t, uy.t).ok());
  EXPECT_EQ(uy.values, (std::vector<uint32_t>{243, 0}));

  // Negative exponents of an unsigned base truncate like integer Div.
  Owned<uint64_t> nb({2}, {1, 2});
  Owned<int64_t> ne({}, {-1});
  Owned<uint64_t> ny({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, nb.t, ne.t, ny.t).ok());
  EXPECT_EQ(ny.values, (std::vector<uint64_t>{1, 0}));
  Owned<uint64_t> zero({1}, {0});
  Owned<uint64_t> zy({1});
  EXPECT_FALSE(binary(ctx, BinaryKind::Pow, zero.t, ne.t, zy.t).ok());
}

TEST(Binary, UnsignedArithmeticAndComparisons) {
  Context ctx;
  Owned<uint32_t> a({3}, {4294967295u, 7, 10});
  Owned<uint32_t> b({3}, {1, 2, 3});
  Owned<uint32_t> c({3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Add, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint32_t>{0, 9, 13}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Div, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint32_t>{4294967295u, 3, 3}));
  Owned<uint64_t> big({2}, {(uint64_t(1) << 63) + 5, 1});
  Owned<uint64_t> five({}, {5});
  Owned<uint8_t> less = makeBool({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Less, big.t, five.t, less.t).ok());
  EXPECT_EQ(less.values, (std::vector<uint8_t>{0, 1}));
}

TEST(Binary, SixteenBitIntegers) {
  Context ctx;
  // Wrapping arithmetic: a uint16_t product promotes to int and would
  // overflow it if computed there.
  Owned<uint16_t> u({3}, {65535, 65535, 300});
  Owned<uint16_t> uc({3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Mul, u.t, u.t, uc.t).ok());
  EXPECT_EQ(uc.values, (std::vector<uint16_t>{1, 1, 24464})); // 90000 % 2^16
  Owned<int16_t> big({2}, {32767, -32768});
  Owned<int16_t> one({}, {1});
  Owned<int16_t> sum({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Add, big.t, one.t, sum.t).ok());
  EXPECT_EQ(sum.values, (std::vector<int16_t>{-32768, -32767}));
  // ONNX's test_mod_mixed_sign_int16: Mod follows the divisor's sign, FMod
  // the dividend's.
  Owned<int16_t> a({6}, {-4, 7, 5, 4, -7, 8});
  Owned<int16_t> b({6}, {2, -3, 8, -2, 3, 5});
  Owned<int16_t> m({6});
  ASSERT_TRUE(binary(ctx, BinaryKind::Mod, a.t, b.t, m.t).ok());
  EXPECT_EQ(m.values, (std::vector<int16_t>{0, -2, 5, 0, 2, 3}));
  ASSERT_TRUE(binary(ctx, BinaryKind::FMod, a.t, b.t, m.t).ok());
  EXPECT_EQ(m.values, (std::vector<int16_t>{0, 1, 5, 0, -1, 3}));
  Owned<uint16_t> ua({3}, {4, 7, 5});
  Owned<uint16_t> ub({3}, {2, 3, 8});
  Owned<uint16_t> um({3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Mod, ua.t, ub.t, um.t).ok());
  EXPECT_EQ(um.values, (std::vector<uint16_t>{0, 1, 5}));
  Owned<int16_t> zero({}, {0});
  EXPECT_FALSE(binary(ctx, BinaryKind::Mod, a.t, zero.t, m.t).ok());
  // Casts saturate; unary and reductions run on int16.
  Owned<float> f({4}, {40000, -40000, -1.5f, kNaNF});
  Owned<int16_t> fi({4});
  ASSERT_TRUE(cast(ctx, f.t, fi.t).ok());
  EXPECT_EQ(fi.values, (std::vector<int16_t>{32767, -32768, -1, 0}));
  Owned<uint16_t> fu({4});
  ASSERT_TRUE(cast(ctx, f.t, fu.t).ok());
  EXPECT_EQ(fu.values, (std::vector<uint16_t>{40000, 0, 0, 0}));
  Owned<int16_t> neg({2});
  ASSERT_TRUE(unary(ctx, UnaryKind::Abs, big.t, neg.t).ok());
  EXPECT_EQ(neg.values, (std::vector<int16_t>{32767, -32768})); // wraps
  Owned<uint16_t> total({});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, u.t, {0}, total.t).ok());
  EXPECT_EQ(total[0], uint16_t(65535 + 65535 + 300));
}

TEST(Reduce, UnsignedIntegers) {
  Context ctx;
  uint64_t top = uint64_t(1) << 63;
  // The sum exceeds INT64_MAX: the mean divides it as unsigned.
  Owned<uint64_t> x({2}, {top, 2});
  Owned<uint64_t> y({});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Mean, x.t, {0}, y.t).ok());
  EXPECT_EQ(y[0], (top >> 1) + 1);
  ASSERT_TRUE(reduce(ctx, ReduceKind::Max, x.t, {0}, y.t).ok());
  EXPECT_EQ(y[0], top);
  Owned<uint64_t> x2({2}, {top, top + 2});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, x2.t, {0}, y.t).ok());
  EXPECT_EQ(y[0], 2u); // wraps
  Owned<uint32_t> x32({2}, {4000000000u, 1000000000u});
  Owned<uint32_t> y32({});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, x32.t, {0}, y32.t).ok());
  EXPECT_EQ(y32[0], 705032704u); // 5e9 mod 2^32
}

//===----------------------------------------------------------------------===//
// 16-bit floats: data movement (arithmetic: Float16ComputeTest.cpp)
//===----------------------------------------------------------------------===//

TEST(Float16, DataMovement) {
  Context ctx;
  Owned<uint16_t> x = make16(DType::F16, {2, 3},
                             {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600});
  Owned<uint16_t> t = make16(DType::F16, {3, 2});
  ASSERT_TRUE(transpose(ctx, x.t, {1, 0}, t.t).ok());
  EXPECT_EQ(t.values, (std::vector<uint16_t>{0x3c00, 0x4400, 0x4000, 0x4500,
                                             0x4200, 0x4600}));
  Owned<uint16_t> s = make16(DType::F16, {2, 1});
  ASSERT_TRUE(slice(ctx, x.t, {0, 2}, {1, 1}, s.t).ok());
  EXPECT_EQ(s.values, (std::vector<uint16_t>{0x4200, 0x4600}));
  Owned<uint16_t> cat = make16(DType::F16, {2, 4});
  ASSERT_TRUE(concat(ctx, {&x.t, &s.t}, 1, cat.t).ok());
  EXPECT_EQ(cat[3], 0x4200);
  EXPECT_EQ(cat[7], 0x4600);
  Owned<int64_t> idx({2}, {2, 0});
  Owned<uint16_t> g = make16(DType::F16, {2, 2});
  ASSERT_TRUE(gather(ctx, x.t, idx.t, 1, g.t).ok());
  EXPECT_EQ(g.values, (std::vector<uint16_t>{0x4200, 0x3c00, 0x4600, 0x4400}));
  Owned<uint16_t> one = make16(DType::BF16, {}, {0x3f80});
  Owned<uint16_t> e = make16(DType::BF16, {3});
  ASSERT_TRUE(expand(ctx, one.t, e.t).ok());
  EXPECT_EQ(e.values, (std::vector<uint16_t>{0x3f80, 0x3f80, 0x3f80}));
  Owned<uint8_t> cond = makeBool({3}, {1, 0, 1});
  Owned<uint16_t> other = make16(DType::BF16, {3}, {0xc000, 0xc000, 0xc000});
  Owned<uint16_t> w = make16(DType::BF16, {3});
  ASSERT_TRUE(where(ctx, cond.t, e.t, other.t, w.t).ok());
  EXPECT_EQ(w.values, (std::vector<uint16_t>{0x3f80, 0xc000, 0x3f80}));
  Owned<uint16_t> c = make16(DType::BF16, {3});
  ASSERT_TRUE(copy(ctx, w.t, c.t).ok());
  EXPECT_EQ(c.values, w.values);
}

TEST(Fill, NewDTypes) {
  Context ctx;
  Owned<uint16_t> h = make16(DType::F16, {2});
  ASSERT_TRUE(fill(ctx, h.t, 65504).ok());
  EXPECT_EQ(h.values, (std::vector<uint16_t>{0x7bff, 0x7bff}));
  ASSERT_TRUE(fill(ctx, h.t, 1e6).ok());
  EXPECT_EQ(h[0], 0x7c00);
  Owned<uint16_t> b = make16(DType::BF16, {2});
  ASSERT_TRUE(fill(ctx, b.t, 1.0).ok());
  EXPECT_EQ(b.values, (std::vector<uint16_t>{0x3f80, 0x3f80}));
  Owned<uint64_t> u64({1});
  ASSERT_TRUE(fill(ctx, u64.t, 1e19).ok());
  EXPECT_EQ(u64[0], 10000000000000000000ull);
  Owned<uint32_t> u32({1});
  ASSERT_TRUE(fill(ctx, u32.t, -5).ok());
  EXPECT_EQ(u32[0], 0u);
  Owned<int16_t> i16({2});
  ASSERT_TRUE(fill(ctx, i16.t, -1e6).ok());
  EXPECT_EQ(i16.values, (std::vector<int16_t>{-32768, -32768}));
  Owned<uint16_t> u16({1});
  ASSERT_TRUE(fill(ctx, u16.t, 70000).ok());
  EXPECT_EQ(u16[0], 65535);
}

} // namespace
