//===- TrainingTest.cpp - Dropout, cross-entropy, optimisers ----*- C++ -*-===//
//
// Dropout determinism and keep rate, SoftmaxCrossEntropyLoss against a
// reference written from the ONNX definition plus finite-difference checks
// of its gradient, and SGD / Adam / AdamW steps against hand-computed values.
//
//===----------------------------------------------------------------------===//

#include "KernelTestHelpers.h"
#include "pp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

/// A Bool tensor (one byte per element).
struct Mask {
  Shape shape;
  std::vector<uint8_t> v;
  explicit Mask(Shape s) : shape(std::move(s)), v(numelOf(shape), 7) {}
  Tensor t() { return Tensor{v.data(), DType::Bool, shape}; }
};

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

template <typename T>
void runDropout(Buf<T> &x, float ratio, bool training, uint64_t seed, Buf<T> &y,
                Mask &mask, int threads = 1, uint64_t offset = 0) {
  Context ctx;
  ctx.numThreads = threads;
  Tensor xt = x.t(), yt = y.t(), mt = mask.t();
  Status s = dropout(ctx, xt, ratio, training, seed, offset, yt, mt);
  ASSERT_TRUE(s.ok()) << s.message;
}

TEST(Dropout, SameSeedSameMask) {
  Buf<float> x = randomBuf<float>({1000}), y1({1000}), y2({1000}), y3({1000});
  Mask m1({1000}), m2({1000}), m3({1000});
  runDropout(x, 0.5f, true, 42, y1, m1);
  runDropout(x, 0.5f, true, 42, y2, m2, 3);
  runDropout(x, 0.5f, true, 43, y3, m3);
  EXPECT_EQ(m1.v, m2.v);
  EXPECT_EQ(y1.v, y2.v);
  EXPECT_NE(m1.v, m3.v);
}

TEST(Dropout, MaskDependsOnlyOnSeedAndIndex) {
  // A smaller tensor of another shape sees the prefix of the same mask.
  Buf<double> big = randomBuf<double>({40, 50}), ybig({40, 50});
  Buf<double> small = randomBuf<double>({3, 7, 11}), ysmall({3, 7, 11});
  Mask mbig({40, 50}), msmall({3, 7, 11});
  runDropout(big, 0.25f, true, 7, ybig, mbig, 2);
  runDropout(small, 0.25f, true, 7, ysmall, msmall);
  for (size_t i = 0; i < msmall.v.size(); ++i)
    ASSERT_EQ(msmall.v[i], mbig.v[i]) << i;
}

TEST(Dropout, OffsetSelectsASliceOfTheWholeMask) {
  // Four micro-batches of 250 with offsets m * 250 draw the mask of the
  // whole batch of 1000, slice by slice.
  Buf<float> whole = randomBuf<float>({4, 250}), ywhole({4, 250});
  Mask mwhole({4, 250});
  runDropout(whole, 0.5f, true, 99, ywhole, mwhole);
  for (int m = 0; m < 4; ++m) {
    Buf<float> part({1, 250}), ypart({1, 250});
    for (int i = 0; i < 250; ++i)
      part.v[i] = whole.v[m * 250 + i];
    Mask mpart({1, 250});
    runDropout(part, 0.5f, true, 99, ypart, mpart, 2, uint64_t(m) * 250);
    for (int i = 0; i < 250; ++i) {
      ASSERT_EQ(mpart.v[i], mwhole.v[m * 250 + i]) << m << " " << i;
      ASSERT_EQ(ypart.v[i], ywhole.v[m * 250 + i]) << m << " " << i;
    }
  }
  // Without the offsets the micro-batches would share one mask.
  Buf<float> part({1, 250}), ypart({1, 250});
  Mask mpart({1, 250});
  runDropout(part, 0.5f, true, 99, ypart, mpart);
  EXPECT_NE(
      std::vector<uint8_t>(mwhole.v.begin() + 250, mwhole.v.begin() + 500),
      mpart.v);
}

