//===- Float16ComputeTest.cpp - Arithmetic on F16 and BF16 tensors --------===//
//
// The CPU backend computes the 16-bit floats through f32 (Kernels.h): each
// 16-bit input is widened exactly, the f32 kernel runs, each 16-bit output
// is rounded once to nearest even. So a kernel on 16-bit tensors must give,
// bit for bit, what the same kernel gives on the widened inputs in F32 once
// its outputs are rounded (with `cast`) to the 16-bit dtype: the same code
// on the same data. Non-float operands (labels, masks, indices, F32
// statistics) must come out byte-identical. Also: f32 accumulation, and the
// dtype rules that still hold across operands.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"

#include "pp/Runtime/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

using Shape = std::vector<int64_t>;

enum class Role { In, Out, InOut };

/// One operand of a kernel call: by default a float of the 16-bit dtype
/// under test (F32 in the reference run), else of the `fixed` dtype in both
/// runs. Inputs hold `init`, or uniform values in [lo, hi) rounded to the
/// operand's dtype; outputs start as NaN (0 for non-float dtypes).
struct Spec {
  Role role;
  Shape shape;
  std::optional<DType> fixed;
  std::vector<double> init;
  double lo = -1, hi = 1;
};

Spec in(Shape shape, double lo = -1, double hi = 1) {
  return {Role::In, std::move(shape), std::nullopt, {}, lo, hi};
}
Spec out(Shape shape) { return {Role::Out, std::move(shape), std::nullopt}; }
Spec inout(Shape shape, double lo = -1, double hi = 1) {
  return {Role::InOut, std::move(shape), std::nullopt, {}, lo, hi};
}
Spec fixedIn(DType dtype, Shape shape, std::vector<double> init = {},
             double lo = -1, double hi = 1) {
  return {Role::In, std::move(shape), dtype, std::move(init), lo, hi};
}
Spec fixedOut(DType dtype, Shape shape) {
  return {Role::Out, std::move(shape), dtype};
}

int64_t numelOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Storage for any dtype (8 bytes per element is enough).
Owned<uint64_t> storage(DType dtype, const Shape &shape) {
  return Owned<uint64_t>(shape, {}, dtype);
}

/// dst = `values` converted (as `cast` converts from F64) to dst's dtype.
void assign(const std::vector<double> &values, Tensor &dst) {
  Context ctx;
  Owned<double> src(dst.shape, values);
  Status s = cast(ctx, src.t, dst);
  ASSERT_TRUE(s.ok()) << s.message;
}

void convert(const Tensor &src, Tensor &dst) {
  Context ctx;
  Status s = cast(ctx, src, dst);
  ASSERT_TRUE(s.ok()) << s.message;
}

using Call = std::function<Status(std::vector<Tensor> &)>;

/// Runs `call` on 16-bit operands of `dtype` and on their F32 widening, and
/// checks that every output of the first is the rounded output of the
/// second (and that non-float outputs agree byte for byte).
void expectThroughF32(DType dtype, const std::vector<Spec> &specs,
                      const Call &call, const std::string &what,
                      unsigned seed = 7) {
  SCOPED_TRACE(what + " on " + dtypeName(dtype));
  Context ctx;
  ctx.numThreads = 2;
  std::mt19937 gen(seed);
  std::vector<Owned<uint64_t>> half, wide;
  std::vector<Tensor> halfT, wideT;
  for (const Spec &spec : specs) {
    DType hd = spec.fixed ? *spec.fixed : dtype;
    DType wd = spec.fixed ? *spec.fixed : DType::F32;
    half.push_back(storage(hd, spec.shape));
    wide.push_back(storage(wd, spec.shape));
    int64_t n = numelOf(spec.shape);
    std::vector<double> values = spec.init;
    if (spec.role == Role::Out) {
      bool isFloatOut =
          !spec.fixed || *spec.fixed == DType::F32 || *spec.fixed == DType::F64;
      values.assign(n, isFloatOut ? std::nan("") : 0.0);
    } else if (values.empty()) {
      std::uniform_real_distribution<double> dist(spec.lo, spec.hi);
      for (int64_t i = 0; i < n; ++i)
        values.push_back(dist(gen));
    }
    ASSERT_EQ(static_cast<int64_t>(values.size()), n);
    // Round once into the operand's dtype; the reference reads the same
    // (exactly widened) values.
    assign(values, half.back().t);
    convert(half.back().t, wide.back().t);
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    halfT.push_back(half[k].t);
    wideT.push_back(wide[k].t);
  }
  Status sh = call(halfT);
  ASSERT_TRUE(sh.ok()) << sh.message;
  Status sw = call(wideT);
  ASSERT_TRUE(sw.ok()) << sw.message;
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k].role == Role::In)
      continue;
    std::string operand = "operand " + std::to_string(k);
    int64_t n = numelOf(specs[k].shape);
    if (specs[k].fixed) {
      EXPECT_EQ(std::memcmp(half[k].values.data(), wide[k].values.data(),
                            n * dtypeSize(*specs[k].fixed)),
                0)
          << operand;
      continue;
    }
    Owned<uint64_t> expected = storage(dtype, specs[k].shape);
    convert(wide[k].t, expected.t);
    const uint16_t *got = half[k].t.as<const uint16_t>();
    const uint16_t *want = expected.t.as<const uint16_t>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != want[i] && mismatches++ < 5)
        ADD_FAILURE() << operand << "[" << i << "]: got 0x" << std::hex
                      << got[i] << ", want 0x" << want[i] << std::dec;
    EXPECT_EQ(mismatches, 0) << operand << " of " << n << " elements";
    // The outputs were written (they start as NaN).
    int64_t nans = 0;
    for (int64_t i = 0; i < n; ++i)
      nans += std::isnan(float(wide[k].t.as<const float>()[i]));
    EXPECT_LT(nans, n) << operand << " was not written";
  }
}

