//===- KernelCrossCheck.cpp - Same kernels, same inputs, any backend ------===//
//
// Runs a fixed list of kernel cases on deterministic inputs and writes every
// output as raw little-endian bytes plus a manifest line
// ("<case> <output> <dtype> <d0>x<d1>... <file>") into a directory. Built
// twice from this one source: against pp_runtime (CPU) and, with
// PP_CROSSCHECK_CUDA, against pp_runtime_cuda (buffers in device memory).
// python/compare_kernel_runs.py compares two directories; on a GPU node
// scripts/gpu-check.sh runs both and compares, so every CUDA kernel is
// checked against the CPU reference. Every case runs three times: in F32,
// and with its float tensors in F16 and in BF16 (cases "f16.*", "bf16.*"),
// whose kernels compute through float and round each output once.
//
//   pp-rt-crosscheck-cpu OUT_DIR
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Half.h"
#include "pp/Runtime/Kernels.h"
#ifdef PP_CROSSCHECK_CUDA
#include "pp/Runtime/CudaContext.h"
using namespace pp::rt::cuda;
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace pp::rt;

namespace {

Context ctx;
std::string outDir;
std::ofstream manifest;
int failures = 0;
/// The dtype of a case's float tensors (random / zeros without a dtype).
DType floatType = DType::F32;

/// A tensor whose data lives where the backend computes (host or device),
/// with a host copy for filling and reading.
struct Buffer {
  Tensor tensor;
  std::vector<char> host;

  Buffer(DType dtype, std::vector<int64_t> shape) {
    tensor.dtype = dtype;
    tensor.shape = std::move(shape);
    host.assign(static_cast<size_t>(tensor.bytes()), 0);
#ifdef PP_CROSSCHECK_CUDA
    deviceAlloc(ctx, tensor.bytes() ? tensor.bytes() : 1, &tensor.data);
#else
    tensor.data = host.data();
#endif
  }
  ~Buffer() {
#ifdef PP_CROSSCHECK_CUDA
    deviceFree(ctx, tensor.data);
#endif
  }
  Buffer(const Buffer &) = delete;

  void upload() {
#ifdef PP_CROSSCHECK_CUDA
    copyToDevice(ctx, tensor.data, host.data(), tensor.bytes());
#endif
  }
  void download() {
#ifdef PP_CROSSCHECK_CUDA
    synchronize(ctx);
    copyToHost(ctx, host.data(), tensor.data, tensor.bytes());
#endif
  }
  template <typename T> T *as() { return reinterpret_cast<T *>(host.data()); }
};

using BufferPtr = std::unique_ptr<Buffer>;

/// Stores v as element i of a float buffer's host copy (16 bits: rounded).
void setFloat(Buffer &b, int64_t i, double v) {
  switch (b.tensor.dtype) {
  case DType::F64:
    b.as<double>()[i] = v;
    break;
  case DType::F16:
    b.as<uint16_t>()[i] = doubleToHalf(v);
    break;
  case DType::BF16:
    b.as<uint16_t>()[i] = doubleToBFloat16(v);
    break;
  default:
    b.as<float>()[i] = static_cast<float>(v);
  }
}

/// Uniform values in [lo, hi) from a fixed linear congruential sequence, so
/// both builds see the same inputs.
BufferPtr random(std::vector<int64_t> shape, uint64_t seed, double lo = -1,
                 double hi = 1, DType dtype = floatType) {
  auto b = std::make_unique<Buffer>(dtype, std::move(shape));
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0, n = b->tensor.numel(); i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(state >> 11) * 0x1.0p-53;
    double v = lo + (hi - lo) * u;
    if (dtype == DType::I64)
      b->as<int64_t>()[i] = static_cast<int64_t>(std::floor(v));
    else
      setFloat(*b, i, v);
  }
  b->upload();
  return b;
}

BufferPtr zeros(std::vector<int64_t> shape, DType dtype = floatType) {
  auto b = std::make_unique<Buffer>(dtype, std::move(shape));
  b->upload();
  return b;
}

