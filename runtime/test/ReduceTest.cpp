//===- ReduceTest.cpp - Tests of the reduction and softmax CPU kernels ----===//
//
// Sum / Mean / Max against naive loops (both output layouts, negative axes),
// softmax and log-softmax against a naive formula and on extreme inputs,
// and finite-difference checks of softmaxGrad.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// Reduce
//===----------------------------------------------------------------------===//

TEST(Reduce, SumMeanMaxMinOverTwoAxes) {
  Context ctx;
  Owned<double> x = random<double>({2, 3, 4}, 1);
  for (ReduceKind kind :
       {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max, ReduceKind::Min}) {
    Owned<double> kept({1, 3, 1}), dropped({3});
    ASSERT_TRUE(reduce(ctx, kind, x.t, {0, 2}, kept.t).ok());
    ASSERT_TRUE(reduce(ctx, kind, x.t, {-3, -1}, dropped.t).ok());
    for (int j = 0; j < 3; ++j) {
      double sum = 0, mx = -INFINITY, mn = INFINITY;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) {
          double v = x[(i * 3 + j) * 4 + k];
          sum += v;
          mx = std::max(mx, v);
          mn = std::min(mn, v);
        }
      double expected = kind == ReduceKind::Sum    ? sum
                        : kind == ReduceKind::Mean ? sum / 8
                        : kind == ReduceKind::Max  ? mx
                                                   : mn;
      EXPECT_NEAR(kept[j], expected, 1e-14);
      EXPECT_EQ(kept[j], dropped[j]);
    }
  }
}

TEST(Reduce, HandValues) {
  Context ctx;
  Owned<float> x({2, 3}, {1, 2, 3, 4, 5, 6});
  Owned<float> rows({2}), cols({1, 3}), all({});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, x.t, {1}, rows.t).ok());
  EXPECT_EQ(rows.values, (std::vector<float>{6, 15}));
  ASSERT_TRUE(reduce(ctx, ReduceKind::Mean, x.t, {0}, cols.t).ok());
  EXPECT_EQ(cols.values, (std::vector<float>{2.5, 3.5, 4.5}));
  ASSERT_TRUE(reduce(ctx, ReduceKind::Max, x.t, {0, 1}, all.t).ok());
  EXPECT_EQ(all[0], 6);
  // No axes: every output is its one input.
  Owned<float> same({2, 3});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Mean, x.t, {}, same.t).ok());
  EXPECT_EQ(same.values, x.values);
}

TEST(Reduce, MaxPropagatesNaNAndEmptySets) {
  Context ctx;
  float nan = std::numeric_limits<float>::quiet_NaN();
  Owned<float> x({2, 3}, {1, nan, 3, -1, -2, -3});
  Owned<float> y({2});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Max, x.t, {1}, y.t).ok());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], -1);
  // Reducing an empty dim: Sum 0, Mean NaN, Max -inf (ONNX).
  Owned<float> e({2, 0});
  Owned<float> r({2});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, e.t, {1}, r.t).ok());
  EXPECT_EQ(r[0], 0);
  ASSERT_TRUE(reduce(ctx, ReduceKind::Mean, e.t, {1}, r.t).ok());
  EXPECT_TRUE(std::isnan(r[0]));
  ASSERT_TRUE(reduce(ctx, ReduceKind::Max, e.t, {1}, r.t).ok());
  EXPECT_EQ(r[0], -INFINITY);
  ASSERT_TRUE(reduce(ctx, ReduceKind::Min, e.t, {1}, r.t).ok());
  EXPECT_EQ(r[0], INFINITY);
  ASSERT_TRUE(reduce(ctx, ReduceKind::Min, x.t, {1}, y.t).ok());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], -3);
}

