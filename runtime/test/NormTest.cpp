//===- NormTest.cpp - Tests of layer and batch normalisation ----*- C++ -*-===//
//
// Compares layerNorm / batchNorm with reference loops written here, checks
// the running-statistics update against hand-computed values, and checks the
// gradient kernels with central finite differences in F64.
//
//===----------------------------------------------------------------------===//

#include "KernelTestHelpers.h"
#include "pp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

struct LayerNormCase {
  Shape x;
  int64_t axis;
  Shape scale; // broadcast to x.shape[axis:]
  bool bias;
};

std::vector<LayerNormCase> layerNormCases() {
  return {{{3, 4, 5}, -1, {5}, true}, {{3, 4, 5}, 1, {4, 5}, true},
          {{3, 4, 5}, 1, {5}, false}, {{3, 4, 5}, 0, {3, 4, 5}, true},
          {{6, 7}, -2, {1, 7}, true}, {{2, 3, 2, 4}, 2, {2, 1}, true}};
}

/// Per-row mean, invStd and y by definition.
template <typename T>
void refLayerNorm(const LayerNormCase &lc, const Buf<T> &x, const Buf<T> &scale,
                  const Buf<T> &bias, double eps, std::vector<double> &y,
                  std::vector<double> &mean, std::vector<double> &inv) {
  int64_t axis = lc.axis < 0 ? lc.axis + int64_t(lc.x.size()) : lc.axis;
  Shape norm(lc.x.begin() + axis, lc.x.end());
  int64_t inner = numelOf(norm), outer = numelOf(x.shape) / inner;
  y.assign(x.v.size(), 0);
  mean.assign(outer, 0);
  inv.assign(outer, 0);
  auto paramAt = [&](const Buf<T> &p, int64_t j) {
    // Broadcast by index arithmetic from the right.
    int64_t off = 0, stride = 1;
    for (int64_t d = int64_t(norm.size()) - 1, pd = int64_t(p.shape.size()) - 1;
         d >= 0; --d, --pd) {
      int64_t idx = (j / stride) % norm[d];
      stride *= norm[d];
      if (pd < 0)
        continue;
      int64_t pStride = 1;
      for (int64_t q = pd + 1; q < int64_t(p.shape.size()); ++q)
        pStride *= p.shape[q];
      off += (p.shape[pd] == 1 ? 0 : idx) * pStride;
    }
    return double(p.v[off]);
  };
  for (int64_t r = 0; r < outer; ++r) {
    double s = 0, sq = 0;
    for (int64_t j = 0; j < inner; ++j)
      s += x.v[r * inner + j];
    double mu = s / inner;
    for (int64_t j = 0; j < inner; ++j)
      sq += (x.v[r * inner + j] - mu) * (x.v[r * inner + j] - mu);
    double is = 1 / std::sqrt(sq / inner + eps);
    mean[r] = mu;
    inv[r] = is;
    for (int64_t j = 0; j < inner; ++j)
      y[r * inner + j] = (x.v[r * inner + j] - mu) * is * paramAt(scale, j) +
                         (lc.bias ? paramAt(bias, j) : 0.0);
  }
}

Shape statShape(const LayerNormCase &lc) {
  Shape s = lc.x;
  int64_t axis = lc.axis < 0 ? lc.axis + int64_t(s.size()) : lc.axis;
  for (size_t d = axis; d < s.size(); ++d)
    s[d] = 1;
  return s;
}

template <typename T, typename S> void checkLayerNorm(int threads) {
  Context ctx;
  ctx.numThreads = threads;
  const float eps = 1e-3f;
  int index = 0;
  for (const LayerNormCase &lc : layerNormCases()) {
    SCOPED_TRACE(::testing::Message() << "case " << index++);
    Buf<T> x = randomBuf<T>(lc.x, -2, 3), scale = randomBuf<T>(lc.scale),
           bias = randomBuf<T>(lc.scale);
    std::vector<double> wantY, wantMean, wantInv;
    refLayerNorm(lc, x, scale, bias, double(eps), wantY, wantMean, wantInv);
    Buf<T> y(lc.x, T(9));
    Buf<S> mean(statShape(lc)), inv(statShape(lc));
    Tensor xt = x.t(), st = scale.t(), bt = bias.t(), yt = y.t(), mt = mean.t(),
           it = inv.t();
    Status s = layerNorm(ctx, xt, st, lc.bias ? &bt : nullptr, lc.axis, eps, yt,
                         mt, it);
    ASSERT_TRUE(s.ok()) << s.message;
    expectNear(y.v, wantY, tol<T>() * 10, "y");
    expectNear(mean.v, wantMean, tol<S>(), "mean");
    expectNear(inv.v, wantInv, tol<S>(), "invStdDev");
  }
}

