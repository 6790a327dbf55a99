//===- Float16ReferenceTest.cpp - 16-bit contractions against float64 -----===//
//
// The CPU backend's F16 and BF16 GEMMs and convolutions are the reference of
// the CUDA backend's tensor-core kernels (Kernels.h: widen exactly, sum in
// f32, round each output once to nearest even). Float16ComputeTest checks
// that they run the f32 code; this test checks the numbers themselves:
// every output element against a float64 reference computed from the same
// (rounded) inputs, within the error those semantics allow:
//
//   |y - ref| <= u * |ref| + (k + 2) * 2^-24 * (1 + u) * S + tiny
//
// where S is the sum of the magnitudes of the output's k terms (products,
// alpha * a_i * b_i, and beta * c), 2^-24 the unit roundoff of f32 (a sum of
// k terms in f32, in any order or blocking, errs by at most k - 1 roundings
// of partial sums bounded by S; one more for alpha, one for beta * c), u the
// unit roundoff of the output dtype (2^-8 for bf16, 2^-11 for f16: the
// single rounding to nearest) and tiny half the spacing of f16's subnormals
// (2^-25; 0 for bf16). A kernel that accumulates in 16 bits, rounds twice,
// truncates, or drops or repeats a term exceeds it.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>

using namespace pp::rt;
using namespace pp::rt::test;

