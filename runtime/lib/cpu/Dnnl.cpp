//===- Dnnl.cpp - oneDNN convolutions of the CPU backend --------*- C++ -*-===//
//
// One oneDNN primitive per problem (pass, shapes, window, bias, thread
// count), cached per calling thread. dnnl::memory objects over the caller's
// buffers (plain ncw / nchw / ncdhw activations, oiw / oihw / oidhw or
// grouped goi... weights) feed it through reorders into the blocked layouts
// oneDNN picks (format_tag::any): with plain layouts it has only its own
// im2col + GEMM, slower than the runtime's; the blocked JIT kernels are
// faster even with the reorders (bench/README.md). The blocked copies live
// in per-thread arenas shared by all plans. oneDNN's threads are OpenMP's
// (Debian's libdnnl is built with it): each call runs with ctx.numThreads
// of them, and a primitive is created for the thread count it runs with.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Depthwise.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#ifdef PP_RUNTIME_HAVE_DNNL
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <new>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>
#endif

namespace pp::rt::cpu {

namespace {

std::atomic<int> convImplOverride{-1};
std::atomic<int> gemmImplOverride{-1};
std::atomic<int64_t> dnnlCalls{0};
std::atomic<int64_t> dnnlGemms{0};
std::atomic<int64_t> dnnlMatmuls{0};
std::atomic<int64_t> dnnlEltwises{0};
std::atomic<int64_t> dnnlSoftmaxes{0};

ConvImpl environmentConvImpl() {
  static const ConvImpl impl = [] {
    const char *value = std::getenv("PP_RUNTIME_CONV");
    if (value && std::strcmp(value, "im2col") == 0)
      return ConvImpl::Im2col;
    if (value && std::strcmp(value, "onednn") == 0)
      return ConvImpl::OneDnn;
    return ConvImpl::Auto;
  }();
  return impl;
}

GemmImpl environmentGemmImpl() {
  static const GemmImpl impl = [] {
    const char *value = std::getenv("PP_RUNTIME_GEMM");
    if (value && std::strcmp(value, "openblas") == 0)
      return GemmImpl::OpenBLAS;
    if (value && std::strcmp(value, "sgemm") == 0)
      return GemmImpl::Sgemm;
    return GemmImpl::Auto;
  }();
  return impl;
}

} // namespace

GemmImpl gemmImpl() {
  int forced = gemmImplOverride.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<GemmImpl>(forced) : environmentGemmImpl();
}

GemmImpl setGemmImpl(GemmImpl impl) {
  GemmImpl previous = gemmImpl();
  gemmImplOverride.store(static_cast<int>(impl), std::memory_order_relaxed);
  return previous;
}

ConvImpl convImpl() {
  int forced = convImplOverride.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<ConvImpl>(forced) : environmentConvImpl();
}

ConvImpl setConvImpl(ConvImpl impl) {
  ConvImpl previous = convImpl();
  convImplOverride.store(static_cast<int>(impl), std::memory_order_relaxed);
  return previous;
}

int64_t dnnlConvCalls() { return dnnlCalls.load(std::memory_order_relaxed); }

int64_t dnnlGemmCalls() { return dnnlGemms.load(std::memory_order_relaxed); }

int64_t dnnlMatmulCalls() {
  return dnnlMatmuls.load(std::memory_order_relaxed);
}

int64_t dnnlEltwiseCalls() {
  return dnnlEltwises.load(std::memory_order_relaxed);
}

bool dnnlEltwiseTakes(UnaryKind kind, bool gradient) {
  switch (kind) {
  case UnaryKind::GeluErf:
  case UnaryKind::GeluTanh:
    return true;
  case UnaryKind::Sigmoid:
  case UnaryKind::Tanh:
    return !gradient;
  default:
    return false;
  }
}

int64_t dnnlSoftmaxCalls() {
  return dnnlSoftmaxes.load(std::memory_order_relaxed);
}

#ifndef PP_RUNTIME_HAVE_DNNL

bool dnnlAvailable() { return false; }

bool dnnlSgemm(const Context &, bool, bool, int64_t, int64_t, int64_t, float,
               const float *, int64_t, const float *, int64_t, float, float *,
               int64_t) {
  return false;
}

bool dnnlGemmEpilogue(const Context &, bool, bool, int64_t, int64_t, int64_t,
                      float, const float *, int64_t, const float *, int64_t,
                      const float *, bool, float *, int64_t) {
  return false;
}

bool dnnlBatchedMatmul(const Context &, int64_t, bool, bool, bool, bool,
                       int64_t, int64_t, int64_t, const float *, const float *,
                       float *) {
  return false;
}

bool dnnlEltwise(const Context &, UnaryKind, int64_t, const float *,
                 const float *, float *) {
  return false;
}

bool dnnlSoftmax(const Context &, bool, int64_t, int64_t, int64_t,
                 const float *, const float *, const float *, float *) {
  return false;
}

bool dnnlConvForward(const Context &, const common::ConvDims &, int,
                     const float *, const float *, const float *, float *,
                     bool) {
  return false;
}
bool dnnlConvBackwardData(const Context &, const common::ConvDims &, int,
                          const float *, const float *, float *) {
  return false;
}
bool dnnlConvBackwardWeights(const Context &, const common::ConvDims &, int,
                             const float *, const float *, float *) {
  return false;
}

#else // PP_RUNTIME_HAVE_DNNL

bool dnnlAvailable() { return true; }

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum class Pass : int64_t {
  Forward,
  ForwardRelu, // with relu as an eltwise post-op
  BackwardData,
  BackwardWeights
};

/// Everything a primitive depends on.
using Key = std::array<int64_t, 8 + 7 * 3>;

Key makeKey(Pass pass, const common::ConvDims &cp, int rank, bool bias,
            int threads) {
  const common::Geometry &g = cp.geo;
  Key key{static_cast<int64_t>(pass),
          rank,
          bias,
          threads,
          cp.n,
          cp.c,
          cp.m,
          cp.group};
  size_t at = 8;
  for (const int64_t *dims : {g.in, g.out, g.k, g.s, g.pb, g.pe, g.d})
    for (int i = 0; i < 3; ++i)
      key[at++] = dims[i];
  return key;
}

struct KeyHash {
  size_t operator()(const Key &key) const {
    size_t h = 0;
    for (int64_t v : key)
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

/// One of a primitive's operands: a memory over the caller's buffer, and
/// when the primitive wants another layout, one of that layout (its buffer
/// is the calling thread's arena of the operand's slot, bound per call) with
/// the reorder between the two.
struct Operand {
  int arg = 0;
  memory user;
  memory inner; // empty: the primitive uses `user` itself
  dnnl::reorder convert;
};

/// A primitive ready to run: inputs in argument order (x or dy first, then
/// w or dy, then the bias if any) and one output.
struct Plan {
  bool supported = false;
  // oneDNN runs the problem on its own im2col + GEMM (gemm:jit), not a JIT
  // convolution kernel.
  bool gemmFallback = false;
  dnnl::primitive primitive;
  std::vector<Operand> inputs;
  Operand output;
  memory scratchpad; // buffer from the scratchpad arena, bound per call
};

/// A growable 64-byte aligned buffer. Each thread has one per operand slot
/// and one for the scratchpad, shared by all its plans: the blocked copies
/// cost as much memory as the largest convolution's, not the sum of all.
class Arena {
public:
  void *get(size_t bytes) {
    if (bytes > capacity) {
      capacity = (bytes + 63) / 64 * 64;
      data.reset(static_cast<char *>(std::aligned_alloc(64, capacity)));
      if (!data)
        throw std::bad_alloc();
    }
    return data.get();
  }

private:
  struct Free {
    void operator()(char *p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  size_t capacity = 0;
};

const dnnl::engine &cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::dims spatial(const int64_t *dims, int rank, int64_t minus = 0) {
  memory::dims out;
  for (int i = 3 - rank; i < 3; ++i)
    out.push_back(dims[i] - minus);
  return out;
}

Tag activationTag(int rank) {
  return rank == 1 ? Tag::ncw : rank == 2 ? Tag::nchw : Tag::ncdhw;
}
Tag weightTag(int rank, bool grouped) {
  if (grouped)
    return rank == 1 ? Tag::goiw : rank == 2 ? Tag::goihw : Tag::goidhw;
  return rank == 1 ? Tag::oiw : rank == 2 ? Tag::oihw : Tag::oidhw;
}

/// Binds `op` to the primitive's wanted layout `want` over the user's
/// layout `user` (a reorder in direction input ? user -> inner : inner ->
/// user when they differ).
Operand makeOperand(int arg, const memory::desc &user, const memory::desc &want,
                    bool input) {
  const dnnl::engine &engine = cpuEngine();
  Operand op;
  op.arg = arg;
  op.user = memory(user, engine, DNNL_MEMORY_NONE);
  if (want != user) {
    op.inner = memory(want, engine, DNNL_MEMORY_NONE);
    op.convert = input ? dnnl::reorder(op.user, op.inner)
                       : dnnl::reorder(op.inner, op.user);
  }
  return op;
}

/// Whether oneDNN picked its im2col + GEMM for the problem: for depthwise
/// problems (no JIT kernel in oneDNN 2.6 for the weight gradient of 7x7
/// kernels, or for planes smaller than the pads) that is one GEMM of a single
/// row per channel, many times slower than the direct loops.
bool runsOnGemm(const dnnl::primitive_desc_base &pd) {
  return std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
}

Plan makePlan(Pass pass, const common::ConvDims &cp, int rank, bool bias) {
  const common::Geometry &g = cp.geo;
  const dnnl::engine &engine = cpuEngine();
  bool grouped = cp.group > 1;
  memory::dims xDims{cp.n, cp.c}, yDims{cp.n, cp.m}, wDims;
  if (grouped)
    wDims = {cp.group, cp.coutG, cp.cinG};
  else
    wDims = {cp.m, cp.cinG};
  for (int64_t v : spatial(g.in, rank))
    xDims.push_back(v);
  for (int64_t v : spatial(g.out, rank))
    yDims.push_back(v);
  for (int64_t v : spatial(g.k, rank))
    wDims.push_back(v);
  memory::dims strides = spatial(g.s, rank), dilates = spatial(g.d, rank, 1),
               padL = spatial(g.pb, rank), padR = spatial(g.pe, rank);
  auto f32 = memory::data_type::f32;
  memory::desc xUser(xDims, f32, activationTag(rank)),
      yUser(yDims, f32, activationTag(rank)),
      wUser(wDims, f32, weightTag(rank, grouped)), bUser({cp.m}, f32, Tag::x);
  // oneDNN picks the layouts it computes in (blocked: with the caller's
  // plain ones it only has its own im2col + GEMM, slower than ours).
  memory::desc xWant(xDims, f32, Tag::any), yWant(yDims, f32, Tag::any),
      wWant(wDims, f32, Tag::any);

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto algo = dnnl::algorithm::convolution_direct;
  auto forwardDesc = [&](bool withBias) {
    return withBias ? dnnl::convolution_forward::desc(
                          dnnl::prop_kind::forward_training, algo, xWant, wWant,
                          bUser, yWant, strides, dilates, padL, padR)
                    : dnnl::convolution_forward::desc(
                          dnnl::prop_kind::forward_training, algo, xWant, wWant,
                          yWant, strides, dilates, padL, padR);
  };
  Plan plan;
  memory::desc scratch;
  switch (pass) {
  case Pass::Forward:
  case Pass::ForwardRelu: {
    if (pass == Pass::ForwardRelu) {
      dnnl::post_ops ops;
      ops.append_eltwise(/*scale=*/1.f, dnnl::algorithm::eltwise_relu,
                         /*alpha=*/0.f, /*beta=*/0.f);
      attr.set_post_ops(ops);
    }
    dnnl::convolution_forward::primitive_desc pd(forwardDesc(bias), attr,
                                                 engine);
    plan.primitive = dnnl::convolution_forward(pd);
    plan.gemmFallback = runsOnGemm(pd);
    plan.inputs.push_back(
        makeOperand(DNNL_ARG_SRC, xUser, pd.src_desc(), true));
    plan.inputs.push_back(
        makeOperand(DNNL_ARG_WEIGHTS, wUser, pd.weights_desc(), true));
    if (bias)
      plan.inputs.push_back(
          makeOperand(DNNL_ARG_BIAS, bUser, pd.bias_desc(), true));
    plan.output = makeOperand(DNNL_ARG_DST, yUser, pd.dst_desc(), false);
    scratch = pd.scratchpad_desc();
    break;
  }
  case Pass::BackwardData: {
    dnnl::convolution_forward::primitive_desc hint(forwardDesc(false), engine);
    dnnl::convolution_backward_data::desc desc(algo, xWant, wWant, yWant,
                                               strides, dilates, padL, padR);
    dnnl::convolution_backward_data::primitive_desc pd(desc, attr, engine,
                                                       hint);
    plan.primitive = dnnl::convolution_backward_data(pd);
    plan.gemmFallback = runsOnGemm(pd);
    plan.inputs.push_back(
        makeOperand(DNNL_ARG_DIFF_DST, yUser, pd.diff_dst_desc(), true));
    plan.inputs.push_back(
        makeOperand(DNNL_ARG_WEIGHTS, wUser, pd.weights_desc(), true));
    plan.output =
        makeOperand(DNNL_ARG_DIFF_SRC, xUser, pd.diff_src_desc(), false);
    scratch = pd.scratchpad_desc();
    break;
  }
  case Pass::BackwardWeights: {
    dnnl::convolution_forward::primitive_desc hint(forwardDesc(false), engine);
    dnnl::convolution_backward_weights::desc desc(algo, xWant, wWant, yWant,
                                                  strides, dilates, padL, padR);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, engine,
                                                          hint);
    plan.primitive = dnnl::convolution_backward_weights(pd);
    plan.gemmFallback = runsOnGemm(pd);
    plan.inputs.push_back(
        makeOperand(DNNL_ARG_SRC, xUser, pd.src_desc(), true));
    plan.inputs.push_back(
        makeOperand(DNNL_ARG_DIFF_DST, yUser, pd.diff_dst_desc(), true));
    plan.output = makeOperand(DNNL_ARG_DIFF_WEIGHTS, wUser,
                              pd.diff_weights_desc(), false);
    scratch = pd.scratchpad_desc();
    break;
  }
  }
  plan.scratchpad = memory(scratch, engine, DNNL_MEMORY_NONE);
  plan.supported = true;
  return plan;
}

/// The plans of this thread (a plan's buffers are not shared between
/// threads that may run at once). Bounded: a program has a few dozen
/// problems; anything beyond starts over.
Plan &planFor(Pass pass, const common::ConvDims &cp, int rank, bool bias,
              int threads) {
  thread_local std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans;
  Key key = makeKey(pass, cp, rank, bias, threads);
  auto it = plans.find(key);
  if (it != plans.end())
    return *it->second;
  constexpr size_t maxPlans = 512;
  if (plans.size() >= maxPlans)
    plans.clear();
  auto plan = std::make_unique<Plan>();
  try {
    *plan = makePlan(pass, cp, rank, bias);
  } catch (const dnnl::error &) {
    *plan = Plan(); // unsupported: im2col from now on
  }
  return *plans.emplace(key, std::move(plan)).first->second;
}

/// Sets this thread's OpenMP team size for the scope (oneDNN forks teams of
/// omp_get_max_threads()).
class OmpThreads {
public:
  explicit OmpThreads(int threads) : previous(omp_get_max_threads()) {
    if (threads != previous)
      omp_set_num_threads(threads);
    changed = threads != previous;
  }
  ~OmpThreads() {
    if (changed)
      omp_set_num_threads(previous);
  }

private:
  int previous;
  bool changed = false;
};

bool takes(const common::ConvDims &cp, int rank) {
  if (rank < 1 || rank > 3 || cp.n <= 0 || cp.c <= 0 || cp.m <= 0 ||
      cp.group <= 0)
    return false;
  for (int i = 0; i < 3; ++i)
    if (cp.geo.in[i] <= 0 || cp.geo.out[i] <= 0 || cp.geo.k[i] <= 0)
      return false;
  return true;
}

bool run(Pass pass, const Context &ctx, const common::ConvDims &cp, int rank,
         std::initializer_list<const float *> inputs, float *output) {
  if (!takes(cp, rank))
    return false;
  int threads = std::max(1, ctx.numThreads);
  bool bias = inputs.size() > 2 && inputs.begin()[2];
  OmpThreads scope(threads);
  Plan &plan = planFor(pass, cp, rank, bias, threads);
  if (!plan.supported ||
      (plan.gemmFallback && isDepthwise(cp) && convImpl() != ConvImpl::OneDnn))
    return false;
  thread_local dnnl::stream stream(cpuEngine());
  constexpr size_t outputSlot = 3, scratchSlot = 4;
  thread_local Arena arenas[5];
  std::unordered_map<int, memory> args;
  auto bind = [&](Operand &op, const void *data, size_t slot) {
    op.user.set_data_handle(const_cast<void *>(data));
    if (!op.inner) {
      args[op.arg] = op.user;
      return;
    }
    op.inner.set_data_handle(arenas[slot].get(op.inner.get_desc().get_size()));
    args[op.arg] = op.inner;
    if (slot != outputSlot)
      op.convert.execute(stream, op.user, op.inner);
  };
  try {
    size_t slot = 0;
    for (const float *data : inputs)
      if (data) {
        bind(plan.inputs[slot], data, slot);
        ++slot;
      }
    bind(plan.output, output, outputSlot);
    plan.scratchpad.set_data_handle(arenas[scratchSlot].get(
        std::max<size_t>(1, plan.scratchpad.get_desc().get_size())));
    args[DNNL_ARG_SCRATCHPAD] = plan.scratchpad;
    plan.primitive.execute(stream, args);
    if (plan.output.inner)
      plan.output.convert.execute(stream, plan.output.inner, plan.output.user);
    stream.wait();
  } catch (const dnnl::error &) {
    return false; // the caller's im2col rewrites the whole output
  }
  dnnlCalls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

} // namespace

namespace {

/// A GEMM as oneDNN's matmul primitive: its blocked (brgemm) kernels ran
/// widemlp's 256 x 1024 x 1024 layer at 181 GFLOP/s on one core against
/// 131 for dnnl_sgemm (bench/gemm_epilogue.cpp). Transposes are strides; alpha
/// an output scale, beta a sum post-op. Primitives are cached per thread (a
/// program has a few dozen shapes); a shape only a reference kernel takes is
/// left to sgemm.
struct MatmulPlan {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias;
  size_t scratchBytes = 0;
  bool supported = false;
};

/// The epilogue of a matmul: a bias row added to every row of c (instead
/// of beta * c) and a Relu, applied as the primitive writes c.
struct MatmulEpilogue {
  bool bias = false, relu = false;
};

MatmulPlan makeMatmulPlan(bool transA, bool transB, int64_t m, int64_t n,
                          int64_t k, float alpha, int64_t lda, int64_t ldb,
                          float beta, int64_t ldc, MatmulEpilogue epilogue) {
  using dt = memory::data_type;
  MatmulPlan plan;
  plan.a = memory::desc({m, k}, dt::f32,
                        transA ? memory::dims{1, lda} : memory::dims{lda, 1});
  plan.b = memory::desc({k, n}, dt::f32,
                        transB ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  plan.c = memory::desc({m, n}, dt::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.f)
    attr.set_output_scales(0, {alpha});
  dnnl::post_ops ops;
  if (beta != 0.f)
    ops.append_sum(beta);
  if (epilogue.relu)
    ops.append_eltwise(/*scale=*/1.f, dnnl::algorithm::eltwise_relu,
                       /*alpha=*/0.f, /*beta=*/0.f);
  attr.set_post_ops(ops);
  if (epilogue.bias)
    plan.bias = memory::desc({1, n}, dt::f32, memory::dims{n, 1});
  dnnl::matmul::primitive_desc pd(
      epilogue.bias ? dnnl::matmul::desc(plan.a, plan.b, plan.bias, plan.c)
                    : dnnl::matmul::desc(plan.a, plan.b, plan.c),
      attr, cpuEngine());
  if (std::string(pd.impl_info_str()).find("ref") != std::string::npos)
    return plan;
  plan.primitive = dnnl::matmul(pd);
  plan.scratchBytes = pd.scratchpad_desc().get_size();
  plan.supported = true;
  return plan;
}

/// Runs a supported plan on a, b and c (and the bias row where the plan has
/// one) with this thread's stream and scratchpad; false when oneDNN fails.
bool executeMatmulPlan(MatmulPlan &plan, const float *a, const float *b,
                       float *c, const float *bias) {
  thread_local dnnl::stream stream(cpuEngine());
  thread_local Arena scratch;
  try {
    const dnnl::engine &engine = cpuEngine();
    memory aMem(plan.a, engine, const_cast<float *>(a));
    memory bMem(plan.b, engine, const_cast<float *>(b));
    memory cMem(plan.c, engine, c);
    dnnl::memory::desc scratchDesc(
        {static_cast<int64_t>(std::max<size_t>(1, plan.scratchBytes))},
        memory::data_type::u8, memory::format_tag::a);
    memory scratchMem(scratchDesc, engine,
                      scratch.get(std::max<size_t>(1, plan.scratchBytes)));
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, aMem},
                                            {DNNL_ARG_WEIGHTS, bMem},
                                            {DNNL_ARG_DST, cMem},
                                            {DNNL_ARG_SCRATCHPAD, scratchMem}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS,
                   memory(plan.bias, engine, const_cast<float *>(bias)));
    plan.primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error &) {
    return false;
  }
  return true;
}

/// On one thread, GEMMs of at least this many multiply-adds run on the
/// matmul primitive (dnnlSgemm says why).
constexpr int64_t kMatmulFlops = int64_t(1) << 22;

bool runMatmul(int threads, bool transA, bool transB, int64_t m, int64_t n,
               int64_t k, float alpha, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
               const float *bias = nullptr, bool relu = false) {
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, float, int64_t,
                         int64_t, float, int64_t, int, bool, bool>;
  thread_local std::map<Key, MatmulPlan> plans;
  MatmulEpilogue epilogue{bias != nullptr, relu};
  Key key{transA,       transB, m,    n,   k,       alpha,
          lda,          ldb,    beta, ldc, threads, epilogue.bias,
          epilogue.relu};
  auto it = plans.find(key);
  if (it == plans.end()) {
    constexpr size_t maxPlans = 512;
    if (plans.size() >= maxPlans)
      plans.clear();
    MatmulPlan plan;
    try {
      plan = makeMatmulPlan(transA, transB, m, n, k, alpha, lda, ldb, beta, ldc,
                            epilogue);
    } catch (const dnnl::error &) {
      plan = MatmulPlan(); // unsupported: sgemm from now on
    }
    it = plans.emplace(key, std::move(plan)).first;
  }
  MatmulPlan &plan = it->second;
  return plan.supported && executeMatmulPlan(plan, a, b, c, bias);
}

/// Runs a GEMM on the matmul primitive where that is the choice (one
/// thread, at least kMatmulFlops, gemmImpl() Auto) and counts it; false
/// elsewhere or when it fails (c untouched).
bool matmulOnOneThread(const Context &ctx, bool transA, bool transB, int64_t m,
                       int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta,
                       float *c, int64_t ldc, const float *bias, bool relu) {
  if (gemmImpl() != GemmImpl::Auto || std::max(1, ctx.numThreads) != 1 ||
      m * n * k < kMatmulFlops)
    return false;
  OmpThreads scope(1);
  if (!runMatmul(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c,
                 ldc, bias, relu))
    return false;
  dnnlGemms.fetch_add(1, std::memory_order_relaxed);
  dnnlMatmuls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

} // namespace

bool dnnlSgemm(const Context &ctx, bool transA, bool transB, int64_t m,
               int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  GemmImpl impl = gemmImpl();
  if (impl == GemmImpl::OpenBLAS)
    return false;
  char ta = transA ? 'T' : 'N', tb = transB ? 'T' : 'N';
  int threads = std::max(1, ctx.numThreads);
  // On one thread, large GEMMs go to the matmul primitive (widemlp's step:
  // 69 ms against 112 with sgemm); small ones stay on sgemm, whose dispatch
  // is cheaper (the primitive was 1.2x slower at 8 x 784 x 128). On several
  // threads the column split below was as fast (41.5 against 43.2 ms on 2).
  if (matmulOnOneThread(ctx, transA, transB, m, n, k, alpha, a, lda, b, ldb,
                        beta, c, ldc, nullptr, false))
    return true;
  // On several threads, each computes a block of c's columns (or rows, when
  // c is taller than wide) with a one-thread sgemm: oneDNN's own split of
  // an (N, T) GEMM of the MLP's shape reached 130-143 GFLOP/s on 2 threads
  // against 180-190 this way (bench/README.md).
  constexpr int64_t kSplitFlops = int64_t(1) << 22;
  if (threads > 1 && m * n * k >= kSplitFlops) {
    bool byColumns = n >= m;
    int64_t extent = byColumns ? n : m;
    int64_t parts =
        std::min<int64_t>(threads, std::max<int64_t>(1, extent / 16));
    int64_t chunk = (extent + parts - 1) / parts;
    chunk = (chunk + 15) / 16 * 16;
    std::atomic<bool> ok{true};
#pragma omp parallel for num_threads(parts) schedule(static, 1)
    for (int64_t part = 0; part < parts; ++part) {
      int64_t begin = part * chunk, end = std::min(extent, begin + chunk);
      if (begin >= end)
        continue;
      omp_set_num_threads(1);
      dnnl_status_t status =
          byColumns ? dnnl_sgemm(ta, tb, m, end - begin, k, alpha, a, lda,
                                 transB ? b + begin * ldb : b + begin, ldb,
                                 beta, c + begin, ldc)
                    : dnnl_sgemm(ta, tb, end - begin, n, k, alpha,
                                 transA ? a + begin : a + begin * lda, lda, b,
                                 ldb, beta, c + begin * ldc, ldc);
      if (status != dnnl_success)
        ok = false;
    }
    if (!ok)
      return false;
  } else {
    OmpThreads scope(threads);
    if (dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) !=
        dnnl_success)
      return false;
  }
  dnnlGemms.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool dnnlGemmEpilogue(const Context &ctx, bool transA, bool transB, int64_t m,
                      int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb,
                      const float *bias, bool relu, float *c, int64_t ldc) {
  return !(bias && alpha != 1.f) &&
         matmulOnOneThread(ctx, transA, transB, m, n, k, alpha, a, lda, b, ldb,
                           0.f, c, ldc, bias, relu);
}

bool dnnlBatchedMatmul(const Context &ctx, int64_t batch, bool transA,
                       bool aShared, bool transB, bool bShared, int64_t m,
                       int64_t n, int64_t k, const float *a, const float *b,
                       float *y) {
  if (gemmImpl() != GemmImpl::Auto || batch < 1 || m < 1 || n < 1 || k < 1)
    return false;
  int threads = std::max(1, ctx.numThreads);
  using Key = std::tuple<int64_t, bool, bool, bool, bool, int64_t, int64_t,
                         int64_t, int>;
  thread_local std::map<Key, MatmulPlan> plans;
  Key key{batch, transA, aShared, transB, bShared, m, n, k, threads};
  auto it = plans.find(key);
  if (it == plans.end()) {
    constexpr size_t maxPlans = 512;
    if (plans.size() >= maxPlans)
      plans.clear();
    using dt = memory::data_type;
    MatmulPlan plan;
    // Transposes are strides; a shared operand is a batch of one, which
    // the primitive broadcasts.
    auto operand = [](int64_t count, int64_t rows, int64_t cols,
                      bool transposed) {
      return memory::desc({count, rows, cols}, dt::f32,
                          transposed ? memory::dims{rows * cols, 1, rows}
                                     : memory::dims{rows * cols, cols, 1});
    };
    plan.a = operand(aShared ? 1 : batch, m, k, transA);
    plan.b = operand(bShared ? 1 : batch, k, n, transB);
    plan.c = operand(batch, m, n, false);
    try {
      OmpThreads scope(threads);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(plan.a, plan.b, plan.c), attr, cpuEngine());
      if (std::string(pd.impl_info_str()).find("ref") == std::string::npos) {
        plan.primitive = dnnl::matmul(pd);
        plan.scratchBytes = pd.scratchpad_desc().get_size();
        plan.supported = true;
      }
    } catch (const dnnl::error &) {
      plan = MatmulPlan(); // unsupported: the per-matrix GEMMs
    }
    it = plans.emplace(key, std::move(plan)).first;
  }
  MatmulPlan &plan = it->second;
  OmpThreads scope(threads);
  if (!plan.supported || !executeMatmulPlan(plan, a, b, y, nullptr))
    return false;
  dnnlMatmuls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

/// The primitive cached under `key` in this thread's `plans`, made by
/// `make` on first use; bounded like the convolutions' plans.
template <typename Key, typename Make>
dnnl::primitive &cachedPrimitive(std::map<Key, dnnl::primitive> &plans,
                                 const Key &key, Make make) {
  auto it = plans.find(key);
  if (it != plans.end())
    return it->second;
  constexpr size_t maxPlans = 512;
  if (plans.size() >= maxPlans)
    plans.clear();
  return plans.emplace(key, make()).first->second;
}

bool dnnlEltwise(const Context &ctx, UnaryKind kind, int64_t n, const float *x,
                 const float *dy, float *out) {
  static const bool scalar = [] {
    const char *value = std::getenv("PP_RUNTIME_ELTWISE");
    return value && std::strcmp(value, "scalar") == 0;
  }();
  bool backward = dy != nullptr;
  if (n < kDnnlEltwiseMinElements || scalar ||
      !dnnlEltwiseTakes(kind, backward))
    return false;
  dnnl::algorithm algo =
      kind == UnaryKind::GeluErf    ? dnnl::algorithm::eltwise_gelu_erf
      : kind == UnaryKind::GeluTanh ? dnnl::algorithm::eltwise_gelu_tanh
      : kind == UnaryKind::Sigmoid  ? dnnl::algorithm::eltwise_logistic
                                    : dnnl::algorithm::eltwise_tanh;
  int threads = std::max(1, ctx.numThreads);
  // A primitive per (algorithm, pass, size, threads), cached per thread
  // like the convolutions'; eltwise primitives need no scratchpad.
  using Key = std::tuple<int, bool, int64_t, int>;
  thread_local std::map<Key, dnnl::primitive> plans;
  Key key{static_cast<int>(algo), backward, n, threads};
  OmpThreads scope(threads);
  const dnnl::engine &engine = cpuEngine();
  memory::desc data({n}, memory::data_type::f32, Tag::a);
  try {
    dnnl::primitive &primitive = cachedPrimitive(plans, key, [&] {
      dnnl::eltwise_forward::primitive_desc forward(
          {dnnl::prop_kind::forward_training, algo, data, 0.f, 0.f}, engine);
      return backward ? dnnl::primitive(dnnl::eltwise_backward(
                            dnnl::eltwise_backward::primitive_desc(
                                {algo, data, data, 0.f, 0.f}, engine, forward)))
                      : dnnl::primitive(dnnl::eltwise_forward(forward));
    });
    thread_local dnnl::stream stream(engine);
    memory xMem(data, engine, const_cast<float *>(x));
    memory outMem(data, engine, out);
    if (backward)
      primitive.execute(
          stream,
          {{DNNL_ARG_SRC, xMem},
           {DNNL_ARG_DIFF_DST, memory(data, engine, const_cast<float *>(dy))},
           {DNNL_ARG_DIFF_SRC, outMem}});
    else
      primitive.execute(stream, {{DNNL_ARG_SRC, xMem}, {DNNL_ARG_DST, outMem}});
    stream.wait();
  } catch (const dnnl::error &) {
    return false;
  }
  dnnlEltwises.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool dnnlSoftmax(const Context &ctx, bool log, int64_t outer, int64_t n,
                 int64_t inner, const float *x, const float *y, const float *dy,
                 float *out) {
  static const bool loop = [] {
    const char *value = std::getenv("PP_RUNTIME_SOFTMAX");
    return value && std::strcmp(value, "loop") == 0;
  }();
  if (loop || outer * n * inner < kDnnlEltwiseMinElements)
    return false;
  int threads = std::max(1, ctx.numThreads);
  bool backward = dy != nullptr;
  // A primitive per problem, cached per thread; an empty primitive marks a
  // layout oneDNN has only its reference kernel for (the runtime's loop is
  // faster there).
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int>;
  thread_local std::map<Key, dnnl::primitive> plans;
  Key key{log, backward, outer, n, inner, threads};
  OmpThreads scope(threads);
  const dnnl::engine &engine = cpuEngine();
  memory::desc data({outer, n, inner}, memory::data_type::f32, Tag::abc);
  try {
    dnnl::primitive &primitive = cachedPrimitive(plans, key, [&] {
      auto make = [&](auto forwardDesc, auto backwardDesc) -> dnnl::primitive {
        using Forward = decltype(forwardDesc);
        using Backward = decltype(backwardDesc);
        typename Forward::primitive_desc forward(
            {dnnl::prop_kind::forward_training, data, 1}, engine);
        if (!backward) {
          if (std::string(forward.impl_info_str()).find("ref") !=
              std::string::npos)
            return {};
          return Forward(forward);
        }
        typename Backward::primitive_desc pd({data, data, 1}, engine, forward);
        if (std::string(pd.impl_info_str()).find("ref") != std::string::npos)
          return {};
        return Backward(pd);
      };
      return log ? make(dnnl::logsoftmax_forward(), dnnl::logsoftmax_backward())
                 : make(dnnl::softmax_forward(), dnnl::softmax_backward());
    });
    if (!primitive)
      return false;
    thread_local dnnl::stream stream(engine);
    memory outMem(data, engine, out);
    if (backward)
      primitive.execute(
          stream,
          {{DNNL_ARG_DST, memory(data, engine, const_cast<float *>(y))},
           {DNNL_ARG_DIFF_DST, memory(data, engine, const_cast<float *>(dy))},
           {DNNL_ARG_DIFF_SRC, outMem}});
    else
      primitive.execute(
          stream, {{DNNL_ARG_SRC, memory(data, engine, const_cast<float *>(x))},
                   {DNNL_ARG_DST, outMem}});
    stream.wait();
  } catch (const dnnl::error &) {
    return false;
  }
  dnnlSoftmaxes.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool dnnlConvForward(const Context &ctx, const common::ConvDims &cp, int rank,
                     const float *x, const float *w, const float *bias,
                     float *y, bool reluPostOp) {
  return run(reluPostOp ? Pass::ForwardRelu : Pass::Forward, ctx, cp, rank,
             {x, w, bias}, y);
}

bool dnnlConvBackwardData(const Context &ctx, const common::ConvDims &cp,
                          int rank, const float *dy, const float *w,
                          float *dx) {
  return run(Pass::BackwardData, ctx, cp, rank, {dy, w}, dx);
}

bool dnnlConvBackwardWeights(const Context &ctx, const common::ConvDims &cp,
                             int rank, const float *dy, const float *x,
                             float *dw) {
  return run(Pass::BackwardWeights, ctx, cp, rank, {x, dy}, dw);
}

#endif // PP_RUNTIME_HAVE_DNNL

} // namespace pp::rt::cpu