TEST(LayerNorm, MatchesReferenceF32) { checkLayerNorm<float, float>(1); }
TEST(LayerNorm, MatchesReferenceF64) { checkLayerNorm<double, double>(2); }
TEST(LayerNorm, F64WithF32Statistics) { checkLayerNorm<double, float>(1); }

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  Context ctx;
  const float eps = 1e-2f;
  int index = 0;
  for (const LayerNormCase &lc : layerNormCases()) {
    SCOPED_TRACE(::testing::Message() << "case " << index++);
    Buf<double> x = randomBuf<double>(lc.x),
                scale = randomBuf<double>(lc.scale),
                bias = randomBuf<double>(lc.scale), r = randomBuf<double>(lc.x),
                y(lc.x);
    Buf<double> mean(statShape(lc)), inv(statShape(lc));
    auto loss = [&]() {
      Tensor xt = x.t(), st = scale.t(), bt = bias.t(), yt = y.t(),
             mt = mean.t(), it = inv.t();
      EXPECT_TRUE(layerNorm(ctx, xt, st, lc.bias ? &bt : nullptr, lc.axis, eps,
                            yt, mt, it)
                      .ok());
      return dot(y.v, r.v);
    };
    loss(); // fills mean / invStdDev at the unperturbed point
    Buf<double> dx(lc.x), dscale(lc.scale), dbias(lc.scale);
    for (int threads : {1, 3}) {
      ctx.numThreads = threads;
      Tensor rt = r.t(), xt = x.t(), st = scale.t(), mt = mean.t(),
             it = inv.t(), dxt = dx.t(), dst = dscale.t(), dbt = dbias.t();
      Status s = layerNormGrad(ctx, rt, xt, st, mt, it, lc.axis, dxt, dst,
                               lc.bias ? &dbt : nullptr);
      ASSERT_TRUE(s.ok()) << s.message;
    }
    ctx.numThreads = 1;
    expectNear(dx.v, numericGrad(x.v, loss), 1e-7, "dx");
    expectNear(dscale.v, numericGrad(scale.v, loss), 1e-7, "dscale");
    if (lc.bias)
      expectNear(dbias.v, numericGrad(bias.v, loss), 1e-7, "dbias");
  }
}

TEST(LayerNorm, Errors) {
  Context ctx;
  Buf<float> x({2, 3, 4}), scale({4}), y({2, 3, 4}), mean({2, 3, 1}),
      inv({2, 3, 1});
  Tensor xt = x.t(), st = scale.t(), yt = y.t(), mt = mean.t(), it = inv.t();
  EXPECT_TRUE(layerNorm(ctx, xt, st, nullptr, -1, 1e-5f, yt, mt, it).ok());
  Status s = layerNorm(ctx, xt, st, nullptr, 3, 1e-5f, yt, mt, it);
  EXPECT_NE(s.message.find("layerNorm: axis 3 out of range"), std::string::npos)
      << s.message;
  s = layerNorm(ctx, xt, st, nullptr, 1, 1e-5f, yt, mt, it);
  EXPECT_NE(s.message.find(
                "layerNorm: mean: expected shape [2, 1, 1], got [2, 3, 1]"),
            std::string::npos)
      << s.message;
  Buf<float> badScale({3});
  Tensor bst = badScale.t();
  s = layerNorm(ctx, xt, bst, nullptr, -1, 1e-5f, yt, mt, it);
  EXPECT_NE(s.message.find("does not broadcast to the normalised dims [4]"),
            std::string::npos)
      << s.message;
  Buf<double> yd({2, 3, 4});
  Tensor ydt = yd.t();
  s = layerNorm(ctx, xt, st, nullptr, -1, 1e-5f, ydt, mt, it);
  EXPECT_NE(s.message.find("layerNorm: y: expected dtype f32, got f64"),
            std::string::npos)
      << s.message;
  Buf<float> dscale({5});
  Tensor dst = dscale.t();
  s = layerNormGrad(ctx, yt, xt, st, mt, it, -1, yt, dst, nullptr);
  EXPECT_NE(
      s.message.find("layerNormGrad: dscale: expected shape [4], got [5]"),
      std::string::npos)
      << s.message;
}

