//===- Conv.cu - Convolution on cuDNN -------------------------------------===//
//
// conv, convGradInput and convGradWeight on cuDNN's (v9 legacy)
// convolution API. 1-D problems run as 2-D with a unit height. cuDNN pads
// symmetrically only, so asymmetric ONNX pads go through an explicitly
// zero-padded copy of the input (and a crop of the input gradient).
// Algorithms come from cuDNN's heuristics (cudnnGet*_v7, no benchmarking,
// no synchronisation), tried in order until one gets its workspace. F64,
// and F32 unless the context allows TF32 (Context::allowTF32), are
// restricted to FMA math, so FP32 never silently becomes TF32; F32 with
// TF32 allowed, F16 and BF16 take the tensor-op algorithms too (never a
// down-conversion below the data's type). F16 and BF16 run with a float
// compute type (cuDNN's pseudo-half configurations): products summed in
// float, each output rounded once; a bias and an activation other than
// Identity apply to that rounded output (a second rounding, where the CPU
// backend rounds once). Each problem's
// descriptors and the algorithm that ran it are kept per thread (ConvPlan):
// cuDNN 9's heuristic query costs far more host time than a small
// convolution (resnet18 spent most of its H200 step there).
//
//===----------------------------------------------------------------------===//

#include "Window.cuh"

#include <cudnn.h>

#include <map>

namespace pp::rt {

using namespace cuda;

namespace {

Status dnnFailure(const std::string &what, cudnnStatus_t status) {
  return Status::error(what + ": " + cudnnGetErrorString(status));
}

#define PP_DNN_TRY(WHAT, EXPR)                                                 \
  do {                                                                         \
    cudnnStatus_t dnnStatus_ = (EXPR);                                         \
    if (dnnStatus_ != CUDNN_STATUS_SUCCESS)                                    \
      return dnnFailure(WHAT, dnnStatus_);                                     \
  } while (false)

/// A convolution x [N, C, in...] * w [M, C / G, k...] -> y [N, M, out...].
struct ConvProblem : ConvDims {
  /// Spatial dims given to cuDNN: 2 for 1-D and 2-D, 3 for 3-D.
  int spatial = 2;
  bool asymmetric = false;
};

/// Validates the convolution (shared checks) and picks the cuDNN layout.
Status resolveConv(const std::string &what, const Tensor &x, const Tensor &w,
                   const Tensor &y, const WindowParams &params,
                   const char *const names[3], ConvProblem &cp) {
  PP_RT_TRY(resolveConvDims(what, x, w, y, params, names, cp));
  cp.spatial = x.rank() == 5 ? 3 : 2;
  for (int i = 0; i < 3; ++i)
    cp.asymmetric = cp.asymmetric || cp.geo.pb[i] != cp.geo.pe[i];
  return Status::success();
}

/// Owns the cuDNN descriptors of one problem.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors &) = delete;
  Descriptors &operator=(const Descriptors &) = delete;
  ~Descriptors() {
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (x)
      cudnnDestroyTensorDescriptor(x);
  }
};

Status intDims(const std::string &what, const std::vector<int64_t> &dims,
               std::vector<int> &out) {
  out.clear();
  for (int64_t d : dims) {
    if (d < 0 || d > 0x7fffffff)
      return Status::error(what + ": dim " + std::to_string(d) +
                           " exceeds cuDNN's 32-bit sizes");
    out.push_back(static_cast<int>(d));
  }
  return Status::success();
}

/// A packed NCHW / NCDHW tensor descriptor.
Status setTensor(const std::string &what, cudnnTensorDescriptor_t desc,
                 cudnnDataType_t type, const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides = stridesOf(dims);
  if (!dims.empty() && strides[0] * dims[0] > 0x7fffffff)
    return Status::error(what + ": tensor of shape " + shapeString(dims) +
                         " exceeds cuDNN's 32-bit strides");
  std::vector<int> d, s;
  PP_RT_TRY(intDims(what, dims, d));
  PP_RT_TRY(intDims(what, strides, s));
  PP_DNN_TRY(what, cudnnSetTensorNdDescriptor(desc, type, int(d.size()),
                                              d.data(), s.data()));
  return Status::success();
}

/// The cuDNN-side spatial dims of a geometry array (the last cp.spatial).
std::vector<int64_t> spatialOf(const ConvProblem &cp, const int64_t *dims) {
  return std::vector<int64_t>(dims + 3 - cp.spatial, dims + 3);
}

std::vector<int64_t> withLead(int64_t a, int64_t b,
                              const std::vector<int64_t> &rest) {
  std::vector<int64_t> dims = {a, b};
  dims.insert(dims.end(), rest.begin(), rest.end());
  return dims;
}

/// The input's spatial dims as cuDNN sees them: padded explicitly when the
/// pads are asymmetric.
std::vector<int64_t> inputSpatial(const ConvProblem &cp) {
  std::vector<int64_t> in = spatialOf(cp, cp.geo.in);
  if (cp.asymmetric)
    for (int i = 0; i < cp.spatial; ++i) {
      int j = 3 - cp.spatial + i;
      in[i] += cp.geo.pb[j] + cp.geo.pe[j];
    }
  return in;
}

/// How cuDNN runs a dtype.
struct DnnTypes {
  cudnnDataType_t data, compute;
  /// Tensor-op algorithms allowed (TF32 for F32 data), else FMA only.
  bool tensorOps;
};

DnnTypes dnnTypes(const Context &ctx, DType dtype) {
  switch (dtype) {
  case DType::F64:
    return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, false};
  case DType::F16:
    return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, true};
  case DType::BF16:
    return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, true};
  default:
    return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, ctx.allowTF32};
  }
}