const DType kFloat16s[] = {DType::F16, DType::BF16};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(Float16Compute, BinaryArithmeticWithBroadcasting) {
  for (DType dt : kFloat16s) {
    struct Case {
      BinaryKind kind;
      Shape a, b, c;
      double lo, hi; // of b (Div and Pow keep away from 0)
    };
    for (const Case &c :
         {Case{BinaryKind::Add, {2, 3, 4}, {3, 1}, {2, 3, 4}, -1, 1},
          Case{BinaryKind::Sub, {3, 1}, {2, 1, 4}, {2, 3, 4}, -1, 1},
          Case{BinaryKind::Mul, {4}, {2, 3, 4}, {2, 3, 4}, -3, 3},
          Case{BinaryKind::Div, {2, 3, 4}, {2, 1, 4}, {2, 3, 4}, 0.25, 2},
          Case{BinaryKind::Pow, {2, 3, 4}, {4}, {2, 3, 4}, -2, 2}}) {
      double aLo = c.kind == BinaryKind::Pow ? 0.1 : -2;
      expectThroughF32(
          dt, {in(c.a, aLo, 2), in(c.b, c.lo, c.hi), out(c.c)},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return binary(ctx, c.kind, t[0], t[1], t[2]);
          },
          std::string("binary ") + std::to_string(int(c.kind)));
    }
  }
}

TEST(Float16Compute, BinaryComparisonsWriteBool) {
  for (DType dt : kFloat16s)
    for (BinaryKind kind : {BinaryKind::Less, BinaryKind::Greater}) {
      expectThroughF32(
          dt, {in({3, 4}), in({4}), fixedOut(DType::Bool, {3, 4})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return binary(ctx, kind, t[0], t[1], t[2]);
          },
          "compare");
    }
  // Equal on values the rounding makes equal: 1 + 2^-12 is 1 in both.
  for (DType dt : kFloat16s) {
    Context ctx;
    Owned<uint64_t> a = storage(dt, {3}), b = storage(dt, {3});
    assign({1.0, 2.0, -0.5}, a.t);
    assign({1.0 + 1.0 / 4096, 2.5, -0.5}, b.t);
    Owned<uint8_t> c = makeBool({3});
    ASSERT_TRUE(binary(ctx, BinaryKind::Equal, a.t, b.t, c.t).ok());
    EXPECT_EQ(c.values, (std::vector<uint8_t>{1, 0, 1}));
  }
}

TEST(Float16Compute, PowExponentOfAnotherDType) {
  // Pow alone lets the exponent's dtype differ: a 16-bit exponent of an F32
  // base, an I64 exponent of a 16-bit base.
  for (DType dt : kFloat16s) {
    expectThroughF32(
        dt,
        {fixedIn(DType::F32, {4}, {}, 0.5, 2), in({4}, -2, 2),
         fixedOut(DType::F32, {4})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return binary(ctx, BinaryKind::Pow, t[0], t[1], t[2]);
        },
        "pow f32 ^ 16-bit");
    expectThroughF32(
        dt, {in({4}, -2, 2), fixedIn(DType::I64, {4}, {0, 1, 2, 3}), out({4})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return binary(ctx, BinaryKind::Pow, t[0], t[1], t[2]);
        },
        "pow 16-bit ^ i64");
  }
}

