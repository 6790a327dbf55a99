//===- DnnlConvTest.cpp - oneDNN convolutions against im2col ----*- C++ -*-===//
//
// The CPU backend runs F32 convolutions on oneDNN when built with it
// (lib/cpu/Dnnl.h). These tests run every convolution kernel (conv with and
// without bias, convGradInput, convGradWeight) twice on the same random
// operands, once forced onto the im2col + GEMM path and once on oneDNN
// (ConvImpl::OneDnn, which keeps the depthwise problems oneDNN runs on its
// own GEMM there instead of the direct loops of DepthwiseConvTest), and
// require max|dnnl - im2col| <= 1e-5 * max|im2col| over 1-D, 2-D and 3-D
// problems with strides, asymmetric pads, dilations, groups (depthwise
// included), 1x1 kernels and batches of 1 to 16, on 1 and 2 threads. They
// also check that oneDNN really ran, that F64 stays on im2col, that the
// per-thread primitive cache gives the same bits for a problem seen again,
// and that threads running convolutions at once get their own results.
// A fused Relu (oneDNN's post-op) gives the Relu of the convolution.
// F32 GEMMs (matmul, gemm) run on oneDNN's sgemm too: DnnlGemm compares
// them with OpenBLAS's on the shapes of the test models' layers, with every
// transpose and alpha / beta, under the same tolerance.
// GELU (erf and tanh) and softmax / log-softmax with their gradients, and
// sigmoid and tanh forward, run on oneDNN's eltwise and softmax primitives:
// DnnlVectorMath checks them against f64 formulas and the F64 loops.
// Without oneDNN in the build they are skipped.
//
//===----------------------------------------------------------------------===//

#include "KernelTestHelpers.h"
#include "cpu/Dnnl.h"
#include "pp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

using namespace pp::rt;
using namespace pp::rt::test;
using pp::rt::cpu::ConvImpl;