/// The math type a problem's descriptor starts with: FMA where tensor ops
/// are not allowed; else cuDNN's default (TF32 on F32 data) or tensor ops
/// (16-bit data). Each algorithm then runs under the math type cuDNN
/// proposed it with.
cudnnMathType_t baseMathType(const DnnTypes &types) {
  if (!types.tensorOps)
    return CUDNN_FMA_MATH;
  return types.data == CUDNN_DATA_FLOAT ? CUDNN_DEFAULT_MATH
                                        : CUDNN_TENSOR_OP_MATH;
}

/// Creates and fills the descriptors of a problem.
Status describe(const std::string &what, const ConvProblem &cp,
                const DnnTypes &types, Descriptors &d) {
  cudnnDataType_t type = types.data;
  PP_DNN_TRY(what, cudnnCreateTensorDescriptor(&d.x));
  PP_DNN_TRY(what, cudnnCreateTensorDescriptor(&d.y));
  PP_DNN_TRY(what, cudnnCreateFilterDescriptor(&d.w));
  PP_DNN_TRY(what, cudnnCreateConvolutionDescriptor(&d.conv));
  std::vector<int64_t> in = inputSpatial(cp);
  std::vector<int64_t> out = spatialOf(cp, cp.geo.out);
  PP_RT_TRY(setTensor(what, d.x, type, withLead(cp.n, cp.c, in)));
  PP_RT_TRY(setTensor(what, d.y, type, withLead(cp.n, cp.m, out)));
  std::vector<int> wDims;
  PP_RT_TRY(
      intDims(what, withLead(cp.m, cp.cinG, spatialOf(cp, cp.geo.k)), wDims));
  PP_DNN_TRY(what, cudnnSetFilterNdDescriptor(d.w, type, CUDNN_TENSOR_NCHW,
                                              int(wDims.size()), wDims.data()));
  std::vector<int64_t> pads(cp.spatial, 0);
  if (!cp.asymmetric)
    pads = spatialOf(cp, cp.geo.pb);
  std::vector<int> p, s, dil;
  PP_RT_TRY(intDims(what, pads, p));
  PP_RT_TRY(intDims(what, spatialOf(cp, cp.geo.s), s));
  PP_RT_TRY(intDims(what, spatialOf(cp, cp.geo.d), dil));
  PP_DNN_TRY(what, cudnnSetConvolutionNdDescriptor(
                       d.conv, cp.spatial, p.data(), s.data(), dil.data(),
                       CUDNN_CROSS_CORRELATION, types.compute));
  PP_DNN_TRY(what, cudnnSetConvolutionGroupCount(d.conv, int(cp.group)));
  PP_DNN_TRY(what, cudnnSetConvolutionMathType(d.conv, baseMathType(types)));
  // cuDNN must agree with the validated output size.
  std::vector<int> expect(2 + cp.spatial);
  PP_DNN_TRY(what, cudnnGetConvolutionNdForwardOutputDim(
                       d.conv, d.x, d.w, int(expect.size()), expect.data()));
  std::vector<int64_t> got(expect.begin(), expect.end());
  if (got != withLead(cp.n, cp.m, out))
    return Status::error(what + ": cuDNN computes output " + shapeString(got) +
                         " for expected " +
                         shapeString(withLead(cp.n, cp.m, out)));
  return Status::success();
}