template <typename T> void checkKeepRate(float ratio) {
  const int64_t n = 200000;
  Buf<T> x = randomBuf<T>({n}), y({n});
  Mask m({n});
  runDropout(x, ratio, true, 2024, y, m, 2);
  int64_t kept = 0;
  T scale = T(1.0 / (1.0 - double(ratio)));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(m.v[i] == 0 || m.v[i] == 1);
    kept += m.v[i];
    ASSERT_EQ(y[i], m.v[i] ? x[i] * scale : T(0)) << i;
  }
  // Five standard deviations of a binomial keep count.
  double p = 1.0 - ratio, sd = std::sqrt(p * (1 - p) / n);
  EXPECT_NEAR(double(kept) / n, p, 5 * sd) << "ratio " << ratio;
}

TEST(Dropout, KeepRateAndScaling) {
  checkKeepRate<float>(0.1f);
  checkKeepRate<float>(0.5f);
  checkKeepRate<double>(0.3f);
  checkKeepRate<double>(0.9f);
}

TEST(Dropout, RatioZeroInferenceAndRatioOne) {
  Buf<float> x = randomBuf<float>({5, 6}), y({5, 6});
  Mask m({5, 6});
  runDropout(x, 0.f, true, 1, y, m);
  EXPECT_EQ(y.v, x.v);
  for (uint8_t b : m.v)
    EXPECT_EQ(b, 1);
  Buf<float> y2({5, 6});
  Mask m2({5, 6});
  runDropout(x, 0.7f, false, 1, y2, m2);
  EXPECT_EQ(y2.v, x.v);
  for (uint8_t b : m2.v)
    EXPECT_EQ(b, 1);
  Buf<float> y3({5, 6}, 1.f);
  Mask m3({5, 6});
  runDropout(x, 1.f, true, 1, y3, m3);
  for (size_t i = 0; i < y3.v.size(); ++i) {
    EXPECT_EQ(y3[i], 0.f);
    EXPECT_EQ(m3.v[i], 0);
  }
}

template <typename T> void checkDropoutGrad() {
  Context ctx;
  const float ratio = 0.4f;
  Buf<T> x = randomBuf<T>({8, 9}), y({8, 9}), dy = randomBuf<T>({8, 9}),
         dx({8, 9}, T(5));
  Mask m({8, 9});
  runDropout(x, ratio, true, 11, y, m);
  Tensor dyt = dy.t(), mt = m.t(), dxt = dx.t();
  Status s = dropoutGrad(ctx, dyt, mt, ratio, dxt);
  ASSERT_TRUE(s.ok()) << s.message;
  std::vector<double> want(dy.v.size());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = m.v[i] ? double(dy[i]) / (1.0 - ratio) : 0.0;
  expectNear(dx.v, want, 1e-6, "dx");
  // The gradient is the adjoint of the (linear, for a fixed mask) forward.
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    lhs += double(y[i]) * double(dy[i]);
    rhs += double(x[i]) * double(dx[i]);
  }
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
}

TEST(Dropout, GradF32) { checkDropoutGrad<float>(); }
TEST(Dropout, GradF64) { checkDropoutGrad<double>(); }