TEST(Reduce, Integers) {
  Context ctx;
  Owned<int64_t> x({2, 3}, {1, -2, 3, 4, 5, 7});
  Owned<int64_t> y({2});
  ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, x.t, {1}, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int64_t>{2, 16}));
  ASSERT_TRUE(reduce(ctx, ReduceKind::Mean, x.t, {1}, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int64_t>{0, 5})); // 2/3, 16/3 truncated
  ASSERT_TRUE(reduce(ctx, ReduceKind::Max, x.t, {1}, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int64_t>{3, 7}));
  ASSERT_TRUE(reduce(ctx, ReduceKind::Min, x.t, {1}, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int64_t>{-2, 4}));
}

TEST(Reduce, ParallelMatchesSerial) {
  Context serial, parallel;
  parallel.numThreads = 4;
  Owned<float> x = random<float>({16, 50, 40}, 3);
  for (const std::vector<int64_t> &axes :
       {std::vector<int64_t>{0}, {1}, {2}, {0, 2}}) {
    std::vector<int64_t> shape = {16, 50, 40};
    for (int64_t a : axes)
      shape[a] = 1;
    Owned<float> y1(shape), y2(shape);
    ASSERT_TRUE(reduce(serial, ReduceKind::Sum, x.t, axes, y1.t).ok());
    ASSERT_TRUE(reduce(parallel, ReduceKind::Sum, x.t, axes, y2.t).ok());
    EXPECT_EQ(y1.values, y2.values);
  }
}