//===----------------------------------------------------------------------===//
// BatchNorm
//===----------------------------------------------------------------------===//

TEST(BatchNorm, HandComputedTrainingStep) {
  // One channel holding {1, 3}: mean 2, biased var 1, unbiased var 2.
  Context ctx;
  Buf<double> x({2, 1}), scale({1}, 2.0), bias({1}, 0.5), inMean({1}, 0.0),
      inVar({1}, 1.0);
  x.v = {1, 3};
  Buf<double> y({2, 1}), runMean({1}), runVar({1}), saved({1}), savedInv({1});
  Tensor xt = x.t(), st = scale.t(), bt = bias.t(), imt = inMean.t(),
         ivt = inVar.t(), yt = y.t(), rmt = runMean.t(), rvt = runVar.t(),
         smt = saved.t(), sit = savedInv.t();
  const float eps = 0.25f, momentum = 0.9f;
  Status s = batchNorm(ctx, xt, st, bt, imt, ivt, eps, momentum, true, yt, rmt,
                       rvt, &smt, &sit, /*unbiasedRunningVar=*/true);
  ASSERT_TRUE(s.ok()) << s.message;
  double inv = 1 / std::sqrt(1.25);
  EXPECT_NEAR(y[0], -inv * 2 + 0.5, 1e-12);
  EXPECT_NEAR(y[1], inv * 2 + 0.5, 1e-12);
  EXPECT_NEAR(saved[0], 2.0, 1e-12);
  EXPECT_NEAR(savedInv[0], inv, 1e-12);
  // running = momentum * running + (1 - momentum) * batch (unbiased var).
  EXPECT_NEAR(runMean[0], 0.9f * 0.0 + (1 - 0.9f) * 2.0, 1e-7);
  EXPECT_NEAR(runVar[0], 0.9f * 1.0 + (1 - 0.9f) * 2.0, 1e-7);
  // ONNX's reference (the default) uses the biased variance, 1.
  s = batchNorm(ctx, xt, st, bt, imt, ivt, eps, momentum, true, yt, rmt, rvt,
                &smt, &sit);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_NEAR(runVar[0], 0.9f * 1.0 + (1 - 0.9f) * 1.0, 1e-7);
}

template <typename T>
void checkBatchNormTraining(const Shape &shape, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  int64_t n = shape[0], c = shape[1], plane = numelOf(shape) / (n * c),
          m = n * plane;
  Buf<T> x = randomBuf<T>(shape, -1, 4), scale = randomBuf<T>({c}),
         bias = randomBuf<T>({c});
  Buf<T> inMean = randomBuf<T>({c}), inVar = randomBuf<T>({c}, 0.5, 2);
  const float eps = 1e-3f, momentum = 0.8f;
  std::vector<double> mean(c, 0), var(c, 0), wantY(x.v.size()), wantRunMean(c),
      wantRunVar(c), wantInv(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < plane; ++p)
        mean[ch] += x[(i * c + ch) * plane + p];
    mean[ch] /= m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < plane; ++p) {
        double d = x[(i * c + ch) * plane + p] - mean[ch];
        var[ch] += d * d;
      }
    var[ch] /= m;
    wantInv[ch] = 1 / std::sqrt(var[ch] + double(eps));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < plane; ++p) {
        int64_t at = (i * c + ch) * plane + p;
        wantY[at] = (x[at] - mean[ch]) * wantInv[ch] * double(scale[ch]) +
                    double(bias[ch]);
      }
    wantRunMean[ch] =
        double(momentum) * inMean[ch] + (1 - double(momentum)) * mean[ch];
    wantRunVar[ch] = double(momentum) * inVar[ch] +
                     (1 - double(momentum)) * var[ch] * m / (m - 1.0);
  }
  // The running statistics are updated in place (outputs alias inputs).
  Buf<T> y(shape), saved({c}), savedInv({c});
  Tensor xt = x.t(), st = scale.t(), bt = bias.t(), imt = inMean.t(),
         ivt = inVar.t(), yt = y.t(), smt = saved.t(), sit = savedInv.t();
  Status s = batchNorm(ctx, xt, st, bt, imt, ivt, eps, momentum, true, yt, imt,
                       ivt, &smt, &sit, /*unbiasedRunningVar=*/true);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(y.v, wantY, tol<T>() * 10, "y");
  expectNear(saved.v, mean, tol<T>(), "savedMean");
  expectNear(savedInv.v, wantInv, tol<T>(), "savedInvStd");
  expectNear(inMean.v, wantRunMean, tol<T>(), "runningMean");
  expectNear(inVar.v, wantRunVar, tol<T>(), "runningVar");
}