TEST(Dropout, Errors) {
  Context ctx;
  Buf<float> x({4}), y({4}), y5({5});
  Mask m({4});
  Tensor xt = x.t(), yt = y.t(), mt = m.t(), y5t = y5.t();
  Status s = dropout(ctx, xt, -0.1f, true, 0, 0, yt, mt);
  EXPECT_NE(s.message.find("dropout: ratio must lie in [0, 1]"),
            std::string::npos)
      << s.message;
  EXPECT_FALSE(dropout(ctx, xt, 1.5f, true, 0, 0, yt, mt).ok());
  EXPECT_FALSE(dropout(ctx, xt, NAN, true, 0, 0, yt, mt).ok());
  s = dropout(ctx, xt, 0.5f, true, 0, 0, y5t, mt);
  EXPECT_NE(s.message.find("dropout: y: expected shape [4], got [5]"),
            std::string::npos)
      << s.message;
  Buf<float> fm({4});
  Tensor fmt = fm.t();
  s = dropout(ctx, xt, 0.5f, true, 0, 0, yt, fmt);
  EXPECT_NE(s.message.find("dropout: mask: expected dtype bool, got f32"),
            std::string::npos)
      << s.message;
  s = dropoutGrad(ctx, xt, fmt, 0.5f, yt);
  EXPECT_NE(s.message.find("dropoutGrad: mask"), std::string::npos)
      << s.message;
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

struct SceCase {
  Shape scores;
  bool weights;
  bool ignore;
  int64_t ignoreIndex;
  std::string reduction;
};

/// The ONNX definition: log_softmax over dim 1; loss_i = -w[label] *
/// logp[label] (0 for the ignore index); mean divides by the summed weights
/// of the counted labels.
template <typename T>
void refSce(const SceCase &sc, const Buf<T> &scores, const Buf<int64_t> &labels,
            const Buf<T> &weights, std::vector<double> &loss,
            std::vector<double> &logProb) {
  int64_t n = sc.scores[0], c = sc.scores[1],
          inner = numelOf(sc.scores) / (n * c);
  logProb.assign(scores.v.size(), 0);
  std::vector<double> per(n * inner), w(n * inner);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < inner; ++d) {
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < c; ++k)
        mx = std::max(mx, double(scores.v[(i * c + k) * inner + d]));
      for (int64_t k = 0; k < c; ++k)
        sum += std::exp(double(scores.v[(i * c + k) * inner + d]) - mx);
      for (int64_t k = 0; k < c; ++k)
        logProb[(i * c + k) * inner + d] =
            double(scores.v[(i * c + k) * inner + d]) - mx - std::log(sum);
      int64_t label = labels.v[i * inner + d];
      if (sc.ignore && label == sc.ignoreIndex)
        continue;
      w[i * inner + d] = sc.weights ? double(weights.v[label]) : 1.0;
      per[i * inner + d] =
          -w[i * inner + d] * logProb[(i * c + label) * inner + d];
    }
  if (sc.reduction == "none") {
    loss = per;
    return;
  }
  double total = 0, totalW = 0;
  for (size_t i = 0; i < per.size(); ++i) {
    total += per[i];
    totalW += w[i];
  }
  loss = {sc.reduction == "sum" ? total : total / totalW};
}

std::vector<SceCase> sceCases() {
  std::vector<SceCase> cases;
  for (Shape shape : {Shape{5, 4}, Shape{2, 3, 4}, Shape{2, 4, 3, 2}})
    for (const char *red : {"none", "sum", "mean"})
      for (int variant = 0; variant < 4; ++variant)
        cases.push_back({shape, variant % 2 == 1, variant >= 2,
                         variant == 3 ? 1 : -100, red});
  return cases;
}

/// Labels in [0, C) with a few set to the ignore index.
Buf<int64_t> makeLabels(const SceCase &sc) {
  Shape shape = sc.scores;
  int64_t c = shape[1];
  shape.erase(shape.begin() + 1);
  Buf<int64_t> labels(shape);
  for (size_t i = 0; i < labels.v.size(); ++i)
    labels[i] =
        (sc.ignore && i % 3 == 0) ? sc.ignoreIndex : int64_t((i * 5 + 1) % c);
  return labels;
}

Shape lossShape(const SceCase &sc, const Buf<int64_t> &labels) {
  return sc.reduction == "none" ? labels.shape : Shape{};
}

