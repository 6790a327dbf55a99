//===- ElementwiseTest.cpp - Tests of the elementwise CPU kernels ---------===//
//
// Values against hand results or naive formulas, numpy broadcasting, Bool
// outputs, error statuses, and finite-difference checks of unaryGrad.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Runs unary on F64 values of shape [n] and returns y.
std::vector<double> unary64(UnaryKind kind, const std::vector<double> &x,
                            float alpha = 0.f, float beta = 0.f) {
  Context ctx;
  Owned<double> in({static_cast<int64_t>(x.size())}, x);
  Owned<double> out({static_cast<int64_t>(x.size())});
  Status s = unary(ctx, kind, in.t, out.t, alpha, beta);
  EXPECT_TRUE(s.ok()) << s.message;
  return out.values;
}

/// The beta the sweeps below pass: Selu's gamma, 0 for the rest (HardSigmoid's
/// reference assumes 0).
float betaFor(UnaryKind kind) { return kind == UnaryKind::Selu ? 1.25f : 0.f; }

/// Naive double-precision references of the forward maps.
double reference(UnaryKind kind, double x, double alpha, double beta = 0) {
  switch (kind) {
  case UnaryKind::Identity:
    return x;
  case UnaryKind::Relu:
    return x > 0 ? x : 0;
  case UnaryKind::LeakyRelu:
    return x >= 0 ? x : alpha * x;
  case UnaryKind::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Erf:
    return std::erf(x);
  case UnaryKind::GeluErf:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case UnaryKind::GeluTanh: {
    double c = std::sqrt(2 / M_PI);
    return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Abs:
    return std::fabs(x);
  case UnaryKind::Reciprocal:
    return 1 / x;
  case UnaryKind::Floor:
    return std::floor(x);
  case UnaryKind::Ceil:
    return std::ceil(x);
  case UnaryKind::HardSigmoid: // beta 0, as unary64 passes it
    return std::max(0.0, std::min(1.0, alpha * x));
  case UnaryKind::HardSwish:
    return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
  case UnaryKind::Elu:
    return x >= 0 ? x : alpha * (std::exp(x) - 1);
  case UnaryKind::Selu:
    return beta * (x >= 0 ? x : alpha * (std::exp(x) - 1));
  case UnaryKind::Celu:
    return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1));
  case UnaryKind::ThresholdedRelu:
    return x > alpha ? x : 0;
  case UnaryKind::Softplus:
    return std::log(1 + std::exp(x));
  case UnaryKind::Softsign:
    return x / (1 + std::fabs(x));
  case UnaryKind::Sin:
    return std::sin(x);
  case UnaryKind::Cos:
    return std::cos(x);
  case UnaryKind::Round: {
    double r = std::floor(x), frac = x - r;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2) != 0))
      r += 1;
    return r;
  }
  case UnaryKind::Not:
    break;
  }
  return kNaN;
}

const UnaryKind kFloatKinds[] = {
    UnaryKind::Identity,    UnaryKind::Relu,
    UnaryKind::LeakyRelu,   UnaryKind::Sigmoid,
    UnaryKind::Tanh,        UnaryKind::Erf,
    UnaryKind::GeluErf,     UnaryKind::GeluTanh,
    UnaryKind::Sqrt,        UnaryKind::Exp,
    UnaryKind::Log,         UnaryKind::Neg,
    UnaryKind::Abs,         UnaryKind::Reciprocal,
    UnaryKind::Floor,       UnaryKind::Ceil,
    UnaryKind::HardSigmoid, UnaryKind::HardSwish,
    UnaryKind::Elu,         UnaryKind::Selu,
    UnaryKind::Celu,        UnaryKind::ThresholdedRelu,
    UnaryKind::Softplus,    UnaryKind::Softsign,
    UnaryKind::Sin,         UnaryKind::Cos,
    UnaryKind::Round};

