//===- MovementTest.cpp - Tests of the data movement CPU kernels ----------===//
//
// Values against naive index arithmetic and numpy.pad, adjoint identities of
// sliceGrad, padGrad and gatherGrad, and error statuses (bad perms,
// out-of-range indices).
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

Owned<float> iota(std::vector<int64_t> shape) {
  Owned<float> t(std::move(shape), {});
  for (size_t i = 0; i < t.values.size(); ++i)
    t.values[i] = static_cast<float>(i);
  return t;
}

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

TEST(Transpose, MatchesNaive) {
  Context ctx;
  Owned<float> x = iota({2, 3, 4});
  Owned<float> y({4, 2, 3});
  ASSERT_TRUE(transpose(ctx, x.t, {2, 0, 1}, y.t).ok());
  // y[k, i, j] = x[i, j, k]
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(y[(k * 2 + i) * 3 + j], x[(i * 3 + j) * 4 + k]);
}

TEST(Transpose, DefaultReversesAndOtherDTypes) {
  Context ctx;
  Owned<int64_t> x({2, 3}, {1, 2, 3, 4, 5, 6});
  Owned<int64_t> y({3, 2});
  ASSERT_TRUE(transpose(ctx, x.t, {}, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  Owned<uint8_t> b = makeBool({1, 2, 1}, {1, 0});
  Owned<uint8_t> bt = makeBool({2, 1, 1});
  ASSERT_TRUE(transpose(ctx, b.t, {1, 0, 2}, bt.t).ok());
  EXPECT_EQ(bt.values, (std::vector<uint8_t>{1, 0}));
}

TEST(Transpose, ParallelLarge) {
  Context ctx;
  ctx.numThreads = 4;
  Owned<float> x = iota({8, 64, 130});
  Owned<float> y({130, 64, 8});
  ASSERT_TRUE(transpose(ctx, x.t, {2, 1, 0}, y.t).ok());
  for (int i : {0, 3, 7})
    for (int j : {0, 17, 63})
      for (int k : {0, 65, 129})
        EXPECT_EQ(y[(k * 64 + j) * 8 + i], x[(i * 64 + j) * 130 + k]);
}

TEST(Transpose, EveryPermOfRank4) {
  // Odd sizes so tiles are partial; some perms take the tiled path.
  Context ctx;
  ctx.numThreads = 3;
  const std::vector<int64_t> shape = {3, 5, 2, 37};
  Owned<float> x = iota(shape);
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    std::vector<int64_t> yShape(4);
    for (int d = 0; d < 4; ++d)
      yShape[d] = shape[perm[d]];
    Owned<float> y(yShape);
    ASSERT_TRUE(transpose(ctx, x.t, perm, y.t).ok());
    std::vector<int64_t> xs = {370, 74, 37, 1};
    int64_t i = 0;
    bool same = true;
    for (int64_t a = 0; a < yShape[0]; ++a)
      for (int64_t b = 0; b < yShape[1]; ++b)
        for (int64_t c = 0; c < yShape[2]; ++c)
          for (int64_t d = 0; d < yShape[3]; ++d, ++i)
            same &= y[i] == x[a * xs[perm[0]] + b * xs[perm[1]] +
                              c * xs[perm[2]] + d * xs[perm[3]]];
    EXPECT_TRUE(same) << perm[0] << perm[1] << perm[2] << perm[3];
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Transpose, Errors) {
  Context ctx;
  Owned<float> x({2, 3}), y({3, 2});
  Status s = transpose(ctx, x.t, {0, 0}, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("transpose"), std::string::npos);
  EXPECT_FALSE(transpose(ctx, x.t, {0, 1, 2}, y.t).ok());
  EXPECT_FALSE(transpose(ctx, x.t, {0, 2}, y.t).ok());
  EXPECT_FALSE(transpose(ctx, x.t, {0, 1}, y.t).ok()); // y should be [2, 3]
}

//===----------------------------------------------------------------------===//
// Slice
//===----------------------------------------------------------------------===//

TEST(Slice, StepsAndNegativeSteps) {
  Context ctx;
  Owned<float> x = iota({4, 5});
  // Rows 1, 3 and columns 4, 2, 0.
  Owned<float> y({2, 3});
  ASSERT_TRUE(slice(ctx, x.t, {1, 4}, {2, -2}, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{9, 7, 5, 19, 17, 15}));
  Owned<float> empty({0, 3});
  EXPECT_TRUE(slice(ctx, x.t, {4, 0}, {1, 1}, empty.t).ok());
}

TEST(Slice, Errors) {
  Context ctx;
  Owned<float> x = iota({4, 5});
  Owned<float> y({2, 3});
  Status s = slice(ctx, x.t, {3, 0}, {1, 1}, y.t); // rows 3, 4: past the end
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("slice"), std::string::npos);
  EXPECT_FALSE(slice(ctx, x.t, {0, 0}, {0, 1}, y.t).ok());
  EXPECT_FALSE(slice(ctx, x.t, {0}, {1}, y.t).ok());
  EXPECT_FALSE(slice(ctx, x.t, {0, 1}, {1, -1}, y.t).ok()); // 1, 0, -1
  Owned<double> wrong({2, 3});
  EXPECT_FALSE(slice(ctx, x.t, {0, 0}, {1, 1}, wrong.t).ok());
}

TEST(SliceGrad, ValuesAndAdjoint) {
  Context ctx;
  Owned<double> dy({2, 2}, {1, 2, 3, 4});
  Owned<double> dx({3, 4});
  std::fill(dx.values.begin(), dx.values.end(), 7.0); // must be overwritten
  ASSERT_TRUE(sliceGrad(ctx, dy.t, {0, 3}, {2, -2}, dx.t).ok());
  EXPECT_EQ(dx.values,
            (std::vector<double>{0, 2, 0, 1, 0, 0, 0, 0, 0, 4, 0, 3}));

  // <slice(x), g> == <x, sliceGrad(g)>
  const std::vector<int64_t> starts = {1, 0, 4}, steps = {1, 2, -3};
  Owned<double> x = random<double>({3, 5, 6}, 1);
  Owned<double> g = random<double>({2, 3, 2}, 2);
  Owned<double> sx({2, 3, 2}), gx({3, 5, 6});
  ASSERT_TRUE(slice(ctx, x.t, starts, steps, sx.t).ok());
  ASSERT_TRUE(sliceGrad(ctx, g.t, starts, steps, gx.t).ok());
  EXPECT_NEAR(dot(sx.values, g.values), dot(x.values, gx.values), 1e-12);
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

TEST(Pad, ModesMatchNumpy) {
  Context ctx;
  Owned<float> x({2, 3}, {1, 2, 3, 4, 5, 6});
  Owned<float> y({4, 7});
  // numpy.pad(x, ((1, 1), (2, 2)), mode)
  ASSERT_TRUE(pad(ctx, x.t, {1, 2, 1, 2}, PadMode::Constant, 9.0, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{9, 9, 9, 9, 9, 9, 9, //
                                          9, 9, 1, 2, 3, 9, 9, //
                                          9, 9, 4, 5, 6, 9, 9, //
                                          9, 9, 9, 9, 9, 9, 9}));
  ASSERT_TRUE(pad(ctx, x.t, {1, 2, 1, 2}, PadMode::Reflect, 0.0, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{6, 5, 4, 5, 6, 5, 4, //
                                          3, 2, 1, 2, 3, 2, 1, //
                                          6, 5, 4, 5, 6, 5, 4, //
                                          3, 2, 1, 2, 3, 2, 1}));
  ASSERT_TRUE(pad(ctx, x.t, {1, 2, 1, 2}, PadMode::Edge, 0.0, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{1, 1, 1, 2, 3, 3, 3, //
                                          1, 1, 1, 2, 3, 3, 3, //
                                          4, 4, 4, 5, 6, 6, 6, //
                                          4, 4, 4, 5, 6, 6, 6}));
  // Negative pads crop: x[:, 1:] padded by one 0 row on top.
  Owned<float> cropped({3, 2});
  ASSERT_TRUE(
      pad(ctx, x.t, {1, -1, 0, 0}, PadMode::Constant, 0.0, cropped.t).ok());
  EXPECT_EQ(cropped.values, (std::vector<float>{0, 0, 2, 3, 5, 6}));
  // Reflect wider than the dim repeats the mirror images (numpy's rule).
  Owned<int64_t> v({3}, {1, 2, 3}), wide({9});
  ASSERT_TRUE(pad(ctx, v.t, {3, 3}, PadMode::Reflect, 0.0, wide.t).ok());
  EXPECT_EQ(wide.values, (std::vector<int64_t>{2, 3, 2, 1, 2, 3, 2, 1, 2}));
}

TEST(PadGrad, AdjointOfEveryMode) {
  Context ctx;
  ctx.numThreads = 3;
  const std::vector<int64_t> pads = {0, 2, -1, 1, 3, 0, 2, 1};
  Owned<double> x = random<double>({2, 3, 4, 5}, 3);
  Owned<double> g = random<double>({5, 5, 5, 7}, 4);
  for (PadMode mode : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
    // <pad(x), g> == <x, padGrad(g)> (the constant is 0: pad is linear).
    Owned<double> px({5, 5, 5, 7}), gx({2, 3, 4, 5});
    ASSERT_TRUE(pad(ctx, x.t, pads, mode, 0.0, px.t).ok());
    ASSERT_TRUE(padGrad(ctx, g.t, pads, mode, gx.t).ok());
    EXPECT_NEAR(dot(px.values, g.values), dot(x.values, gx.values), 1e-12)
        << static_cast<int>(mode);
  }
}

TEST(Pad, Errors) {
  Context ctx;
  Owned<float> x({2, 3}), y({4, 5}), empty({0, 3}), e({2, 3});
  EXPECT_TRUE(pad(ctx, x.t, {1, 1, 1, 1}, PadMode::Constant, 0, y.t).ok());
  Status s = pad(ctx, x.t, {1, 1, 1, 0}, PadMode::Constant, 0, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("pad: dim 1"), std::string::npos) << s.message;
  EXPECT_FALSE(pad(ctx, x.t, {1, 1}, PadMode::Constant, 0, y.t).ok());
  EXPECT_FALSE(pad(ctx, empty.t, {1, 0, 0, 0}, PadMode::Edge, 0, e.t).ok());
  EXPECT_TRUE(pad(ctx, empty.t, {1, 0, 1, 0}, PadMode::Constant, 0, e.t).ok());
  Owned<int64_t> ints({2, 3}), intsOut({4, 5});
  EXPECT_FALSE(
      padGrad(ctx, ints.t, {-1, -1, -1, -1}, PadMode::Edge, intsOut.t).ok());
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

TEST(Concat, AlongMiddleAxis) {
  Context ctx;
  Owned<int32_t> a({2, 1, 2}, {1, 2, 3, 4});
  Owned<int32_t> b({2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  Owned<int32_t> e({2, 0, 2});
  Owned<int32_t> y({2, 3, 2});
  ASSERT_TRUE(concat(ctx, {&a.t, &e.t, &b.t}, -2, y.t).ok());
  EXPECT_EQ(y.values,
            (std::vector<int32_t>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
}

TEST(Concat, Errors) {
  Context ctx;
  Owned<float> a({2, 2}), b({3, 2}), y({4, 2}), wide({2, 4});
  Status s = concat(ctx, {&a.t, &b.t}, 1, wide.t); // b has 3 rows, not 2
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("concat input 1"), std::string::npos) << s.message;
  EXPECT_FALSE(concat(ctx, {&a.t, &b.t}, 0, y.t).ok()); // 2 + 3 != 4
  EXPECT_FALSE(concat(ctx, {}, 0, y.t).ok());
  EXPECT_FALSE(concat(ctx, {&a.t, nullptr}, 0, y.t).ok());
  EXPECT_FALSE(concat(ctx, {&a.t, &a.t}, 2, y.t).ok());
  Owned<double> d({2, 2});
  EXPECT_FALSE(concat(ctx, {&a.t, &d.t}, 0, y.t).ok());
}

TEST(Split, InvertsConcat) {
  Context ctx;
  Owned<float> x = iota({3, 5, 2});
  Owned<float> p({3, 2, 2}), q({3, 3, 2});
  ASSERT_TRUE(split(ctx, x.t, 1, {&p.t, &q.t}).ok());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 2; ++k) {
        float v = x[(i * 5 + j) * 2 + k];
        if (j < 2)
          EXPECT_EQ(p[(i * 2 + j) * 2 + k], v);
        else
          EXPECT_EQ(q[(i * 3 + j - 2) * 2 + k], v);
      }
  Owned<float> back({3, 5, 2});
  ASSERT_TRUE(concat(ctx, {&p.t, &q.t}, 1, back.t).ok());
  EXPECT_EQ(back.values, x.values);
  Owned<float> r({3, 2, 2});
  EXPECT_FALSE(split(ctx, x.t, 1, {&p.t, &r.t}).ok()); // 2 + 2 != 5
  EXPECT_FALSE(split(ctx, x.t, 3, {&p.t, &q.t}).ok());
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

TEST(Gather, Axis0WithNegativeIndices) {
  Context ctx;
  Owned<float> data = iota({3, 2});
  Owned<int64_t> idx({2, 2}, {0, -1, 1, -3});
  Owned<float> y({2, 2, 2});
  ASSERT_TRUE(gather(ctx, data.t, idx.t, 0, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{0, 1, 4, 5, 2, 3, 0, 1}));
}

TEST(Gather, InnerAxisI32AndScalarIndex) {
  Context ctx;
  Owned<float> data = iota({2, 3, 2});
  Owned<int32_t> idx({2}, {2, 0});
  Owned<float> y({2, 2, 2});
  ASSERT_TRUE(gather(ctx, data.t, idx.t, -2, y.t).ok());
  EXPECT_EQ(y.values, (std::vector<float>{4, 5, 0, 1, 10, 11, 6, 7}));
  // A rank-0 index removes the axis.
  Owned<int64_t> one({}, {1});
  Owned<float> z({2, 3});
  ASSERT_TRUE(gather(ctx, data.t, one.t, 2, z.t).ok());
  EXPECT_EQ(z.values, (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TEST(Gather, OutOfRangeIsAnError) {
  Context ctx;
  Owned<float> data = iota({3, 2});
  Owned<float> y({2, 2});
  for (int64_t bad : {int64_t(3), int64_t(-4), int64_t(1) << 40}) {
    Owned<int64_t> idx({2}, {0, bad});
    Status s = gather(ctx, data.t, idx.t, 0, y.t);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message.find("out of range"), std::string::npos) << s.message;
  }
  Owned<float> fidx({2}, {0, 1});
  EXPECT_FALSE(gather(ctx, data.t, fidx.t, 0, y.t).ok());
  Owned<int64_t> ok({2}, {0, 1});
  Owned<float> wrong({2, 3});
  EXPECT_FALSE(gather(ctx, data.t, ok.t, 0, wrong.t).ok());
  EXPECT_FALSE(gather(ctx, data.t, ok.t, 2, y.t).ok());
}

TEST(GatherGrad, AccumulatesRepeatedIndices) {
  Context ctx;
  Owned<double> dy({3, 2}, {1, 2, 10, 20, 100, 200});
  Owned<int64_t> idx({3}, {1, -2, 0});
  Owned<double> dd({3, 2});
  std::fill(dd.values.begin(), dd.values.end(), 5.0); // must be overwritten
  ASSERT_TRUE(gatherGrad(ctx, dy.t, idx.t, 0, dd.t).ok());
  EXPECT_EQ(dd.values, (std::vector<double>{100, 200, 11, 22, 0, 0}));
  Owned<int64_t> bad({3}, {1, 3, 0});
  EXPECT_FALSE(gatherGrad(ctx, dy.t, bad.t, 0, dd.t).ok());
}

TEST(GatherGrad, AdjointOfGather) {
  // Exercise both parallel splits: outer >= inner and outer < inner.
  for (int axis : {0, 1, 2}) {
    Context ctx;
    ctx.numThreads = 3;
    std::vector<int64_t> shape = {7, 5, 300};
    Owned<int64_t> idx({4, 2}, {0, -1, 2, 2, 1, 0, -2, 3});
    std::vector<int64_t> yShape(shape.begin(), shape.begin() + axis);
    yShape.push_back(4);
    yShape.push_back(2);
    yShape.insert(yShape.end(), shape.begin() + axis + 1, shape.end());
    Owned<double> x = random<double>(shape, 1);
    Owned<double> g = random<double>(yShape, 2);
    Owned<double> gx(yShape), gg(shape);
    ASSERT_TRUE(gather(ctx, x.t, idx.t, axis, gx.t).ok());
    ASSERT_TRUE(gatherGrad(ctx, g.t, idx.t, axis, gg.t).ok());
    EXPECT_NEAR(dot(gx.values, g.values), dot(x.values, gg.values), 1e-9)
        << "axis " << axis;
  }
}

//===----------------------------------------------------------------------===//
// Copy
//===----------------------------------------------------------------------===//

TEST(ScatterND, RowsAndElementsInOrder) {
  Context ctx;
  Owned<float> data = iota({4, 3});
  // k = 1: whole rows; -1 is the last row; a repeated row keeps the last.
  Owned<int64_t> rows({3, 1}, {1, -1, 1});
  Owned<float> updates({3, 3}, {10, 11, 12, 20, 21, 22, 30, 31, 32});
  Owned<float> y({4, 3});
  ASSERT_TRUE(
      scatterND(ctx, data.t, rows.t, updates.t, ScatterReduction::None, y.t)
          .ok());
  EXPECT_EQ(y.values,
            (std::vector<float>{0, 1, 2, 30, 31, 32, 6, 7, 8, 20, 21, 22}));
  // A repeated row accumulates with a reduction; in place (y is data).
  ASSERT_TRUE(
      scatterND(ctx, data.t, rows.t, updates.t, ScatterReduction::Add, data.t)
          .ok());
  EXPECT_EQ(data.values,
            (std::vector<float>{0, 1, 2, 43, 46, 49, 6, 7, 8, 29, 31, 33}));

  // k = 2: single elements, i32 indices, each reduction.
  Owned<int32_t> cells({2, 2}, {0, 2, 3, -3});
  Owned<int64_t> base({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Owned<int64_t> values({2}, {5, 5});
  Owned<int64_t> out({4, 3});
  std::vector<std::pair<ScatterReduction, std::array<int64_t, 2>>> expected = {
      {ScatterReduction::None, {5, 5}},
      {ScatterReduction::Add, {8, 15}},
      {ScatterReduction::Mul, {15, 50}},
      {ScatterReduction::Max, {5, 10}},
      {ScatterReduction::Min, {3, 5}}};
  for (auto [reduction, cell] : expected) {
    ASSERT_TRUE(
        scatterND(ctx, base.t, cells.t, values.t, reduction, out.t).ok());
    EXPECT_EQ(out[2], cell[0]) << static_cast<int>(reduction);
    EXPECT_EQ(out[9], cell[1]) << static_cast<int>(reduction);
    EXPECT_EQ(out[0], 1);
    EXPECT_EQ(out[11], 12);
  }
}

TEST(ScatterND, ErrorsNameTheCause) {
  Context ctx;
  Owned<float> data = iota({4, 3});
  Owned<float> y({4, 3});
  Owned<float> updates({1, 3});
  Owned<int64_t> far({1, 1}, {4});
  Status s =
      scatterND(ctx, data.t, far.t, updates.t, ScatterReduction::None, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("index 4 of tuple 0 (dim 0) is out of range for "
                           "size 4"),
            std::string::npos)
      << s.message;
  Owned<int64_t> row({1, 1}, {0});
  Owned<float> wrong({1, 2});
  s = scatterND(ctx, data.t, row.t, wrong.t, ScatterReduction::None, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("scatterND updates"), std::string::npos)
      << s.message;
  Owned<int64_t> tooLong({1, 3}, {0, 0, 0});
  s = scatterND(ctx, data.t, tooLong.t, updates.t, ScatterReduction::None, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("last dim 3"), std::string::npos) << s.message;
}

TEST(Copy, ReshapesAndChecksCount) {
  Context ctx;
  Owned<float> x = iota({2, 3});
  Owned<float> y({3, 1, 2});
  ASSERT_TRUE(copy(ctx, x.t, y.t).ok());
  EXPECT_EQ(y.values, x.values);
  Owned<float> small({5});
  Status s = copy(ctx, x.t, small.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("copy"), std::string::npos);
  Owned<double> d({6});
  EXPECT_FALSE(copy(ctx, x.t, d.t).ok());
}

} // namespace