template <typename T> void checkSce() {
  Context ctx;
  int index = 0;
  for (const SceCase &sc : sceCases()) {
    SCOPED_TRACE(::testing::Message()
                 << "case " << index++ << " " << sc.reduction);
    Buf<T> scores = randomBuf<T>(sc.scores, -3, 3),
           weights = randomBuf<T>({sc.scores[1]}, 0.2, 2);
    Buf<int64_t> labels = makeLabels(sc);
    std::vector<double> wantLoss, wantLogProb;
    refSce(sc, scores, labels, weights, wantLoss, wantLogProb);
    Buf<T> loss(lossShape(sc, labels)), logProb(sc.scores);
    for (int threads : {1, 2}) {
      ctx.numThreads = threads;
      Tensor st = scores.t(), lt = labels.t(), wt = weights.t(),
             losst = loss.t(), lpt = logProb.t();
      Status s = softmaxCrossEntropy(ctx, st, lt, sc.weights ? &wt : nullptr,
                                     sc.ignore, sc.ignoreIndex, sc.reduction,
                                     losst, lpt);
      ASSERT_TRUE(s.ok()) << s.message;
      double rel = std::is_same_v<T, float> ? 1e-5 : 1e-12;
      expectNear(loss.v, wantLoss, rel, "loss");
      expectNear(logProb.v, wantLogProb, rel, "logProb");
    }
  }
}

TEST(SoftmaxCrossEntropy, MatchesReferenceF32) { checkSce<float>(); }
TEST(SoftmaxCrossEntropy, MatchesReferenceF64) { checkSce<double>(); }

TEST(SoftmaxCrossEntropy, Int32Labels) {
  Context ctx;
  Buf<double> scores = randomBuf<double>({3, 4}), loss({}), loss64({}),
              logProb({3, 4});
  Buf<int32_t> labels({3});
  labels.v = {0, 3, 2};
  Buf<int64_t> labels64({3});
  labels64.v = {0, 3, 2};
  Tensor st = scores.t(), lt = labels.t(), l64 = labels64.t(), losst = loss.t(),
         loss64t = loss64.t(), lpt = logProb.t();
  ASSERT_TRUE(
      softmaxCrossEntropy(ctx, st, lt, nullptr, false, 0, "mean", losst, lpt)
          .ok());
  ASSERT_TRUE(
      softmaxCrossEntropy(ctx, st, l64, nullptr, false, 0, "mean", loss64t, lpt)
          .ok());
  EXPECT_EQ(loss[0], loss64[0]);
}

TEST(SoftmaxCrossEntropy, AllIgnoredMean) {
  // ONNX: 0 / 0 = NaN for the loss; the gradient stays 0.
  Context ctx;
  Buf<double> scores = randomBuf<double>({2, 3}), loss({}), logProb({2, 3}),
              dloss({}, 1.0), dscores({2, 3}, 5.0);
  Buf<int64_t> labels({2}, -1);
  Tensor st = scores.t(), lt = labels.t(), losst = loss.t(), lpt = logProb.t(),
         dlt = dloss.t(), dst = dscores.t();
  ASSERT_TRUE(
      softmaxCrossEntropy(ctx, st, lt, nullptr, true, -1, "mean", losst, lpt)
          .ok());
  EXPECT_TRUE(std::isnan(loss[0]));
  ASSERT_TRUE(
      softmaxCrossEntropyGrad(ctx, dlt, lpt, lt, nullptr, true, -1, "mean", dst)
          .ok());
  for (double g : dscores.v)
    EXPECT_EQ(g, 0.0);
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  Context ctx;
  int index = 0;
  for (const SceCase &sc : sceCases()) {
    SCOPED_TRACE(::testing::Message()
                 << "case " << index++ << " " << sc.reduction);
    Buf<double> scores = randomBuf<double>(sc.scores, -2, 2),
                weights = randomBuf<double>({sc.scores[1]}, 0.2, 2);
    Buf<int64_t> labels = makeLabels(sc);
    Shape ls = lossShape(sc, labels);
    Buf<double> loss(ls), logProb(sc.scores), dloss = randomBuf<double>(ls);
    auto objective = [&]() {
      Tensor st = scores.t(), lt = labels.t(), wt = weights.t(),
             losst = loss.t(), lpt = logProb.t();
      EXPECT_TRUE(softmaxCrossEntropy(ctx, st, lt, sc.weights ? &wt : nullptr,
                                      sc.ignore, sc.ignoreIndex, sc.reduction,
                                      losst, lpt)
                      .ok());
      double l = 0;
      for (size_t i = 0; i < loss.v.size(); ++i)
        l += loss[i] * dloss[i];
      return l;
    };
    objective();
    Buf<double> dscores(sc.scores);
    for (int threads : {1, 2}) {
      ctx.numThreads = threads;
      Tensor dlt = dloss.t(), lpt = logProb.t(), lt = labels.t(),
             wt = weights.t(), dst = dscores.t();
      Status s =
          softmaxCrossEntropyGrad(ctx, dlt, lpt, lt, sc.weights ? &wt : nullptr,
                                  sc.ignore, sc.ignoreIndex, sc.reduction, dst);
      ASSERT_TRUE(s.ok()) << s.message;
    }
    ctx.numThreads = 1;
    expectNear(dscores.v, numericGrad(scores.v, objective), 1e-7, "dscores");
  }
}