Status dnnHandle(const std::string &what, const Context &ctx,
                 cudnnHandle_t &handle) {
  handle = static_cast<cudnnHandle_t>(ctx.dnnHandle);
  if (!handle)
    return Status::error(what + ": the context has no cuDNN handle");
  PP_DNN_TRY(what, cudnnSetStream(handle, streamOf(ctx)));
  return Status::success();
}

constexpr int kMaxAlgos = 16;

/// The three cuDNN calls of a convolution.
enum class ConvDirection { Forward, BackwardData, BackwardFilter };

/// The algorithm that last ran a problem in one direction, with the math
/// type it ran under (algo -1: none yet).
struct CachedAlgorithm {
  int algo = -1;
  cudnnMathType_t math = CUDNN_FMA_MATH;
};

/// What a problem needs on every call after its first: its descriptors and,
/// per direction, the algorithm that last ran it.
struct ConvPlan {
  Descriptors d;
  DnnTypes types;
  bool described = false;
  CachedAlgorithm algorithm[3];
};

/// The plan of a problem (shape, dtype, TF32 or not, device) on this
/// thread, described on first use. Per thread, so --local's device threads
/// never share or lock it.
Status planFor(const std::string &what, const Context &ctx, DType dtype,
               const ConvProblem &cp, ConvPlan *&plan) {
  thread_local std::map<std::vector<int64_t>, ConvPlan> plans;
  int device = 0;
  cudaGetDevice(&device);
  DnnTypes types = dnnTypes(ctx, dtype);
  std::vector<int64_t> key = {int64_t(dtype), int64_t(types.tensorOps),
                              device,         cp.n,
                              cp.c,           cp.m,
                              cp.group,       cp.spatial,
                              cp.asymmetric};
  for (const int64_t *dims : {cp.geo.in, cp.geo.out, cp.geo.k, cp.geo.s,
                              cp.geo.pb, cp.geo.pe, cp.geo.d})
    key.insert(key.end(), dims, dims + 3);
  plan = &plans.try_emplace(std::move(key)).first->second;
  if (!plan->described) {
    plan->types = types;
    PP_RT_TRY(describe(what, cp, types, plan->d));
    plan->described = true;
  }
  return Status::success();
}