void record(const std::string &caseName, const std::string &output, Buffer &b) {
  b.download();
  std::string file = caseName + "." + output + ".bin";
  std::ofstream os(outDir + "/" + file, std::ios::binary);
  os.write(b.host.data(), static_cast<std::streamsize>(b.host.size()));
  std::string shape;
  for (int64_t d : b.tensor.shape)
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  manifest << caseName << " " << output << " " << dtypeName(b.tensor.dtype)
           << " " << (shape.empty() ? "scalar" : shape) << " " << file << "\n";
}

bool ok(const std::string &caseName, const Status &status) {
  if (status.ok())
    return true;
  std::fprintf(stderr, "%s: %s\n", caseName.c_str(), status.message.c_str());
  ++failures;
  return false;
}

/// A case runs its kernels on inputs of fixed seeds and records their
/// outputs under its name.
struct Case {
  const char *name;
  void (*run)(const std::string &caseName);
};

WindowParams window(int64_t k, int64_t stride, int64_t pad) {
  WindowParams p;
  p.kernel = {k, k};
  p.strides = {stride, stride};
  p.pads = {pad, pad, pad, pad};
  p.dilations = {1, 1};
  return p;
}

//===----------------------------------------------------------------------===//
// Elementwise and reductions
//===----------------------------------------------------------------------===//

/// GeluErf forward and its gradient.
void checkGeluGrad(const std::string &n) {
  auto x = random({4, 37}, 1), y = zeros({4, 37}), dy = random({4, 37}, 2),
       dx = zeros({4, 37});
  if (ok(n, unary(ctx, UnaryKind::GeluErf, x->tensor, y->tensor)) &&
      ok(n, unaryGrad(ctx, UnaryKind::GeluErf, x->tensor, y->tensor, dy->tensor,
                      dx->tensor))) {
    record(n, "y", *y);
    record(n, "dx", *dx);
  }
}

/// Elu to Cos, forward and gradient, and Round.
void checkActivationsAndGrads(const std::string &n) {
  // The unary kinds added with the outside-model ops, forward and
  // unaryGrad (Selu's beta is its gamma).
  const UnaryKind kinds[] = {UnaryKind::Elu,      UnaryKind::Selu,
                             UnaryKind::Celu,     UnaryKind::ThresholdedRelu,
                             UnaryKind::Softplus, UnaryKind::Softsign,
                             UnaryKind::Sin,      UnaryKind::Cos};
  auto x = random({3, 29}, 43, -4, 4), dy = random({3, 29}, 44);
  for (UnaryKind kind : kinds) {
    auto y = zeros({3, 29}), dx = zeros({3, 29});
    if (ok(n, unary(ctx, kind, x->tensor, y->tensor, 0.7f, 1.2f)) &&
        ok(n, unaryGrad(ctx, kind, x->tensor, y->tensor, dy->tensor, dx->tensor,
                        0.7f, 1.2f))) {
      record(n, std::string(toString(kind)) + ".y", *y);
      record(n, std::string(toString(kind)) + ".dx", *dx);
    }
  }
  auto r = zeros({3, 29});
  if (ok(n, unary(ctx, UnaryKind::Round, x->tensor, r->tensor)))
    record(n, "Round.y", *r);
}

/// Broadcast Max and Min and a Min reduction.
void checkMaxMinReduceMin(const std::string &n) {
  auto a = random({4, 6}, 45), b = random({6}, 46), mx = zeros({4, 6}),
       mn = zeros({4, 6}), rmin = zeros({4, 1});
  if (ok(n, binary(ctx, BinaryKind::Max, a->tensor, b->tensor, mx->tensor)) &&
      ok(n, binary(ctx, BinaryKind::Min, a->tensor, b->tensor, mn->tensor)) &&
      ok(n, reduce(ctx, ReduceKind::Min, a->tensor, {1}, rmin->tensor))) {
    record(n, "max", *mx);
    record(n, "min", *mn);
    record(n, "reduce_min", *rmin);
  }
}

