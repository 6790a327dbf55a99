//===- LinalgTest.cpp - Tests of matmul, gemm, conv and pooling -*- C++ -*-===//
//
// Compares the CPU kernels with naive reference loops written here (direct
// convolution and pooling over every tap) on small random shapes, checks the
// gradient kernels with central finite differences in F64, and times one
// representative convolution.
//
//===----------------------------------------------------------------------===//

#include "KernelTestHelpers.h"
#include "common/Checks.h"
#include "cpu/DeadTaps.h"
#include "pp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <vector>

using namespace pp::rt;
using namespace pp::rt::test;
using pp::rt::common::ConvDims;
using pp::rt::common::resolveConvDims;

namespace {

//===----------------------------------------------------------------------===//
// matmul / gemm
//===----------------------------------------------------------------------===//

/// numpy matmul by definition: promote rank-1 operands, broadcast batch dims
/// index by index, contract.
template <typename T>
std::vector<double> refMatmul(const Buf<T> &a, const Buf<T> &b, Shape &yShape) {
  Shape as = a.shape, bs = b.shape;
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  size_t rank = std::max(as.size(), bs.size());
  while (as.size() < rank)
    as.insert(as.begin(), 1);
  while (bs.size() < rank)
    bs.insert(bs.begin(), 1);
  int64_t m = as[rank - 2], k = as[rank - 1], n = bs[rank - 1];
  Shape batch(rank - 2);
  for (size_t i = 0; i + 2 < rank; ++i)
    batch[i] = std::max(as[i], bs[i]);
  std::vector<double> y;
  forEachIndex(batch, [&](const Shape &bi) {
    Shape ai(bi), bj(bi);
    for (size_t i = 0; i < bi.size(); ++i) {
      ai[i] = as[i] == 1 ? 0 : bi[i];
      bj[i] = bs[i] == 1 ? 0 : bi[i];
    }
    Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
    int64_t aOff = flatten(aBatch, ai) * m * k,
            bOff = flatten(bBatch, bj) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += double(a.v[aOff + i * k + p]) * double(b.v[bOff + p * n + j]);
        y.push_back(s);
      }
  });
  yShape = batch;
  if (a.shape.size() > 1)
    yShape.push_back(m);
  if (b.shape.size() > 1)
    yShape.push_back(n);
  return y;
}

/// x with its last two dims swapped: what matmul reads back through
/// transA / transB.
template <typename T> Buf<T> swapLastTwo(const Buf<T> &x) {
  Shape shape = x.shape;
  size_t r = shape.size();
  std::swap(shape[r - 2], shape[r - 1]);
  Buf<T> t(shape);
  int64_t rows = x.shape[r - 2], cols = x.shape[r - 1];
  int64_t size = rows * cols;
  for (int64_t at = 0; size > 0 && at < int64_t(x.v.size()); at += size)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        t.v[at + j * rows + i] = x.v[at + i * cols + j];
  return t;
}

template <typename T> void checkMatmul(const Shape &as, const Shape &bs) {
  SCOPED_TRACE(::testing::Message() << "a " << ::testing::PrintToString(as)
                                    << " b " << ::testing::PrintToString(bs));
  Context ctx;
  Buf<T> a = randomBuf<T>(as), b = randomBuf<T>(bs);
  Shape yShape;
  std::vector<double> want = refMatmul(a, b, yShape);
  // Each operand of rank >= 2 also stored transposed and read through its
  // flag: the same product.
  for (bool transA : {false, true}) {
    for (bool transB : {false, true}) {
      if ((transA && as.size() < 2) || (transB && bs.size() < 2))
        continue;
      SCOPED_TRACE(::testing::Message()
                   << "transA " << transA << " transB " << transB);
      Buf<T> aStored = transA ? swapLastTwo(a) : a;
      Buf<T> bStored = transB ? swapLastTwo(b) : b;
      for (int threads : {1, 3}) {
        ctx.numThreads = threads;
        Buf<T> y(yShape, T(7));
        Tensor at = aStored.t(), bt = bStored.t(), yt = y.t();
        Status s = matmul(ctx, at, bt, yt, transA, transB);
        ASSERT_TRUE(s.ok()) << s.message;
        expectNear(y.v, want, tol<T>(), "matmul");
      }
    }
  }
}

template <typename T> void matmulShapes() {
  checkMatmul<T>({3, 4}, {4, 5});
  checkMatmul<T>({2, 3, 4}, {4, 5});
  checkMatmul<T>({4}, {2, 4, 5});
  checkMatmul<T>({2, 3, 4}, {4});
  checkMatmul<T>({4}, {4});
  checkMatmul<T>({2, 1, 3, 4}, {3, 4, 2});
  checkMatmul<T>({1, 3, 4}, {2, 4, 5});
  checkMatmul<T>({3, 4}, {2, 2, 4, 5});
  checkMatmul<T>({2, 3, 4}, {2, 4, 5});
  checkMatmul<T>({3, 0}, {0, 2}); // empty contraction gives zeros
  checkMatmul<T>({0, 3}, {3, 2});
  // Attention's shapes: q k^T and its gradients, batch dims of both.
  checkMatmul<T>({2, 3, 7, 5}, {2, 3, 5, 7});
  checkMatmul<T>({2, 3, 7, 7}, {1, 3, 7, 5});
}

TEST(Matmul, ShapesF32) { matmulShapes<float>(); }
TEST(Matmul, ShapesF64) { matmulShapes<double>(); }