/// Runs `run(algo, workspace, bytes)` with the cached algorithm of the
/// problem, else with those `query` proposes (heuristics), in order,
/// skipping those that fail, whose workspace cannot be allocated, or whose
/// math type the plan's dtype does not allow (tensor ops: F32 with TF32,
/// F16, BF16; a down-conversion: never); the one that runs is cached.
template <typename Perf, typename QueryFn, typename WorkspaceFn, typename RunFn>
Status runAlgorithms(const std::string &what, cudaStream_t stream,
                     ConvPlan &plan, ConvDirection direction, QueryFn query,
                     WorkspaceFn workspace, RunFn run) {
  using Algo = decltype(Perf{}.algo);
  CachedAlgorithm &cached = plan.algorithm[int(direction)];
  cudnnConvolutionDescriptor_t conv = plan.d.conv;
  // Runs one algorithm under `math`; NOT_SUPPORTED-family statuses mean
  // "try another".
  auto attempt = [&](Algo algo, cudnnMathType_t math, cudnnStatus_t &status) {
    if (plan.types.tensorOps && (status = cudnnSetConvolutionMathType(
                                     conv, math)) != CUDNN_STATUS_SUCCESS)
      return false;
    size_t bytes = 0;
    if (workspace(algo, &bytes) != CUDNN_STATUS_SUCCESS) {
      status = CUDNN_STATUS_NOT_SUPPORTED; // not for this problem: skip it
      return false;
    }
    void *ws = nullptr;
    if (bytes > 0 && cudaMallocAsync(&ws, bytes, stream) != cudaSuccess) {
      cudaGetLastError(); // out of memory for this one: try the next
      status = CUDNN_STATUS_ALLOC_FAILED;
      return false;
    }
    status = run(algo, ws, bytes);
    if (ws)
      cudaFreeAsync(ws, stream);
    return status == CUDNN_STATUS_SUCCESS;
  };
  // cuDNN 9 numbers the "not supported" family 3000-3999.
  auto unsupported = [](cudnnStatus_t status) {
    return static_cast<int>(status) / 1000 ==
               CUDNN_STATUS_NOT_SUPPORTED / 1000 ||
           status == CUDNN_STATUS_ALLOC_FAILED;
  };
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  if (cached.algo >= 0) {
    if (attempt(static_cast<Algo>(cached.algo), cached.math, last))
      return Status::success();
    if (!unsupported(last))
      return dnnFailure(what, last);
    cached.algo = -1; // e.g. its workspace no longer fits: ask the heuristics
  }
  // The heuristics answer for the descriptor's base math type.
  if (plan.types.tensorOps)
    PP_DNN_TRY(what,
               cudnnSetConvolutionMathType(conv, baseMathType(plan.types)));
  Perf perfs[kMaxAlgos];
  int count = 0;
  PP_DNN_TRY(what, query(perfs, &count));
  for (int i = 0; i < count; ++i) {
    const Perf &perf = perfs[i];
    if (perf.status != CUDNN_STATUS_SUCCESS ||
        perf.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
        (!plan.types.tensorOps && perf.mathType == CUDNN_TENSOR_OP_MATH))
      continue;
    if (attempt(perf.algo, perf.mathType, last)) {
      cached = {static_cast<int>(perf.algo), perf.mathType};
      return Status::success();
    }
    if (!unsupported(last))
      return dnnFailure(what, last);
  }
  const char *typeName = plan.types.data == CUDNN_DATA_HALF       ? "f16"
                         : plan.types.data == CUDNN_DATA_BFLOAT16 ? "bf16"
                         : plan.types.data == CUDNN_DATA_DOUBLE   ? "f64"
                                                                  : "f32";
  return Status::error(what + ": no cuDNN algorithm could run this " +
                       typeName + " problem (" + cudnnGetErrorString(last) +
                       ")");
}

/// alpha and beta: double for F64 data, else float (cuDNN's rule).
template <typename T> struct Scalars { Compute<T> one = 1, zero = 0; };

/// Copies x [N, C, in...] into the interior of the zeroed padded buffer.
template <typename T> struct PadOp {
  const T *x;
  T *padded;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    padded[o[0]] = x[i];
  }
};

/// Crops the interior of the padded gradient into dx.
template <typename T> struct CropOp {
  const T *padded;
  T *dx;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    dx[i] = padded[o[0]];
  }
};

/// The index space of x's elements inside the padded buffer.
Status paddedIndex(const std::string &what, const ConvProblem &cp,
                   int64_t &base, StridedIndex<1> &index) {
  std::vector<int64_t> padded =
      withLead(cp.n, cp.c, inputSpatial(cp)); // 4-D or 5-D
  std::vector<int64_t> strides = stridesOf(padded);
  std::vector<int64_t> shape = withLead(cp.n, cp.c, spatialOf(cp, cp.geo.in));
  base = 0;
  for (int i = 0; i < cp.spatial; ++i)
    base += cp.geo.pb[3 - cp.spatial + i] * strides[2 + i];
  return makeIndex<1>(what, shape, {strides}, index);
}

int64_t paddedSize(const ConvProblem &cp) {
  return product(withLead(cp.n, cp.c, inputSpatial(cp)), 0, 2 + cp.spatial);
}

/// Zero-pads x into fresh scratch when cuDNN cannot pad it itself.
template <typename T>
Status padInput(const std::string &what, cudaStream_t stream,
                const ConvProblem &cp, const T *x, Scratch &scratch,
                const T **out) {
  *out = x;
  if (!cp.asymmetric)
    return Status::success();
  T *padded = nullptr;
  int64_t size = paddedSize(cp);
  PP_RT_TRY(scratch.alloc(what, size, &padded));
  PP_CUDA_TRY(what, cudaMemsetAsync(padded, 0, size * sizeof(T), stream));
  int64_t base;
  StridedIndex<1> index;
  PP_RT_TRY(paddedIndex(what, cp, base, index));
  PP_RT_TRY(launchMap(what, stream, cp.n * cp.c * cp.geo.inSize, index,
                      PadOp<T>{x, padded + base}));
  *out = padded;
  return Status::success();
}