TEST(BatchNorm, TrainingMatchesReferenceF32) {
  checkBatchNormTraining<float>({4, 3, 2, 5}, 1);
  checkBatchNormTraining<float>({5, 3}, 2);
  checkBatchNormTraining<float>({2, 4, 3, 2, 2}, 2);
}

TEST(BatchNorm, TrainingMatchesReferenceF64) {
  checkBatchNormTraining<double>({4, 3, 2, 5}, 2);
  checkBatchNormTraining<double>({5, 3}, 1);
  checkBatchNormTraining<double>({3, 2, 7}, 3);
}

/// A fused Relu (--pp-fuse-elementwise) gives the bits of batchNorm then
/// the Relu kernel, statistics included, in training and inference, on F32
/// and F64 and on 1 and 2 threads; another kind goes through unary after
/// the normalisation.
template <typename T> void checkBatchNormActivation(UnaryKind kind) {
  for (bool training : {true, false})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "training " << training << " threads " << threads);
      Context ctx;
      ctx.numThreads = threads;
      Shape shape{3, 5, 7, 6};
      Buf<T> x = randomBuf<T>(shape), scale = randomBuf<T>({5}),
             bias = randomBuf<T>({5});
      Buf<T> inMean = randomBuf<T>({5}), inVar = randomBuf<T>({5}, 0.5, 2);
      auto run = [&](UnaryKind activation, Buf<T> &y, Buf<T> &runMean,
                     Buf<T> &runVar, Buf<T> &saved, Buf<T> &savedInv) {
        Tensor xt = x.t(), st = scale.t(), bt = bias.t(), imt = inMean.t(),
               ivt = inVar.t(), yt = y.t(), rmt = runMean.t(), rvt = runVar.t(),
               smt = saved.t(), sit = savedInv.t();
        Status s = batchNorm(ctx, xt, st, bt, imt, ivt, 1e-5f, 0.9f, training,
                             yt, rmt, rvt, &smt, &sit, true, activation);
        ASSERT_TRUE(s.ok()) << s.message;
      };
      Buf<T> y(shape), rm({5}), rv({5}), sm({5}), si({5});
      Buf<T> fy(shape), frm({5}), frv({5}), fsm({5}), fsi({5});
      run(UnaryKind::Identity, y, rm, rv, sm, si);
      Tensor yt = y.t();
      Status s = unary(ctx, kind, yt, yt);
      ASSERT_TRUE(s.ok()) << s.message;
      run(kind, fy, frm, frv, fsm, fsi);
      int64_t zeros = 0;
      for (size_t i = 0; i < y.v.size(); ++i) {
        ASSERT_EQ(std::memcmp(&fy.v[i], &y.v[i], sizeof(T)), 0)
            << "element " << i;
        zeros += y.v[i] == T(0);
      }
      if (kind == UnaryKind::Relu) {
        EXPECT_GT(zeros, 0);
      }
      for (auto [got, want] : {std::pair{&frm, &rm}, std::pair{&frv, &rv},
                               std::pair{&fsm, &sm}, std::pair{&fsi, &si}})
        EXPECT_EQ(std::memcmp(got->v.data(), want->v.data(),
                              want->v.size() * sizeof(T)),
                  0);
    }
}

TEST(BatchNorm, FusedReluIsTheReluOfTheOutput) {
  checkBatchNormActivation<float>(UnaryKind::Relu);
  checkBatchNormActivation<double>(UnaryKind::Relu);
  checkBatchNormActivation<float>(UnaryKind::Tanh);
}