namespace {

/// Relative tolerance against max|im2col| (both paths accumulate in f32).
constexpr double kRelTol = 1e-5;

using Case = ConvCase;

std::vector<Case> cases() {
  return {
      // 1-D: plain, strided + dilated + asymmetric, grouped
      {2, 3, 4, 1, {9}, {3}, {1}, {1, 1}, {1}},
      {3, 4, 6, 2, {17}, {3}, {2}, {2, 0}, {2}},
      {2, 8, 8, 8, {12}, {5}, {1}, {2, 2}, {1}},
      // 2-D: resnet18 at 32x32 (stem, 3x3, strided 3x3, 1x1 downsample,
      // 1x1 spatial with 3x3 kernel)
      {4, 3, 64, 1, {32, 32}, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}},
      {4, 64, 64, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {4, 64, 128, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {4, 64, 128, 1, {8, 8}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {2, 256, 512, 1, {2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {2, 128, 128, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      // 2-D: odd channel counts, asymmetric pads, rectangular everything
      {3, 5, 7, 1, {9, 11}, {3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}},
      {1, 3, 5, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {16, 3, 2, 1, {6, 5}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {5, 16, 24, 1, {4, 4}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      // 2-D: dilated, pads reaching past the kernel
      {2, 16, 16, 1, {12, 12}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},
      {2, 4, 6, 1, {5, 5}, {1, 1}, {1, 1}, {2, 1, 0, 2}, {1, 1}},
      // 2-D: grouped, depthwise, depthwise with a multiplier
      {3, 32, 64, 4, {8, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 32, 32, 32, {9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {2, 6, 12, 6, {6, 6}, {3, 3}, {1, 2}, {1, 1, 1, 1}, {2, 1}},
      {2, 4, 8, 4, {5, 7}, {1, 3}, {1, 1}, {0, 1, 0, 1}, {1, 1}},
      // 3-D
      {2,
       2,
       3,
       1,
       {4, 5, 4},
       {2, 3, 2},
       {1, 2, 1},
       {1, 0, 1, 0, 1, 1},
       {1, 1, 2}},
      {2,
       16,
       16,
       2,
       {5, 6, 6},
       {3, 3, 3},
       {1, 1, 1},
       {1, 1, 1, 1, 1, 1},
       {1, 1, 1}},
      {1,
       4,
       8,
       1,
       {6, 6, 6},
       {1, 1, 1},
       {2, 2, 2},
       {0, 0, 0, 0, 0, 0},
       {1, 1, 1}},
  };
}

/// The outputs of the four kernels on one problem.
struct Outputs {
  std::vector<float> y, yBias, dx, dw;
};

struct Operands {
  Buf<float> x, w, b, dy;
  explicit Operands(const Case &cc)
      : x(randomBuf<float>(cat({cc.n, cc.c}, cc.in))),
        w(randomBuf<float>(cat({cc.m, cc.c / cc.group}, cc.kernel))),
        b(randomBuf<float>({cc.m})),
        dy(randomBuf<float>(cat({cc.n, cc.m}, convOut(cc)))) {}
};

Outputs runAll(const Case &cc, Operands &ops, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  WindowParams p = paramsOf(cc);
  // Outputs start as NaN: a kernel that skips an element fails the check.
  float nan = std::numeric_limits<float>::quiet_NaN();
  Buf<float> y(ops.dy.shape, nan), yBias(ops.dy.shape, nan),
      dx(ops.x.shape, nan), dw(ops.w.shape, nan);
  Tensor xt = ops.x.t(), wt = ops.w.t(), bt = ops.b.t(), dyt = ops.dy.t();
  Tensor yt = y.t(), ybt = yBias.t(), dxt = dx.t(), dwt = dw.t();
  Status s = conv(ctx, xt, wt, nullptr, p, yt);
  EXPECT_TRUE(s.ok()) << s.message;
  s = conv(ctx, xt, wt, &bt, p, ybt);
  EXPECT_TRUE(s.ok()) << s.message;
  s = convGradInput(ctx, dyt, wt, p, dxt);
  EXPECT_TRUE(s.ok()) << s.message;
  s = convGradWeight(ctx, dyt, xt, p, dwt);
  EXPECT_TRUE(s.ok()) << s.message;
  return {y.v, yBias.v, dx.v, dw.v};
}

Outputs runWith(ConvImpl impl, const Case &cc, Operands &ops, int threads) {
  ConvImpl previous = cpu::setConvImpl(impl);
  Outputs out = runAll(cc, ops, threads);
  cpu::setConvImpl(previous);
  return out;
}

class DnnlConv : public ::testing::Test {
protected:
  void SetUp() override {
    if (!cpu::dnnlAvailable())
      GTEST_SKIP() << "built without oneDNN";
  }
};

TEST_F(DnnlConv, MatchesIm2colOnEveryKernel) {
  int index = 0;
  double worst[4] = {0, 0, 0, 0};
  for (const Case &cc : cases()) {
    Operands ops(cc);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << index << " threads " << threads);
      Outputs ref = runWith(ConvImpl::Im2col, cc, ops, threads);
      int64_t before = cpu::dnnlConvCalls();
      Outputs got = runWith(ConvImpl::OneDnn, cc, ops, threads);
      // Every case here is one oneDNN takes: all four calls ran on it
      // (ConvImpl::OneDnn: its own im2col + GEMM included, which Auto
      // leaves to the direct depthwise loops, DepthwiseConvTest).
      EXPECT_EQ(cpu::dnnlConvCalls() - before, 4);
      double errors[4] = {relError(got.y, ref.y),
                          relError(got.yBias, ref.yBias),
                          relError(got.dx, ref.dx), relError(got.dw, ref.dw)};
      EXPECT_LE(errors[0], kRelTol) << "conv";
      EXPECT_LE(errors[1], kRelTol) << "conv + bias";
      EXPECT_LE(errors[2], kRelTol) << "convGradInput";
      EXPECT_LE(errors[3], kRelTol) << "convGradWeight";
      for (int k = 0; k < 4; ++k)
        worst[k] = std::max(worst[k], errors[k]);
    }
    ++index;
  }
  std::printf("[ worst    ] max|dnnl - im2col| / max|im2col|: conv %.2g, "
              "conv + bias %.2g, convGradInput %.2g, convGradWeight %.2g "
              "(tolerance %.0g)\n",
              worst[0], worst[1], worst[2], worst[3], kRelTol);
}

TEST_F(DnnlConv, ThreadCountsAgree) {
  for (const Case &cc : cases()) {
    Operands ops(cc);
    Outputs one = runWith(ConvImpl::Auto, cc, ops, 1);
    Outputs two = runWith(ConvImpl::Auto, cc, ops, 2);
    EXPECT_LE(relError(two.y, one.y), kRelTol);
    EXPECT_LE(relError(two.yBias, one.yBias), kRelTol);
    EXPECT_LE(relError(two.dx, one.dx), kRelTol);
    EXPECT_LE(relError(two.dw, one.dw), kRelTol);
  }
}

/// Problems alternate, so each call finds its cached primitive again; a
/// cached primitive gives the bits of its first run.
TEST_F(DnnlConv, CachedPrimitivesRepeatTheirResults) {
  std::vector<Case> all = cases();
  std::vector<Operands> ops;
  std::vector<Outputs> first;
  for (const Case &cc : all)
    ops.emplace_back(cc);
  for (size_t i = 0; i < all.size(); ++i)
    first.push_back(runWith(ConvImpl::Auto, all[i], ops[i], 2));
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < all.size(); ++i) {
      Outputs again = runWith(ConvImpl::Auto, all[i], ops[i], 2);
      EXPECT_TRUE(sameBits(again.y, first[i].y)) << "case " << i;
      EXPECT_TRUE(sameBits(again.yBias, first[i].yBias)) << "case " << i;
      EXPECT_TRUE(sameBits(again.dx, first[i].dx)) << "case " << i;
      EXPECT_TRUE(sameBits(again.dw, first[i].dw)) << "case " << i;
    }
}

/// conv with a fused Relu (the graph's Relu of its output, --pp-fuse-
/// elementwise) gives what conv then the Relu kernel give: oneDNN's eltwise
/// post-op on the Auto path, the im2col output then unary on the other, and
/// unary after the convolution for a kind without a post-op (Sigmoid).
TEST_F(DnnlConv, FusedActivationIsTheActivationOfTheConvolution) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  double worst = 0;
  int64_t negatives = 0;
  for (const Case &cc : cases()) {
    Operands ops(cc);
    WindowParams p = paramsOf(cc);
    Tensor xt = ops.x.t(), wt = ops.w.t(), bt = ops.b.t();
    for (ConvImpl impl : {ConvImpl::OneDnn, ConvImpl::Im2col})
      for (UnaryKind kind : {UnaryKind::Relu, UnaryKind::Sigmoid})
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message()
                       << "impl " << int(impl) << " kind " << toString(kind)
                       << " threads " << threads);
          ConvImpl previous = cpu::setConvImpl(impl);
          Context ctx;
          ctx.numThreads = threads;
          Buf<float> plain(ops.dy.shape, nan), want(ops.dy.shape, nan),
              fused(ops.dy.shape, nan);
          Tensor plainT = plain.t(), wantT = want.t(), fusedT = fused.t();
          Status s = conv(ctx, xt, wt, &bt, p, plainT);
          EXPECT_TRUE(s.ok()) << s.message;
          s = unary(ctx, kind, plainT, wantT);
          EXPECT_TRUE(s.ok()) << s.message;
          int64_t before = cpu::dnnlConvCalls();
          s = conv(ctx, xt, wt, &bt, p, fusedT, kind);
          EXPECT_TRUE(s.ok()) << s.message;
          cpu::setConvImpl(previous);
          EXPECT_EQ(cpu::dnnlConvCalls() - before,
                    impl == ConvImpl::OneDnn ? 1 : 0);
          if (impl == ConvImpl::Im2col || kind != UnaryKind::Relu) {
            // The same convolution, then the same kernel.
            EXPECT_TRUE(sameBits(fused.v, want.v));
            continue;
          }
          // The post-op: zero exactly where the convolution is negative
          // (of either sign: oneDNN writes -0), elsewhere within the
          // tolerance (it may pick another implementation).
          for (size_t i = 0; i < want.v.size(); ++i)
            if (plain.v[i] < 0) {
              ++negatives;
              ASSERT_EQ(fused.v[i], 0.f) << "element " << i;
            }
          double error = relError(fused.v, want.v);
          EXPECT_LE(error, kRelTol);
          worst = std::max(worst, error);
        }
  }
  EXPECT_GT(negatives, 0);
  std::printf("[ worst    ] max|post-op - relu(conv)| / max|relu(conv)|: %.2g "
              "over %lld negative elements (tolerance %.0g)\n",
              worst, static_cast<long long>(negatives), kRelTol);
}

/// Device threads of a local job convolve at once, each with its own plans.
TEST_F(DnnlConv, ConcurrentCallersGetTheirOwnResults) {
  std::vector<Case> all = cases();
  std::vector<Operands> ops;
  std::vector<Outputs> serial;
  for (const Case &cc : all)
    ops.emplace_back(cc);
  for (size_t i = 0; i < all.size(); ++i)
    serial.push_back(runWith(ConvImpl::Auto, all[i], ops[i], 1));
  std::vector<std::vector<Outputs>> results(3);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < results.size(); ++t)
    workers.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round)
        for (size_t j = 0; j < all.size(); ++j) {
          size_t i = (j + t * 5) % all.size(); // a different order each
          if (round == 1)
            results[t].push_back(runAll(all[i], ops[i], 1));
          else
            runAll(all[i], ops[i], 1);
        }
    });
  for (std::thread &w : workers)
    w.join();
  for (size_t t = 0; t < results.size(); ++t)
    for (size_t j = 0; j < all.size(); ++j) {
      size_t i = (j + t * 5) % all.size();
      const Outputs &got = results[t][j];
      EXPECT_TRUE(sameBits(got.y, serial[i].y)) << t << " " << i;
      EXPECT_TRUE(sameBits(got.yBias, serial[i].yBias)) << t << " " << i;
      EXPECT_TRUE(sameBits(got.dx, serial[i].dx)) << t << " " << i;
      EXPECT_TRUE(sameBits(got.dw, serial[i].dw)) << t << " " << i;
    }
}

TEST_F(DnnlConv, Float64StaysOnIm2col) {
  Context ctx;
  Buf<double> x = randomBuf<double>({2, 3, 6, 6});
  Buf<double> w = randomBuf<double>({4, 3, 3, 3});
  Buf<double> y({2, 4, 4, 4});
  Tensor xt = x.t(), wt = w.t(), yt = y.t();
  WindowParams p;
  p.kernel = {3, 3};
  int64_t before = cpu::dnnlConvCalls();
  ASSERT_TRUE(conv(ctx, xt, wt, nullptr, p, yt).ok());
  EXPECT_EQ(cpu::dnnlConvCalls(), before);
}

TEST_F(DnnlConv, ForcedIm2colSkipsOneDnn) {
  Case cc{2, 3, 4, 1, {6, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}};
  Operands ops(cc);
  int64_t before = cpu::dnnlConvCalls();
  runWith(ConvImpl::Im2col, cc, ops, 1);
  EXPECT_EQ(cpu::dnnlConvCalls(), before);
}

/// An empty batch is not oneDNN's: the im2col path handles it.
TEST_F(DnnlConv, EmptyBatchFallsBack) {
  Context ctx;
  Buf<float> x({0, 3, 6, 6}), w = randomBuf<float>({4, 3, 3, 3}),
                              y({0, 4, 4, 4});
  Buf<float> dw(w.shape, 7.f);
  Tensor xt = x.t(), wt = w.t(), yt = y.t(), dwt = dw.t();
  WindowParams p;
  p.kernel = {3, 3};
  int64_t before = cpu::dnnlConvCalls();
  ASSERT_TRUE(conv(ctx, xt, wt, nullptr, p, yt).ok());
  ASSERT_TRUE(convGradWeight(ctx, yt, xt, p, dwt).ok());
  EXPECT_EQ(cpu::dnnlConvCalls(), before);
  for (float v : dw.v)
    EXPECT_EQ(v, 0.f);
}

} // namespace

namespace {

class DnnlGemm : public ::testing::Test {
protected:
  void SetUp() override {
    if (!cpu::dnnlAvailable())
      GTEST_SKIP() << "built without oneDNN";
  }
};

std::vector<float> gemmWith(cpu::GemmImpl impl, int threads, Buf<float> &a,
                            Buf<float> &b, Buf<float> &c, float alpha,
                            float beta, bool transA, bool transB,
                            const Shape &yShape,
                            UnaryKind activation = UnaryKind::Identity) {
  cpu::GemmImpl previous = cpu::setGemmImpl(impl);
  Context ctx;
  ctx.numThreads = threads;
  Buf<float> y(yShape, std::numeric_limits<float>::quiet_NaN());
  Tensor at = a.t(), bt = b.t(), ct = c.t(), yt = y.t();
  Status s =
      gemm(ctx, at, bt, &ct, alpha, beta, transA, transB, yt, activation);
  EXPECT_TRUE(s.ok()) << s.message;
  cpu::setGemmImpl(previous);
  return y.v;
}

} // namespace

TEST_F(DnnlGemm, MatchesOpenBlasOnLayerShapes) {
  // m x n x k: the MLP's and GPT's layers, a classifier head, odd sizes;
  // on 2 threads the larger ones are split by columns or by rows (ragged
  // last blocks included).
  const int64_t shapes[][3] = {
      {256, 1024, 1024}, {1024, 1024, 256}, {32, 128, 64}, {8, 10, 512},
      {1, 1, 1},         {7, 13, 5},        {33, 65, 129}, {100, 300, 200},
      {300, 100, 200},   {37, 1000, 300}};
  double worst = 0;
  for (const auto &shape : shapes)
    for (int variant = 0; variant < 4; ++variant)
      for (int threads : {1, 2}) {
        int64_t m = shape[0], n = shape[1], k = shape[2];
        bool transA = variant & 1, transB = variant & 2;
        SCOPED_TRACE(::testing::Message()
                     << m << "x" << n << "x" << k << " transA " << transA
                     << " transB " << transB << " threads " << threads);
        Buf<float> a = randomBuf<float>(transA ? Shape{k, m} : Shape{m, k});
        Buf<float> b = randomBuf<float>(transB ? Shape{n, k} : Shape{k, n});
        Buf<float> c = randomBuf<float>({m, n});
        float alpha = variant == 3 ? 0.5f : 1.f, beta = variant ? -1.5f : 0.f;
        std::vector<float> want =
            gemmWith(cpu::GemmImpl::OpenBLAS, threads, a, b, c, alpha, beta,
                     transA, transB, {m, n});
        int64_t before = cpu::dnnlGemmCalls();
        int64_t matmulsBefore = cpu::dnnlMatmulCalls();
        std::vector<float> got = gemmWith(cpu::GemmImpl::Auto, threads, a, b, c,
                                          alpha, beta, transA, transB, {m, n});
        EXPECT_EQ(cpu::dnnlGemmCalls() - before, 1);
        // On one thread the large ones run as the matmul primitive,
        // whatever the transposes, alpha and beta (no reference kernel
        // takes them).
        EXPECT_EQ(cpu::dnnlMatmulCalls() - matmulsBefore,
                  threads == 1 && m * n * k >= (int64_t(1) << 22) ? 1 : 0);
        double error = relError(got, want);
        EXPECT_LE(error, kRelTol);
        worst = std::max(worst, error);
      }
  std::printf("[ worst    ] max|dnnl - openblas| / max|openblas|: %.2g "
              "(tolerance %.0g)\n",
              worst, kRelTol);
}

TEST_F(DnnlGemm, BiasAndReluEpilogue) {
  // A linear layer: y = relu(x w^T + bias). On one thread a large one runs
  // as the matmul primitive with the bias and the Relu as its epilogue; the
  // others (small, 2 threads, a full c matrix, alpha with a bias) take sgemm
  // and a Relu pass. Each is compared with OpenBLAS and a separate Relu.
  struct Case {
    int64_t m, n, k;
    Shape c;
    float alpha;
  };
  const Case cases[] = {{256, 1024, 1024, {1024}, 1.f},
                        {256, 1024, 1024, {1, 1024}, 1.f},
                        {256, 1024, 1024, {256, 1024}, 1.f},
                        {256, 1024, 1024, {1024}, 0.5f},
                        {8, 128, 784, {128}, 1.f}};
  for (const Case &tc : cases)
    for (int threads : {1, 2})
      for (UnaryKind activation : {UnaryKind::Identity, UnaryKind::Relu}) {
        SCOPED_TRACE(::testing::Message()
                     << tc.m << "x" << tc.n << "x" << tc.k << " c "
                     << tc.c.size() << "-d alpha " << tc.alpha << " threads "
                     << threads << " relu " << (activation == UnaryKind::Relu));
        Buf<float> a = randomBuf<float>({tc.m, tc.k});
        Buf<float> b = randomBuf<float>({tc.n, tc.k});
        Buf<float> c = randomBuf<float>(tc.c);
        std::vector<float> want =
            gemmWith(cpu::GemmImpl::OpenBLAS, threads, a, b, c, tc.alpha, 1.f,
                     false, true, {tc.m, tc.n});
        if (activation == UnaryKind::Relu)
          for (float &v : want)
            v = std::max(v, 0.f);
        int64_t matmulsBefore = cpu::dnnlMatmulCalls();
        std::vector<float> got =
            gemmWith(cpu::GemmImpl::Auto, threads, a, b, c, tc.alpha, 1.f,
                     false, true, {tc.m, tc.n}, activation);
        bool large = tc.m * tc.n * tc.k >= (int64_t(1) << 22);
        EXPECT_EQ(cpu::dnnlMatmulCalls() - matmulsBefore,
                  threads == 1 && large ? 1 : 0);
        EXPECT_LE(relError(got, want), kRelTol);
        if (activation == UnaryKind::Relu) {
          EXPECT_GE(*std::min_element(got.begin(), got.end()), 0.f);
          // Half the outputs of a random layer are clamped.
          int64_t zeros = std::count(got.begin(), got.end(), 0.f);
          EXPECT_GT(zeros, int64_t(got.size()) / 4);
        }
      }
}

TEST_F(DnnlGemm, ForcedOpenBlasSkipsOneDnn) {
  Buf<float> a = randomBuf<float>({4, 3}), b = randomBuf<float>({3, 5}),
             c = randomBuf<float>({4, 5});
  int64_t before = cpu::dnnlGemmCalls();
  gemmWith(cpu::GemmImpl::OpenBLAS, 1, a, b, c, 1.f, 0.f, false, false, {4, 5});
  EXPECT_EQ(cpu::dnnlGemmCalls(), before);
}

namespace {

class DnnlVectorMath : public ::testing::Test {
protected:
  void SetUp() override {
    if (!cpu::dnnlAvailable())
      GTEST_SKIP() << "built without oneDNN";
  }
};

/// The f64 formula of each kind dnnlEltwise runs.
double eltwiseRef(UnaryKind kind, double x) {
  switch (kind) {
  case UnaryKind::GeluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case UnaryKind::GeluErf:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case UnaryKind::Sigmoid:
    return 1 / (1 + std::exp(-x));
  default:
    return std::tanh(x);
  }
}

} // namespace

// GELU (erf and tanh) forward and gradient, sigmoid and tanh forward from
// oneDNN's eltwise primitive (their gradients, from y, stay on the loop),
// against f64 formulas (the gradient by central differences of them), on 1
// and 2 threads, over values from -12 to 12 (both tails and the middle), in
// place too; a tensor below kDnnlEltwiseMinElements stays on the loop.
TEST_F(DnnlVectorMath, MatchesTheFormulasInForwardAndGradient) {
  const int64_t n = 3 * cpu::kDnnlEltwiseMinElements + 7;
  Buf<float> x = randomBuf<float>({n}, -12, 12), dy = randomBuf<float>({n});
  for (UnaryKind kind : {UnaryKind::GeluErf, UnaryKind::GeluTanh,
                         UnaryKind::Sigmoid, UnaryKind::Tanh}) {
    SCOPED_TRACE(toString(kind));
    std::vector<double> y64(n), dx64(n);
    for (int64_t i = 0; i < n; ++i) {
      double v = x[i], h = 1e-5;
      y64[i] = eltwiseRef(kind, v);
      dx64[i] =
          dy[i] * (eltwiseRef(kind, v + h) - eltwiseRef(kind, v - h)) / (2 * h);
    }
    int64_t calls = cpu::dnnlEltwiseTakes(kind, /*gradient=*/true) ? 2 : 1;
    for (int threads : {1, 2}) {
      Context ctx;
      ctx.numThreads = threads;
      Buf<float> y({n}), dx({n});
      Tensor xt = x.t(), yt = y.t(), dyt = dy.t(), dxt = dx.t();
      int64_t before = cpu::dnnlEltwiseCalls();
      ASSERT_TRUE(unary(ctx, kind, xt, yt).ok());
      ASSERT_TRUE(unaryGrad(ctx, kind, xt, yt, dyt, dxt).ok());
      EXPECT_EQ(cpu::dnnlEltwiseCalls() - before, calls);
      expectNear(y.v, y64, 2e-6, "forward");
      expectNear(dx.v, dx64, 2e-6, "gradient");
      // In place, as the generated programs may run it.
      Buf<float> inPlace = x;
      Tensor it = inPlace.t();
      ASSERT_TRUE(unary(ctx, kind, it, it).ok());
      EXPECT_EQ(inPlace.v, y.v);
    }
  }
  Buf<float> small = randomBuf<float>({cpu::kDnnlEltwiseMinElements - 1});
  Buf<float> smallY({cpu::kDnnlEltwiseMinElements - 1});
  Tensor st = small.t(), syt = smallY.t();
  Context ctx;
  int64_t before = cpu::dnnlEltwiseCalls();
  ASSERT_TRUE(unary(ctx, UnaryKind::GeluErf, st, syt).ok());
  ASSERT_TRUE(unary(ctx, UnaryKind::Sigmoid, st, syt).ok());
  EXPECT_EQ(cpu::dnnlEltwiseCalls(), before);
}

// Softmax and log-softmax with their gradients from oneDNN's primitive
// against the runtime's F64 loop on the same values: along the last axis
// (oneDNN's vectorised forward, which must run) and along a middle axis
// (whichever runs), on 1 and 2 threads, values from -30 to 30.
TEST_F(DnnlVectorMath, SoftmaxMatchesTheF64Loop) {
  for (auto [shape, axis, mustRun] :
       {std::tuple<Shape, int64_t, bool>{{64, 3, 49}, 2, true},
        std::tuple<Shape, int64_t, bool>{{8, 300, 5}, 1, false}}) {
    int64_t n = numelOf(shape);
    Buf<float> x = randomBuf<float>(shape, -30, 30),
               dy = randomBuf<float>(shape);
    Buf<double> x64(shape), dy64(shape);
    for (int64_t i = 0; i < n; ++i) {
      x64[i] = x[i];
      dy64[i] = dy[i];
    }
    for (bool log : {false, true}) {
      Context ctx;
      Buf<double> y64(shape), dx64(shape);
      Tensor x64t = x64.t(), y64t = y64.t(), dy64t = dy64.t(), dx64t = dx64.t();
      ASSERT_TRUE(softmax(ctx, x64t, axis, log, y64t).ok());
      ASSERT_TRUE(softmaxGrad(ctx, y64t, dy64t, axis, log, dx64t).ok());
      for (int threads : {1, 2}) {
        ctx.numThreads = threads;
        Buf<float> y(shape), dx(shape);
        Tensor xt = x.t(), yt = y.t(), dyt = dy.t(), dxt = dx.t();
        int64_t before = cpu::dnnlSoftmaxCalls();
        ASSERT_TRUE(softmax(ctx, xt, axis, log, yt).ok());
        // The forward has a JIT kernel from AVX2 on; the backward not on
        // every CPU (on an AVX2-only AMD EPYC oneDNN offers its reference
        // kernel, which the runtime leaves to its loop): either may run.
        if (mustRun)
          EXPECT_EQ(cpu::dnnlSoftmaxCalls() - before, 1);
        ASSERT_TRUE(softmaxGrad(ctx, yt, dyt, axis, log, dxt).ok());
        // oneDNN sums a row in f32 (the loop in f64): log(sum) is off by up
        // to 49 roundings of the sum, 2.8e-6 here.
        expectNear(y.v, y64.v, log ? 1e-5 : 1e-6,
                   log ? "log-softmax" : "softmax");
        // The gradient from the f32 y: its rounding is in dx too.
        expectNear(dx.v, dx64.v, 1e-5, "gradient");
      }
    }
  }
}