/// y[n, m, ...] += b[m].
template <typename T> struct BiasOp {
  const T *b;
  T *y;
  int64_t m, plane;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    y[i] = narrow<T>(widen(y[i]) + widen(b[(i / plane) % m]));
  }
};

template <typename T>
Status convForward(const std::string &what, const Context &ctx, DType dtype,
                   const ConvProblem &cp, const T *x, const T *w, const T *b,
                   T *y) {
  cudaStream_t stream = streamOf(ctx);
  int64_t total = cp.n * cp.m * cp.geo.outSize;
  if (total == 0)
    return Status::success();
  if (cp.c == 0 || cp.geo.kSize == 0) {
    PP_CUDA_TRY(what, cudaMemsetAsync(y, 0, total * sizeof(T), stream));
  } else {
    cudnnHandle_t h;
    PP_RT_TRY(dnnHandle(what, ctx, h));
    ConvPlan *plan;
    PP_RT_TRY(planFor(what, ctx, dtype, cp, plan));
    const Descriptors &d = plan->d;
    Scratch scratch(stream);
    const T *input;
    PP_RT_TRY(padInput(what, stream, cp, x, scratch, &input));
    Scalars<T> s;
    PP_RT_TRY(runAlgorithms<cudnnConvolutionFwdAlgoPerf_t>(
        what, stream, *plan, ConvDirection::Forward,
        [&](cudnnConvolutionFwdAlgoPerf_t *perfs, int *count) {
          return cudnnGetConvolutionForwardAlgorithm_v7(
              h, d.x, d.w, d.conv, d.y, kMaxAlgos, count, perfs);
        },
        [&](cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv,
                                                         d.y, algo, bytes);
        },
        [&](cudnnConvolutionFwdAlgo_t algo, void *ws, size_t bytes) {
          return cudnnConvolutionForward(h, &s.one, d.x, input, d.w, w, d.conv,
                                         algo, ws, bytes, &s.zero, d.y, y);
        }));
  }
  if (!b)
    return Status::success();
  StridedIndex<1> flat;
  PP_RT_TRY(makeIndex<1>(what, {total}, {std::vector<int64_t>{1}}, flat));
  return launchMap(what, stream, total, flat,
                   BiasOp<T>{b, y, cp.m, cp.geo.outSize});
}

template <typename T>
Status convBackwardInput(const std::string &what, const Context &ctx,
                         DType dtype, const ConvProblem &cp, const T *dy,
                         const T *w, T *dx) {
  cudaStream_t stream = streamOf(ctx);
  int64_t total = cp.n * cp.c * cp.geo.inSize;
  if (total == 0)
    return Status::success();
  if (cp.m == 0 || cp.geo.outSize == 0 || cp.cinG == 0) {
    PP_CUDA_TRY(what, cudaMemsetAsync(dx, 0, total * sizeof(T), stream));
    return Status::success();
  }
  cudnnHandle_t h;
  PP_RT_TRY(dnnHandle(what, ctx, h));
  ConvPlan *plan;
  PP_RT_TRY(planFor(what, ctx, dtype, cp, plan));
  const Descriptors &d = plan->d;
  Scratch scratch(stream);
  // With asymmetric pads cuDNN writes the padded gradient; dx is its crop.
  T *target = dx;
  if (cp.asymmetric)
    PP_RT_TRY(scratch.alloc(what, paddedSize(cp), &target));
  Scalars<T> s;
  PP_RT_TRY(runAlgorithms<cudnnConvolutionBwdDataAlgoPerf_t>(
      what, stream, *plan, ConvDirection::BackwardData,
      [&](cudnnConvolutionBwdDataAlgoPerf_t *perfs, int *count) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(
            h, d.w, d.y, d.conv, d.x, kMaxAlgos, count, perfs);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv,
                                                            d.x, algo, bytes);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t bytes) {
        return cudnnConvolutionBackwardData(h, &s.one, d.w, w, d.y, dy, d.conv,
                                            algo, ws, bytes, &s.zero, d.x,
                                            target);
      }));
  if (!cp.asymmetric)
    return Status::success();
  int64_t base;
  StridedIndex<1> index;
  PP_RT_TRY(paddedIndex(what, cp, base, index));
  return launchMap(what, stream, total, index, CropOp<T>{target + base, dx});
}

