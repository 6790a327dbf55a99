//===- Common.cuh - Shared helpers of the CUDA kernels ---------*- CUDA -*-===//
//
// The host-side checks shared with the CPU backend (common/Checks.h),
// CUDA / cuBLAS / cuDNN error translation into Status, stream-ordered
// scratch memory, device-side error flags for data-dependent checks, the
// strided index walker of broadcasting kernels, and block reductions.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_CUDA_COMMON_CUH
#define PP_RUNTIME_CUDA_COMMON_CUH

#include "common/Checks.h"
#include "common/KernelMath.h"
#include "pp/Runtime/Half.h"
#include "pp/Runtime/Kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

/// Returns a Status naming WHAT and the CUDA error when EXPR fails.
#define PP_CUDA_TRY(WHAT, EXPR)                                                \
  do {                                                                         \
    cudaError_t cudaStatus_ = (EXPR);                                          \
    if (cudaStatus_ != cudaSuccess)                                            \
      return ::pp::rt::cuda::cudaFailure(WHAT, cudaStatus_);                   \
  } while (false)

/// Checks the launch that precedes it (bad configuration, missing image).
#define PP_CUDA_LAUNCHED(WHAT) PP_CUDA_TRY(WHAT, cudaGetLastError())

namespace pp::rt::cuda {

//===----------------------------------------------------------------------===//
// Host-side validation
//===----------------------------------------------------------------------===//

// The checks and shape helpers shared with the CPU backend (Checks.h).
using namespace ::pp::rt::common;

/// "what: <CUDA error name>: <description>".
Status cudaFailure(const std::string &what, cudaError_t error);

inline cudaStream_t streamOf(const Context &ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

//===----------------------------------------------------------------------===//
// Dtype dispatch
//===----------------------------------------------------------------------===//

/// The integer dtypes this backend stores, casts and moves but computes
/// nothing on (visitDType refuses them).
inline bool isStorageOnlyInt(DType dtype) {
  return dtype == DType::U32 || dtype == DType::U64 || dtype == DType::I16 ||
         dtype == DType::U16;
}

/// Calls fn(TypeTag<T>{}) with T the storage type of `dtype` (Bool is
/// uint8_t; kernels that care about truthiness check the dtype). F16, BF16,
/// U32, U64, I16 and U16 are an error here: on this backend only cast, fill,
/// the data movement kernels and Pow exponents accept them, handling them
/// before dispatching.
template <typename Fn> Status visitDType(DType dtype, Fn &&fn) {
  return visitCommonDType(dtype, fn, [](DType other) {
    return Status::error(std::string("unsupported dtype ") + dtypeName(other) +
                         " on the CUDA backend (cast it first)");
  });
}

/// visitDType, and F16 / BF16 as __half / __nv_bfloat16: for the kernels
/// whose element code widens, computes in Compute<T> and narrows (integers
/// and the 32/64-bit floats unchanged).
template <typename Fn> Status visitDTypeOr16(DType dtype, Fn &&fn) {
  if (dtype == DType::F16)
    return fn(TypeTag<__half>{});
  if (dtype == DType::BF16)
    return fn(TypeTag<__nv_bfloat16>{});
  return visitDType(dtype, fn);
}

/// Calls fn(TypeTag<T>{}) for F32 / F64, else reports `what`.
template <typename Fn>
Status visitFloat(DType dtype, const std::string &what, Fn &&fn) {
  if (dtype == DType::F32)
    return fn(TypeTag<float>{});
  if (dtype == DType::F64)
    return fn(TypeTag<double>{});
  return Status::error(what + ": unsupported dtype " + dtypeName(dtype));
}

//===----------------------------------------------------------------------===//
// 16-bit floats
//===----------------------------------------------------------------------===//

// Kernels that take F16 and BF16 store them as CUDA's __half and
// __nv_bfloat16 (the same bits as Half.h's) and compute them as the CPU
// backend does: each element is widened to float (exactly), the arithmetic
// runs in float (or wider, where the F32 kernel does), and each result is
// rounded once, to nearest even. Compute<T> is the type a kernel computes
// an element of T in; widen() and narrow<T>() convert.

template <typename T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<__half> { using type = float; };
template <> struct ComputeTypeOf<__nv_bfloat16> { using type = float; };
template <typename T> using Compute = typename ComputeTypeOf<T>::type;

template <typename T>
constexpr bool isHalfType =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// An element as its compute type (exact).
template <typename T> __device__ __forceinline__ Compute<T> widen(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}

/// A computed value as an element of T: a 16-bit float is rounded from the
/// float value (a double first becomes that float, as the CPU's f32 kernel
/// stores it), to nearest even.
template <typename T, typename V> __device__ __forceinline__ T narrow(V v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// `t` as the shared checks (Checks.h) see an operand of a kernel that
/// computes the 16-bit floats through float: a 16-bit float as F32, like the
/// CPU backend's widened copy (the same shape and buffer; only the checks
/// read it). The kernel checks expectSameDType first, so that mixing float
/// dtypes stays an error.
inline Tensor checkedAsF32(const Tensor &t) {
  Tensor view = t;
  if (isFloat16(t.dtype))
    view.dtype = DType::F32;
  return view;
}

/// visitFloat, and F16 / BF16 as __half / __nv_bfloat16 for the kernels
/// that compute them through float (widen, compute, narrow).
template <typename Fn>
Status visitFloatOr16(DType dtype, const std::string &what, Fn &&fn) {
  if (dtype == DType::F16)
    return fn(TypeTag<__half>{});
  if (dtype == DType::BF16)
    return fn(TypeTag<__nv_bfloat16>{});
  return visitFloat(dtype, what, fn);
}

//===----------------------------------------------------------------------===//
// Scratch memory and device error flags
//===----------------------------------------------------------------------===//

/// Stream-ordered temporaries (cudaMallocAsync on the kernel's stream),
/// released with cudaFreeAsync when the owner goes out of scope, so they
/// outlive every kernel queued before the release.
class Scratch {
public:
  explicit Scratch(cudaStream_t stream) : stream(stream) {}
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch();

  /// Allocates `bytes` (null for 0); the memory is uninitialised.
  Status alloc(const std::string &what, size_t bytes, void **ptr);
  template <typename T>
  Status alloc(const std::string &what, int64_t count, T **ptr) {
    void *raw = nullptr;
    PP_RT_TRY(alloc(what, static_cast<size_t>(count) * sizeof(T), &raw));
    *ptr = static_cast<T *>(raw);
    return Status::success();
  }

private:
  cudaStream_t stream;
  std::vector<void *> blocks;
};

/// No error recorded in a device flag.
constexpr unsigned long long kNoError = ~0ull;

/// A device word that kernels lower (atomicMin) to the first flat position
/// that failed a data-dependent check; starts at kNoError.
Status makeErrorFlag(const std::string &what, Scratch &scratch,
                     cudaStream_t stream, unsigned long long **flag);
/// Waits for the stream and reads the flag: -1 when no check failed.
Status readErrorFlag(const std::string &what, cudaStream_t stream,
                     const unsigned long long *flag, int64_t &position);
/// Reads element i of an integer device tensor (for error messages).
int64_t readDeviceInt(const Tensor &t, int64_t i, cudaStream_t stream);

/// Copies a host vector to fresh device scratch (the host copy may be freed
/// on return).
template <typename T>
Status uploadVector(const std::string &what, Scratch &scratch,
                    cudaStream_t stream, const std::vector<T> &host,
                    T **device) {
  PP_RT_TRY(scratch.alloc(what, static_cast<int64_t>(host.size()), device));
  if (!host.empty())
    PP_CUDA_TRY(what,
                cudaMemcpyAsync(*device, host.data(), host.size() * sizeof(T),
                                cudaMemcpyHostToDevice, stream));
  return Status::success();
}

/// Runs a kernel on F16 / BF16 tensors through its f32 code, as the CPU
/// backend's Float16Widening does, for the kernels that accumulate through
/// atomics (scatters into a gradient), where adding into 16 bits would
/// round at every step:
///
///   Float16Widening w(ctx);
///   Tensor wideDy, wideDx;
///   PP_RT_TRY(w.in(dy, wideDy));
///   PP_RT_TRY(w.out(dx, wideDx));
///   return w.finish(kernel(ctx, wideDy, wideDx));
///
/// in() casts a 16-bit float tensor to an f32 scratch copy (exact), out()
/// gives f32 scratch that finish() rounds once into the original when the
/// kernel succeeded. Other tensors, and ones the kernel's checks reject
/// (negative dims, no data) or that hold nothing, pass through (the latter
/// as F32, for the f32 kernel to report). The scratch lives as long as the
/// object.
class Float16Widening {
public:
  explicit Float16Widening(Context &ctx) : ctx(ctx), scratch(streamOf(ctx)) {}
  Status in(const Tensor &t, Tensor &wide) { return widen(t, true, wide); }
  Status out(const Tensor &t, Tensor &wide);
  /// Rounds the outputs when `status` is ok; returns `status`.
  Status finish(Status status);

private:
  Status widen(const Tensor &t, bool read, Tensor &wide);

  Context &ctx;
  Scratch scratch;
  std::vector<std::pair<Tensor, Tensor>> outputs; // (original, wide)
};

/// Runs a 16-bit gradient kernel whose atomics would round every partial
/// sum on f32 copies instead: widens dy, calls run(wideDy, wideDx) and
/// rounds dx once.
template <typename Run>
Status gradInF32(Context &ctx, const char *what, const Tensor &dy, Tensor &dx,
                 Run run) {
  PP_RT_TRY(expectSameDType(what, {&dy, &dx}));
  Float16Widening w(ctx);
  Tensor wideDy, wideDx;
  PP_RT_TRY(w.in(dy, wideDy));
  PP_RT_TRY(w.out(dx, wideDx));
  return w.finish(run(wideDy, wideDx));
}

/// Writes zero bytes over a tensor on the stream.
Status zeroTensor(const std::string &what, Tensor &t, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Launch geometry
//===----------------------------------------------------------------------===//

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n items (capped; the loop covers the
/// rest).
inline unsigned gridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  if (blocks > (int64_t(1) << 18))
    blocks = int64_t(1) << 18;
  return static_cast<unsigned>(blocks);
}

#define PP_GRID_STRIDE(I, N)                                                   \
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < (N);    \
       I += int64_t(blockDim.x) * gridDim.x)

//===----------------------------------------------------------------------===//
// Strided index walker
//===----------------------------------------------------------------------===//

constexpr int kMaxRank = 8;

/// A row-major index space of up to kMaxRank (coalesced) dims and N
/// operands' strides into it, passed to kernels by value.
template <int N> struct StridedIndex {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};

  /// Element offsets of flat index i in each operand. The outermost dim
  /// takes the quotient without a division, so a contiguous (rank-1) space
  /// costs none.
  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k)
      off[k] = 0;
    for (int d = rank - 1; d > 0; --d) {
      int64_t q = i / shape[d];
      int64_t r = i - q * shape[d];
      for (int k = 0; k < N; ++k)
        off[k] += r * strides[k][d];
      i = q;
    }
    if (rank > 0)
      for (int k = 0; k < N; ++k)
        off[k] += i * strides[k][0];
  }
};