TEST(SoftmaxCrossEntropy, Errors) {
  Context ctx;
  Buf<float> scores({2, 3}), loss({}), lossN({2}), logProb({2, 3}),
      dscores({2, 3});
  Buf<int64_t> labels({2});
  labels.v = {0, 3};
  Tensor st = scores.t(), lt = labels.t(), losst = loss.t(), lnt = lossN.t(),
         lpt = logProb.t(), dst = dscores.t();
  Status s =
      softmaxCrossEntropy(ctx, st, lt, nullptr, false, 0, "mean", losst, lpt);
  EXPECT_NE(s.message.find("label 3 at flat position 1 is outside [0, 3)"),
            std::string::npos)
      << s.message;
  s = softmaxCrossEntropyGrad(ctx, losst, lpt, lt, nullptr, false, 0, "mean",
                              dst);
  EXPECT_NE(s.message.find("softmaxCrossEntropyGrad: label 3"),
            std::string::npos)
      << s.message;
  EXPECT_TRUE(
      softmaxCrossEntropy(ctx, st, lt, nullptr, true, 3, "sum", losst, lpt)
          .ok());
  s = softmaxCrossEntropy(ctx, st, lt, nullptr, true, 3, "avg", losst, lpt);
  EXPECT_NE(s.message.find("reduction must be none, sum or mean, got 'avg'"),
            std::string::npos)
      << s.message;
  s = softmaxCrossEntropy(ctx, st, lt, nullptr, true, 3, "none", losst, lpt);
  EXPECT_NE(
      s.message.find("softmaxCrossEntropy: loss: expected shape [2], got []"),
      std::string::npos)
      << s.message;
  s = softmaxCrossEntropy(ctx, st, lt, nullptr, true, 3, "mean", lnt, lpt);
  EXPECT_NE(s.message.find("expected a scalar"), std::string::npos)
      << s.message;
  Buf<float> flabels({2});
  Tensor flt = flabels.t();
  s = softmaxCrossEntropy(ctx, st, flt, nullptr, false, 0, "mean", losst, lpt);
  EXPECT_NE(s.message.find("labels: expected dtype i64 or i32, got f32"),
            std::string::npos)
      << s.message;
  Buf<float> weights({4});
  Tensor wt = weights.t();
  s = softmaxCrossEntropy(ctx, st, lt, &wt, true, 3, "mean", losst, lpt);
  EXPECT_NE(s.message.find("weights: expected shape [3], got [4]"),
            std::string::npos)
      << s.message;
  Buf<int64_t> labels3({3});
  Tensor l3 = labels3.t();
  s = softmaxCrossEntropy(ctx, st, l3, nullptr, false, 0, "mean", losst, lpt);
  EXPECT_NE(s.message.find("labels: expected shape [2], got [3]"),
            std::string::npos)
      << s.message;
}

//===----------------------------------------------------------------------===//
// Optimisers
//===----------------------------------------------------------------------===//

template <typename T>
void sgd(Buf<T> &p, Buf<T> &g, Buf<T> *buf, int64_t step, float lr,
         float momentum, float dampening, float wd, bool nesterov) {
  Context ctx;
  Tensor pt = p.t(), gt = g.t();
  Tensor bt = buf ? buf->t() : Tensor{};
  Status s = sgdStep(ctx, pt, gt, buf ? &bt : nullptr, step, lr, momentum,
                     dampening, wd, nesterov);
  ASSERT_TRUE(s.ok()) << s.message;
}