TEST(BatchNorm, InferenceUsesInputStatistics) {
  Context ctx;
  Buf<float> x = randomBuf<float>({3, 2, 4}), scale = randomBuf<float>({2}),
             bias = randomBuf<float>({2}), inMean = randomBuf<float>({2}),
             inVar = randomBuf<float>({2}, 0.5, 2);
  // Parameters may have another float dtype than x.
  Buf<double> scaleD({2});
  for (int i = 0; i < 2; ++i)
    scaleD[i] = scale[i];
  Buf<float> y({3, 2, 4}), runMean({2}), runVar({2});
  Tensor xt = x.t(), st = scaleD.t(), bt = bias.t(), imt = inMean.t(),
         ivt = inVar.t(), yt = y.t(), rmt = runMean.t(), rvt = runVar.t();
  const float eps = 1e-5f;
  Status s = batchNorm(ctx, xt, st, bt, imt, ivt, eps, 0.9f, false, yt, rmt,
                       rvt, nullptr, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  std::vector<double> want(y.v.size());
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t ch = (i / 4) % 2;
    want[i] =
        (x[i] - inMean[ch]) / std::sqrt(double(inVar[ch]) + eps) * scale[ch] +
        bias[ch];
  }
  expectNear(y.v, want, 1e-5, "y");
  EXPECT_EQ(runMean.v, inMean.v);
  EXPECT_EQ(runVar.v, inVar.v);
}

TEST(BatchNorm, GradientsMatchFiniteDifferences) {
  for (Shape shape : {Shape{4, 3, 2, 3}, Shape{6, 2}, Shape{2, 2, 3, 2, 2}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    Context ctx;
    int64_t c = shape[1];
    Buf<double> x = randomBuf<double>(shape), scale = randomBuf<double>({c}),
                bias = randomBuf<double>({c}), r = randomBuf<double>(shape),
                y(shape);
    Buf<double> inMean({c}), inVar({c}, 1.0), runMean({c}), runVar({c}),
        saved({c}), savedInv({c});
    auto loss = [&]() {
      Tensor xt = x.t(), st = scale.t(), bt = bias.t(), imt = inMean.t(),
             ivt = inVar.t(), yt = y.t(), rmt = runMean.t(), rvt = runVar.t(),
             smt = saved.t(), sit = savedInv.t();
      EXPECT_TRUE(batchNorm(ctx, xt, st, bt, imt, ivt, 1e-3f, 0.9f, true, yt,
                            rmt, rvt, &smt, &sit, /*unbiasedRunningVar=*/true)
                      .ok());
      return dot(y.v, r.v);
    };
    loss();
    Buf<double> dx(shape), dscale({c}), dbias({c});
    for (int threads : {1, 2}) {
      ctx.numThreads = threads;
      Tensor rt = r.t(), xt = x.t(), st = scale.t(), smt = saved.t(),
             sit = savedInv.t(), dxt = dx.t(), dst = dscale.t(),
             dbt = dbias.t();
      Status s = batchNormGrad(ctx, rt, xt, st, smt, sit, dxt, dst, dbt);
      ASSERT_TRUE(s.ok()) << s.message;
    }
    ctx.numThreads = 1;
    expectNear(dx.v, numericGrad(x.v, loss), 1e-7, "dx");
    expectNear(dscale.v, numericGrad(scale.v, loss), 1e-7, "dscale");
    expectNear(dbias.v, numericGrad(bias.v, loss), 1e-7, "dbias");
  }
}

TEST(BatchNorm, F32GradientAgreesWithF64) {
  Context ctx;
  Shape shape = {3, 2, 5};
  Buf<double> xd = randomBuf<double>(shape), dyd = randomBuf<double>(shape);
  Buf<double> scaled({2}), meand({2}), invd({2});
  scaled.v = {0.5, -1.5};
  meand.v = {0.1, -0.2};
  invd.v = {1.3, 0.7};
  Buf<float> xf(shape), dyf(shape), scalef({2}), meanf({2}), invf({2});
  for (size_t i = 0; i < xd.v.size(); ++i) {
    xf[i] = float(xd[i]);
    dyf[i] = float(dyd[i]);
  }
  for (int i = 0; i < 2; ++i) {
    scalef[i] = float(scaled[i]);
    meanf[i] = float(meand[i]);
    invf[i] = float(invd[i]);
  }
  Buf<double> dxd(shape), dsd({2}), dbd({2});
  Buf<float> dxf(shape), dsf({2}), dbf({2});
  Tensor a[] = {dyd.t(),  xd.t(),  scaled.t(), meand.t(),
                invd.t(), dxd.t(), dsd.t(),    dbd.t()};
  Tensor b[] = {dyf.t(),  xf.t(),  scalef.t(), meanf.t(),
                invf.t(), dxf.t(), dsf.t(),    dbf.t()};
  ASSERT_TRUE(
      batchNormGrad(ctx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]).ok());
  ASSERT_TRUE(
      batchNormGrad(ctx, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]).ok());
  expectNear(dxf.v, dxd.v, 1e-5, "dx");
  expectNear(dsf.v, dsd.v, 1e-5, "dscale");
  expectNear(dbf.v, dbd.v, 1e-5, "dbias");
}