TEST(Matmul, Errors) {
  Context ctx;
  Buf<float> a({2, 3}), b({4, 5}), y({2, 5});
  Tensor at = a.t(), bt = b.t(), yt = y.t();
  Status s = matmul(ctx, at, bt, yt);
  EXPECT_NE(s.message.find("contraction"), std::string::npos) << s.message;
  Buf<float> b2({3, 5}), yBad({5, 2});
  Tensor b2t = b2.t(), ybt = yBad.t();
  s = matmul(ctx, at, b2t, ybt);
  EXPECT_NE(s.message.find("matmul: y: expected shape [2, 5]"),
            std::string::npos)
      << s.message;
  Buf<double> bd({3, 5});
  Tensor bdt = bd.t();
  EXPECT_FALSE(matmul(ctx, at, bdt, yt).ok());
  Buf<float> a3({2, 2, 3}), b3({3, 3, 5}), y3({3, 2, 5});
  Tensor a3t = a3.t(), b3t = b3.t(), y3t = y3.t();
  s = matmul(ctx, a3t, b3t, y3t);
  EXPECT_NE(s.message.find("broadcast"), std::string::npos) << s.message;
  Tensor scalar{a.v.data(), DType::F32, {}};
  EXPECT_FALSE(matmul(ctx, scalar, bt, yt).ok());
  Buf<float> v({3}), yv({5});
  Tensor vt = v.t(), yvt = yv.t();
  s = matmul(ctx, vt, b2t, yvt, /*transA=*/true, false);
  EXPECT_NE(s.message.find("a transposed operand needs rank >= 2"),
            std::string::npos)
      << s.message;
  Buf<int64_t> ai({2, 3}), bi({3, 5}), yi({2, 5});
  Tensor ait{ai.v.data(), DType::I64, ai.shape},
      bit{bi.v.data(), DType::I64, bi.shape},
      yit{yi.v.data(), DType::I64, yi.shape};
  s = matmul(ctx, ait, bit, yit);
  EXPECT_NE(s.message.find("unsupported dtype"), std::string::npos)
      << s.message;
}

template <typename T> void gemmCases() {
  Context ctx;
  const int64_t m = 3, n = 4, k = 5;
  std::vector<Shape> cShapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int ci = -1; ci < int(cShapes.size()); ++ci) {
        SCOPED_TRACE(::testing::Message()
                     << "transA " << ta << " transB " << tb << " c " << ci);
        Buf<T> a = randomBuf<T>(ta ? Shape{k, m} : Shape{m, k});
        Buf<T> b = randomBuf<T>(tb ? Shape{n, k} : Shape{k, n});
        Buf<T> c = randomBuf<T>(ci < 0 ? Shape{1} : cShapes[ci]);
        float alpha = 0.75f, beta = ci < 0 ? 0.f : -1.5f;
        std::vector<double> want(m * n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < k; ++p)
              s += double(ta ? a[p * m + i] : a[i * k + p]) *
                   double(tb ? b[j * k + p] : b[p * n + j]);
            double cv = 0;
            if (ci >= 0) {
              Shape cs = cShapes[ci];
              int64_t ri = cs.size() == 2 && cs[0] == m ? i : 0;
              int64_t rj = !cs.empty() && cs.back() == n ? j : 0;
              cv = double(c[ri * (cs.empty() || cs.back() == 1 ? 1 : n) + rj]);
            }
            want[i * n + j] = double(alpha) * s + double(beta) * cv;
          }
        Buf<T> y({m, n}, std::numeric_limits<T>::quiet_NaN());
        Tensor at = a.t(), bt = b.t(), ct = c.t(), yt = y.t();
        Status s =
            gemm(ctx, at, bt, ci < 0 ? nullptr : &ct, alpha, beta, ta, tb, yt);
        ASSERT_TRUE(s.ok()) << s.message;
        expectNear(y.v, want, tol<T>(), "gemm");
      }
}

TEST(Gemm, TransposesAndBroadcastF32) { gemmCases<float>(); }
TEST(Gemm, TransposesAndBroadcastF64) { gemmCases<double>(); }

TEST(Gemm, Errors) {
  Context ctx;
  Buf<float> a({3, 5}), b({5, 4}), y({3, 4}), cBad({2, 4}), yBad({4, 3});
  Tensor at = a.t(), bt = b.t(), yt = y.t(), ct = cBad.t(), ybt = yBad.t();
  Status s = gemm(ctx, at, bt, &ct, 1.f, 1.f, false, false, yt);
  EXPECT_NE(s.message.find("gemm: c [2, 4] does not broadcast"),
            std::string::npos)
      << s.message;
  s = gemm(ctx, at, bt, nullptr, 1.f, 0.f, true, false, yt);
  EXPECT_NE(s.message.find("contraction"), std::string::npos) << s.message;
  s = gemm(ctx, at, bt, nullptr, 1.f, 0.f, false, false, ybt);
  EXPECT_NE(s.message.find("gemm: y: expected shape [3, 4], got [4, 3]"),
            std::string::npos)
      << s.message;
  Buf<float> a3({1, 3, 5});
  Tensor a3t = a3.t();
  EXPECT_FALSE(gemm(ctx, a3t, bt, nullptr, 1.f, 0.f, false, false, yt).ok());
}

/// The adjoints a backward pass builds from gemm (da = dy * b^T, db = a^T *
/// dy) agree with finite differences of matmul.
TEST(Matmul, AdjointsMatchFiniteDifferences) {
  Context ctx;
  Buf<double> a = randomBuf<double>({2, 3, 4}), b = randomBuf<double>({4, 5});
  Buf<double> r = randomBuf<double>({2, 3, 5}), y({2, 3, 5});
  auto loss = [&]() {
    Tensor at = a.t(), bt = b.t(), yt = y.t();
    EXPECT_TRUE(matmul(ctx, at, bt, yt).ok());
    return dot(y.v, r.v);
  };
  // Flattened views: a as [6, 4], dy as [6, 5].
  Tensor a2{a.v.data(), DType::F64, {6, 4}}, r2{r.v.data(), DType::F64, {6, 5}};
  Buf<double> da({6, 4}), db({4, 5});
  Tensor bt = b.t(), dat = da.t(), dbt = db.t();
  ASSERT_TRUE(gemm(ctx, r2, bt, nullptr, 1.f, 0.f, false, true, dat).ok());
  ASSERT_TRUE(gemm(ctx, a2, r2, nullptr, 1.f, 0.f, true, false, dbt).ok());
  expectNear(da.v, numericGrad(a.v, loss), 1e-7, "da");
  expectNear(db.v, numericGrad(b.v, loss), 1e-7, "db");
}