TEST(Sgd, PlainWithWeightDecay) {
  Buf<double> p({2}), g({2});
  p.v = {1.0, -2.0};
  g.v = {0.5, 0.25};
  sgd<double>(p, g, nullptr, 1, 0.1f, 0.f, 0.f, 0.01f, false);
  // p -= lr * (g + wd * p)
  EXPECT_NEAR(p[0], 1.0 - 0.1 * (0.5 + 0.01 * 1.0), 1e-8);
  EXPECT_NEAR(p[1], -2.0 - 0.1 * (0.25 + 0.01 * -2.0), 1e-8);
}

TEST(Sgd, MomentumWithDampeningTwoSteps) {
  // lr 0.1, momentum 0.9, dampening 0.1, wd 0.01; g = 0.5 then -0.2.
  // Step 1: d = 0.51, buf = 0.51 (first step: no dampening), p = 0.949.
  // Step 2: d = -0.2 + 0.00949 = -0.19051,
  //         buf = 0.9 * 0.51 + 0.9 * -0.19051 = 0.287541, p = 0.9202459.
  Buf<double> p({1}, 1.0), g({1}, 0.5), buf({1}, 123.0);
  sgd(p, g, &buf, 1, 0.1f, 0.9f, 0.1f, 0.01f, false);
  EXPECT_NEAR(buf[0], 0.51, 1e-7);
  EXPECT_NEAR(p[0], 0.949, 1e-7);
  g[0] = -0.2;
  sgd(p, g, &buf, 2, 0.1f, 0.9f, 0.1f, 0.01f, false);
  EXPECT_NEAR(buf[0], 0.287541, 1e-7);
  EXPECT_NEAR(p[0], 0.9202459, 1e-7);
}

TEST(Sgd, NesterovTwoSteps) {
  // lr 0.1, momentum 0.9, wd 0.01; g = 0.5 then -0.2.
  // Step 1: d = 0.51, buf = 0.51, d = 0.51 + 0.459 = 0.969, p = 0.9031.
  // Step 2: d = -0.190969, buf = 0.268031, d = 0.0502589, p = 0.89807411.
  Buf<float> p({1}, 1.f), g({1}, 0.5f), buf({1});
  sgd(p, g, &buf, 1, 0.1f, 0.9f, 0.f, 0.01f, true);
  EXPECT_NEAR(p[0], 0.9031, 1e-6);
  g[0] = -0.2f;
  sgd(p, g, &buf, 2, 0.1f, 0.9f, 0.f, 0.01f, true);
  EXPECT_NEAR(buf[0], 0.268031, 1e-6);
  EXPECT_NEAR(p[0], 0.89807411, 1e-6);
}

TEST(Sgd, Errors) {
  Context ctx;
  Buf<float> p({3}), g({3}), g4({4}), buf({3});
  Tensor pt = p.t(), gt = g.t(), g4t = g4.t(), bt = buf.t();
  Status s = sgdStep(ctx, pt, g4t, nullptr, 1, 0.1f, 0.f, 0.f, 0.f, false);
  EXPECT_NE(s.message.find("sgdStep: grad: expected shape [3], got [4]"),
            std::string::npos)
      << s.message;
  s = sgdStep(ctx, pt, gt, nullptr, 1, 0.1f, 0.9f, 0.f, 0.f, false);
  EXPECT_NE(s.message.find("needs a momentum buffer"), std::string::npos)
      << s.message;
  s = sgdStep(ctx, pt, gt, &bt, 1, 0.1f, 0.9f, 0.5f, 0.f, true);
  EXPECT_NE(s.message.find("Nesterov"), std::string::npos) << s.message;
}