/// Div with a divisor broadcast over the outer and inner dims.
void checkBroadcastDiv(const std::string &n) {
  auto a = random({3, 4, 5}, 3), b = random({4, 1}, 4, 0.5, 2),
       c = zeros({3, 4, 5});
  if (ok(n, binary(ctx, BinaryKind::Div, a->tensor, b->tensor, c->tensor)))
    record(n, "c", *c);
}

/// Pow (float and integer exponents), comparisons, Clip, Sum and Max
/// reductions, Softmax and its gradient over a middle axis, and casts.
void checkMixedElementwise(const std::string &n) {
  auto a = random({4, 9}, 62, 0.25, 2), e = random({9}, 63, -2, 2),
       ie = random({9}, 64, -2, 3, DType::I64), pw = zeros({4, 9}),
       pwi = zeros({4, 9}), less = zeros({4, 9}, DType::Bool),
       lo = random({9}, 65, 0.5, 1), clipped = zeros({4, 9}),
       sum = zeros({4, 1}), mx = zeros({1, 9}),
       x = random({3, 5, 4}, 66, -3, 3), sm = zeros({3, 5, 4}),
       dy = random({3, 5, 4}, 67), dx = zeros({3, 5, 4}),
       wide = zeros({4, 9}, DType::F32), back = zeros({4, 9});
  if (ok(n, binary(ctx, BinaryKind::Pow, a->tensor, e->tensor, pw->tensor)) &&
      ok(n, binary(ctx, BinaryKind::Pow, a->tensor, ie->tensor, pwi->tensor)) &&
      ok(n,
         binary(ctx, BinaryKind::Less, a->tensor, e->tensor, less->tensor)) &&
      ok(n, clip(ctx, a->tensor, &lo->tensor, nullptr, clipped->tensor)) &&
      ok(n, reduce(ctx, ReduceKind::Sum, a->tensor, {1}, sum->tensor)) &&
      ok(n, reduce(ctx, ReduceKind::Max, a->tensor, {0}, mx->tensor)) &&
      ok(n, softmax(ctx, x->tensor, 1, false, sm->tensor)) &&
      ok(n, softmaxGrad(ctx, sm->tensor, dy->tensor, 1, false, dx->tensor)) &&
      ok(n, binary(ctx, BinaryKind::Mul, a->tensor, e->tensor, back->tensor)) &&
      ok(n, cast(ctx, back->tensor, wide->tensor))) {
    record(n, "pow", *pw);
    record(n, "pow_int", *pwi);
    record(n, "less", *less);
    record(n, "clip", *clipped);
    record(n, "sum", *sum);
    record(n, "max", *mx);
    record(n, "softmax", *sm);
    record(n, "softmax_dx", *dx);
    record(n, "cast_f32", *wide);
  }
}