TEST(Gemm, AdjointsMatchFiniteDifferences) {
  // y = alpha * a^T * b^T + beta * c, a [K, M], b [N, K], c [N] broadcast.
  Context ctx;
  const int64_t m = 3, n = 4, k = 5;
  const float alpha = 0.5f, beta = 2.f;
  Buf<double> a = randomBuf<double>({k, m}), b = randomBuf<double>({n, k});
  Buf<double> c = randomBuf<double>({n}), r = randomBuf<double>({m, n}),
              y({m, n});
  auto loss = [&]() {
    Tensor at = a.t(), bt = b.t(), ct = c.t(), yt = y.t();
    EXPECT_TRUE(gemm(ctx, at, bt, &ct, alpha, beta, true, true, yt).ok());
    return dot(y.v, r.v);
  };
  // da = alpha * b^T dy^T, db = alpha * dy^T a^T, dc = beta * column sums.
  Buf<double> da({k, m}), db({n, k});
  Tensor at = a.t(), bt = b.t(), rt = r.t(), dat = da.t(), dbt = db.t();
  ASSERT_TRUE(gemm(ctx, bt, rt, nullptr, alpha, 0.f, true, true, dat).ok());
  ASSERT_TRUE(gemm(ctx, rt, at, nullptr, alpha, 0.f, true, true, dbt).ok());
  std::vector<double> dc(n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      dc[j] += beta * r[i * n + j];
  expectNear(da.v, numericGrad(a.v, loss), 1e-7, "da");
  expectNear(db.v, numericGrad(b.v, loss), 1e-7, "db");
  expectNear(dc, numericGrad(c.v, loss), 1e-7, "dc");
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// Visits (n, m, o..., c, k...) of a direct convolution with the flat
/// offsets of x, w and y, for taps inside x.
void forEachConvTap(const ConvCase &cc,
                    const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  Shape out = convOut(cc);
  size_t s = cc.in.size();
  int64_t cinG = cc.c / cc.group, coutG = cc.m / cc.group;
  Shape xShape = cat({cc.n, cc.c}, cc.in),
        wShape = cat({cc.m, cinG}, cc.kernel), yShape = cat({cc.n, cc.m}, out);
  forEachIndex(yShape, [&](const Shape &yi) {
    int64_t g = yi[1] / coutG;
    forEachIndex(cat({cinG}, cc.kernel), [&](const Shape &ki) {
      Shape xi = {yi[0], g * cinG + ki[0]};
      for (size_t i = 0; i < s; ++i) {
        int64_t pos = yi[2 + i] * cc.strides[i] - cc.pads[i] +
                      ki[1 + i] * cc.dilations[i];
        if (pos < 0 || pos >= cc.in[i])
          return;
        xi.push_back(pos);
      }
      fn(flatten(xShape, xi), flatten(wShape, cat({yi[1]}, ki)),
         flatten(yShape, yi));
    });
  });
}

std::vector<ConvCase> convCases() {
  return {
      // 1-D
      {2, 3, 4, 1, {9}, {3}, {1}, {1, 1}, {1}, true},
      {1, 4, 6, 2, {11}, {3}, {2}, {2, 0}, {2}, false},
      // 2-D: plain, padded, strided, dilated, grouped, depthwise, asymmetric
      {2, 3, 5, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      {3, 4, 6, 2, {8, 7}, {3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, true},
      {2, 6, 6, 6, {6, 6}, {3, 3}, {1, 2}, {1, 1, 1, 1}, {2, 1}, false},
      {2, 4, 8, 4, {5, 7}, {1, 3}, {1, 1}, {0, 1, 0, 1}, {1, 1}, true},
      {1, 2, 3, 1, {5, 5}, {5, 5}, {1, 1}, {0, 0, 0, 0}, {1, 1}, true},
      {2, 3, 2, 1, {6, 5}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
      {5, 3, 4, 1, {4, 4}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, true},
      // 3-D
      {2,
       2,
       3,
       1,
       {4, 5, 4},
       {2, 3, 2},
       {1, 2, 1},
       {1, 0, 1, 0, 1, 1},
       {1, 1, 2},
       true},
      {1,
       4,
       4,
       2,
       {5, 4, 6},
       {3, 1, 3},
       {2, 1, 1},
       {1, 0, 0, 1, 0, 2},
       {1, 1, 1},
       false},
  };
}

template <typename T> void checkConvForward(const ConvCase &cc, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  Shape out = convOut(cc);
  Buf<T> x = randomBuf<T>(cat({cc.n, cc.c}, cc.in));
  Buf<T> w = randomBuf<T>(cat({cc.m, cc.c / cc.group}, cc.kernel));
  Buf<T> b = randomBuf<T>({cc.m});
  Buf<T> y(cat({cc.n, cc.m}, out), std::numeric_limits<T>::quiet_NaN());
  std::vector<double> want(y.v.size(), 0.0);
  int64_t planeOut = numelOf(out);
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = cc.bias ? double(b[(i / planeOut) % cc.m]) : 0.0;
  forEachConvTap(cc, [&](int64_t xi, int64_t wi, int64_t yi) {
    want[yi] += double(x[xi]) * double(w[wi]);
  });
  Tensor xt = x.t(), wt = w.t(), bt = b.t(), yt = y.t();
  Status s = conv(ctx, xt, wt, cc.bias ? &bt : nullptr, paramsOf(cc), yt);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(y.v, want, tol<T>(), "conv");
}

template <typename T> void checkConvGrads(const ConvCase &cc, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  Shape out = convOut(cc);
  Buf<T> x = randomBuf<T>(cat({cc.n, cc.c}, cc.in));
  Buf<T> w = randomBuf<T>(cat({cc.m, cc.c / cc.group}, cc.kernel));
  Buf<T> dy = randomBuf<T>(cat({cc.n, cc.m}, out));
  std::vector<double> wantDx(x.v.size(), 0.0), wantDw(w.v.size(), 0.0);
  forEachConvTap(cc, [&](int64_t xi, int64_t wi, int64_t yi) {
    wantDx[xi] += double(dy[yi]) * double(w[wi]);
    wantDw[wi] += double(dy[yi]) * double(x[xi]);
  });
  Buf<T> dx(x.shape, T(5)), dw(w.shape, T(5));
  Tensor dyt = dy.t(), wt = w.t(), xt = x.t(), dxt = dx.t(), dwt = dw.t();
  Status s = convGradInput(ctx, dyt, wt, paramsOf(cc), dxt);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(dx.v, wantDx, tol<T>(), "convGradInput");
  s = convGradWeight(ctx, dyt, xt, paramsOf(cc), dwt);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(dw.v, wantDw, tol<T>() * 10, "convGradWeight");
}

template <typename T> void convAgainstDirect() {
  int index = 0;
  for (const ConvCase &cc : convCases()) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << index << " threads " << threads);
      checkConvForward<T>(cc, threads);
      checkConvGrads<T>(cc, threads);
    }
    ++index;
  }
}

TEST(Conv, MatchesDirectLoopsF32) { convAgainstDirect<float>(); }
TEST(Conv, MatchesDirectLoopsF64) { convAgainstDirect<double>(); }

/// The runtime's resolved dims of `cc`.
ConvDims convDimsOf(const ConvCase &cc) {
  Buf<float> x(cat({cc.n, cc.c}, cc.in)),
      w(cat({cc.m, cc.c / cc.group}, cc.kernel)),
      y(cat({cc.n, cc.m}, convOut(cc)));
  static const char *const names[3] = {"x", "w", "y"};
  ConvDims dims{}; // zeros if resolving fails: the callers' loops stay short
  Status s =
      resolveConvDims("conv", x.t(), w.t(), y.t(), paramsOf(cc), names, dims);
  EXPECT_TRUE(s.ok()) << s.message;
  return dims;
}

/// Kernels with taps that only read padding run cut to their live taps
/// (cpu/DeadTaps.h): the same sums as the direct loops over the whole
/// kernel, a zero gradient on the dead taps (dw starts at 5 here).
TEST(Conv, DeadTapsCutMatchDirectLoops) {
  std::vector<ConvCase> cases = {
      // resnet18 at 32x32: layer4's 3x3 over 1x1 planes (the centre tap
      // alone), its strided first conv over 2x2 (a 2x2 box), layer3's
      // 3x3 over 2x2 with every tap live
      {3, 8, 6, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      {2, 6, 4, 1, {2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
      {2, 4, 4, 1, {2, 2}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      // one dim cut, the other whole; asymmetric pads; grouped; depthwise
      {2, 4, 6, 2, {1, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      {2, 3, 2, 1, {2, 3}, {5, 3}, {1, 1}, {3, 1, 1, 1}, {1, 1}, false},
      {2, 5, 5, 5, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      // dilated, 1-D, 3-D
      {1, 3, 4, 1, {2, 2}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, false},
      {2, 3, 4, 1, {1}, {5}, {1}, {2, 2}, {1}, true},
      {1,
       2,
       3,
       1,
       {1, 2, 1},
       {3, 3, 3},
       {1, 1, 1},
       {1, 1, 1, 1, 1, 1},
       {1, 1, 1},
       true},
      // no tap reads the input: every output is the bias
      {1, 2, 3, 1, {1}, {1}, {3}, {1, 1}, {1}, true},
  };
  int cut = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const ConvCase &cc = cases[i];
    ConvDims dims = convDimsOf(cc);
    cut += cpu::cropDeadTaps(dims, static_cast<int>(cc.in.size()), paramsOf(cc))
               .has_value();
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << i << " threads " << threads);
      checkConvForward<float>(cc, threads);
      checkConvGrads<float>(cc, threads);
      checkConvForward<double>(cc, threads);
      checkConvGrads<double>(cc, threads);
    }
  }
  // All but the whole-kernel case and the one without a live tap.
  EXPECT_EQ(cut, static_cast<int>(cases.size()) - 2);
}

/// The live box and the cut problem over every small 1-D geometry: the cut
/// kernel holds exactly the taps some output reads inside the input, its
/// pads keep every output's position, and the kernels agree with the
/// direct loops wherever a cut happens.
TEST(Conv, DeadTapsSweep) {
  int cuts = 0;
  for (int64_t in = 1; in <= 4; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t d = 1; d <= 3; ++d)
          for (int64_t pb = 0; pb <= 3; ++pb)
            for (int64_t pe = 0; pe <= 3; ++pe) {
              ConvCase cc{1, 2, 2, 1, {in}, {k}, {s}, {pb, pe}, {d}, true};
              if (in + pb + pe - d * (k - 1) - 1 < 0)
                continue;
              int64_t out = convOut(cc)[0];
              SCOPED_TRACE(::testing::Message()
                           << "in " << in << " k " << k << " s " << s << " d "
                           << d << " pads " << pb << "," << pe);
              ConvDims dims = convDimsOf(cc);
              cpu::TapBox box = cpu::liveTaps(dims.geo);
              for (int64_t t = 0; t < k; ++t) {
                bool live = false;
                for (int64_t o = 0; o < out; ++o) {
                  int64_t pos = o * s - pb + t * d;
                  live = live || (pos >= 0 && pos < in);
                }
                bool inBox =
                    t >= box.first[2] && t < box.first[2] + box.count[2];
                // The box is the span of the live taps.
                if (live)
                  EXPECT_TRUE(inBox) << "tap " << t;
                if (box.count[2] > 0 &&
                    (t == box.first[2] || t == box.first[2] + box.count[2] - 1))
                  EXPECT_TRUE(live) << "box edge " << t;
              }
              auto crop = cpu::cropDeadTaps(dims, 1, paramsOf(cc));
              if (!crop)
                continue;
              ++cuts;
              ASSERT_EQ(crop->params.pads.size(), 2u);
              EXPECT_GE(crop->params.pads[0], 0);
              EXPECT_GE(crop->params.pads[1], 0);
              EXPECT_EQ(crop->params.kernel, Shape{box.count[2]});
              checkConvForward<double>(cc, 1);
              checkConvGrads<double>(cc, 1);
            }
  EXPECT_GT(cuts, 100);
}

/// Large planes (one image per GEMM), batches split into a partial last
/// chunk, and pointwise kernels read in place.
TEST(Conv, ChunkingPaths) {
  std::vector<ConvCase> cases = {
      {2, 2, 3, 1, {66, 70}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      {4, 2, 4, 2, {30, 50}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      {3, 4, 6, 2, {70, 64}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, true},
      {7, 3, 2, 1, {35, 40}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false},
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << i << " threads " << threads);
      checkConvForward<double>(cases[i], threads);
      checkConvGrads<double>(cases[i], threads);
      checkConvForward<float>(cases[i], threads);
    }
}

TEST(Conv, GradientsMatchFiniteDifferences) {
  std::vector<ConvCase> cases = {
      {2, 4, 4, 2, {5, 6}, {3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 2}, false},
      {1,
       2,
       3,
       1,
       {4, 3, 4},
       {2, 2, 3},
       {1, 1, 2},
       {0, 1, 1, 1, 0, 1},
       {2, 1, 1},
       false},
      {2, 3, 2, 1, {8}, {3}, {3}, {2, 1}, {2}, false},
  };
  Context ctx;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    SCOPED_TRACE(::testing::Message() << "case " << ci);
    const ConvCase &cc = cases[ci];
    Shape out = convOut(cc);
    Buf<double> x = randomBuf<double>(cat({cc.n, cc.c}, cc.in));
    Buf<double> w = randomBuf<double>(cat({cc.m, cc.c / cc.group}, cc.kernel));
    Buf<double> r = randomBuf<double>(cat({cc.n, cc.m}, out)), y(r.shape);
    auto loss = [&]() {
      Tensor xt = x.t(), wt = w.t(), yt = y.t();
      EXPECT_TRUE(conv(ctx, xt, wt, nullptr, paramsOf(cc), yt).ok());
      return dot(y.v, r.v);
    };
    Buf<double> dx(x.shape), dw(w.shape);
    Tensor rt = r.t(), xt = x.t(), wt = w.t(), dxt = dx.t(), dwt = dw.t();
    ASSERT_TRUE(convGradInput(ctx, rt, wt, paramsOf(cc), dxt).ok());
    ASSERT_TRUE(convGradWeight(ctx, rt, xt, paramsOf(cc), dwt).ok());
    expectNear(dx.v, numericGrad(x.v, loss), 1e-7, "dx");
    expectNear(dw.v, numericGrad(w.v, loss), 1e-7, "dw");
  }
}

TEST(Conv, KernelMayComeFromTheWeight) {
  ConvCase cc{2, 3, 4, 1, {6, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false};
  Context ctx;
  Buf<float> x = randomBuf<float>({2, 3, 6, 6}),
             w = randomBuf<float>({4, 3, 3, 3});
  Buf<float> y1({2, 4, 6, 6}), y2({2, 4, 6, 6});
  WindowParams p = paramsOf(cc);
  Tensor xt = x.t(), wt = w.t(), y1t = y1.t(), y2t = y2.t();
  ASSERT_TRUE(conv(ctx, xt, wt, nullptr, p, y1t).ok());
  p.kernel.clear();
  ASSERT_TRUE(conv(ctx, xt, wt, nullptr, p, y2t).ok());
  EXPECT_EQ(y1.v, y2.v);
  // Empty strides, pads and dilations default to 1, 0 and 1.
  WindowParams bare;
  Buf<float> y3({2, 4, 4, 4});
  Tensor y3t = y3.t();
  Status s = conv(ctx, xt, wt, nullptr, bare, y3t);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST(Conv, Errors) {
  Context ctx;
  Buf<float> x({2, 4, 6, 6}), w({6, 2, 3, 3}), y({2, 6, 4, 4}), b({5});
  Tensor xt = x.t(), wt = w.t(), yt = y.t(), bt = b.t();
  WindowParams p;
  p.group = 2;
  EXPECT_TRUE(conv(ctx, xt, wt, nullptr, p, yt).ok());
  Status s = conv(ctx, xt, wt, &bt, p, yt);
  EXPECT_NE(s.message.find("conv: b: expected shape [6], got [5]"),
            std::string::npos)
      << s.message;
  p.group = 3;
  s = conv(ctx, xt, wt, nullptr, p, yt);
  EXPECT_NE(s.message.find("group 3"), std::string::npos) << s.message;
  p.group = 2;
  p.strides = {2, 2};
  s = conv(ctx, xt, wt, nullptr, p, yt);
  EXPECT_NE(s.message.find("conv: y: expected spatial dims [2, 2], got [4, 4]"),
            std::string::npos)
      << s.message;
  p.strides = {1};
  s = conv(ctx, xt, wt, nullptr, p, yt);
  EXPECT_NE(s.message.find("strides needs 2 values, got 1"), std::string::npos)
      << s.message;
  p.strides.clear();
  p.kernel = {2, 2};
  s = conv(ctx, xt, wt, nullptr, p, yt);
  EXPECT_NE(s.message.find("differs from the weight"), std::string::npos)
      << s.message;
  p.kernel.clear();
  p.pads = {-1, 0, 0, 0};
  EXPECT_FALSE(conv(ctx, xt, wt, nullptr, p, yt).ok());
  p.pads.clear();
  p.dilations = {4, 4};
  s = conv(ctx, xt, wt, nullptr, p, yt);
  EXPECT_NE(s.message.find("larger than the padded input"), std::string::npos)
      << s.message;
  p.dilations.clear();
  Buf<double> wd({6, 2, 3, 3});
  Tensor wdt = wd.t();
  s = conv(ctx, xt, wdt, nullptr, p, yt);
  EXPECT_NE(s.message.find("conv: w: expected dtype f32, got f64"),
            std::string::npos)
      << s.message;
  Tensor x2{x.v.data(), DType::F32, {2, 4}};
  EXPECT_FALSE(conv(ctx, x2, wt, nullptr, p, yt).ok());
  Tensor nullX{nullptr, DType::F32, x.shape};
  EXPECT_FALSE(conv(ctx, nullX, wt, nullptr, p, yt).ok());
  Buf<float> dx({2, 4, 6, 7});
  Tensor dxt = dx.t();
  s = convGradInput(ctx, yt, wt, p, dxt);
  EXPECT_NE(s.message.find("convGradInput: dy: expected spatial dims [4, 5]"),
            std::string::npos)
      << s.message;
  Buf<float> dw({6, 4, 3, 3});
  Tensor dwt = dw.t();
  s = convGradWeight(ctx, yt, xt, p, dwt);
  EXPECT_NE(s.message.find("convGradWeight"), std::string::npos) << s.message;
}

double timeConv(Context &ctx, Tensor &x, Tensor &w, Tensor &b,
                const WindowParams &p, Tensor &y) {
  EXPECT_TRUE(conv(ctx, x, w, &b, p, y).ok()); // warm-up
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(conv(ctx, x, w, &b, p, y).ok());
    times.push_back(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Not a pass/fail check: prints the median time of a 64x3x32x32 input with
/// 64 3x3 filters (pad 1) so that regressions are visible in the log.
TEST(Conv, TimingOfA64x3x32x32Input) {
  Buf<float> x = randomBuf<float>({64, 3, 32, 32}),
             w = randomBuf<float>({64, 3, 3, 3});
  Buf<float> b = randomBuf<float>({64}), y({64, 64, 32, 32});
  WindowParams p;
  p.kernel = {3, 3};
  p.pads = {1, 1, 1, 1};
  Tensor xt = x.t(), wt = w.t(), bt = b.t(), yt = y.t();
  for (int threads : {1, 2}) {
    Context ctx;
    ctx.numThreads = threads;
    double ms = timeConv(ctx, xt, wt, bt, p, yt);
    std::printf(
        "[ timing   ] conv f32 x[64,3,32,32] w[64,3,3,3] pad 1, numThreads %d: "
        "%.2f ms (median of 5)\n",
        threads, ms);
  }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

struct PoolCase {
  int64_t n, c;
  Shape in, kernel, strides, pads, dilations;
  bool ceil;
};

Shape poolOut(const PoolCase &pc) {
  Shape out;
  size_t s = pc.in.size();
  for (size_t i = 0; i < s; ++i) {
    int64_t span = pc.in[i] + pc.pads[i] + pc.pads[i + s] -
                   pc.dilations[i] * (pc.kernel[i] - 1) - 1;
    int64_t o = pc.ceil ? (span + pc.strides[i] - 1) / pc.strides[i] + 1
                        : span / pc.strides[i] + 1;
    // PyTorch's ceil-mode rule: the last window starts inside x or its
    // begin padding.
    if (pc.ceil && (o - 1) * pc.strides[i] >= pc.in[i] + pc.pads[i])
      --o;
    out.push_back(o);
  }
  return out;
}

WindowParams paramsOf(const PoolCase &pc) {
  WindowParams p;
  p.kernel = pc.kernel;
  p.strides = pc.strides;
  p.pads = pc.pads;
  p.dilations = pc.dilations;
  return p;
}

/// Visits the window of every output: start(yFlat), tap(xFlat or -1 for a
/// padded tap, inside the declared pads).
void forEachPoolTap(const PoolCase &pc,
                    const std::function<void(int64_t)> &start,
                    const std::function<void(int64_t, int64_t)> &tap) {
  Shape out = poolOut(pc);
  size_t s = pc.in.size();
  Shape xShape = cat({pc.n, pc.c}, pc.in), yShape = cat({pc.n, pc.c}, out);
  forEachIndex(yShape, [&](const Shape &yi) {
    int64_t yf = flatten(yShape, yi);
    start(yf);
    forEachIndex(pc.kernel, [&](const Shape &ki) {
      Shape xi = {yi[0], yi[1]};
      bool inside = true;
      for (size_t i = 0; i < s; ++i) {
        int64_t pos =
            yi[2 + i] * pc.strides[i] - pc.pads[i] + ki[i] * pc.dilations[i];
        if (pos < -pc.pads[i] || pos >= pc.in[i] + pc.pads[i + s])
          return; // beyond the declared pads (ceil-mode overhang)
        inside = inside && pos >= 0 && pos < pc.in[i];
        xi.push_back(pos);
      }
      tap(yf, inside ? flatten(xShape, xi) : -1);
    });
  });
}

std::vector<PoolCase> poolCases() {
  return {
      {2, 3, {9}, {3}, {2}, {1, 1}, {1}, false},
      {1, 2, {10}, {2}, {3}, {0, 1}, {2}, true},
      {2, 2, {6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
      {2, 3, {7, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
      {1, 2, {7, 8}, {3, 2}, {2, 3}, {1, 0, 1, 1}, {1, 1}, true},
      {2, 2, {8, 7}, {2, 3}, {1, 2}, {1, 1, 0, 1}, {2, 1}, false},
      {1, 1, {5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
      {1,
       2,
       {4, 5, 6},
       {2, 2, 3},
       {2, 1, 2},
       {0, 1, 1, 1, 0, 1},
       {1, 2, 1},
       false},
      {1,
       2,
       {5, 4, 5},
       {2, 2, 2},
       {2, 2, 2},
       {1, 0, 0, 0, 1, 1},
       {1, 1, 1},
       true},
  };
}

template <typename T> void checkMaxPool(const PoolCase &pc, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  // Negative inputs: a zero from padding would win if it took part.
  Buf<T> x = randomBuf<T>(cat({pc.n, pc.c}, pc.in), -3, -1);
  Shape yShape = cat({pc.n, pc.c}, poolOut(pc));
  std::vector<double> want(numelOf(yShape), -INFINITY);
  std::vector<int64_t> wantIdx(want.size(), -1);
  forEachPoolTap(
      pc, [](int64_t) {},
      [&](int64_t yf, int64_t xf) {
        if (xf >= 0 && (wantIdx[yf] < 0 || double(x[xf]) > want[yf])) {
          want[yf] = x[xf];
          wantIdx[yf] = xf;
        }
      });
  Buf<T> y(yShape, T(9));
  Buf<int64_t> idx(yShape, 77);
  Tensor xt = x.t(), yt = y.t(), it{idx.v.data(), DType::I64, yShape};
  Status s = maxPool(ctx, xt, paramsOf(pc), yt, &it);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(y.v, want, 0, "maxPool");
  EXPECT_EQ(idx.v, wantIdx);
  Buf<T> y2(yShape);
  Tensor y2t = y2.t();
  ASSERT_TRUE(maxPool(ctx, xt, paramsOf(pc), y2t, nullptr).ok());
  EXPECT_EQ(y.v, y2.v);
  // maxPoolGrad scatters dy onto the argmax positions.
  Buf<T> dy = randomBuf<T>(yShape), dx(x.shape, T(3));
  std::vector<double> wantDx(x.v.size(), 0.0);
  for (size_t i = 0; i < dy.v.size(); ++i)
    wantDx[wantIdx[i]] += double(dy[i]);
  Tensor dyt = dy.t(), dxt = dx.t();
  s = maxPoolGrad(ctx, dyt, it, dxt);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(dx.v, wantDx, tol<T>(), "maxPoolGrad");
}

template <typename T>
void checkAvgPool(const PoolCase &pc, bool includePad, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  Buf<T> x = randomBuf<T>(cat({pc.n, pc.c}, pc.in));
  Shape yShape = cat({pc.n, pc.c}, poolOut(pc));
  std::vector<double> sum(numelOf(yShape), 0.0), count(sum.size(), 0.0);
  forEachPoolTap(
      pc, [](int64_t) {},
      [&](int64_t yf, int64_t xf) {
        if (xf >= 0)
          sum[yf] += double(x[xf]);
        if (xf >= 0 || includePad)
          count[yf] += 1;
      });
  std::vector<double> want(sum.size());
  for (size_t i = 0; i < sum.size(); ++i)
    want[i] = sum[i] / count[i];
  Buf<T> y(yShape, T(9));
  Tensor xt = x.t(), yt = y.t();
  Status s = avgPool(ctx, xt, paramsOf(pc), includePad, yt);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(y.v, want, tol<T>(), "avgPool");
  Buf<T> dy = randomBuf<T>(yShape), dx(x.shape, T(3));
  std::vector<double> wantDx(x.v.size(), 0.0);
  forEachPoolTap(
      pc, [](int64_t) {},
      [&](int64_t yf, int64_t xf) {
        if (xf >= 0)
          wantDx[xf] += double(dy[yf]) / count[yf];
      });
  Tensor dyt = dy.t(), dxt = dx.t();
  s = avgPoolGrad(ctx, dyt, paramsOf(pc), includePad, dxt);
  ASSERT_TRUE(s.ok()) << s.message;
  expectNear(dx.v, wantDx, tol<T>(), "avgPoolGrad");
}

template <typename T> void poolAgainstDirect() {
  int index = 0;
  for (const PoolCase &pc : poolCases()) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << index << " threads " << threads);
      checkMaxPool<T>(pc, threads);
      checkAvgPool<T>(pc, false, threads);
      checkAvgPool<T>(pc, true, threads);
    }
    ++index;
  }
}

TEST(Pool, MatchesDirectLoopsF32) { poolAgainstDirect<float>(); }
TEST(Pool, MatchesDirectLoopsF64) { poolAgainstDirect<double>(); }

/// Pools of one or two spatial dims without dilation run a loop over each
/// window's clamped rectangle; the others walk every tap. Both visit the
/// same taps in the same order: each 2-D case, pooled plane by plane, gives
/// the bits of the same planes stacked in depth and pooled as 3-D with a
/// depth-1 kernel (the general walk).
TEST(Pool, PlanarPathGivesTheGeneralWalksBits) {
  int index = 0;
  for (const PoolCase &pc : poolCases()) {
    if (pc.in.size() != 2 || pc.dilations != Shape{1, 1})
      continue;
    SCOPED_TRACE(::testing::Message() << "case " << index++);
    constexpr int64_t depth = 2;
    PoolCase deep{pc.n,
                  pc.c,
                  {depth, pc.in[0], pc.in[1]},
                  {1, pc.kernel[0], pc.kernel[1]},
                  {1, pc.strides[0], pc.strides[1]},
                  {0, pc.pads[0], pc.pads[1], 0, pc.pads[2], pc.pads[3]},
                  {1, 1, 1},
                  pc.ceil};
    Context ctx;
    Buf<double> x3 = randomBuf<double>(cat({pc.n, pc.c}, deep.in));
    Shape y3Shape = cat({pc.n, pc.c}, poolOut(deep));
    Buf<double> dy3 = randomBuf<double>(y3Shape);
    int64_t planes = pc.n * pc.c, in2 = pc.in[0] * pc.in[1];
    int64_t out2 = numelOf(y3Shape) / planes / depth;
    // Depth slice d of x3 / dy3 as a 2-D tensor.
    auto slice = [&](const Buf<double> &b, int64_t d, int64_t size,
                     Shape shape) {
      Buf<double> r(cat({pc.n, pc.c}, shape));
      for (int64_t p = 0; p < planes; ++p)
        std::copy_n(b.v.begin() + (p * depth + d) * size, size,
                    r.v.begin() + p * size);
      return r;
    };
    Shape out2Shape(y3Shape.end() - 2, y3Shape.end());
    auto run = [&](auto kernel, Buf<double> &in, Shape outShape,
                   const PoolCase &c) {
      Buf<double> out(outShape, 7.0);
      Tensor it = in.t(), ot = out.t();
      Status s = kernel(it, paramsOf(c), ot);
      EXPECT_TRUE(s.ok()) << s.message;
      return out;
    };
    for (int mode = 0; mode < 3; ++mode) {
      bool includePad = mode == 2;
      auto forward = [&](Tensor &in, const WindowParams &p, Tensor &out) {
        return mode == 0 ? maxPool(ctx, in, p, out, nullptr)
                         : avgPool(ctx, in, p, includePad, out);
      };
      auto backward = [&](Tensor &dy, const WindowParams &p, Tensor &dx) {
        return avgPoolGrad(ctx, dy, p, includePad, dx);
      };
      Buf<double> y3 = run(forward, x3, y3Shape, deep);
      Buf<double> dx3 = run(backward, dy3, x3.shape, deep);
      for (int64_t d = 0; d < depth; ++d) {
        Buf<double> x2 = slice(x3, d, in2, pc.in);
        Buf<double> y2 = run(forward, x2, cat({pc.n, pc.c}, out2Shape), pc);
        EXPECT_EQ(y2.v, slice(y3, d, out2, out2Shape).v) << "mode " << mode;
        if (mode == 0)
          continue;
        Buf<double> dy2 = slice(dy3, d, out2, out2Shape);
        Buf<double> dx2 = run(backward, dy2, x2.shape, pc);
        EXPECT_EQ(dx2.v, slice(dx3, d, in2, pc.in).v) << "mode " << mode;
      }
    }
  }
  EXPECT_EQ(index, 4); // the 2-D cases without dilation
}

TEST(Pool, CountIncludePadDivisors) {
  // 1x1x3x3 of ones, 3x3 window, pads 1, stride 2: corner windows cover 4
  // inputs of 9 taps.
  Context ctx;
  Buf<float> x({1, 1, 3, 3}, 1.f), y({1, 1, 2, 2});
  WindowParams p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  Tensor xt = x.t(), yt = y.t();
  ASSERT_TRUE(avgPool(ctx, xt, p, true, yt).ok());
  for (float v : y.v)
    EXPECT_FLOAT_EQ(v, 4.f / 9.f);
  ASSERT_TRUE(avgPool(ctx, xt, p, false, yt).ok());
  for (float v : y.v)
    EXPECT_FLOAT_EQ(v, 1.f);
}

TEST(Pool, MaxPoolTiesAndNaN) {
  Context ctx;
  Buf<double> x({1, 1, 1, 4});
  x.v = {2, 2, NAN, 1};
  WindowParams p;
  p.kernel = {1, 2};
  p.strides = {1, 2};
  Buf<double> y({1, 1, 1, 2});
  Buf<int64_t> idx({1, 1, 1, 2});
  Tensor xt = x.t(), yt = y.t(), it{idx.v.data(), DType::I64, idx.shape};
  ASSERT_TRUE(maxPool(ctx, xt, p, yt, &it).ok());
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(idx[0], 0); // first maximum wins
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(idx[1], 2);
}

// Rows wide enough for the walk over whole rows (windows wholly inside a
// row), with ties everywhere (three values) and NaNs: the first maximum in
// the window's order wins, and the first NaN.
TEST(Pool, MaxPoolTiesAndNaNOnWideRows) {
  const PoolCase cases[] = {
      {2, 3, {9, 23}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
      {1, 2, {6, 17}, {2, 3}, {1, 2}, {0, 1, 0, 2}, {1, 1}, false},
      {2, 2, {31}, {3}, {2}, {1, 1}, {1}, true},
      {1, 1, {4, 40}, {1, 4}, {1, 4}, {0, 0, 0, 0}, {1, 1}, false}};
  std::mt19937 gen(7);
  for (const PoolCase &pc : cases)
    for (int threads : {1, 2}) {
      Context ctx;
      ctx.numThreads = threads;
      Buf<float> x(cat({pc.n, pc.c}, pc.in));
      for (float &v : x.v)
        v = gen() % 23 == 0 ? NAN : -float(gen() % 3);
      Shape yShape = cat({pc.n, pc.c}, poolOut(pc));
      std::vector<double> want(numelOf(yShape), -INFINITY);
      std::vector<int64_t> wantIdx(want.size(), -1);
      forEachPoolTap(
          pc, [](int64_t) {},
          [&](int64_t yf, int64_t xf) {
            if (xf < 0)
              return;
            double v = x[xf];
            if (wantIdx[yf] < 0 || v > want[yf] ||
                (std::isnan(v) && !std::isnan(want[yf]))) {
              want[yf] = v;
              wantIdx[yf] = xf;
            }
          });
      Buf<float> y(yShape, 9.f);
      Buf<int64_t> idx(yShape, 77);
      Tensor xt = x.t(), yt = y.t(), it{idx.v.data(), DType::I64, yShape};
      ASSERT_TRUE(maxPool(ctx, xt, paramsOf(pc), yt, &it).ok());
      EXPECT_EQ(idx.v, wantIdx);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_TRUE(std::isnan(want[i]) ? std::isnan(y[i]) : y[i] == want[i])
            << "output " << i;
    }
}

TEST(Pool, GradientsMatchFiniteDifferences) {
  Context ctx;
  std::vector<PoolCase> cases = {
      {2, 2, {5, 6}, {3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 2}, false},
      {1, 2, {7, 5}, {2, 2}, {2, 2}, {1, 1, 0, 0}, {1, 1}, true},
      {1,
       2,
       {4, 3, 5},
       {2, 2, 2},
       {1, 1, 2},
       {1, 0, 0, 0, 1, 1},
       {1, 1, 1},
       false},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    SCOPED_TRACE(::testing::Message() << "case " << ci);
    const PoolCase &pc = cases[ci];
    Shape yShape = cat({pc.n, pc.c}, poolOut(pc));
    // Distinct, well separated values keep the argmax stable under h.
    Buf<double> x(cat({pc.n, pc.c}, pc.in));
    for (size_t i = 0; i < x.v.size(); ++i)
      x[i] = double((i * 7919) % x.v.size()) * 0.01;
    Buf<double> r = randomBuf<double>(yShape), y(yShape);
    Buf<int64_t> idx(yShape);
    Tensor it{idx.v.data(), DType::I64, yShape};
    auto maxLoss = [&]() {
      Tensor xt = x.t(), yt = y.t();
      EXPECT_TRUE(maxPool(ctx, xt, paramsOf(pc), yt, &it).ok());
      return dot(y.v, r.v);
    };
    maxLoss();
    Buf<double> dx(x.shape);
    Tensor rt = r.t(), dxt = dx.t();
    ASSERT_TRUE(maxPoolGrad(ctx, rt, it, dxt).ok());
    expectNear(dx.v, numericGrad(x.v, maxLoss), 1e-7, "maxPoolGrad");
    for (bool includePad : {false, true}) {
      auto avgLoss = [&]() {
        Tensor xt = x.t(), yt = y.t();
        EXPECT_TRUE(avgPool(ctx, xt, paramsOf(pc), includePad, yt).ok());
        return dot(y.v, r.v);
      };
      ASSERT_TRUE(avgPoolGrad(ctx, rt, paramsOf(pc), includePad, dxt).ok());
      expectNear(dx.v, numericGrad(x.v, avgLoss), 1e-7, "avgPoolGrad");
    }
  }
}

TEST(Pool, Errors) {
  Context ctx;
  Buf<float> x({1, 2, 6, 6}), y({1, 2, 3, 3});
  Tensor xt = x.t(), yt = y.t();
  WindowParams p;
  Status s = maxPool(ctx, xt, p, yt, nullptr);
  EXPECT_NE(s.message.find("maxPool: kernel needs 2 values, got 0"),
            std::string::npos)
      << s.message;
  p.kernel = {2, 2};
  s = maxPool(ctx, xt, p, yt, nullptr);
  EXPECT_NE(
      s.message.find("maxPool: y: expected spatial dims [5, 5], got [3, 3]"),
      std::string::npos)
      << s.message;
  p.strides = {2, 2};
  EXPECT_TRUE(maxPool(ctx, xt, p, yt, nullptr).ok());
  Buf<int32_t> idx32({1, 2, 3, 3});
  Tensor i32{idx32.v.data(), DType::I32, idx32.shape};
  s = maxPool(ctx, xt, p, yt, &i32);
  EXPECT_NE(s.message.find("maxPool: indices: expected dtype i64, got i32"),
            std::string::npos)
      << s.message;
  Buf<float> yc({1, 3, 3, 3});
  Tensor yct = yc.t();
  EXPECT_FALSE(avgPool(ctx, xt, p, false, yct).ok());
  // Ceil mode's one extra window is accepted, two are not.
  p.strides = {3, 3};
  Buf<float> yCeil({1, 2, 3, 3}), yTooBig({1, 2, 4, 4});
  Tensor yCeilT = yCeil.t(), yTooBigT = yTooBig.t();
  EXPECT_TRUE(avgPool(ctx, xt, p, true, yCeilT).ok());
  s = avgPool(ctx, xt, p, true, yTooBigT);
  EXPECT_NE(
      s.message.find(
          "expected spatial dims [2, 2] (or [3, 3] in ceil mode), got [4, 4]"),
      std::string::npos)
      << s.message;
  // Indices outside their (n, c) plane are rejected.
  Buf<float> dy({1, 2, 1, 1}, 1.f), dx({1, 2, 2, 2});
  Buf<int64_t> bad({1, 2, 1, 1});
  bad.v = {5, 6};
  Tensor dyt = dy.t(), dxt = dx.t(), badT{bad.v.data(), DType::I64, bad.shape};
  s = maxPoolGrad(ctx, dyt, badT, dxt);
  EXPECT_NE(s.message.find("outside the (n, c) plane"), std::string::npos)
      << s.message;
}

} // namespace