/// Adam as written in the paper / torch docs: bias-corrected moments.
struct AdamRef {
  double m = 0, v = 0;
  void step(double &p, double g, int t, double lr, double b1, double b2,
            double eps, double wd, bool decoupled) {
    if (decoupled)
      p -= lr * wd * p;
    else
      g += wd * p;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    double mHat = m / (1 - std::pow(b1, t)), vHat = v / (1 - std::pow(b2, t));
    p -= lr * mHat / (std::sqrt(vHat) + eps);
  }
};

TEST(Adam, FirstStepMovesByLearningRate) {
  // m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25: p -= 0.1 * 0.5 / (0.5 +
  // 1e-8).
  Buf<double> p({1}, 1.0), g({1}, 0.5), m({1}), v({1});
  Context ctx;
  Tensor pt = p.t(), gt = g.t(), mt = m.t(), vt = v.t();
  ASSERT_TRUE(
      adamStep(ctx, pt, gt, mt, vt, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.f, false)
          .ok());
  EXPECT_NEAR(m[0], 0.05, 1e-7);
  EXPECT_NEAR(v[0], 0.00025, 1e-8);
  EXPECT_NEAR(p[0], 0.9, 1e-7);
}

template <typename T> void checkAdam(bool decoupled, float wd) {
  Context ctx;
  ctx.numThreads = 2;
  const float lr = 0.01f, b1 = 0.8f, b2 = 0.95f, eps = 1e-6f;
  Buf<T> p = randomBuf<T>({7}), m({7}), v({7});
  std::vector<double> ref(p.v.begin(), p.v.end());
  std::vector<AdamRef> state(7);
  for (int t = 1; t <= 5; ++t) {
    Buf<T> g = randomBuf<T>({7});
    Tensor pt = p.t(), gt = g.t(), mt = m.t(), vt = v.t();
    Status s = adamStep(ctx, pt, gt, mt, vt, t, lr, b1, b2, eps, wd, decoupled);
    ASSERT_TRUE(s.ok()) << s.message;
    for (int i = 0; i < 7; ++i)
      state[i].step(ref[i], double(g[i]), t, lr, b1, b2, eps, wd, decoupled);
  }
  expectNear(p.v, ref, std::is_same_v<T, float> ? 1e-5 : 1e-10, "param");
}

TEST(Adam, MatchesReferenceF32) {
  checkAdam<float>(false, 0.f);
  checkAdam<float>(false, 0.1f);
  checkAdam<float>(true, 0.1f);
}

TEST(Adam, MatchesReferenceF64) {
  checkAdam<double>(false, 0.f);
  checkAdam<double>(false, 0.1f);
  checkAdam<double>(true, 0.1f);
}

TEST(Adam, AdamWDecaysTheWeightNotTheGradient) {
  // A zero gradient leaves m = v = 0: Adam's L2 term still moves p through
  // the moments, AdamW only scales p by 1 - lr * wd.
  Context ctx;
  Buf<double> p({1}, 2.0), g({1}, 0.0), m({1}), v({1});
  Tensor pt = p.t(), gt = g.t(), mt = m.t(), vt = v.t();
  ASSERT_TRUE(
      adamStep(ctx, pt, gt, mt, vt, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, true)
          .ok());
  EXPECT_NEAR(p[0], 2.0 * (1 - 0.1f * 0.5f), 1e-7);
  EXPECT_EQ(m[0], 0.0);
}