TEST(Float16Compute, Unary) {
  for (DType dt : kFloat16s)
    for (UnaryKind kind :
         {UnaryKind::Relu, UnaryKind::Exp, UnaryKind::Tanh, UnaryKind::Sigmoid,
          UnaryKind::GeluErf, UnaryKind::Log, UnaryKind::Sqrt,
          UnaryKind::LeakyRelu, UnaryKind::HardSwish}) {
      bool positive = kind == UnaryKind::Log || kind == UnaryKind::Sqrt;
      expectThroughF32(
          dt, {in({5, 7}, positive ? 0.01 : -4, 4), out({5, 7})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return unary(ctx, kind, t[0], t[1], 0.1f);
          },
          std::string("unary ") + toString(kind));
    }
}

TEST(Float16Compute, UnaryInPlace) {
  // y aliasing x: outputs are only written once the kernel is done.
  for (DType dt : kFloat16s) {
    Context ctx;
    Owned<uint64_t> x = storage(dt, {4});
    assign({-1.0, 0.5, 2.0, -3.0}, x.t);
    ASSERT_TRUE(unary(ctx, UnaryKind::Relu, x.t, x.t).ok());
    Owned<double> back({4});
    convert(x.t, back.t);
    EXPECT_EQ(back.values, (std::vector<double>{0, 0.5, 2, 0}));
  }
}

TEST(Float16Compute, UnaryGrad) {
  for (DType dt : kFloat16s)
    for (UnaryKind kind : {UnaryKind::Relu, UnaryKind::Tanh, UnaryKind::Sigmoid,
                           UnaryKind::GeluTanh}) {
      expectThroughF32(
          dt, {in({6, 5}, -3, 3), in({6, 5}), in({6, 5}), out({6, 5})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return unaryGrad(ctx, kind, t[0], t[1], t[2], t[3]);
          },
          std::string("unaryGrad ") + toString(kind));
    }
}

TEST(Float16Compute, ClipAndReduceSumTo) {
  for (DType dt : kFloat16s) {
    expectThroughF32(
        dt, {in({3, 4}, -2, 2), in({4}, -1, -0.5), in({}, 0.5, 1), out({3, 4})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return clip(ctx, t[0], &t[1], &t[2], t[3]);
        },
        "clip");
    expectThroughF32(
        dt, {in({2, 3, 4}), out({3, 1})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return reduceSumTo(ctx, t[0], t[1]);
        },
        "reduceSumTo");
  }
}

//===----------------------------------------------------------------------===//
// Reductions, softmax, normalisation
//===----------------------------------------------------------------------===//

TEST(Float16Compute, Reduce) {
  for (DType dt : kFloat16s) {
    struct Case {
      ReduceKind kind;
      std::vector<int64_t> axes;
      Shape y;
    };
    for (const Case &c : {Case{ReduceKind::Sum, {1}, {3, 5}},
                          Case{ReduceKind::Mean, {0, 2}, {1, 4, 1}},
                          Case{ReduceKind::Max, {2}, {3, 4}},
                          Case{ReduceKind::Sum, {0, 1, 2}, {}}}) {
      expectThroughF32(
          dt, {in({3, 4, 5}, -4, 4), out(c.y)},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return reduce(ctx, c.kind, t[0], c.axes, t[1]);
          },
          "reduce " + std::to_string(int(c.kind)));
    }
  }
}