bool positiveDomain(UnaryKind kind) {
  return kind == UnaryKind::Sqrt || kind == UnaryKind::Log ||
         kind == UnaryKind::Reciprocal;
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

TEST(Unary, HandValues) {
  auto y = unary64(UnaryKind::Relu, {-1, 0, 2.5});
  EXPECT_EQ(y, (std::vector<double>{0, 0, 2.5}));
  y = unary64(UnaryKind::LeakyRelu, {-2, 0, 3}, 0.1f);
  EXPECT_DOUBLE_EQ(y[0], -2 * double(0.1f));
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 3);
  y = unary64(UnaryKind::Sigmoid, {0, -800, 800});
  EXPECT_EQ(y, (std::vector<double>{0.5, 0, 1})); // no overflow to NaN
  y = unary64(UnaryKind::Softplus, {-800, 0, 800});
  EXPECT_EQ(y[0], 0); // neither overflows
  EXPECT_DOUBLE_EQ(y[1], std::log(2.0));
  EXPECT_EQ(y[2], 800);
  // Round halves to even.
  y = unary64(UnaryKind::Round, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6});
  EXPECT_EQ(y, (std::vector<double>{0, 2, 2, -0, -2, 2, -3}));
  // gelu(1) = Phi(1); the tanh form from PyTorch's docs.
  EXPECT_NEAR(unary64(UnaryKind::GeluErf, {1})[0], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(unary64(UnaryKind::GeluTanh, {1})[0], 0.8411919906082768, 1e-15);
  EXPECT_NEAR(unary64(UnaryKind::GeluErf, {-1})[0], -0.15865525393145707,
              1e-15);
  // HardSigmoid with ONNX's defaults (alpha 0.2, beta 0.5) and HardSwish.
  {
    Context ctx;
    Owned<double> in({4}, {-5, 0, 1, 5});
    Owned<double> out({4});
    ASSERT_TRUE(
        unary(ctx, UnaryKind::HardSigmoid, in.t, out.t, 0.2f, 0.5f).ok());
    EXPECT_EQ(out[0], 0);
    EXPECT_DOUBLE_EQ(out[1], 0.5);
    EXPECT_DOUBLE_EQ(out[2], double(0.2f) + 0.5);
    EXPECT_EQ(out[3], 1);
  }
  y = unary64(UnaryKind::HardSwish, {-4, -1, 1, 4});
  EXPECT_EQ(y[0], -0.0);
  EXPECT_DOUBLE_EQ(y[1], -1.0 * 2 / 6);
  EXPECT_DOUBLE_EQ(y[2], 1.0 * 4 / 6);
  EXPECT_EQ(y[3], 4);
  y = unary64(UnaryKind::Floor, {-1.5, 1.5, 2});
  EXPECT_EQ(y, (std::vector<double>{-2, 1, 2}));
  y = unary64(UnaryKind::Ceil, {-1.5, 1.5, 2});
  EXPECT_EQ(y, (std::vector<double>{-1, 2, 2}));
  y = unary64(UnaryKind::Abs, {-3, 0, 4});
  EXPECT_EQ(y, (std::vector<double>{3, 0, 4}));
  y = unary64(UnaryKind::Reciprocal, {4, -0.5});
  EXPECT_EQ(y, (std::vector<double>{0.25, -2}));
  EXPECT_TRUE(std::isnan(unary64(UnaryKind::Relu, {kNaN})[0]));
}

TEST(Unary, MatchesNaiveFormulasF32) {
  Context ctx;
  for (UnaryKind kind : kFloatKinds) {
    Owned<float> x = positiveDomain(kind) ? random<float>({3, 5}, 7, 0.1, 3)
                                          : random<float>({3, 5}, 7, -3, 3);
    Owned<float> y({3, 5});
    Status s = unary(ctx, kind, x.t, y.t, 0.2f, betaFor(kind));
    ASSERT_TRUE(s.ok()) << s.message;
    for (int64_t i = 0; i < 15; ++i)
      EXPECT_NEAR(y[i], reference(kind, x[i], 0.2f, betaFor(kind)), 2e-6)
          << "kind " << static_cast<int>(kind) << " x " << x[i];
  }
}

TEST(Unary, InPlace) {
  Context ctx;
  Owned<float> x({4}, {-1, 2, -3, 4});
  ASSERT_TRUE(unary(ctx, UnaryKind::Relu, x.t, x.t).ok());
  EXPECT_EQ(x.values, (std::vector<float>{0, 2, 0, 4}));
}

TEST(Unary, NotOnBool) {
  Context ctx;
  Owned<uint8_t> x = makeBool({3}, {0, 1, 1});
  Owned<uint8_t> y = makeBool({3});
  ASSERT_TRUE(unary(ctx, UnaryKind::Not, x.t, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<uint8_t>{1, 0, 0}));

  Owned<float> f({3}), g({3});
  Status s = unary(ctx, UnaryKind::Not, f.t, g.t);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("Not"), std::string::npos) << s.message;
}

TEST(Unary, Integers) {
  Context ctx;
  Owned<int32_t> x({4}, {-5, 0, 7, std::numeric_limits<int32_t>::min()});
  Owned<int32_t> y({4});
  ASSERT_TRUE(unary(ctx, UnaryKind::Neg, x.t, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int32_t>{5, 0, -7, x[3]})); // wraps
  ASSERT_TRUE(unary(ctx, UnaryKind::Abs, x.t, y.t).ok());
  EXPECT_EQ(y[0], 5);
  EXPECT_EQ(y[2], 7);
  ASSERT_TRUE(unary(ctx, UnaryKind::Relu, x.t, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int32_t>{0, 0, 7, 0}));
  EXPECT_FALSE(unary(ctx, UnaryKind::Sigmoid, x.t, y.t).ok());
  EXPECT_FALSE(unary(ctx, UnaryKind::Floor, x.t, y.t).ok());
}