namespace {

using Shape = std::vector<int64_t>;

const DType kFloat16s[] = {DType::BF16, DType::F16};

int64_t numelOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Unit roundoff of a 16-bit float dtype: half its spacing at 1.
double unitRoundoff(DType dtype) {
  return dtype == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}
/// Half the spacing of the dtype's subnormals.
double subnormalHalfSpacing(DType dtype) {
  return dtype == DType::F16 ? std::ldexp(1.0, -25) : 0.0;
}

/// A 16-bit operand: its bits, and the values they hold (exactly).
struct Operand {
  Owned<uint16_t> bits;
  std::vector<double> values;
};

/// Uniform values in [-1, 1) rounded to `dtype` (by `cast` from F64).
Operand randomOperand(DType dtype, Shape shape, std::mt19937 &gen) {
  Operand op{make16(dtype, shape), {}};
  int64_t n = numelOf(shape);
  std::uniform_real_distribution<double> dist(-1, 1);
  Owned<double> source(shape);
  for (int64_t i = 0; i < n; ++i)
    source[i] = dist(gen);
  Context ctx;
  Status s = cast(ctx, source.t, op.bits.t);
  EXPECT_TRUE(s.ok()) << s.message;
  Owned<double> back(shape);
  s = cast(ctx, op.bits.t, back.t);
  EXPECT_TRUE(s.ok()) << s.message;
  op.values = back.values;
  return op;
}

/// An output: NaN bits until the kernel writes it.
Owned<uint16_t> outputOf(DType dtype, Shape shape) {
  Owned<uint16_t> out = make16(dtype, shape);
  for (uint16_t &bits : out.values)
    bits = 0x7fff; // a NaN in both formats
  return out;
}

/// The float64 reference of each output element: its value, the sum of its
/// terms' magnitudes and their count.
struct Reference {
  std::vector<double> value, magnitude;
  std::vector<int64_t> terms;
  explicit Reference(int64_t n) : value(n, 0.0), magnitude(n, 0.0), terms(n) {}
  void add(int64_t i, double term) {
    value[i] += term;
    magnitude[i] += std::fabs(term);
    ++terms[i];
  }
};

/// The error element i of a `dtype` output may have (the bound above).
double boundOf(DType dtype, const Reference &ref, size_t i) {
  double u = unitRoundoff(dtype);
  return u * std::fabs(ref.value[i]) +
         double(ref.terms[i] + 2) * std::ldexp(1.0, -24) * (1 + u) *
             ref.magnitude[i] +
         subnormalHalfSpacing(dtype);
}

/// The values of a 16-bit tensor (exactly).
std::vector<double> valuesOf(const Tensor &t) {
  Context ctx;
  Owned<double> values(t.shape);
  Status s = cast(ctx, t, values.t);
  EXPECT_TRUE(s.ok()) << s.message;
  return values.values;
}

/// How many elements of `got` lie outside their bound.
int64_t countOutside(DType dtype, const std::vector<double> &got,
                     const Reference &ref) {
  int64_t outside = 0;
  for (size_t i = 0; i < ref.value.size(); ++i)
    outside += !(std::fabs(got[i] - ref.value[i]) <= boundOf(dtype, ref, i));
  return outside;
}

/// Checks every element of `got` against `ref` within its bound.
void expectWithinBound(const std::string &what, DType dtype,
                       const Owned<uint16_t> &got, const Reference &ref) {
  SCOPED_TRACE(what + " in " + dtypeName(dtype));
  std::vector<double> values = valuesOf(got.t);
  ASSERT_EQ(values.size(), ref.value.size());
  int64_t failures = 0;
  for (size_t i = 0; i < ref.value.size(); ++i) {
    double want = ref.value[i];
    double bound = boundOf(dtype, ref, i);
    double error = std::fabs(values[i] - want);
    if (!(error <= bound)) { // NaN fails too
      if (failures++ < 5)
        ADD_FAILURE() << "element " << i << ": got " << values[i]
                      << ", float64 reference " << want << ", error " << error
                      << " > bound " << bound << " (" << ref.terms[i]
                      << " terms of magnitude " << ref.magnitude[i] << ")";
    }
  }
  EXPECT_EQ(failures, 0) << "of " << ref.value.size() << " elements";
}

std::string shapeText(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Element (i, j) of a row-major [rows, cols] matrix, or of its transpose.
int64_t at(bool trans, int64_t i, int64_t j, int64_t rows, int64_t cols) {
  return trans ? j * rows + i : i * cols + j;
}

/// Offset of batch index `index` (flat, over `batch`) in an operand whose
/// batch dims `dims` broadcast to `batch` (numpy rules), in matrices.
int64_t broadcastMatrix(const Shape &dims, const Shape &batch, int64_t index) {
  int64_t offset = 0, stride = 1;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    int64_t coord = index % batch[d];
    index /= batch[d];
    int64_t k = d - int64_t(batch.size() - dims.size());
    if (k >= 0) {
      if (dims[k] != 1)
        offset += coord * stride;
      stride *= dims[k];
    }
  }
  return offset;
}

//===----------------------------------------------------------------------===//
// GEMM and matmul
//===----------------------------------------------------------------------===//

TEST(Float16Reference, GemmTransposesBiasAndRelu) {
  std::mt19937 gen(11);
  const int64_t m = 9, n = 13;
  for (DType dt : kFloat16s)
    for (int64_t k : {7, 301})
      for (bool transA : {false, true})
        for (bool transB : {false, true})
          for (UnaryKind act : {UnaryKind::Identity, UnaryKind::Relu}) {
            Operand a =
                randomOperand(dt, transA ? Shape{k, m} : Shape{m, k}, gen);
            Operand b =
                randomOperand(dt, transB ? Shape{n, k} : Shape{k, n}, gen);
            Operand c = randomOperand(dt, {n}, gen); // a bias row
            Owned<uint16_t> y = outputOf(dt, {m, n});
            const float alpha = 0.75f, beta = 1.5f;
            Context ctx;
            ctx.numThreads = 2;
            Status s = gemm(ctx, a.bits.t, b.bits.t, &c.bits.t, alpha, beta,
                            transA, transB, y.t, act);
            ASSERT_TRUE(s.ok()) << s.message;
            Reference ref(m * n);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                for (int64_t p = 0; p < k; ++p)
                  ref.add(i * n + j, alpha * a.values[at(transA, i, p, m, k)] *
                                         b.values[at(transB, p, j, k, n)]);
                ref.add(i * n + j, beta * c.values[j]);
              }
            // Relu is 1-Lipschitz: the bound of its input holds.
            if (act == UnaryKind::Relu)
              for (double &v : ref.value)
                v = std::max(v, 0.0);
            expectWithinBound(std::string("gemm") + (transA ? " a^T" : "") +
                                  (transB ? " b^T" : "") +
                                  (act == UnaryKind::Relu ? " relu" : ""),
                              dt, y, ref);
          }
}