/// Applies op(i, offsets) to every flat index of an index space: the
/// generic body of broadcasting, gathering and strided-copy kernels.
template <int N, typename Op>
__global__ void __launch_bounds__(kThreads)
    mapKernel(Op op, int64_t n, StridedIndex<N> index) {
  PP_GRID_STRIDE(i, n) {
    int64_t off[N];
    index.offsets(i, off);
    op(i, off);
  }
}

/// Launches mapKernel over n elements on `stream`.
template <int N, typename Op>
Status launchMap(const std::string &what, cudaStream_t stream, int64_t n,
                 const StridedIndex<N> &index, const Op &op) {
  if (n <= 0)
    return Status::success();
  mapKernel<N, Op><<<gridFor(n), kThreads, 0, stream>>>(op, n, index);
  PP_CUDA_LAUNCHED(what);
  return Status::success();
}

/// Coalesces `shape` / `strides` and packs them; fails beyond kMaxRank.
template <int N>
Status makeIndex(const std::string &what, std::vector<int64_t> shape,
                 std::array<std::vector<int64_t>, N> strides,
                 StridedIndex<N> &index) {
  coalesceDims(shape, strides);
  if (shape.size() > static_cast<size_t>(kMaxRank))
    return Status::error(what + ": more than " + std::to_string(kMaxRank) +
                         " non-mergeable dims are not supported by the CUDA "
                         "backend");
  index.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    index.shape[d] = shape[d];
    for (int k = 0; k < N; ++k)
      index.strides[k][d] = strides[k][d];
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Reads element i of a float tensor whose dtype is known only at run time
/// (per-channel parameters may be F32 or F64 independently of x).
__device__ __forceinline__ double loadFloat(const void *p, bool f64,
                                            int64_t i) {
  return f64 ? static_cast<const double *>(p)[i]
             : double(static_cast<const float *>(p)[i]);
}
__device__ __forceinline__ void storeFloat(void *p, bool f64, int64_t i,
                                           double v) {
  if (f64)
    static_cast<double *>(p)[i] = v;
  else
    static_cast<float *>(p)[i] = static_cast<float>(v);
}
/// Element i of a float tensor of run-time dtype F32, F64, F16 or BF16
/// (per-channel parameters and statistics, whose dtype is independent of
/// the data's).
__device__ __forceinline__ double loadAnyFloat(const void *p, DType dtype,
                                               int64_t i) {
  switch (dtype) {
  case DType::F64:
    return static_cast<const double *>(p)[i];
  case DType::F16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case DType::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}
/// Stores v as loadAnyFloat reads it (16-bit: rounded through float).
__device__ __forceinline__ void storeAnyFloat(void *p, DType dtype, int64_t i,
                                              double v) {
  switch (dtype) {
  case DType::F64:
    static_cast<double *>(p)[i] = v;
    break;
  case DType::F16:
    static_cast<__half *>(p)[i] = narrow<__half>(v);
    break;
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(p)[i] = narrow<__nv_bfloat16>(v);
    break;
  default:
    static_cast<float *>(p)[i] = static_cast<float>(v);
  }
}
/// Reads element i of an I64 or I32 index tensor.
__device__ __forceinline__ int64_t loadIndex(const void *p, bool i64,
                                             int64_t i) {
  return i64 ? static_cast<const int64_t *>(p)[i]
             : int64_t(static_cast<const int32_t *>(p)[i]);
}

template <typename T> __device__ __forceinline__ bool isNaN(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

/// Overloads picking the single- or double-precision libdevice function, so
/// F32 math stays in F32 as on the CPU.
namespace dm {
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ double erf(double x) { return ::erf(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float floor(float x) { return ::floorf(x); }
__device__ __forceinline__ double floor(double x) { return ::floor(x); }
__device__ __forceinline__ float ceil(float x) { return ::ceilf(x); }
__device__ __forceinline__ double ceil(double x) { return ::ceil(x); }
__device__ __forceinline__ float abs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double abs(double x) { return ::fabs(x); }
__device__ __forceinline__ float expm1(float x) { return ::expm1f(x); }
__device__ __forceinline__ double expm1(double x) { return ::expm1(x); }
__device__ __forceinline__ float log1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
__device__ __forceinline__ float sin(float x) { return ::sinf(x); }
__device__ __forceinline__ double sin(double x) { return ::sin(x); }
__device__ __forceinline__ float cos(float x) { return ::cosf(x); }
__device__ __forceinline__ double cos(double x) { return ::cos(x); }
__device__ __forceinline__ float rint(float x) { return ::rintf(x); }
__device__ __forceinline__ double rint(double x) { return ::rint(x); }
__device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double pow(double x, double y) {
  return ::pow(x, y);
}
} // namespace dm

/// Reduces v over the block with `op` (blockDim.x a multiple of 32, at most
/// 1024) and returns the result to every thread. `smem` holds 32 values;
/// the call synchronises the block, so it may be reused right after.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T *smem) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  __syncthreads(); // smem may still be read from a previous call
  if (lane == 0)
    smem[warp] = v;
  __syncthreads();
  const unsigned warps = blockDim.x >> 5;
  if (warp == 0) {
    v = lane < warps ? smem[lane] : smem[0];
    // Lanes past `warps` repeat smem[0]: harmless for max, so sums mask it.
    for (int offset = 16; offset > 0; offset >>= 1) {
      T other = __shfl_down_sync(0xffffffffu, v, offset);
      if (lane + offset < warps)
        v = op(v, other);
    }
    if (lane == 0)
      smem[0] = v;
  }
  __syncthreads();
  return smem[0];
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

} // namespace pp::rt::cuda

#endif // PP_RUNTIME_CUDA_COMMON_CUH
