//===- DepthwiseConvTest.cpp - Direct depthwise convolutions ----*- C++ -*-===//
//
// The CPU backend runs depthwise convolutions (one input and one output
// channel per group) on direct loops (lib/cpu/Depthwise.h) wherever oneDNN
// does not take them with a JIT kernel. These tests run the three direct
// kernels against the im2col + GEMM path on 1-D, 2-D and 3-D problems with
// strides, dilations, asymmetric pads and pads wider than the plane (the
// 7x7 kernels of ConvNeXt on 2x2 planes): in F64 within 1e-12 of the
// largest output, in F32 within 1e-5. They check that 1 and 2 threads give
// the same bits, that conv / convGradInput / convGradWeight run the direct
// loops for F64 (no oneDNN there) and that an F32 problem oneDNN would run
// on its own im2col + GEMM runs them too.
//
//===----------------------------------------------------------------------===//

#include "KernelTestHelpers.h"
#include "cpu/Depthwise.h"
#include "cpu/Dnnl.h"
#include "pp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace pp::rt;
using namespace pp::rt::test;
using pp::rt::cpu::ConvImpl;

namespace {

std::vector<ConvCase> depthwiseCases() {
  return {
      // 1-D: plain, strided + dilated + asymmetric pads
      {2, 8, 8, 8, {12}, {5}, {1}, {2, 2}, {1}},
      {3, 4, 4, 4, {17}, {3}, {2}, {2, 0}, {2}},
      // 2-D: MobileNet's 3x3 (stride 1 and 2), EfficientNet's 5x5
      {2, 32, 32, 32, {9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 16, 16, 16, {9, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {3, 6, 6, 6, {7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
      // 2-D: ConvNeXt's 7x7 on 16x16 and on planes smaller than the pads
      {2, 12, 12, 12, {16, 16}, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}},
      {4, 24, 24, 24, {2, 2}, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}},
      {2, 5, 5, 5, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      // 2-D: rectangular, asymmetric pads, dilations, mixed strides, 1x1
      {3, 5, 5, 5, {9, 11}, {3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}},
      {2, 4, 4, 4, {12, 12}, {3, 3}, {1, 3}, {2, 2, 2, 2}, {2, 2}},
      {2, 7, 7, 7, {5, 6}, {1, 1}, {2, 1}, {0, 1, 1, 0}, {1, 1}},
      // 3-D
      {2,
       3,
       3,
       3,
       {4, 5, 6},
       {3, 3, 3},
       {1, 2, 1},
       {1, 1, 0, 1, 0, 1},
       {1, 1, 2}},
  };
}

template <typename T> struct Operands {
  Buf<T> x, w, b, dy;
  explicit Operands(const ConvCase &cc)
      : x(randomBuf<T>(cat({cc.n, cc.c}, cc.in))),
        w(randomBuf<T>(cat({cc.m, 1}, cc.kernel))), b(randomBuf<T>({cc.m})),
        dy(randomBuf<T>(cat({cc.n, cc.m}, convOut(cc)))) {}
  /// The same values in another precision.
  template <typename U>
  explicit Operands(Operands<U> &o)
      : x(o.x.shape), w(o.w.shape), b(o.b.shape), dy(o.dy.shape) {
    std::copy(o.x.v.begin(), o.x.v.end(), x.v.begin());
    std::copy(o.w.v.begin(), o.w.v.end(), w.v.begin());
    std::copy(o.b.v.begin(), o.b.v.end(), b.v.begin());
    std::copy(o.dy.v.begin(), o.dy.v.end(), dy.v.begin());
  }
};

template <typename T> struct Outputs { std::vector<T> y, dx, dw; };

/// conv (with bias), convGradInput and convGradWeight through the public
/// kernels, under `impl`; outputs start as NaN so a skipped element shows.
template <typename T>
Outputs<T> runKernels(ConvImpl impl, const ConvCase &cc, Operands<T> &ops,
                      int threads) {
  ConvImpl previous = cpu::setConvImpl(impl);
  Context ctx;
  ctx.numThreads = threads;
  WindowParams p = paramsOf(cc);
  T nan = std::numeric_limits<T>::quiet_NaN();
  Buf<T> y(ops.dy.shape, nan), dx(ops.x.shape, nan), dw(ops.w.shape, nan);
  Tensor xt = ops.x.t(), wt = ops.w.t(), bt = ops.b.t(), dyt = ops.dy.t();
  Tensor yt = y.t(), dxt = dx.t(), dwt = dw.t();
  Status s = conv(ctx, xt, wt, &bt, p, yt);
  EXPECT_TRUE(s.ok()) << s.message;
  s = convGradInput(ctx, dyt, wt, p, dxt);
  EXPECT_TRUE(s.ok()) << s.message;
  s = convGradWeight(ctx, dyt, xt, p, dwt);
  EXPECT_TRUE(s.ok()) << s.message;
  cpu::setConvImpl(previous);
  return {y.v, dx.v, dw.v};
}

/// The three direct kernels called directly.
template <typename T>
Outputs<T> runDirect(const ConvCase &cc, Operands<T> &ops, int threads) {
  Context ctx;
  ctx.numThreads = threads;
  WindowParams p = paramsOf(cc);
  T nan = std::numeric_limits<T>::quiet_NaN();
  Buf<T> y(ops.dy.shape, nan), dx(ops.x.shape, nan), dw(ops.w.shape, nan);
  common::ConvDims cp;
  static const char *const names[3] = {"x", "w", "y"};
  Tensor xt = ops.x.t(), wt = ops.w.t(), yt = y.t();
  Status s = common::resolveConvDims("conv", xt, wt, yt, p, names, cp);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(cpu::isDepthwise(cp));
  cpu::depthwiseForward<T>(ctx, cp, ops.x.v.data(), ops.w.v.data(),
                           ops.b.v.data(), y.v.data());
  cpu::depthwiseBackwardData<T>(ctx, cp, ops.dy.v.data(), ops.w.v.data(),
                                dx.v.data());
  cpu::depthwiseBackwardWeights<T>(ctx, cp, ops.dy.v.data(), ops.x.v.data(),
                                   dw.v.data());
  return {y.v, dx.v, dw.v};
}

TEST(DepthwiseConv, MatchesIm2colInF64) {
  int index = 0;
  for (const ConvCase &cc : depthwiseCases()) {
    Operands<double> ops(cc);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << index << " threads " << threads);
      Outputs<double> ref = runKernels(ConvImpl::Im2col, cc, ops, threads);
      Outputs<double> got = runDirect(cc, ops, threads);
      EXPECT_LE(relError(got.y, ref.y), 1e-12) << "forward";
      EXPECT_LE(relError(got.dx, ref.dx), 1e-12) << "input gradient";
      EXPECT_LE(relError(got.dw, ref.dw), 1e-12) << "weight gradient";
    }
    ++index;
  }
}

TEST(DepthwiseConv, F32MatchesF64) {
  int index = 0;
  for (const ConvCase &cc : depthwiseCases()) {
    SCOPED_TRACE(::testing::Message() << "case " << index++);
    Operands<float> ops(cc);
    Operands<double> wide(ops);
    Outputs<float> got = runDirect(cc, ops, 2);
    Outputs<double> ref = runDirect(cc, wide, 1);
    EXPECT_LE(relError(got.y, ref.y), 1e-5) << "forward";
    EXPECT_LE(relError(got.dx, ref.dx), 1e-5) << "input gradient";
    EXPECT_LE(relError(got.dw, ref.dw), 1e-5) << "weight gradient";
  }
}

/// Forward and input gradient run plane by plane, the weight gradient
/// channel by channel over all images: the thread count changes no bit.
TEST(DepthwiseConv, ThreadCountsGiveTheSameBits) {
  for (const ConvCase &cc : depthwiseCases()) {
    Operands<float> ops(cc);
    Outputs<float> one = runDirect(cc, ops, 1);
    Outputs<float> two = runDirect(cc, ops, 2);
    EXPECT_TRUE(sameBits(one.y, two.y));
    EXPECT_TRUE(sameBits(one.dx, two.dx));
    EXPECT_TRUE(sameBits(one.dw, two.dw));
  }
}

/// F64 never reaches oneDNN: the public kernels give the direct loops' bits
/// (im2col's GEMM sums the taps in another order).
TEST(DepthwiseConv, PublicKernelsRunTheDirectLoopsInF64) {
  ConvCase cc{2, 12, 12, 12, {16, 16}, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}};
  Operands<double> ops(cc);
  Outputs<double> direct = runDirect(cc, ops, 2);
  Outputs<double> got = runKernels(ConvImpl::Auto, cc, ops, 2);
  Outputs<double> im2col = runKernels(ConvImpl::Im2col, cc, ops, 2);
  EXPECT_TRUE(sameBits(got.y, direct.y));
  EXPECT_TRUE(sameBits(got.dx, direct.dx));
  EXPECT_TRUE(sameBits(got.dw, direct.dw));
  // Not vacuous: the forced im2col path differs in the last bits.
  EXPECT_FALSE(sameBits(im2col.dw, direct.dw));
}

/// Where oneDNN has no JIT kernel for an F32 depthwise problem (its own
/// im2col + GEMM: the weight gradient of 7x7 kernels and planes smaller
/// than the pads on the CPUs measured), the direct loops run instead; with
/// PP_RUNTIME_CONV=onednn oneDNN runs everything it takes.
TEST(DepthwiseConv, F32ProblemsOneDnnRunsOnGemmTakeTheDirectLoops) {
  if (!cpu::dnnlAvailable())
    GTEST_SKIP() << "built without oneDNN";
  for (const ConvCase &cc : depthwiseCases()) {
    Operands<float> ops(cc);
    Outputs<float> direct = runDirect(cc, ops, 1);
    int64_t before = cpu::dnnlConvCalls();
    Outputs<float> got = runKernels(ConvImpl::Auto, cc, ops, 1);
    int64_t onOneDnn = cpu::dnnlConvCalls() - before;
    // Each kernel ran on one of the two; those that did not reach oneDNN
    // gave the direct loops' bits.
    int direct3 = sameBits(got.y, direct.y) + sameBits(got.dx, direct.dx) +
                  sameBits(got.dw, direct.dw);
    EXPECT_GE(onOneDnn + direct3, 3);
    EXPECT_LE(relError(got.y, direct.y), 1e-5);
    EXPECT_LE(relError(got.dx, direct.dx), 1e-5);
    EXPECT_LE(relError(got.dw, direct.dw), 1e-5);
    before = cpu::dnnlConvCalls();
    runKernels(ConvImpl::OneDnn, cc, ops, 1);
    EXPECT_EQ(cpu::dnnlConvCalls() - before, 3);
  }
}

} // namespace