/// matmul of a [aBatch..., m, k] and b [bBatch..., k, n] (transposed when
/// asked) against the reference, over `batch` (their broadcast).
void checkMatmul(DType dt, Shape aBatch, Shape bBatch, Shape batch, int64_t m,
                 int64_t k, int64_t n, bool transA, bool transB,
                 std::mt19937 &gen) {
  auto withMatrix = [](Shape dims, int64_t rows, int64_t cols) {
    dims.push_back(rows);
    dims.push_back(cols);
    return dims;
  };
  Operand a = randomOperand(
      dt, withMatrix(aBatch, transA ? k : m, transA ? m : k), gen);
  Operand b = randomOperand(
      dt, withMatrix(bBatch, transB ? n : k, transB ? k : n), gen);
  Owned<uint16_t> y = outputOf(dt, withMatrix(batch, m, n));
  Context ctx;
  ctx.numThreads = 2;
  Status s = matmul(ctx, a.bits.t, b.bits.t, y.t, transA, transB);
  ASSERT_TRUE(s.ok()) << s.message;
  int64_t count = numelOf(batch);
  Reference ref(count * m * n);
  for (int64_t t = 0; t < count; ++t) {
    int64_t aOff = broadcastMatrix(aBatch, batch, t) * m * k;
    int64_t bOff = broadcastMatrix(bBatch, batch, t) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          ref.add((t * m + i) * n + j,
                  a.values[aOff + at(transA, i, p, m, k)] *
                      b.values[bOff + at(transB, p, j, k, n)]);
  }
  std::ostringstream what;
  what << "matmul a" << shapeText(a.bits.t.shape) << (transA ? "^T" : "")
       << " b" << shapeText(b.bits.t.shape) << (transB ? "^T" : "");
  expectWithinBound(what.str(), dt, y, ref);
}

TEST(Float16Reference, Matmul) {
  std::mt19937 gen(12);
  for (DType dt : kFloat16s) {
    // A linear layer: a's batch folded into rows, one shared b.
    checkMatmul(dt, {2, 3}, {}, {2, 3}, 5, 200, 7, false, false, gen);
    checkMatmul(dt, {2, 3}, {}, {2, 3}, 5, 200, 7, false, true, gen);
    // Plain 2-D products, every transpose.
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        checkMatmul(dt, {}, {}, {}, 6, 257, 11, transA, transB, gen);
  }
}

TEST(Float16Reference, BatchedMatmul) {
  std::mt19937 gen(13);
  for (DType dt : kFloat16s) {
    // Attention's shapes: whole batches on both sides, b transposed (q k^T)
    // and not (p v).
    checkMatmul(dt, {2, 3}, {2, 3}, {2, 3}, 8, 64, 8, false, true, gen);
    checkMatmul(dt, {2, 3}, {2, 3}, {2, 3}, 8, 96, 16, false, false, gen);
    // One side broadcast whole, the other not.
    checkMatmul(dt, {1}, {4}, {4}, 6, 130, 5, true, false, gen);
    // A numpy broadcast across both: [2, 1] x [1, 3] -> [2, 3].
    checkMatmul(dt, {2, 1}, {1, 3}, {2, 3}, 4, 150, 6, false, false, gen);
  }
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// A 2-D convolution's index map: calls term(yIndex, xIndex, wIndex) for
/// every product x * w that an output element sums (taps in the padding
/// left out).
void forEachConvTerm(
    const Shape &x, const Shape &w, const Shape &y, const WindowParams &p,
    const std::function<void(int64_t, int64_t, int64_t)> &term) {
  int64_t n = x[0], c = x[1], h = x[2], wd = x[3];
  int64_t m = w[0], cg = w[1], kh = w[2], kw = w[3];
  int64_t oh = y[2], ow = y[3];
  int64_t mg = m / p.group;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o) {
      int64_t g = o / mg;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t yIndex = ((b * m + o) * oh + i) * ow + j;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t r = 0; r < kh; ++r)
              for (int64_t s = 0; s < kw; ++s) {
                int64_t xi = i * p.strides[0] - p.pads[0] + r * p.dilations[0];
                int64_t xj = j * p.strides[1] - p.pads[1] + s * p.dilations[1];
                if (xi < 0 || xi >= h || xj < 0 || xj >= wd)
                  continue;
                int64_t channel = g * cg + ci;
                int64_t xIndex = ((b * c + channel) * h + xi) * wd + xj;
                int64_t wIndex = ((o * cg + ci) * kh + r) * kw + s;
                term(yIndex, xIndex, wIndex);
              }
        }
    }
  (void)c;
}