/// The F32 kernels against the F64 ones on the same (F32-representable)
/// values, at sizes that reach the kernels' 8-lane loops and their tails,
/// with a mean far from zero against the spread (50 +- 1): the statistics
/// accumulate in double lanes, the elementwise passes run in F32.
Buf<double> widened(const Buf<float> &b) {
  Buf<double> d(b.shape);
  for (size_t i = 0; i < b.v.size(); ++i)
    d.v[i] = b.v[i];
  return d;
}

TEST(BatchNorm, F32MatchesF64OnLargeOffsetPlanes) {
  for (Shape shape : {Shape{4, 3, 37, 41}, Shape{2, 4, 8, 8}, Shape{3, 2, 3}})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "shape " << shape[0] << "x" << shape[1] << "x"
                   << numelOf(shape) / (shape[0] * shape[1]) << " threads "
                   << threads);
      Context ctx;
      ctx.numThreads = threads;
      int64_t c = shape[1];
      Buf<float> xf = randomBuf<float>(shape, 49, 51),
                 dyf = randomBuf<float>(shape), scalef = randomBuf<float>({c}),
                 biasf = randomBuf<float>({c});
      Buf<double> xd = widened(xf), dyd = widened(dyf),
                  scaled = widened(scalef), biasd = widened(biasf);
      auto forward = [&](auto &x, auto &scale, auto &bias, auto &y, auto &saved,
                         auto &savedInv) {
        using T = typename std::decay_t<decltype(x.v)>::value_type;
        Buf<T> rm({c}), rv({c}, T(1));
        Tensor xt = x.t(), st = scale.t(), bt = bias.t(), rmt = rm.t(),
               rvt = rv.t(), yt = y.t(), smt = saved.t(), sit = savedInv.t();
        Status s = batchNorm(ctx, xt, st, bt, rmt, rvt, 1e-5f, 0.9f, true, yt,
                             rmt, rvt, &smt, &sit);
        ASSERT_TRUE(s.ok()) << s.message;
      };
      auto backward = [&](auto &dy, auto &x, auto &scale, auto &saved,
                          auto &savedInv, auto &dx, auto &ds, auto &db) {
        Tensor dyt = dy.t(), xt = x.t(), st = scale.t(), smt = saved.t(),
               sit = savedInv.t(), dxt = dx.t(), dst = ds.t(), dbt = db.t();
        Status s = batchNormGrad(ctx, dyt, xt, st, smt, sit, dxt, dst, dbt);
        ASSERT_TRUE(s.ok()) << s.message;
      };
      Buf<float> yf(shape), savedf({c}), invf({c}), dxf(shape), dsf({c}),
          dbf({c});
      Buf<double> yd(shape), savedd({c}), invd({c}), dxd(shape), dsd({c}),
          dbd({c});
      forward(xf, scalef, biasf, yf, savedf, invf);
      forward(xd, scaled, biasd, yd, savedd, invd);
      expectNear(savedf.v, savedd.v, 1e-7, "savedMean");
      expectNear(invf.v, invd.v, 1e-6, "savedInvStd");
      expectNear(yf.v, yd.v, 2e-5, "y");
      // Both gradients from the F32 statistics: their rounding (the mean's
      // ulp at 50 times the sum of dy) is the interface's, not the kernel's.
      Buf<double> savedFromF32 = widened(savedf), invFromF32 = widened(invf);
      backward(dyf, xf, scalef, savedf, invf, dxf, dsf, dbf);
      backward(dyd, xd, scaled, savedFromF32, invFromF32, dxd, dsd, dbd);
      expectNear(dxf.v, dxd.v, 2e-5, "dx");
      expectNear(dsf.v, dsd.v, 1e-5, "dscale");
      expectNear(dbf.v, dbd.v, 1e-6, "dbias");
    }
}