TEST(Float16Compute, ReductionsAccumulateInF32) {
  // 4096 ones: a 16-bit accumulator stalls at 256 (BF16) or 2048 (F16).
  for (DType dt : kFloat16s) {
    SCOPED_TRACE(dtypeName(dt));
    Context ctx;
    Owned<uint64_t> ones = storage(dt, {4096});
    assign(std::vector<double>(4096, 1.0), ones.t);
    Owned<uint64_t> sum = storage(dt, {});
    ASSERT_TRUE(reduce(ctx, ReduceKind::Sum, ones.t, {0}, sum.t).ok());
    Owned<double> value({});
    convert(sum.t, value.t);
    EXPECT_EQ(value[0], 4096.0);
    // The same in a GEMM: a [1, 4096] x [4096, 1] dot product.
    Owned<uint64_t> row = storage(dt, {1, 4096}), col = storage(dt, {4096, 1});
    assign(std::vector<double>(4096, 1.0), row.t);
    assign(std::vector<double>(4096, 1.0), col.t);
    Owned<uint64_t> dotT = storage(dt, {1, 1});
    ASSERT_TRUE(matmul(ctx, row.t, col.t, dotT.t).ok());
    Owned<double> dotV({1, 1});
    convert(dotT.t, dotV.t);
    EXPECT_EQ(dotV[0], 4096.0);
  }
}

TEST(Float16Compute, SoftmaxAndGrad) {
  for (DType dt : kFloat16s)
    for (bool log : {false, true})
      for (int64_t axis : {1, -1}) {
        expectThroughF32(
            dt, {in({3, 6, 4}, -5, 5), out({3, 6, 4})},
            [&](std::vector<Tensor> &t) {
              Context ctx;
              return softmax(ctx, t[0], axis, log, t[1]);
            },
            "softmax");
        expectThroughF32(
            dt, {in({3, 6, 4}, 0, 1), in({3, 6, 4}), out({3, 6, 4})},
            [&](std::vector<Tensor> &t) {
              Context ctx;
              return softmaxGrad(ctx, t[0], t[1], axis, log, t[2]);
            },
            "softmaxGrad");
      }
}

TEST(Float16Compute, LayerNormWithF32Statistics) {
  // x, scale, bias, y of the 16-bit dtype; mean and invStdDev in F32 (the
  // stash type), or in the 16-bit dtype too.
  for (DType dt : kFloat16s)
    for (bool f32Stats : {true, false}) {
      auto stat = [&](Shape s) {
        return f32Stats ? fixedOut(DType::F32, s) : out(s);
      };
      expectThroughF32(
          dt,
          {in({4, 3, 8}, -3, 3), in({8}), in({8}), out({4, 3, 8}),
           stat({4, 3, 1}), stat({4, 3, 1})},
          [](std::vector<Tensor> &t) {
            Context ctx;
            return layerNorm(ctx, t[0], t[1], &t[2], -1, 1e-5f, t[3], t[4],
                             t[5]);
          },
          "layerNorm");
      auto statIn = [&](Shape s, double lo, double hi) {
        return f32Stats ? fixedIn(DType::F32, s, {}, lo, hi) : in(s, lo, hi);
      };
      expectThroughF32(
          dt,
          {in({4, 3, 8}), in({4, 3, 8}, -3, 3), in({3, 8}),
           statIn({4, 1, 1}, -0.5, 0.5), statIn({4, 1, 1}, 0.5, 2),
           out({4, 3, 8}), out({3, 8}), out({3, 8})},
          [](std::vector<Tensor> &t) {
            Context ctx;
            return layerNormGrad(ctx, t[0], t[1], t[2], t[3], t[4], 1, t[5],
                                 t[6], &t[7]);
          },
          "layerNormGrad");
    }
}

TEST(Float16Compute, BatchNorm) {
  for (DType dt : kFloat16s) {
    for (bool training : {true, false}) {
      // Per-channel tensors mix 16-bit and F32 (any float dtype).
      expectThroughF32(
          dt,
          {in({2, 3, 4, 4}, -2, 2), in({3}), fixedIn(DType::F32, {3}), in({3}),
           in({3}, 0.5, 2), out({2, 3, 4, 4}), out({3}),
           fixedOut(DType::F32, {3}), out({3}), out({3})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return batchNorm(ctx, t[0], t[1], t[2], t[3], t[4], 1e-5f, 0.9f,
                             training, t[5], t[6], t[7], &t[8], &t[9], true);
          },
          "batchNorm");
    }
    // The running statistics updated in place (aliasing the inputs).
    expectThroughF32(
        dt,
        {in({2, 3, 5}), in({3}), in({3}), inout({3}), inout({3}, 0.5, 2),
         out({2, 3, 5})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return batchNorm(ctx, t[0], t[1], t[2], t[3], t[4], 1e-5f, 0.9f, true,
                           t[5], t[3], t[4], nullptr, nullptr);
        },
        "batchNorm in place");
    expectThroughF32(
        dt, {in({2, 3, 5}), out({3}), out({3})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return batchNormStatistics(ctx, t[0], 1e-5, t[1], t[2]);
        },
        "batchNormStatistics");
    expectThroughF32(
        dt,
        {in({2, 3, 5}), in({2, 3, 5}), in({3}),
         fixedIn(DType::F32, {3}, {}, -0.5, 0.5), in({3}, 0.5, 2),
         out({2, 3, 5}), out({3}), fixedOut(DType::F32, {3})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return batchNormGrad(ctx, t[0], t[1], t[2], t[3], t[4], t[5], t[6],
                               t[7]);
        },
        "batchNormGrad");
  }
}