template <typename T>
Status convBackwardWeight(const std::string &what, const Context &ctx,
                          DType dtype, const ConvProblem &cp, const T *dy,
                          const T *x, T *dw) {
  cudaStream_t stream = streamOf(ctx);
  int64_t total = cp.m * cp.cinG * cp.geo.kSize;
  if (total == 0)
    return Status::success();
  if (cp.n == 0 || cp.geo.outSize == 0) {
    PP_CUDA_TRY(what, cudaMemsetAsync(dw, 0, total * sizeof(T), stream));
    return Status::success();
  }
  cudnnHandle_t h;
  PP_RT_TRY(dnnHandle(what, ctx, h));
  ConvPlan *plan;
  PP_RT_TRY(planFor(what, ctx, dtype, cp, plan));
  const Descriptors &d = plan->d;
  Scratch scratch(stream);
  const T *input;
  PP_RT_TRY(padInput(what, stream, cp, x, scratch, &input));
  Scalars<T> s;
  return runAlgorithms<cudnnConvolutionBwdFilterAlgoPerf_t>(
      what, stream, *plan, ConvDirection::BackwardFilter,
      [&](cudnnConvolutionBwdFilterAlgoPerf_t *perfs, int *count) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, d.x, d.y, d.conv, d.w, kMaxAlgos, count, perfs);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, d.x, d.y, d.conv, d.w, algo, bytes);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t bytes) {
        return cudnnConvolutionBackwardFilter(h, &s.one, d.x, input, d.y, dy,
                                              d.conv, algo, ws, bytes, &s.zero,
                                              d.w, dw);
      });
}

} // namespace

Status conv(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *b,
            const WindowParams &params, Tensor &y, UnaryKind activation) {
  static const char *const names[3] = {"x", "w", "y"};
  const std::string what = "conv";
  if (anyFloat16(x, w, b, y))
    PP_RT_TRY(expectSameDType(what, {&x, &w, b, &y}));
  ConvProblem cp;
  PP_RT_TRY(resolveConv(what, checkedAsF32(x), checkedAsF32(w), checkedAsF32(y),
                        params, names, cp));
  if (b) {
    PP_RT_TRY(expectDType(checkedAsF32(*b), checkedAsF32(x).dtype, "conv: b"));
    PP_RT_TRY(expectShape(*b, {cp.m}, "conv: b"));
  }
  PP_RT_TRY(visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return convForward<T>(what, ctx, x.dtype, cp, x.as<T>(), w.as<T>(),
                          b ? b->as<T>() : nullptr, y.as<T>());
  }));
  return applyActivation(ctx, activation, y);
}

Status convGradInput(Context &ctx, const Tensor &dy, const Tensor &w,
                     const WindowParams &params, Tensor &dx) {
  static const char *const names[3] = {"dx", "w", "dy"};
  const std::string what = "convGradInput";
  if (anyFloat16(dy, w, dx))
    PP_RT_TRY(expectSameDType(what, {&dx, &w, &dy}));
  ConvProblem cp;
  PP_RT_TRY(resolveConv(what, checkedAsF32(dx), checkedAsF32(w),
                        checkedAsF32(dy), params, names, cp));
  return visitFloatOr16(dx.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return convBackwardInput<T>(what, ctx, dx.dtype, cp, dy.as<T>(), w.as<T>(),
                                dx.as<T>());
  });
}

Status convGradWeight(Context &ctx, const Tensor &dy, const Tensor &x,
                      const WindowParams &params, Tensor &dw) {
  static const char *const names[3] = {"x", "dw", "dy"};
  const std::string what = "convGradWeight";
  if (anyFloat16(dy, x, dw))
    PP_RT_TRY(expectSameDType(what, {&x, &dw, &dy}));
  ConvProblem cp;
  PP_RT_TRY(resolveConv(what, checkedAsF32(x), checkedAsF32(dw),
                        checkedAsF32(dy), params, names, cp));
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return convBackwardWeight<T>(what, ctx, x.dtype, cp, dy.as<T>(), x.as<T>(),
                                 dw.as<T>());
  });
}

} // namespace pp::rt