/// A Mean reduction over a middle dim.
void checkReduceMean(const std::string &n) {
  auto x = random({6, 7, 8}, 5), y = zeros({6, 1, 8});
  if (ok(n, reduce(ctx, ReduceKind::Mean, x->tensor, {1}, y->tensor)))
    record(n, "y", *y);
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// LogSoftmax forward and its gradient.
void checkLogSoftmaxGrad(const std::string &n) {
  auto x = random({5, 33}, 6, -4, 4), y = zeros({5, 33}),
       dy = random({5, 33}, 7), dx = zeros({5, 33});
  if (ok(n, softmax(ctx, x->tensor, -1, true, y->tensor)) &&
      ok(n, softmaxGrad(ctx, y->tensor, dy->tensor, -1, true, dx->tensor))) {
    record(n, "y", *y);
    record(n, "dx", *dx);
  }
}

/// LayerNorm forward (with bias) and its gradients.
void checkLayerNorm(const std::string &n) {
  auto x = random({6, 48}, 8), s = random({48}, 9), b = random({48}, 10),
       y = zeros({6, 48}), mean = zeros({6, 1}), inv = zeros({6, 1}),
       dy = random({6, 48}, 11), dx = zeros({6, 48}), ds = zeros({48}),
       db = zeros({48});
  if (ok(n, layerNorm(ctx, x->tensor, s->tensor, &b->tensor, -1, 1e-5f,
                      y->tensor, mean->tensor, inv->tensor)) &&
      ok(n,
         layerNormGrad(ctx, dy->tensor, x->tensor, s->tensor, mean->tensor,
                       inv->tensor, -1, dx->tensor, ds->tensor, &db->tensor))) {
    record(n, "y", *y);
    record(n, "dx", *dx);
    record(n, "dscale", *ds);
    record(n, "dbias", *db);
  }
}

/// LayerNorm and BatchNorm of a 16-bit x with F32 statistics and
/// per-channel tensors (the stash type; in the F32 run all are F32).
void checkNormF32Statistics(const std::string &n) {
  const DType f32 = DType::F32;
  auto x = random({6, 48}, 68), s = random({48}, 69), y = zeros({6, 48}),
       mean = zeros({6, 1}, f32), inv = zeros({6, 1}, f32),
       dy = random({6, 48}, 70), dx = zeros({6, 48}), ds = zeros({48});
  auto bx = random({4, 3, 5, 5}, 71), bs = random({3}, 72, -1, 1, f32),
       bb = random({3}, 73, -1, 1, f32), bm = random({3}, 74, -1, 1, f32),
       bv = random({3}, 75, 0.5, 1.5, f32), by = zeros({4, 3, 5, 5}),
       rm = zeros({3}, f32), rv = zeros({3}, f32), sm = zeros({3}, f32),
       si = zeros({3}, f32);
  if (ok(n, layerNorm(ctx, x->tensor, s->tensor, nullptr, -1, 1e-5f, y->tensor,
                      mean->tensor, inv->tensor)) &&
      ok(n, layerNormGrad(ctx, dy->tensor, x->tensor, s->tensor, mean->tensor,
                          inv->tensor, -1, dx->tensor, ds->tensor, nullptr)) &&
      ok(n, batchNorm(ctx, bx->tensor, bs->tensor, bb->tensor, bm->tensor,
                      bv->tensor, 1e-5f, 0.9f, true, by->tensor, rm->tensor,
                      rv->tensor, &sm->tensor, &si->tensor, true))) {
    record(n, "ln_y", *y);
    record(n, "ln_inv", *inv);
    record(n, "ln_dx", *dx);
    record(n, "ln_dscale", *ds);
    record(n, "bn_y", *by);
    record(n, "bn_running_mean", *rm);
    record(n, "bn_running_var", *rv);
  }
}

/// Training BatchNorm (running statistics updated) and its gradients.
void checkBatchNormTrain(const std::string &n) {
  auto x = random({4, 3, 5, 5}, 12), s = random({3}, 13), b = random({3}, 14),
       m = random({3}, 15), v = random({3}, 16, 0.5, 1.5),
       y = zeros({4, 3, 5, 5}), rm = zeros({3}), rv = zeros({3}),
       sm = zeros({3}), si = zeros({3}), dy = random({4, 3, 5, 5}, 17),
       dx = zeros({4, 3, 5, 5}), ds = zeros({3}), db = zeros({3});
  if (ok(n, batchNorm(ctx, x->tensor, s->tensor, b->tensor, m->tensor,
                      v->tensor, 1e-5f, 0.9f, true, y->tensor, rm->tensor,
                      rv->tensor, &sm->tensor, &si->tensor, true)) &&
      ok(n, batchNormGrad(ctx, dy->tensor, x->tensor, s->tensor, sm->tensor,
                          si->tensor, dx->tensor, ds->tensor, db->tensor))) {
    record(n, "y", *y);
    record(n, "running_mean", *rm);
    record(n, "running_var", *rv);
    record(n, "dx", *dx);
    record(n, "dscale", *ds);
    record(n, "dbias", *db);
  }
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// Gemm with both operands transposed, alpha, beta and a bias.
void checkGemmTransposed(const std::string &n) {
  auto a = random({19, 13}, 18), b = random({23, 19}, 19), c = random({23}, 20),
       y = zeros({13, 23});
  if (ok(n, gemm(ctx, a->tensor, b->tensor, &c->tensor, 0.5f, 2.0f, true, true,
                 y->tensor)))
    record(n, "y", *y);
}

/// Gemm's other paths: no c, c with beta and a fused activation (run on the
/// unrounded product for 16-bit y), Relu, and k = 0 (y = beta * c).
void checkGemmPaths(const std::string &n) {
  auto a = random({9, 12}, 54), b = random({12, 7}, 55), c = random({9, 1}, 56),
       plain = zeros({9, 7}), gelu = zeros({9, 7}), relu = zeros({9, 7}),
       a0 = zeros({9, 0}), b0 = zeros({0, 7}), empty = zeros({9, 7});
  if (ok(n, gemm(ctx, a->tensor, b->tensor, nullptr, 1.0f, 0.0f, false, false,
                 plain->tensor)) &&
      ok(n, gemm(ctx, a->tensor, b->tensor, &c->tensor, 0.75f, 1.5f, false,
                 false, gelu->tensor, UnaryKind::GeluErf)) &&
      ok(n, gemm(ctx, a->tensor, b->tensor, &c->tensor, 1.0f, 1.0f, false,
                 false, relu->tensor, UnaryKind::Relu)) &&
      ok(n, gemm(ctx, a0->tensor, b0->tensor, &c->tensor, 1.0f, 0.5f, false,
                 false, empty->tensor))) {
    record(n, "plain", *plain);
    record(n, "gelu", *gelu);
    record(n, "relu", *relu);
    record(n, "k0", *empty);
  }
}

/// A batched MatMul against an unbatched right operand.
void checkBatchedMatmul(const std::string &n) {
  auto a = random({3, 7, 9}, 21), b = random({9, 5}, 22), y = zeros({3, 7, 5});
  if (ok(n, matmul(ctx, a->tensor, b->tensor, y->tensor)))
    record(n, "y", *y);
}

/// Batched MatMuls with a transposed operand.
void checkBatchedMatmulTransposed(const std::string &n) {
  // Attention's q k^T (both batched: strided) and a gradient's
  // a^T dy against a broadcast operand (one pointer per matrix).
  auto q = random({2, 3, 7, 5}, 50), k = random({2, 3, 7, 5}, 51),
       s = zeros({2, 3, 7, 7}), a = random({2, 1, 7, 6}, 52),
       dy = random({1, 3, 7, 4}, 53), da = zeros({2, 3, 6, 4});
  if (ok(n, matmul(ctx, q->tensor, k->tensor, s->tensor, false, true)) &&
      ok(n, matmul(ctx, a->tensor, dy->tensor, da->tensor, true, false))) {
    record(n, "qk", *s);
    record(n, "ady", *da);
  }
}

//===----------------------------------------------------------------------===//
// Convolutions and pooling
//===----------------------------------------------------------------------===//

/// A strided, padded Conv and its input and weight gradients.
void checkConvAndGrads(const std::string &n) {
  WindowParams p = window(3, 2, 1);
  auto x = random({2, 4, 9, 9}, 23), w = random({6, 4, 3, 3}, 24),
       b = random({6}, 25), y = zeros({2, 6, 5, 5}),
       dy = random({2, 6, 5, 5}, 26), dx = zeros({2, 4, 9, 9}),
       dw = zeros({6, 4, 3, 3});
  if (ok(n, conv(ctx, x->tensor, w->tensor, &b->tensor, p, y->tensor)) &&
      ok(n, convGradInput(ctx, dy->tensor, w->tensor, p, dx->tensor)) &&
      ok(n, convGradWeight(ctx, dy->tensor, x->tensor, p, dw->tensor))) {
    record(n, "y", *y);
    record(n, "dx", *dx);
    record(n, "dw", *dw);
  }
}

/// ConvTranspose with stride, pads and a bias.
void checkConvTranspose(const std::string &n) {
  // Stride 2, pads 1, output_padding 1: 5 -> 2 (5 - 1) + 1 + 3 - 2.
  WindowParams p = window(3, 2, 1);
  auto x = random({2, 4, 5, 5}, 47), w = random({4, 3, 3, 3}, 48),
       b = random({3}, 49), y = zeros({2, 3, 10, 10});
  if (ok(n, convTranspose(ctx, x->tensor, w->tensor, &b->tensor, p, y->tensor)))
    record(n, "y", *y);
}

/// A Conv of two groups without bias.
void checkGroupedConv(const std::string &n) {
  WindowParams p = window(3, 1, 1);
  p.group = 2;
  auto x = random({1, 4, 6, 6}, 27), w = random({4, 2, 3, 3}, 28),
       y = zeros({1, 4, 6, 6});
  if (ok(n, conv(ctx, x->tensor, w->tensor, nullptr, p, y->tensor)))
    record(n, "y", *y);
}

/// Conv with a bias and a fused Relu, and with Tanh (run on the rounded
/// 16-bit result, as applyActivation on y).
void checkConvActivation(const std::string &n) {
  WindowParams p = window(3, 1, 1);
  auto x = random({2, 3, 6, 6}, 57), w = random({4, 3, 3, 3}, 58),
       b = random({4}, 59), relu = zeros({2, 4, 6, 6}),
       tanh = zeros({2, 4, 6, 6});
  if (ok(n, conv(ctx, x->tensor, w->tensor, &b->tensor, p, relu->tensor,
                 UnaryKind::Relu)) &&
      ok(n, conv(ctx, x->tensor, w->tensor, nullptr, p, tanh->tensor,
                 UnaryKind::Tanh))) {
    record(n, "relu", *relu);
    record(n, "tanh", *tanh);
  }
}

/// AvgPool (padding counted and not) and its gradient.
void checkAvgPoolAndGrad(const std::string &n) {
  WindowParams p = window(3, 2, 1);
  auto x = random({2, 3, 7, 7}, 60), with = zeros({2, 3, 4, 4}),
       without = zeros({2, 3, 4, 4}), dy = random({2, 3, 4, 4}, 61),
       dx = zeros({2, 3, 7, 7});
  if (ok(n, avgPool(ctx, x->tensor, p, true, with->tensor)) &&
      ok(n, avgPool(ctx, x->tensor, p, false, without->tensor)) &&
      ok(n, avgPoolGrad(ctx, dy->tensor, p, false, dx->tensor))) {
    record(n, "y_pad", *with);
    record(n, "y", *without);
    record(n, "dx", *dx);
  }
}

/// MaxPool with its indices, and its gradient.
void checkMaxPoolAndGrad(const std::string &n) {
  WindowParams p = window(3, 2, 1);
  auto x = random({2, 3, 8, 8}, 29), y = zeros({2, 3, 4, 4}),
       idx = zeros({2, 3, 4, 4}, DType::I64), dy = random({2, 3, 4, 4}, 30),
       dx = zeros({2, 3, 8, 8});
  if (ok(n, maxPool(ctx, x->tensor, p, y->tensor, &idx->tensor)) &&
      ok(n, maxPoolGrad(ctx, dy->tensor, idx->tensor, dx->tensor))) {
    record(n, "y", *y);
    record(n, "indices", *idx);
    record(n, "dx", *dx);
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Transpose, Gather and Gather's gradient.
void checkTransposeGather(const std::string &n) {
  auto x = random({3, 4, 5}, 31), t = zeros({5, 3, 4}),
       table = random({10, 6}, 32), ids = random({7}, 33, 0, 10, DType::I64),
       g = zeros({7, 6}), dy = random({7, 6}, 34), dt = zeros({10, 6});
  if (ok(n, transpose(ctx, x->tensor, {2, 0, 1}, t->tensor)) &&
      ok(n, gather(ctx, table->tensor, ids->tensor, 0, g->tensor)) &&
      ok(n, gatherGrad(ctx, dy->tensor, ids->tensor, 0, dt->tensor))) {
    record(n, "transposed", *t);
    record(n, "gathered", *g);
    record(n, "dtable", *dt);
  }
}

/// ScatterND (replace, then add) and FMod.
void checkScatterNd(const std::string &n) {
  // Rows (k = 1, a repeated and a negative index) replaced, then
  // single elements (k = 2) added; Mod and FMod of the result.
  auto data = random({6, 4}, 35), updates = random({3, 4}, 36),
       y = zeros({6, 4}), z = zeros({6, 4}), cells = random({5}, 38),
       divisor = random({4}, 39, 0.5, 2), r = zeros({6, 4});
  auto rows = random({3, 1}, 37, 0, 1, DType::I64);
  auto at = random({5, 2}, 40, 0, 1, DType::I64);
  const int64_t rowValues[] = {2, -1, 2};
  const int64_t cellValues[] = {0, 0, 5, 3, 1, 2, 0, 0, -1, -1};
  std::copy(rowValues, rowValues + 3, rows->as<int64_t>());
  std::copy(cellValues, cellValues + 10, at->as<int64_t>());
  rows->upload();
  at->upload();
  if (ok(n, scatterND(ctx, data->tensor, rows->tensor, updates->tensor,
                      ScatterReduction::None, y->tensor)) &&
      ok(n, scatterND(ctx, y->tensor, at->tensor, cells->tensor,
                      ScatterReduction::Add, z->tensor)) &&
      ok(n, binary(ctx, BinaryKind::FMod, z->tensor, divisor->tensor,
                   r->tensor))) {
    record(n, "replaced", *y);
    record(n, "added", *z);
    record(n, "fmod", *r);
  }
}

/// Pad in each mode, and its gradient.
void checkPadAndGrad(const std::string &n) {
  // Each mode with a crop; reflect wider than a dim.
  const std::vector<int64_t> pads = {0, 1, 5, -1, 0, -1, 2, 3};
  auto x = random({2, 3, 4, 5}, 41), dy = random({2, 3, 11, 7}, 42);
  const std::pair<PadMode, const char *> modes[] = {
      {PadMode::Constant, "constant"},
      {PadMode::Reflect, "reflect"},
      {PadMode::Edge, "edge"}};
  for (auto [mode, name] : modes) {
    auto y = zeros({2, 3, 11, 7}), dx = zeros({2, 3, 4, 5});
    if (ok(n, pad(ctx, x->tensor, pads, mode, 1.5, y->tensor)) &&
        ok(n, padGrad(ctx, dy->tensor, pads, mode, dx->tensor))) {
      record(n, std::string("y_") + name, *y);
      record(n, std::string("dx_") + name, *dx);
    }
  }
}

//===----------------------------------------------------------------------===//
// Losses, dropout and optimizers
//===----------------------------------------------------------------------===//

/// SoftmaxCrossEntropy (mean) and its gradient.
void checkSoftmaxCrossEntropy(const std::string &n) {
  auto s = random({8, 10}, 35, -3, 3), l = random({8}, 36, 0, 10, DType::I64),
       loss = zeros({}), logp = zeros({8, 10}), one = zeros({}),
       ds = zeros({8, 10});
  setFloat(*one, 0, 1.0);
  one->upload();
  if (ok(n, softmaxCrossEntropy(ctx, s->tensor, l->tensor, nullptr, false, 0,
                                "mean", loss->tensor, logp->tensor)) &&
      ok(n, softmaxCrossEntropyGrad(ctx, one->tensor, logp->tensor, l->tensor,
                                    nullptr, false, 0, "mean", ds->tensor))) {
    record(n, "loss", *loss);
    record(n, "dscores", *ds);
  }
}

/// Training Dropout's output and mask from a fixed seed.
void checkDropout(const std::string &n) {
  auto x = random({16, 33}, 37), y = zeros({16, 33}),
       mask = zeros({16, 33}, DType::Bool);
  if (ok(n, dropout(ctx, x->tensor, 0.3f, true, 1234, 5000, y->tensor,
                    mask->tensor))) {
    record(n, "y", *y);
    record(n, "mask", *mask);
  }
}

/// Three steps of SGD with Nesterov momentum and of AdamW.
void checkSgdMomentumAdam(const std::string &n) {
  auto p = random({50}, 38), g = random({50}, 39), buf = random({50}, 40),
       q = random({50}, 41), m = random({50}, 42), v = random({50}, 43, 0, 1);
  bool done = true;
  for (int64_t step = 1; step <= 3 && done; ++step)
    done = ok(n, sgdStep(ctx, p->tensor, g->tensor, &buf->tensor, step, 0.1f,
                         0.9f, 0.0f, 0.01f, true)) &&
           ok(n, adamStep(ctx, q->tensor, g->tensor, m->tensor, v->tensor, step,
                          0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, true));
  if (done) {
    record(n, "sgd_param", *p);
    record(n, "sgd_buffer", *buf);
    record(n, "adam_param", *q);
    record(n, "adam_v", *v);
  }
}

/// Every case, in the order of the manifest.
std::vector<Case> cases() {
  return {
      {"gelu_grad", checkGeluGrad},
      {"activations_and_grads", checkActivationsAndGrads},
      {"max_min_reduce_min", checkMaxMinReduceMin},
      {"broadcast_div", checkBroadcastDiv},
      {"reduce_mean", checkReduceMean},
      {"mixed_elementwise", checkMixedElementwise},
      {"log_softmax_grad", checkLogSoftmaxGrad},
      {"layer_norm", checkLayerNorm},
      {"batch_norm_train", checkBatchNormTrain},
      {"norm_f32_statistics", checkNormF32Statistics},
      {"gemm_transposed", checkGemmTransposed},
      {"gemm_paths", checkGemmPaths},
      {"batched_matmul", checkBatchedMatmul},
      {"batched_matmul_transposed", checkBatchedMatmulTransposed},
      {"conv_and_grads", checkConvAndGrads},
      {"conv_transpose", checkConvTranspose},
      {"grouped_conv", checkGroupedConv},
      {"conv_activation", checkConvActivation},
      {"max_pool_and_grad", checkMaxPoolAndGrad},
      {"avg_pool_and_grad", checkAvgPoolAndGrad},
      {"transpose_gather", checkTransposeGather},
      {"scatter_nd", checkScatterNd},
      {"pad_and_grad", checkPadAndGrad},
      {"softmax_cross_entropy", checkSoftmaxCrossEntropy},
      {"dropout", checkDropout},
      {"sgd_momentum_adam", checkSgdMomentumAdam},
  };
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  outDir = argv[1];
#ifdef PP_CROSSCHECK_CUDA
  if (Status s = createContext(ctx); !s.ok()) {
    std::fprintf(stderr, "no CUDA context: %s\n", s.message.c_str());
    return 1;
  }
#endif
  manifest.open(outDir + "/manifest.txt");
  if (!manifest) {
    std::fprintf(stderr, "cannot write %s/manifest.txt\n", outDir.c_str());
    return 1;
  }
  int count = 0;
  const std::pair<DType, const char *> floatTypes[] = {
      {DType::F32, ""}, {DType::F16, "f16."}, {DType::BF16, "bf16."}};
  for (auto [dtype, prefix] : floatTypes) {
    floatType = dtype;
    for (const Case &c : cases()) {
      c.run(prefix + std::string(c.name));
      ++count;
    }
  }
  manifest.close();
#ifdef PP_CROSSCHECK_CUDA
  destroyContext(ctx);
#endif
  std::printf("%d cases, %d failed\n", count, failures);
  return failures ? 1 : 0;
}