TEST(Reduce, Errors) {
  Context ctx;
  Owned<float> x({2, 3});
  Owned<float> y({3});
  Status s = reduce(ctx, ReduceKind::Sum, x.t, {1}, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("reduce Sum"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("[2, 1]"), std::string::npos) << s.message;
  Owned<float> z({2});
  EXPECT_FALSE(reduce(ctx, ReduceKind::Sum, x.t, {2}, z.t).ok());
  EXPECT_FALSE(reduce(ctx, ReduceKind::Sum, x.t, {1, -1}, z.t).ok());
  Owned<double> d({2});
  EXPECT_FALSE(reduce(ctx, ReduceKind::Max, x.t, {1}, d.t).ok());
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

/// Naive softmax / log-softmax along axis 1 of a [A, B, C] tensor.
std::vector<double> naiveSoftmax(const std::vector<double> &x, int A, int B,
                                 int C, bool log) {
  std::vector<double> y(x.size());
  for (int a = 0; a < A; ++a)
    for (int c = 0; c < C; ++c) {
      double sum = 0;
      for (int b = 0; b < B; ++b)
        sum += std::exp(x[(a * B + b) * C + c]);
      for (int b = 0; b < B; ++b) {
        double v = x[(a * B + b) * C + c];
        y[(a * B + b) * C + c] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  return y;
}

TEST(Softmax, MatchesNaiveOnEveryAxis) {
  Context ctx;
  Owned<double> x = random<double>({2, 3, 4}, 5, -3, 3);
  for (bool log : {false, true}) {
    // Axis 1 directly; axes 0 and 2 as [1, 2, 12] and [6, 4, 1] views.
    for (int axis : {0, 1, 2, -1}) {
      int dims[3] = {2, 3, 4};
      int norm = axis < 0 ? axis + 3 : axis;
      int A = 1, C = 1;
      for (int d = 0; d < norm; ++d)
        A *= dims[d];
      for (int d = norm + 1; d < 3; ++d)
        C *= dims[d];
      std::vector<double> expected =
          naiveSoftmax(x.values, A, dims[norm], C, log);
      Owned<double> y({2, 3, 4});
      ASSERT_TRUE(softmax(ctx, x.t, axis, log, y.t).ok());
      for (int i = 0; i < 24; ++i)
        EXPECT_NEAR(y[i], expected[i], 1e-14) << "axis " << axis;
    }
  }
}

TEST(Softmax, StableOnLargeInputs) {
  Context ctx;
  Owned<float> x({2, 3}, {1000, 1001, 1002, -1000, -1e30f, -1000});
  Owned<float> y({2, 3}), ly({2, 3});
  ASSERT_TRUE(softmax(ctx, x.t, 1, false, y.t).ok());
  ASSERT_TRUE(softmax(ctx, x.t, 1, true, ly.t).ok());
  // Row 0 is softmax([0, 1, 2]); row 1 puts half on each -1000.
  double z = 1 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(y[0], 1 / z, 1e-7);
  EXPECT_NEAR(y[2], std::exp(2.0) / z, 1e-7);
  EXPECT_NEAR(ly[0], -std::log(z), 1e-6);
  EXPECT_NEAR(ly[2], 2 - std::log(z), 1e-6);
  EXPECT_FLOAT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[4], 0);
  EXPECT_NEAR(ly[3], -std::log(2.0), 1e-6);
  EXPECT_TRUE(std::isfinite(ly[4]));
}

TEST(Softmax, ParallelRowsSumToOne) {
  Context ctx;
  ctx.numThreads = 4;
  Owned<float> x = random<float>({256, 3, 100}, 8, -5, 5);
  Owned<float> y({256, 3, 100});
  ASSERT_TRUE(softmax(ctx, x.t, 2, false, y.t).ok());
  for (int r = 0; r < 256 * 3; ++r) {
    double s = 0;
    for (int c = 0; c < 100; ++c)
      s += y[r * 100 + c];
    ASSERT_NEAR(s, 1, 1e-5);
  }
}

TEST(Softmax, Errors) {
  Context ctx;
  Owned<float> x({2, 3}), y({2, 3});
  Status s = softmax(ctx, x.t, 2, false, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("softmax: axis 2"), std::string::npos) << s.message;
  Owned<int32_t> ix({2, 3}), iy({2, 3});
  EXPECT_FALSE(softmax(ctx, ix.t, 1, false, iy.t).ok());
  Owned<float> wrong({3, 2});
  EXPECT_FALSE(softmax(ctx, x.t, 1, true, wrong.t).ok());
  EXPECT_FALSE(softmaxGrad(ctx, x.t, wrong.t, 1, false, y.t).ok());
  EXPECT_FALSE(softmaxGrad(ctx, x.t, y.t, -3, false, y.t).ok());
}

TEST(SoftmaxGrad, FiniteDifferencesF64) {
  Context ctx;
  const std::vector<int64_t> shape = {2, 3, 4};
  for (bool log : {false, true})
    for (int axis : {0, 1, -1}) {
      Owned<double> x = random<double>(shape, 21, -2, 2);
      Owned<double> dy = random<double>(shape, 22);
      Owned<double> y(shape), dx(shape);
      ASSERT_TRUE(softmax(ctx, x.t, axis, log, y.t).ok());
      ASSERT_TRUE(softmaxGrad(ctx, y.t, dy.t, axis, log, dx.t).ok());
      auto loss = [&](const std::vector<double> &v) {
        Owned<double> in(shape, v), out(shape);
        EXPECT_TRUE(softmax(ctx, in.t, axis, log, out.t).ok());
        return dot(out.values, dy.values);
      };
      std::vector<double> expected = numericGrad(x.values, loss);
      for (int i = 0; i < 24; ++i)
        EXPECT_NEAR(dx[i], expected[i], 1e-8)
            << "log " << log << " axis " << axis << " i " << i;
    }
}

TEST(SoftmaxGrad, InPlaceOverDy) {
  Context ctx;
  Owned<float> x = random<float>({3, 5}, 4);
  Owned<float> y({3, 5}), dx({3, 5});
  Owned<float> dy = random<float>({3, 5}, 9);
  ASSERT_TRUE(softmax(ctx, x.t, 1, false, y.t).ok());
  ASSERT_TRUE(softmaxGrad(ctx, y.t, dy.t, 1, false, dx.t).ok());
  ASSERT_TRUE(softmaxGrad(ctx, y.t, dy.t, 1, false, dy.t).ok());
  EXPECT_EQ(dx.values, dy.values);
}

} // namespace