TEST(Unary, Errors) {
  Context ctx;
  Owned<float> x({2, 3});
  Owned<float> wrongShape({3, 2});
  Status s = unary(ctx, UnaryKind::Exp, x.t, wrongShape.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("unary Exp"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("[2, 3]"), std::string::npos) << s.message;
  Owned<double> wrongType({2, 3});
  EXPECT_FALSE(unary(ctx, UnaryKind::Exp, x.t, wrongType.t).ok());
  Tensor null{nullptr, DType::F32, {2, 3}};
  EXPECT_FALSE(unary(ctx, UnaryKind::Exp, null, x.t).ok());
}

//===----------------------------------------------------------------------===//
// Unary gradients
//===----------------------------------------------------------------------===//

TEST(UnaryGrad, FiniteDifferencesF64) {
  Context ctx;
  const double alpha = 0.3;
  for (UnaryKind kind : kFloatKinds) {
    if (kind == UnaryKind::Floor || kind == UnaryKind::Ceil ||
        kind == UnaryKind::Round)
      continue;
    // Keep clear of the kinks at 0 (Relu, LeakyRelu, Abs).
    Owned<double> x = positiveDomain(kind) ? random<double>({2, 4}, 3, 0.2, 3)
                                           : random<double>({2, 4}, 3, -2, 2);
    for (double &v : x.values)
      if (std::fabs(v) < 0.05)
        v = 0.5;
    Owned<double> dy = random<double>({2, 4}, 11);
    Owned<double> y({2, 4}), dx({2, 4});
    const float beta = betaFor(kind);
    ASSERT_TRUE(unary(ctx, kind, x.t, y.t, alpha, beta).ok());
    Status s = unaryGrad(ctx, kind, x.t, y.t, dy.t, dx.t, alpha, beta);
    ASSERT_TRUE(s.ok()) << s.message;
    auto loss = [&](const std::vector<double> &v) {
      return dot(unary64(kind, v, alpha, beta), dy.values);
    };
    std::vector<double> expected = numericGrad(x.values, loss);
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_NEAR(dx[i], expected[i], 1e-7 * (1 + std::fabs(expected[i])))
          << "kind " << static_cast<int>(kind) << " x " << x[i];
  }
}

TEST(UnaryGrad, KinksFollowPyTorch) {
  Context ctx;
  Owned<double> x({3}, {-1, 0, 1});
  Owned<double> dy({3}, {2, 2, 2});
  Owned<double> dx({3});
  Tensor none; // Relu, LeakyRelu and Abs do not read y
  ASSERT_TRUE(unaryGrad(ctx, UnaryKind::Relu, x.t, none, dy.t, dx.t).ok());
  EXPECT_EQ(dx.values, (std::vector<double>{0, 0, 2}));
  ASSERT_TRUE(
      unaryGrad(ctx, UnaryKind::LeakyRelu, x.t, none, dy.t, dx.t, 0.5f).ok());
  EXPECT_EQ(dx.values, (std::vector<double>{1, 1, 2}));
  ASSERT_TRUE(unaryGrad(ctx, UnaryKind::Abs, x.t, none, dy.t, dx.t).ok());
  EXPECT_EQ(dx.values, (std::vector<double>{-2, 0, 2}));
  // HardSwish at its kinks as torch's hardswish_backward: x = -3 takes the
  // middle piece (x / 3 + 1/2), x = 3 too.
  Owned<double> hx({5}, {-4, -3, 0, 3, 4});
  Owned<double> hdy({5}, {2, 2, 2, 2, 2});
  Owned<double> hdx({5});
  ASSERT_TRUE(
      unaryGrad(ctx, UnaryKind::HardSwish, hx.t, none, hdy.t, hdx.t).ok());
  EXPECT_EQ(hdx.values, (std::vector<double>{0, -1, 1, 3, 2}));
  // HardSigmoid (torch's alpha 1/6, beta 1/2): zero where clamped.
  ASSERT_TRUE(unaryGrad(ctx, UnaryKind::HardSigmoid, hx.t, none, hdy.t, hdx.t,
                        1.f / 6, 0.5f)
                  .ok());
  EXPECT_EQ(hdx.values[0], 0);
  EXPECT_EQ(hdx.values[1], 0);
  EXPECT_DOUBLE_EQ(hdx.values[2], 2 * double(1.f / 6));
  EXPECT_EQ(hdx.values[4], 0);
  // Elu at 0 takes the exponential branch (torch's elu_backward), so do
  // Selu and Celu; ThresholdedRelu at alpha is zero.
  ASSERT_TRUE(unaryGrad(ctx, UnaryKind::Elu, x.t, none, dy.t, dx.t, 0.5f).ok());
  EXPECT_EQ(dx.values[1], 1);
  ASSERT_TRUE(
      unaryGrad(ctx, UnaryKind::Selu, x.t, none, dy.t, dx.t, 0.5f, 3.f).ok());
  EXPECT_EQ(dx.values[1], 3);
  EXPECT_EQ(dx.values[2], 6);
  ASSERT_TRUE(
      unaryGrad(ctx, UnaryKind::ThresholdedRelu, x.t, none, dy.t, dx.t, 1.f)
          .ok());
  EXPECT_EQ(dx.values, (std::vector<double>{0, 0, 0}));
  for (UnaryKind kind : {UnaryKind::Floor, UnaryKind::Ceil, UnaryKind::Round}) {
    dx.values = {9, 9, 9};
    ASSERT_TRUE(unaryGrad(ctx, kind, x.t, none, dy.t, dx.t).ok());
    EXPECT_EQ(dx.values, (std::vector<double>{0, 0, 0}));
  }
}

TEST(UnaryGrad, F32MatchesF64) {
  Context ctx;
  Owned<float> x = random<float>({16}, 5, 0.1, 2);
  Owned<float> dy = random<float>({16}, 6);
  Owned<float> y({16}), dx({16});
  for (UnaryKind kind : {UnaryKind::GeluTanh, UnaryKind::Sigmoid,
                         UnaryKind::Sqrt, UnaryKind::Reciprocal}) {
    ASSERT_TRUE(unary(ctx, kind, x.t, y.t).ok());
    ASSERT_TRUE(unaryGrad(ctx, kind, x.t, y.t, dy.t, dx.t).ok());
    Owned<double> x64({16}, {x.values.begin(), x.values.end()});
    Owned<double> dy64({16}, {dy.values.begin(), dy.values.end()});
    Owned<double> y64({16}), dx64({16});
    ASSERT_TRUE(unary(ctx, kind, x64.t, y64.t).ok());
    ASSERT_TRUE(unaryGrad(ctx, kind, x64.t, y64.t, dy64.t, dx64.t).ok());
    for (int i = 0; i < 16; ++i)
      EXPECT_NEAR(dx[i], dx64[i], 1e-5 * (1 + std::fabs(dx64[i])));
  }
}

TEST(UnaryGrad, Errors) {
  Context ctx;
  Owned<float> x({4}), y({4}), dy({4}), dx({4});
  Owned<float> shortY({3});
  Status s = unaryGrad(ctx, UnaryKind::Sigmoid, x.t, shortY.t, dy.t, dx.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("unaryGrad Sigmoid y"), std::string::npos)
      << s.message;
  Owned<float> shortDx({3});
  EXPECT_FALSE(unaryGrad(ctx, UnaryKind::Tanh, x.t, y.t, dy.t, shortDx.t).ok());
  Owned<int32_t> ix({4}), idy({4}), idx({4});
  EXPECT_FALSE(unaryGrad(ctx, UnaryKind::Neg, ix.t, ix.t, idy.t, idx.t).ok());
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

TEST(Binary, BroadcastAddMatchesNaive) {
  Context ctx;
  // [2, 3, 1] + [4] -> [2, 3, 4]
  Owned<float> a = random<float>({2, 3, 1}, 1);
  Owned<float> b = random<float>({4}, 2);
  Owned<float> c({2, 3, 4});
  ASSERT_TRUE(binary(ctx, BinaryKind::Add, a.t, b.t, c.t).ok());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(c[(i * 3 + j) * 4 + k], a[i * 3 + j] + b[k]);
}

TEST(Binary, BroadcastBothSides) {
  Context ctx;
  // [3, 1] - [1, 4] -> [3, 4]; a rank-0 scalar times [2, 3].
  Owned<double> a({3, 1}, {1, 2, 3});
  Owned<double> b({1, 4}, {10, 20, 30, 40});
  Owned<double> c({3, 4});
  ASSERT_TRUE(binary(ctx, BinaryKind::Sub, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<double>{-9, -19, -29, -39, -8, -18, -28, -38,
                                           -7, -17, -27, -37}));
  Owned<double> s({}, {2});
  Owned<double> m({2, 3}, {1, 2, 3, 4, 5, 6});
  Owned<double> out({2, 3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Mul, s.t, m.t, out.t).ok());
  EXPECT_EQ(out.values, (std::vector<double>{2, 4, 6, 8, 10, 12}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Div, m.t, s.t, out.t).ok());
  EXPECT_EQ(out.values, (std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3}));
}

TEST(Binary, MiddleAxisBroadcast) {
  Context ctx;
  // [2, 1, 3] * [4, 1] -> [2, 4, 3]: stretched dims on both operands.
  Owned<int64_t> a({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Owned<int64_t> b({4, 1}, {1, 10, 100, 1000});
  Owned<int64_t> c({2, 4, 3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Mul, a.t, b.t, c.t).ok());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(c[(i * 4 + j) * 3 + k], a[i * 3 + k] * b[j]);
}

TEST(Binary, IntegerDivTruncatesTowardZero) {
  Context ctx;
  Owned<int32_t> a({5}, {-7, 7, -7, 7, std::numeric_limits<int32_t>::min()});
  Owned<int32_t> b({5}, {2, -2, -2, 2, -1});
  Owned<int32_t> c({5});
  ASSERT_TRUE(binary(ctx, BinaryKind::Div, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<int32_t>{-3, -3, 3, 3, a[4]}));

  Owned<int32_t> zero({}, {0});
  Status s = binary(ctx, BinaryKind::Div, a.t, zero.t, c.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("division by zero"), std::string::npos);
}

TEST(Binary, ModSignFollowsDivisorFModDividend) {
  Context ctx;
  int32_t min = std::numeric_limits<int32_t>::min();
  Owned<int32_t> a({6}, {-7, 7, -7, 7, min, 6});
  Owned<int32_t> b({6}, {3, -3, -3, 3, -1, 3});
  Owned<int32_t> c({6});
  // Python: -7 % 3 = 2, 7 % -3 = -2; C: -7 % 3 = -1, 7 % -3 = 1.
  ASSERT_TRUE(binary(ctx, BinaryKind::Mod, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<int32_t>{2, -2, -1, 1, 0, 0}));
  ASSERT_TRUE(binary(ctx, BinaryKind::FMod, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<int32_t>{-1, 1, -1, 1, 0, 0}));

  Owned<double> x({4}, {-7.5, 7.5, -7.5, 7.5});
  Owned<double> y({4}, {2, -2, -2, 2});
  Owned<double> z({4});
  ASSERT_TRUE(binary(ctx, BinaryKind::FMod, x.t, y.t, z.t).ok());
  EXPECT_EQ(z.values, (std::vector<double>{-1.5, 1.5, -1.5, 1.5}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Mod, x.t, y.t, z.t).ok());
  EXPECT_EQ(z.values, (std::vector<double>{0.5, -0.5, -1.5, 1.5}));

  Owned<uint8_t> u({2}, {250, 7});
  Owned<uint8_t> v({}, {4});
  Owned<uint8_t> w({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Mod, u.t, v.t, w.t).ok());
  EXPECT_EQ(w.values, (std::vector<uint8_t>{2, 3}));

  Owned<int32_t> zero({}, {0});
  for (BinaryKind kind : {BinaryKind::Mod, BinaryKind::FMod}) {
    Status s = binary(ctx, kind, a.t, zero.t, c.t);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message.find("division by zero"), std::string::npos);
  }
}

TEST(Binary, IntegerWraps) {
  Context ctx;
  Owned<int8_t> a({2}, {127, -128});
  Owned<int8_t> b({2}, {1, 1});
  Owned<int8_t> c({2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Add, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<int8_t>{-128, -127}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Sub, b.t, a.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<int8_t>{-126, -127}));
}

TEST(Binary, Pow) {
  Context ctx;
  Owned<float> a({3}, {2, 4, -2});
  Owned<float> b({3}, {3, 0.5, 2});
  Owned<float> c({3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<float>{8, 2, 4}));
  // Float base, integer exponent (ONNX lets T1 differ).
  Owned<int64_t> e({}, {3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, a.t, e.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<float>{8, 64, -8}));

  Owned<int64_t> ia({6}, {3, -2, 2, 1, -1, 5});
  Owned<int64_t> ib({6}, {4, 3, -1, -5, -3, 0});
  Owned<int64_t> ic({6});
  ASSERT_TRUE(binary(ctx, BinaryKind::Pow, ia.t, ib.t, ic.t).ok());
  EXPECT_EQ(ic.values, (std::vector<int64_t>{81, -8, 0, 1, -1, 1}));
  Owned<int64_t> z({1}, {0});
  Owned<int64_t> neg({1}, {-1});
  Owned<int64_t> out({1});
  EXPECT_FALSE(binary(ctx, BinaryKind::Pow, z.t, neg.t, out.t).ok());
}

TEST(Binary, MaxMinPropagateNaN) {
  Context ctx;
  float nan = float(kNaN);
  Owned<float> a({4}, {1, nan, 3, -0.5f});
  Owned<float> b({4}, {2, 1, nan, -0.5f});
  Owned<float> c({4});
  ASSERT_TRUE(binary(ctx, BinaryKind::Max, a.t, b.t, c.t).ok());
  EXPECT_EQ(c[0], 2);
  EXPECT_TRUE(std::isnan(c[1]));
  EXPECT_TRUE(std::isnan(c[2]));
  EXPECT_EQ(c[3], -0.5f);
  ASSERT_TRUE(binary(ctx, BinaryKind::Min, a.t, b.t, c.t).ok());
  EXPECT_EQ(c[0], 1);
  EXPECT_TRUE(std::isnan(c[1]));
  EXPECT_TRUE(std::isnan(c[2]));
  Owned<int32_t> ia({3}, {-5, 7, 0});
  Owned<int32_t> ib({}, {1});
  Owned<int32_t> ic({3});
  ASSERT_TRUE(binary(ctx, BinaryKind::Max, ia.t, ib.t, ic.t).ok());
  EXPECT_EQ(ic.values, (std::vector<int32_t>{1, 7, 1}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Min, ia.t, ib.t, ic.t).ok());
  EXPECT_EQ(ic.values, (std::vector<int32_t>{-5, 1, 0}));
}

TEST(Binary, ComparisonsWriteBool) {
  Context ctx;
  Owned<float> a({2, 2}, {1, 2, 3, 4});
  Owned<float> b({2}, {2, 2});
  Owned<uint8_t> c = makeBool({2, 2});
  ASSERT_TRUE(binary(ctx, BinaryKind::Equal, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint8_t>{0, 1, 0, 0}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Less, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint8_t>{1, 0, 0, 0}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Greater, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint8_t>{0, 0, 1, 1}));
  // NaN compares unequal and unordered.
  Owned<float> n({1}, {float(kNaN)});
  Owned<uint8_t> one = makeBool({1});
  for (BinaryKind k :
       {BinaryKind::Equal, BinaryKind::Less, BinaryKind::Greater}) {
    ASSERT_TRUE(binary(ctx, k, n.t, n.t, one.t).ok());
    EXPECT_EQ(one[0], 0);
  }
  // Comparing into a float output is misuse.
  Owned<float> f({2, 2});
  Status s = binary(ctx, BinaryKind::Less, a.t, b.t, f.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("bool"), std::string::npos) << s.message;
}

TEST(Binary, LogicAndBoolEquality) {
  Context ctx;
  Owned<uint8_t> a = makeBool({4}, {0, 0, 1, 1});
  Owned<uint8_t> b = makeBool({4}, {0, 1, 0, 1});
  Owned<uint8_t> c = makeBool({4});
  ASSERT_TRUE(binary(ctx, BinaryKind::And, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint8_t>{0, 0, 0, 1}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Or, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint8_t>{0, 1, 1, 1}));
  ASSERT_TRUE(binary(ctx, BinaryKind::Equal, a.t, b.t, c.t).ok());
  EXPECT_EQ(c.values, (std::vector<uint8_t>{1, 0, 0, 1}));
  Owned<float> f({4});
  EXPECT_FALSE(binary(ctx, BinaryKind::And, f.t, f.t, c.t).ok());
  EXPECT_FALSE(binary(ctx, BinaryKind::Add, a.t, b.t, c.t).ok());
}

TEST(Binary, Errors) {
  Context ctx;
  Owned<float> a({2, 3}), b({4}), c({2, 3});
  Status s = binary(ctx, BinaryKind::Add, a.t, b.t, c.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("binary Add"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("[2, 3]"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("[4]"), std::string::npos) << s.message;
  // Right broadcast, wrong output shape.
  Owned<float> row({3}), wrong({3, 2});
  EXPECT_FALSE(binary(ctx, BinaryKind::Mul, a.t, row.t, wrong.t).ok());
  // Operand dtypes differ.
  Owned<double> d({2, 3});
  EXPECT_FALSE(binary(ctx, BinaryKind::Sub, a.t, d.t, c.t).ok());
}

TEST(Binary, ParallelMatchesSerial) {
  Context serial, parallel;
  parallel.numThreads = 4;
  Owned<float> a = random<float>({64, 1, 300}, 1);
  Owned<float> b = random<float>({40, 1}, 2);
  Owned<float> c1({64, 40, 300}), c2({64, 40, 300});
  ASSERT_TRUE(binary(serial, BinaryKind::Mul, a.t, b.t, c1.t).ok());
  ASSERT_TRUE(binary(parallel, BinaryKind::Mul, a.t, b.t, c2.t).ok());
  EXPECT_EQ(c1.values, c2.values);
  EXPECT_EQ(c1[(5 * 40 + 7) * 300 + 11], a[5 * 300 + 11] * b[7]);
}

//===----------------------------------------------------------------------===//
// Where, clip, cast
//===----------------------------------------------------------------------===//

TEST(Where, Broadcasts) {
  Context ctx;
  Owned<uint8_t> cond = makeBool({2, 1}, {1, 0});
  Owned<int64_t> x({1, 3}, {1, 2, 3});
  Owned<int64_t> y({}, {-1});
  Owned<int64_t> out({2, 3});
  ASSERT_TRUE(where(ctx, cond.t, x.t, y.t, out.t).ok());
  EXPECT_EQ(out.values, (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));

  Owned<float> fc({2, 1});
  EXPECT_FALSE(where(ctx, fc.t, x.t, y.t, out.t).ok());
  Owned<int64_t> bad({4});
  EXPECT_FALSE(where(ctx, cond.t, bad.t, y.t, out.t).ok());
}

TEST(Clip, BoundsAndNaN) {
  Context ctx;
  Owned<float> x({5}, {-2, -0.5f, 0.5f, 2, float(kNaN)});
  Owned<float> lo({}, {-1}), hi({}, {1});
  Owned<float> y({5});
  ASSERT_TRUE(clip(ctx, x.t, &lo.t, &hi.t, y.t).ok());
  EXPECT_EQ(y[0], -1);
  EXPECT_EQ(y[1], -0.5f);
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_EQ(y[3], 1);
  EXPECT_TRUE(std::isnan(y[4]));
  ASSERT_TRUE(clip(ctx, x.t, &lo.t, nullptr, y.t).ok());
  EXPECT_EQ(y[3], 2);
  EXPECT_EQ(y[0], -1);
  ASSERT_TRUE(clip(ctx, x.t, nullptr, &hi.t, y.t).ok());
  EXPECT_EQ(y[0], -2);
  EXPECT_EQ(y[3], 1);
  // lo > hi gives hi, as min(max(x, lo), hi).
  ASSERT_TRUE(clip(ctx, x.t, &hi.t, &lo.t, y.t).ok());
  EXPECT_EQ(y[2], -1);
  // Infinities pass through when a bound is absent.
  Owned<double> inf({2}, {-INFINITY, INFINITY});
  Owned<double> out({2});
  ASSERT_TRUE(clip(ctx, inf.t, nullptr, nullptr, out.t).ok());
  EXPECT_EQ(out.values, inf.values);
}

TEST(Clip, IntegersAndErrors) {
  Context ctx;
  Owned<int32_t> x({4}, {-10, 0, 5, 100});
  Owned<int32_t> lo({}, {0}), hi({}, {6});
  Owned<int32_t> y({4});
  ASSERT_TRUE(clip(ctx, x.t, &lo.t, &hi.t, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int32_t>{0, 0, 5, 6}));
  Owned<float> flo({}, {0});
  EXPECT_FALSE(clip(ctx, x.t, &flo.t, nullptr, y.t).ok());
  Owned<int32_t> wide({5});
  EXPECT_FALSE(clip(ctx, x.t, &wide.t, nullptr, y.t).ok());
}

TEST(Cast, FloatToIntTruncatesAndSaturates) {
  Context ctx;
  Owned<float> x({6}, {-1.7f, 2.9f, -0.5f, float(kNaN), 1e20f, -1e20f});
  Owned<int32_t> y({6});
  ASSERT_TRUE(cast(ctx, x.t, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int32_t>{
                          -1, 2, 0, 0, std::numeric_limits<int32_t>::max(),
                          std::numeric_limits<int32_t>::min()}));
  Owned<int64_t> y64({6});
  ASSERT_TRUE(cast(ctx, x.t, y64.t).ok());
  EXPECT_EQ(y64[4], std::numeric_limits<int64_t>::max());
}

TEST(Cast, BoolAndIntegers) {
  Context ctx;
  Owned<float> x({4}, {0, 0.5f, -2, float(kNaN)});
  Owned<uint8_t> b = makeBool({4});
  ASSERT_TRUE(cast(ctx, x.t, b.t).ok());
  EXPECT_EQ(b.values, (std::vector<uint8_t>{0, 1, 1, 1}));
  Owned<double> back({4});
  ASSERT_TRUE(cast(ctx, b.t, back.t).ok());
  EXPECT_EQ(back.values, (std::vector<double>{0, 1, 1, 1}));
  // Integer narrowing wraps modulo 2^8, as numpy and PyTorch.
  Owned<int64_t> wide({3}, {300, -1, 127});
  Owned<int8_t> narrow({3});
  ASSERT_TRUE(cast(ctx, wide.t, narrow.t).ok());
  EXPECT_EQ(narrow.values, (std::vector<int8_t>{44, -1, 127}));
  Owned<uint8_t> u({2}, {200, 3});
  Owned<float> uf({2});
  ASSERT_TRUE(cast(ctx, u.t, uf.t).ok());
  EXPECT_EQ(uf.values, (std::vector<float>{200, 3}));
  Owned<double> d({1}, {0.1});
  Owned<float> f({1});
  ASSERT_TRUE(cast(ctx, d.t, f.t).ok());
  EXPECT_EQ(f[0], 0.1f);
  Owned<float> wrong({3});
  EXPECT_FALSE(cast(ctx, d.t, wrong.t).ok());
}

//===----------------------------------------------------------------------===//
// Expand, reduceSumTo, fill
//===----------------------------------------------------------------------===//

TEST(Expand, Values) {
  Context ctx;
  Owned<int32_t> x({3, 1}, {1, 2, 3});
  Owned<int32_t> y({2, 3, 4});
  ASSERT_TRUE(expand(ctx, x.t, y.t).ok());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(y[(i * 3 + j) * 4 + k], j + 1);
  Owned<int32_t> bad({2, 3, 4});
  Owned<int32_t> x2({2, 1});
  EXPECT_FALSE(expand(ctx, x2.t, bad.t).ok());
  Owned<int32_t> big({1, 3, 1, 1});
  Owned<int32_t> small({3, 1});
  EXPECT_FALSE(expand(ctx, big.t, small.t).ok()); // only unidirectional
}

TEST(ReduceSumTo, Values) {
  Context ctx;
  Owned<double> x({2, 3, 4});
  for (int i = 0; i < 24; ++i)
    x[i] = i;
  Owned<double> y({3, 1});
  ASSERT_TRUE(reduceSumTo(ctx, x.t, y.t).ok());
  // y[j] = sum_{i,k} (12 i + 4 j + k) = 2*4*4j + 4*12 + 2*6 = 32 j + 60.
  EXPECT_EQ(y.values, (std::vector<double>{60, 92, 124}));
  Owned<double> s({});
  ASSERT_TRUE(reduceSumTo(ctx, x.t, s.t).ok());
  EXPECT_EQ(s[0], 276);
  Owned<double> same({2, 3, 4});
  ASSERT_TRUE(reduceSumTo(ctx, x.t, same.t).ok());
  EXPECT_EQ(same.values, x.values);
  Owned<double> bad({2});
  Status st = reduceSumTo(ctx, x.t, bad.t);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message.find("reduceSumTo"), std::string::npos);
}

TEST(ReduceSumTo, AdjointOfExpand) {
  Context ctx;
  const std::vector<std::vector<int64_t>> smalls = {
      {}, {4}, {3, 1}, {1, 3, 4}, {2, 1, 1}, {2, 3, 4}};
  for (const auto &shape : smalls) {
    Owned<double> y = random<double>(shape, 1);
    Owned<double> x = random<double>({2, 3, 4}, 2);
    Owned<double> ey({2, 3, 4});
    Owned<double> rx(shape);
    ASSERT_TRUE(expand(ctx, y.t, ey.t).ok());
    ASSERT_TRUE(reduceSumTo(ctx, x.t, rx.t).ok());
    EXPECT_NEAR(dot(ey.values, x.values), dot(y.values, rx.values), 1e-12);
  }
}

TEST(Fill, ConvertsToDType) {
  Context ctx;
  Owned<float> f({3});
  ASSERT_TRUE(fill(ctx, f.t, 1.5).ok());
  EXPECT_EQ(f.values, (std::vector<float>{1.5, 1.5, 1.5}));
  Owned<int32_t> i({2});
  ASSERT_TRUE(fill(ctx, i.t, -2.7).ok());
  EXPECT_EQ(i.values, (std::vector<int32_t>{-2, -2}));
  Owned<uint8_t> b = makeBool({2});
  ASSERT_TRUE(fill(ctx, b.t, 0.25).ok());
  EXPECT_EQ(b.values, (std::vector<uint8_t>{1, 1}));
  Tensor null{nullptr, DType::F32, {2}};
  EXPECT_FALSE(fill(ctx, null, 0).ok());
}

} // namespace