/// An update with an UpdateTarget (a weight-versioned schedule keeping the
/// old value as a version) writes the target, leaves the parameter as it
/// was, and computes what the in-place update computes, bit for bit.
template <typename T, typename Update>
void expectOutOfPlaceEqualsInPlace(Update update, const char *what) {
  Context ctx;
  ctx.numThreads = 2;
  Buf<T> p = randomBuf<T>({37}), g = randomBuf<T>({37});
  Buf<T> m1 = randomBuf<T>({37}, 0, 0.1), v1 = randomBuf<T>({37}, 0, 0.1);
  Buf<T> inPlace = p, m2 = m1, v2 = v1, target({37}, 99.0);
  Tensor ipt = inPlace.t(), gt = g.t(), m1t = m1.t(), v1t = v1.t();
  Status s = update(ctx, ipt, gt, m1t, v1t);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message;
  std::vector<UpdateTarget> targets{{p.v.data(), target.v.data()}};
  ctx.updateTargets = &targets;
  Buf<T> before = p;
  Tensor pt = p.t(), m2t = m2.t(), v2t = v2.t();
  s = update(ctx, pt, gt, m2t, v2t);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message;
  EXPECT_TRUE(targets[0].written) << what;
  EXPECT_EQ(p.v, before.v) << what << ": the parameter was written";
  EXPECT_EQ(target.v, inPlace.v) << what;
  EXPECT_EQ(m2.v, m1.v) << what << ": the first moment or momentum";
  EXPECT_EQ(v2.v, v1.v) << what << ": the second moment";
}

template <typename T> void checkOutOfPlaceUpdates() {
  for (bool nesterov : {false, true})
    for (int64_t step : {1, 3})
      expectOutOfPlaceEqualsInPlace<T>(
          [&](Context &ctx, Tensor &p, Tensor &g, Tensor &m, Tensor &) {
            // torch's Nesterov takes no dampening.
            return sgdStep(ctx, p, g, &m, step, 0.1, 0.9, nesterov ? 0 : 0.1,
                           0.01, nesterov);
          },
          "sgd with momentum");
  expectOutOfPlaceEqualsInPlace<T>(
      [](Context &ctx, Tensor &p, Tensor &g, Tensor &, Tensor &) {
        return sgdStep(ctx, p, g, nullptr, 1, 0.1, 0, 0, 0, false);
      },
      "plain sgd");
  for (bool decoupled : {false, true})
    expectOutOfPlaceEqualsInPlace<T>(
        [&](Context &ctx, Tensor &p, Tensor &g, Tensor &m, Tensor &v) {
          return adamStep(ctx, p, g, m, v, 4, 1e-2, 0.9, 0.999, 1e-8, 0.1,
                          decoupled);
        },
        decoupled ? "adamw" : "adam");
}

TEST(OutOfPlaceUpdate, EqualsInPlaceF32) { checkOutOfPlaceUpdates<float>(); }
TEST(OutOfPlaceUpdate, EqualsInPlaceF64) { checkOutOfPlaceUpdates<double>(); }

TEST(OutOfPlaceUpdate, OtherBuffersUpdateInPlace) {
  // A target names one parameter: another is updated in place.
  Context ctx;
  Buf<float> p({2}, 1.0), other({2}, 1.0), g({2}, 1.0), target({2}, 0.0);
  std::vector<UpdateTarget> targets{{p.v.data(), target.v.data()}};
  ctx.updateTargets = &targets;
  Tensor ot = other.t(), gt = g.t();
  ASSERT_TRUE(sgdStep(ctx, ot, gt, nullptr, 1, 0.5, 0, 0, 0, false).ok());
  EXPECT_FALSE(targets[0].written);
  EXPECT_EQ(other.v, (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(target.v, (std::vector<float>{0.f, 0.f}));
}

TEST(Adam, Errors) {
  Context ctx;
  Buf<float> p({3}), g({3}), m({3}), v({2});
  Buf<double> md({3});
  Tensor pt = p.t(), gt = g.t(), mt = m.t(), vt = v.t(), mdt = md.t();
  Status s =
      adamStep(ctx, pt, gt, mt, mt, 0, 0.1f, 0.9f, 0.999f, 1e-8f, 0.f, false);
  EXPECT_NE(s.message.find("adamStep: step counts from 1, got 0"),
            std::string::npos)
      << s.message;
  s = adamStep(ctx, pt, gt, mt, vt, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.f, false);
  EXPECT_NE(s.message.find("adamStep: v: expected shape [3], got [2]"),
            std::string::npos)
      << s.message;
  s = adamStep(ctx, pt, gt, mdt, mt, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.f, false);
  EXPECT_NE(s.message.find("adamStep: m: expected dtype f32, got f64"),
            std::string::npos)
      << s.message;
}

} // namespace