//===----------------------------------------------------------------------===//
// Contractions, convolution, pooling
//===----------------------------------------------------------------------===//

TEST(Float16Compute, Matmul) {
  for (DType dt : kFloat16s) {
    struct Case {
      Shape a, b, y;
    };
    for (const Case &c : {Case{{2, 5, 7}, {7, 3}, {2, 5, 3}},
                          Case{{5, 7}, {2, 7, 3}, {2, 5, 3}},
                          Case{{7}, {7, 3}, {3}}, Case{{4, 7}, {7}, {4}}}) {
      expectThroughF32(
          dt, {in(c.a), in(c.b), out(c.y)},
          [](std::vector<Tensor> &t) {
            Context ctx;
            return matmul(ctx, t[0], t[1], t[2]);
          },
          "matmul");
    }
  }
}

TEST(Float16Compute, GemmWithBias) {
  for (DType dt : kFloat16s)
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        Shape a = transA ? Shape{6, 4} : Shape{4, 6};
        Shape b = transB ? Shape{5, 6} : Shape{6, 5};
        expectThroughF32(
            dt, {in(a), in(b), in({5}), out({4, 5})},
            [&](std::vector<Tensor> &t) {
              Context ctx;
              return gemm(ctx, t[0], t[1], &t[2], 0.5f, 2.f, transA, transB,
                          t[3]);
            },
            "gemm");
      }
}

TEST(Float16Compute, ConvAndGradients) {
  WindowParams params;
  params.kernel = {3, 3};
  params.strides = {2, 1};
  params.pads = {1, 0, 1, 2};
  params.dilations = {1, 1};
  // x [2, 4, 7, 6], w [6, 2, 3, 3] (group 2) -> y [2, 6, 4, 6].
  params.group = 2;
  Shape x = {2, 4, 7, 6}, w = {6, 2, 3, 3}, y = {2, 6, 4, 6};
  for (DType dt : kFloat16s) {
    expectThroughF32(
        dt, {in(x), in(w), in({6}), out(y)},
        [&](std::vector<Tensor> &t) {
          Context ctx;
          return conv(ctx, t[0], t[1], &t[2], params, t[3]);
        },
        "conv");
    expectThroughF32(
        dt, {in(y), in(w), out(x)},
        [&](std::vector<Tensor> &t) {
          Context ctx;
          return convGradInput(ctx, t[0], t[1], params, t[2]);
        },
        "convGradInput");
    expectThroughF32(
        dt, {in(y), in(x), out(w)},
        [&](std::vector<Tensor> &t) {
          Context ctx;
          return convGradWeight(ctx, t[0], t[1], params, t[2]);
        },
        "convGradWeight");
  }
}

TEST(Float16Compute, Pooling) {
  WindowParams params;
  params.kernel = {2, 2};
  params.strides = {2, 2};
  params.pads = {0, 1, 0, 1};
  Shape x = {2, 3, 4, 5}, y = {2, 3, 2, 3};
  for (DType dt : kFloat16s) {
    expectThroughF32(
        dt, {in(x), out(y), fixedOut(DType::I64, y)},
        [&](std::vector<Tensor> &t) {
          Context ctx;
          return maxPool(ctx, t[0], params, t[1], &t[2]);
        },
        "maxPool");
    // Indices of x [1, 2, 2, 2] planes of 4 elements (repeats accumulate).
    expectThroughF32(
        dt,
        {in({1, 2, 2, 1}), fixedIn(DType::I64, {1, 2, 2, 1}, {3, 3, 4, 6}),
         out({1, 2, 2, 2})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return maxPoolGrad(ctx, t[0], t[1], t[2]);
        },
        "maxPoolGrad");
    for (bool countIncludePad : {false, true}) {
      expectThroughF32(
          dt, {in(x), out(y)},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return avgPool(ctx, t[0], params, countIncludePad, t[1]);
          },
          "avgPool");
      expectThroughF32(
          dt, {in(y), out(x)},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return avgPoolGrad(ctx, t[0], params, countIncludePad, t[1]);
          },
          "avgPoolGrad");
    }
  }
}