TEST(Float16Reference, ConvAndGradients) {
  std::mt19937 gen(14);
  WindowParams params;
  params.kernel = {3, 3};
  params.strides = {2, 1};
  params.pads = {1, 0, 1, 2}; // asymmetric
  params.dilations = {1, 2};
  params.group = 2;
  // x [2, 8, 9, 8], w [6, 4, 3, 3] (group 2) -> y [2, 6, 5, 6].
  Shape xs = {2, 8, 9, 8}, ws = {6, 4, 3, 3}, ys = {2, 6, 5, 6};
  for (DType dt : kFloat16s) {
    Operand x = randomOperand(dt, xs, gen), w = randomOperand(dt, ws, gen);
    Operand bias = randomOperand(dt, {6}, gen);
    Operand dy = randomOperand(dt, ys, gen);
    Context ctx;
    ctx.numThreads = 2;

    Owned<uint16_t> y = outputOf(dt, ys);
    Status s = conv(ctx, x.bits.t, w.bits.t, &bias.bits.t, params, y.t);
    ASSERT_TRUE(s.ok()) << s.message;
    Reference yRef(numelOf(ys));
    forEachConvTerm(xs, ws, ys, params,
                    [&](int64_t yi, int64_t xi, int64_t wi) {
                      yRef.add(yi, x.values[xi] * w.values[wi]);
                    });
    int64_t plane = ys[2] * ys[3];
    for (int64_t i = 0; i < numelOf(ys); ++i)
      yRef.add(i, bias.values[(i / plane) % ys[1]]);
    expectWithinBound("conv", dt, y, yRef);

    Owned<uint16_t> dx = outputOf(dt, xs);
    s = convGradInput(ctx, dy.bits.t, w.bits.t, params, dx.t);
    ASSERT_TRUE(s.ok()) << s.message;
    Reference dxRef(numelOf(xs));
    forEachConvTerm(xs, ws, ys, params,
                    [&](int64_t yi, int64_t xi, int64_t wi) {
                      dxRef.add(xi, dy.values[yi] * w.values[wi]);
                    });
    expectWithinBound("convGradInput", dt, dx, dxRef);

    Owned<uint16_t> dw = outputOf(dt, ws);
    s = convGradWeight(ctx, dy.bits.t, x.bits.t, params, dw.t);
    ASSERT_TRUE(s.ok()) << s.message;
    Reference dwRef(numelOf(ws));
    forEachConvTerm(xs, ws, ys, params,
                    [&](int64_t yi, int64_t xi, int64_t wi) {
                      dwRef.add(wi, dy.values[yi] * x.values[xi]);
                    });
    expectWithinBound("convGradWeight", dt, dw, dwRef);
  }
}

/// A float64 product of a [m, k] and b [k, n] in `dtype` with its
/// reference.
struct Product {
  Operand a, b;
  Reference ref;
  Product(DType dtype, int64_t m, int64_t k, int64_t n, std::mt19937 &gen)
      : a(randomOperand(dtype, {m, k}, gen)),
        b(randomOperand(dtype, {k, n}, gen)), ref(m * n) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          ref.add(i * n + j, a.values[i * k + p] * b.values[p * n + j]);
  }
};

/// The bound is tight enough to matter: exact sums truncated to the dtype
/// instead of rounded to nearest (short sums, where the output's rounding
/// dominates), and sums whose partial sums are rounded to the dtype (long
/// sums: 16-bit accumulation), exceed it. What a kernel that did either
/// would give.
TEST(Float16Reference, BoundRejectsTruncationAndLowPrecisionSums) {
  std::mt19937 gen(15);
  Context ctx;
  for (DType dt : kFloat16s) {
    const int64_t m = 16, n = 16;
    Product shortSums(dt, m, 8, n, gen);
    std::vector<double> truncated(m * n);
    int bits = dt == DType::BF16 ? 8 : 11;
    for (int64_t i = 0; i < m * n; ++i) {
      double v = shortSums.ref.value[i];
      int exponent;
      std::frexp(v, &exponent);
      double ulp = std::ldexp(1.0, exponent - bits);
      truncated[i] = std::trunc(v / ulp) * ulp;
    }
    EXPECT_GT(countOutside(dt, truncated, shortSums.ref), m * n / 8)
        << "truncation in " << dtypeName(dt);
    // The exact sums rounded to nearest are inside.
    Owned<double> exact({m, n}, shortSums.ref.value);
    Owned<uint16_t> rounded = outputOf(dt, {m, n});
    ASSERT_TRUE(cast(ctx, exact.t, rounded.t).ok());
    EXPECT_EQ(countOutside(dt, valuesOf(rounded.t), shortSums.ref), 0);

    const int64_t k = 512;
    Product longSums(dt, m, k, n, gen);
    std::vector<double> low(m * n);
    Owned<double> acc({1});
    Owned<uint16_t> acc16 = make16(dt, {1});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        acc[0] = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc[0] += longSums.a.values[i * k + p] * longSums.b.values[p * n + j];
          ASSERT_TRUE(cast(ctx, acc.t, acc16.t).ok());
          ASSERT_TRUE(cast(ctx, acc16.t, acc.t).ok());
        }
        low[i * n + j] = acc[0];
      }
    EXPECT_GT(countOutside(dt, low, longSums.ref), m * n / 4)
        << "16-bit sums in " << dtypeName(dt);
  }
}

} // namespace