TEST(LayerNorm, F32MatchesF64OnLongOffsetRows) {
  for (Shape shape : {Shape{40, 67}, Shape{5, 768}, Shape{33, 5}})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "shape " << shape[0] << "x"
                                        << shape[1] << " threads " << threads);
      Context ctx;
      ctx.numThreads = threads;
      int64_t rows = shape[0], cols = shape[1];
      Buf<float> xf = randomBuf<float>(shape, 2, 4),
                 dyf = randomBuf<float>(shape),
                 scalef = randomBuf<float>({cols}),
                 biasf = randomBuf<float>({cols});
      Buf<double> xd = widened(xf), dyd = widened(dyf),
                  scaled = widened(scalef), biasd = widened(biasf);
      auto run = [&](auto &x, auto &dy, auto &scale, auto &bias, auto &y,
                     auto &mean, auto &inv, auto &dx, auto &ds, auto &db) {
        Tensor xt = x.t(), st = scale.t(), bt = bias.t(), yt = y.t(),
               mt = mean.t(), it = inv.t(), dyt = dy.t(), dxt = dx.t(),
               dst = ds.t(), dbt = db.t();
        Status s = layerNorm(ctx, xt, st, &bt, -1, 1e-5f, yt, mt, it);
        ASSERT_TRUE(s.ok()) << s.message;
        s = layerNormGrad(ctx, dyt, xt, st, mt, it, -1, dxt, dst, &dbt);
        ASSERT_TRUE(s.ok()) << s.message;
      };
      Buf<float> yf(shape), meanf({rows, 1}), invf({rows, 1}), dxf(shape),
          dsf({cols}), dbf({cols});
      Buf<double> yd(shape), meand({rows, 1}), invd({rows, 1}), dxd(shape),
          dsd({cols}), dbd({cols});
      run(xf, dyf, scalef, biasf, yf, meanf, invf, dxf, dsf, dbf);
      run(xd, dyd, scaled, biasd, yd, meand, invd, dxd, dsd, dbd);
      expectNear(meanf.v, meand.v, 1e-7, "mean");
      expectNear(invf.v, invd.v, 1e-6, "invStdDev");
      expectNear(yf.v, yd.v, 1e-5, "y");
      expectNear(dxf.v, dxd.v, 1e-5, "dx");
      expectNear(dsf.v, dsd.v, 1e-5, "dscale");
      expectNear(dbf.v, dbd.v, 1e-6, "dbias");
    }
}

TEST(BatchNorm, Errors) {
  Context ctx;
  Buf<float> x({1, 2}), p({2}, 1.f), y({1, 2}), rm({2}), rv({2});
  Tensor xt = x.t(), pt = p.t(), yt = y.t(), rmt = rm.t(), rvt = rv.t();
  Status s = batchNorm(ctx, xt, pt, pt, pt, pt, 1e-5f, 0.9f, true, yt, rmt, rvt,
                       nullptr, nullptr, /*unbiasedRunningVar=*/true);
  EXPECT_NE(s.message.find("more than one value per channel"),
            std::string::npos)
      << s.message;
  EXPECT_TRUE(batchNorm(ctx, xt, pt, pt, pt, pt, 1e-5f, 0.9f, false, yt, rmt,
                        rvt, nullptr, nullptr)
                  .ok());
  Buf<float> p3({3});
  Tensor p3t = p3.t();
  s = batchNorm(ctx, xt, p3t, pt, pt, pt, 1e-5f, 0.9f, false, yt, rmt, rvt,
                nullptr, nullptr);
  EXPECT_NE(s.message.find("batchNorm: scale: expected shape [2], got [3]"),
            std::string::npos)
      << s.message;
  Buf<int64_t> pi({2});
  Tensor pit{pi.v.data(), DType::I64, {2}};
  s = batchNorm(ctx, xt, pt, pit, pt, pt, 1e-5f, 0.9f, false, yt, rmt, rvt,
                nullptr, nullptr);
  EXPECT_NE(
      s.message.find("batchNorm: bias: expected dtype f32 or f64, got i64"),
      std::string::npos)
      << s.message;
  Tensor x1{x.v.data(), DType::F32, {2}};
  s = batchNorm(ctx, x1, pt, pt, pt, pt, 1e-5f, 0.9f, false, yt, rmt, rvt,
                nullptr, nullptr);
  EXPECT_NE(s.message.find("rank >= 2"), std::string::npos) << s.message;
  Buf<float> dx({1, 3});
  Tensor dxt = dx.t();
  s = batchNormGrad(ctx, yt, xt, pt, pt, pt, dxt, rmt, rvt);
  EXPECT_NE(
      s.message.find("batchNormGrad: dx: expected shape [1, 2], got [1, 3]"),
      std::string::npos)
      << s.message;
}

} // namespace