TEST(Float16Compute, GatherGradAndPadGrad) {
  for (DType dt : kFloat16s) {
    expectThroughF32(
        dt,
        {in({2, 4, 3}), fixedIn(DType::I64, {4}, {1, -1, 1, 0}),
         out({2, 5, 3})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return gatherGrad(ctx, t[0], t[1], 1, t[2]);
        },
        "gatherGrad");
    expectThroughF32(
        dt, {in({4, 9}), out({3, 4})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return padGrad(ctx, t[0], {1, 3, 0, 2}, PadMode::Reflect, t[1]);
        },
        "padGrad");
  }
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

TEST(Float16Compute, DropoutAndGrad) {
  for (DType dt : kFloat16s) {
    for (bool training : {true, false})
      expectThroughF32(
          dt, {in({8, 16}), out({8, 16}), fixedOut(DType::Bool, {8, 16})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return dropout(ctx, t[0], 0.3f, training, 42, 5, t[1], t[2]);
          },
          "dropout");
    std::vector<double> mask(128);
    for (size_t i = 0; i < mask.size(); ++i)
      mask[i] = (i * 7) % 3 != 0;
    expectThroughF32(
        dt, {in({8, 16}), fixedIn(DType::Bool, {8, 16}, mask), out({8, 16})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return dropoutGrad(ctx, t[0], t[1], 0.3f, t[2]);
        },
        "dropoutGrad");
  }
}

TEST(Float16Compute, SoftmaxCrossEntropyAndGrad) {
  // scores [2, 4, 3]: labels [2, 3] with one ignored (-1).
  std::vector<double> labels = {0, 3, -1, 2, 1, 1};
  for (DType dt : kFloat16s)
    for (const char *reduction : {"mean", "sum", "none"}) {
      bool none = std::string(reduction) == "none";
      Shape lossShape = none ? Shape{2, 3} : Shape{};
      expectThroughF32(
          dt,
          {in({2, 4, 3}, -4, 4), fixedIn(DType::I64, {2, 3}, labels),
           in({4}, 0.5, 2), out(lossShape), out({2, 4, 3})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return softmaxCrossEntropy(ctx, t[0], t[1], &t[2], true, -1,
                                       reduction, t[3], t[4]);
          },
          std::string("softmaxCrossEntropy ") + reduction);
      expectThroughF32(
          dt,
          {in(lossShape, 0.5, 2), in({2, 4, 3}, -3, -0.1),
           fixedIn(DType::I64, {2, 3}, labels), in({4}, 0.5, 2),
           out({2, 4, 3})},
          [&](std::vector<Tensor> &t) {
            Context ctx;
            return softmaxCrossEntropyGrad(ctx, t[0], t[1], t[2], &t[3], true,
                                           -1, reduction, t[4]);
          },
          std::string("softmaxCrossEntropyGrad ") + reduction);
    }
}

TEST(Float16Compute, SgdStep) {
  for (DType dt : kFloat16s)
    for (int64_t step : {1, 5})
      for (bool nesterov : {false, true}) {
        expectThroughF32(
            dt, {inout({33}), in({33}), inout({33})},
            [&](std::vector<Tensor> &t) {
              Context ctx;
              return sgdStep(ctx, t[0], t[1], &t[2], step, 0.1, 0.9, 0.0, 1e-2,
                             nesterov);
            },
            "sgdStep");
      }
  // Without momentum the buffer is not read (nor its dtype checked).
  for (DType dt : kFloat16s)
    expectThroughF32(
        dt, {inout({9}), in({9}), fixedIn(DType::F64, {9})},
        [](std::vector<Tensor> &t) {
          Context ctx;
          return sgdStep(ctx, t[0], t[1], &t[2], 3, 0.5, 0.0, 0.0, 0.0, false);
        },
        "sgdStep without momentum");
}

TEST(Float16Compute, AdamStep) {
  for (DType dt : kFloat16s)
    for (int64_t step : {1, 10})
      for (bool decoupled : {false, true}) {
        expectThroughF32(
            dt,
            {inout({40}), in({40}), inout({40}, -0.1, 0.1),
             inout({40}, 0, 0.01)},
            [&](std::vector<Tensor> &t) {
              Context ctx;
              return adamStep(ctx, t[0], t[1], t[2], t[3], step, 1e-3, 0.9,
                              0.999, 1e-8, 1e-2, decoupled);
            },
            "adamStep");
      }
}

//===----------------------------------------------------------------------===//
// Dtype rules across operands
//===----------------------------------------------------------------------===//

/// Expects an error that names both dtypes.
void expectMixError(const Status &s, const char *a, const char *b,
                    const char *what) {
  ASSERT_FALSE(s.ok()) << what;
  EXPECT_NE(s.message.find(a), std::string::npos) << s.message;
  EXPECT_NE(s.message.find(b), std::string::npos) << s.message;
}

TEST(Float16Compute, MixedFloatDTypesAreErrors) {
  Context ctx;
  Owned<uint64_t> bf = storage(DType::BF16, {2, 2});
  Owned<uint64_t> h = storage(DType::F16, {2, 2});
  Owned<float> f({2, 2});
  Owned<uint64_t> outBF = storage(DType::BF16, {2, 2});
  Owned<float> outF({2, 2});
  expectMixError(binary(ctx, BinaryKind::Add, bf.t, f.t, outBF.t), "bf16",
                 "f32", "bf16 + f32");
  EXPECT_EQ(binary(ctx, BinaryKind::Add, bf.t, f.t, outBF.t).message,
            "binary Add: operand dtypes differ: bf16 and f32");
  expectMixError(binary(ctx, BinaryKind::Mul, f.t, bf.t, outF.t), "f32", "bf16",
                 "f32 * bf16");
  expectMixError(binary(ctx, BinaryKind::Add, h.t, bf.t, outBF.t), "f16",
                 "bf16", "f16 + bf16");
  // The output too must have the operands' dtype.
  expectMixError(binary(ctx, BinaryKind::Add, bf.t, bf.t, outF.t), "bf16",
                 "f32", "bf16 + bf16 -> f32");
  expectMixError(matmul(ctx, bf.t, f.t, outBF.t), "bf16", "f32", "matmul");
  expectMixError(gemm(ctx, bf.t, bf.t, &f.t, 1.f, 1.f, false, false, outBF.t),
                 "bf16", "f32", "gemm bias");
  expectMixError(unary(ctx, UnaryKind::Relu, bf.t, outF.t), "bf16", "f32",
                 "unary");
  Owned<uint64_t> r = storage(DType::BF16, {2});
  Owned<float> scale({2});
  Owned<float> mean({2, 1}), inv({2, 1});
  expectMixError(
      layerNorm(ctx, bf.t, scale.t, nullptr, 1, 1e-5f, outBF.t, mean.t, inv.t),
      "bf16", "f32", "layerNorm scale");
  expectMixError(sgdStep(ctx, bf.t, f.t, nullptr, 1, 0.1, 0, 0, 0, false),
                 "bf16", "f32", "sgdStep");
  Owned<uint64_t> m = storage(DType::BF16, {2, 2});
  expectMixError(
      adamStep(ctx, bf.t, bf.t, m.t, f.t, 1, 1e-3, 0.9, 0.999, 1e-8, 0, false),
      "bf16", "f32", "adamStep");
  // Logic ops stay Bool only.
  Status s = binary(ctx, BinaryKind::And, bf.t, bf.t, outBF.t);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("bf16"), std::string::npos) << s.message;
}

TEST(Float16Compute, ErrorsAfterWideningSaySo) {
  // A shape error found by the f32 kernel: reported, nothing written.
  Context ctx;
  Owned<uint64_t> x = storage(DType::BF16, {2, 3});
  assign({1, 2, 3, 4, 5, 6}, x.t);
  Owned<uint64_t> y = storage(DType::BF16, {3, 3});
  Status s = matmul(ctx, x.t, x.t, y.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("contraction dims differ"), std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("16-bit"), std::string::npos) << s.message;
  for (uint64_t v : y.values)
    EXPECT_EQ(v, 0u);
  // Null data is still reported, not dereferenced.
  Tensor null{nullptr, DType::F16, {2, 2}};
  Owned<uint64_t> out = storage(DType::F16, {2, 2});
  EXPECT_FALSE(unary(ctx, UnaryKind::Exp, null, out.t).ok());
  EXPECT_FALSE(unary(ctx, UnaryKind::Exp, out.t, null).ok());
}

} // namespace
