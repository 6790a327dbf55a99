//===- Checks.h - Host-side code shared by the kernel backends --*- C++ -*-===//
//
// The argument checks and shape computations that the CPU and CUDA backends
// perform identically (same rules, same messages): shape and stride helpers,
// tensor expectations, window geometry, cross-entropy and layer-norm shapes,
// slicing and gathering plans. Checks.cpp is compiled into both libraries
// (a program links one of them, never both). Backend limits (such as the
// CUDA backend's rank cap) stay in the backends.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_COMMON_CHECKS_H
#define PP_RUNTIME_COMMON_CHECKS_H

#include "pp/Runtime/Half.h"
#include "pp/Runtime/Kernels.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#ifndef PP_RT_TRY
#define PP_RT_TRY(EXPR)                                                        \
  do {                                                                         \
    ::pp::rt::Status status_ = (EXPR);                                         \
    if (!status_.ok())                                                         \
      return status_;                                                          \
  } while (false)
#endif

namespace pp::rt::common {

//===----------------------------------------------------------------------===//
// Shapes and tensors
//===----------------------------------------------------------------------===//

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

/// numpy broadcast of two shapes; false when incompatible.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out);

/// Strides to read a tensor of `shape` as if broadcast to `target` (0 on
/// broadcast dims). Requires shape to broadcast to target.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target);

/// True when `from` broadcasts to exactly `to` (unidirectional).
bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to);

/// "[2, 3]" for messages.
std::string shapeString(const std::vector<int64_t> &shape);

/// The product of dims[begin, end).
int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end);

/// Checks that `t` has `dtype` (or `shape`) and a non-null buffer when
/// non-empty.
Status expectDType(const Tensor &t, DType dtype, const char *what);
Status expectShape(const Tensor &t, const std::vector<int64_t> &shape,
                   const char *what);

/// Checks that `t` has no negative dims and a buffer when non-empty.
Status expectValid(const Tensor &t, const char *what);

/// Checks a tensor of a float dtype (F32 or F64) with exactly `shape`.
Status expectFloat(const Tensor &t, const std::vector<int64_t> &shape,
                   const std::string &what);

/// "what: unsupported dtype <dtype>".
Status dtypeError(const std::string &what, DType dtype);

/// y = activation(y) in place (Identity: nothing): what a kernel that takes
/// a fused activation runs where it cannot apply it while writing y.
Status applyActivation(Context &ctx, UnaryKind activation, Tensor &y);

/// Normalises `axis` against `rank` (negative counts from the end); false
/// when it is out of range.
bool normalizeAxis(int64_t &axis, int64_t rank);

inline bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64;
}
/// True for the 16-bit floats (F16, BF16).
inline bool isFloat16(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16;
}

inline bool isFloat16Tensor(const Tensor &t) { return isFloat16(t.dtype); }
inline bool isFloat16Tensor(const Tensor *t) {
  return t && isFloat16(t->dtype);
}
/// True when any of the tensors (references or pointers, null skipped) is
/// F16 or BF16.
template <typename... Ts> bool anyFloat16(const Ts &...tensors) {
  return (isFloat16Tensor(tensors) || ...);
}

/// The dtype rule of a kernel that computes 16-bit floats through f32,
/// checked before they are widened (CPU) or before the shared checks see
/// them as F32 (CUDA): every non-null tensor must have the first one's
/// dtype, so that a 16-bit float mixed with another float dtype (BF16 with
/// F32, F16 with BF16) stays an error once both would be f32: "what:
/// operand dtypes differ: bf16 and f32".
Status expectSameDType(const std::string &what,
                       std::initializer_list<const Tensor *> tensors);

/// The ONNX names of the element-wise kinds, for messages.
const char *unaryName(UnaryKind kind);
const char *binaryName(BinaryKind kind);

/// Merges adjacent dims that every operand walks contiguously and drops
/// size-1 dims, so strided loops run over as few dims as possible. The flat
/// order of the index space is unchanged.
template <size_t N>
void coalesceDims(std::vector<int64_t> &shape,
                  std::array<std::vector<int64_t>, N> &strides) {
  std::vector<int64_t> outShape;
  std::array<std::vector<int64_t>, N> outStrides;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !outShape.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = outStrides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      outShape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k)
        outStrides[k].back() = strides[k][d];
      continue;
    }
    outShape.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k)
      outStrides[k].push_back(strides[k][d]);
  }
  shape = std::move(outShape);
  strides = std::move(outStrides);
}

/// Stands for the C++ element type of a dtype in generic lambdas.
template <typename T> struct TypeTag { using type = T; };

/// Calls fn(TypeTag<T>{}) with T the storage type of the dtypes that both
/// backends compute on (F32, F64, I64, I32, I8; U8 and Bool as uint8_t) and
/// returns its Status; the other dtypes go to other(dtype), which each
/// backend's visitDType gives its own rule (computed on, or an error).
template <typename Fn, typename Other>
Status visitCommonDType(DType dtype, Fn &&fn, Other &&other) {
  switch (dtype) {
  case DType::F32:
    return fn(TypeTag<float>{});
  case DType::F64:
    return fn(TypeTag<double>{});
  case DType::I64:
    return fn(TypeTag<int64_t>{});
  case DType::I32:
    return fn(TypeTag<int32_t>{});
  case DType::I8:
    return fn(TypeTag<int8_t>{});
  case DType::U8:
  case DType::Bool:
    return fn(TypeTag<uint8_t>{});
  case DType::U32:
  case DType::U64:
  case DType::I16:
  case DType::U16:
  case DType::F16:
  case DType::BF16:
    return other(dtype);
  }
  return Status::error("unknown dtype");
}

/// Calls fn(TypeTag<T>{}) with an unsigned type of `bytes` bytes (1, 2, 4 or
/// 8): for kernels that only move elements around.
template <typename Fn> Status visitElementBytes(int64_t bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    return fn(TypeTag<uint8_t>{});
  case 2:
    return fn(TypeTag<uint16_t>{});
  case 4:
    return fn(TypeTag<uint32_t>{});
  case 8:
    return fn(TypeTag<uint64_t>{});
  }
  return Status::error("unsupported element size " + std::to_string(bytes));
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

/// What binary (Kernels.h) computes, once checkBinary has accepted it.
struct BinaryPlan {
  std::string what;           // "binary <Kind>", for messages
  std::vector<int64_t> shape; // a and b broadcast, c's shape
  bool isCompare = false;     // Equal, Less, Greater: c is Bool
  bool isLogic = false;       // And, Or: a, b and c are Bool
};

/// The argument checks of binary that both backends make before their own
/// dtype rules: a and b valid and broadcasting, of one dtype but for Pow's
/// exponent, c of the broadcast shape and of a's dtype (Bool for
/// comparisons and logic), Bool operands for logic.
Status checkBinary(BinaryKind kind, const Tensor &a, const Tensor &b,
                   const Tensor &c, BinaryPlan &plan);

/// The argument checks of where (Kernels.h); `shape` is the broadcast shape
/// of cond, x and y (out's).
Status checkWhere(const Tensor &cond, const Tensor &x, const Tensor &y,
                  const Tensor &out, std::vector<int64_t> &shape);

//===----------------------------------------------------------------------===//
// Movement
//===----------------------------------------------------------------------===//

/// Checks that slicing a tensor of `full` shape with starts/steps yields
/// `part` (counts) without leaving `full`; computes the first element's
/// offset and the per-dim strides into the full tensor.
Status slicePlan(const char *what, const std::vector<int64_t> &full,
                 const std::vector<int64_t> &part,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, int64_t &base,
                 std::vector<int64_t> &strides);

/// ONNX Gather's shape: data.shape[:axis] + indices.shape +
/// data.shape[axis+1:].
std::vector<int64_t> gatherShape(const std::vector<int64_t> &data,
                                 const std::vector<int64_t> &indices,
                                 int64_t axis);

/// The checks of gather and gatherGrad but the indices' dtype and values:
/// `full` is data (or ddata), `part` y (or dy); normalises `axis`.
Status checkGatherShapes(const char *what, const Tensor &full,
                         const Tensor &part, const Tensor &indices,
                         int64_t &axis);

/// The argument checks of copy (Kernels.h).
Status checkCopy(const Tensor &x, const Tensor &y);

/// The argument checks of scatterND (Kernels.h) but the index values: dtypes
/// and shapes. Sets the tuple count, the tuple length k and the elements of
/// one addressed slice.
Status checkScatterND(const Tensor &data, const Tensor &indices,
                      const Tensor &updates, ScatterReduction reduction,
                      const Tensor &y, int64_t &tuples, int64_t &k,
                      int64_t &slice);
/// The element offset of each index tuple's slice in data (`values` are the
/// indices' elements, tuple after tuple); an index out of range is an error
/// that names it.
Status scatterNDOffsets(const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &values, int64_t k,
                        int64_t slice, std::vector<int64_t> &offsets);

/// One operand read as a strided walk: element i of the row-major index
/// space `shape` lies at `base` plus the dot product of i's index with
/// strides[0] (an array of one, as the strided walkers take).
struct StridedView {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, 1> strides;
  int64_t base = 0;
};

/// The argument checks of transpose (Kernels.h): `view` walks x in y's
/// order (y's shape; per dim of y, the stride of x).
Status checkTranspose(const Tensor &x, const std::vector<int64_t> &perm,
                      const Tensor &y, StridedView &view);
/// The argument checks of slice / sliceGrad and their slicePlan: `view`
/// walks the slice of x (of dx) in y's (dy's) order.
Status checkSlice(const Tensor &x, const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &steps, const Tensor &y,
                  StridedView &view);
Status checkSliceGrad(const Tensor &dy, const std::vector<int64_t> &starts,
                      const std::vector<int64_t> &steps, const Tensor &dx,
                      StridedView &view);
/// The argument checks of pad (`full` is x, `part` y) and padGrad (`full`
/// is dy, `part` dx): ranks, y = x + begin + end, and a non-empty source dim
/// wherever Reflect or Edge pads.
Status checkPad(const char *what, const Tensor &x, const Tensor &y,
                const std::vector<int64_t> &pads, PadMode mode);

/// The index of x that index o of a padded dim reads (Kernels.h: pad), or
/// -1 for the constant. `n` is x's size of the dim.
PP_RT_HOST_DEVICE inline int64_t padSource(int64_t o, int64_t begin, int64_t n,
                                           PadMode mode) {
  int64_t s = o - begin;
  if (s >= 0 && s < n)
    return s;
  if (mode == PadMode::Constant || n == 0)
    return -1;
  if (mode == PadMode::Edge || n == 1)
    return s < 0 ? 0 : n - 1;
  // Reflect: the mirror images repeat with period 2 (n - 1).
  int64_t period = 2 * (n - 1);
  s %= period;
  if (s < 0)
    s += period;
  return s < n ? s : period - s;
}

/// The argument checks of concat / split; `a` is the normalised axis.
Status checkConcat(const std::vector<const Tensor *> &inputs, int64_t axis,
                   const Tensor &y, int64_t &a);
Status checkSplit(const Tensor &x, int64_t axis,
                  const std::vector<Tensor *> &outputs, int64_t &a);

//===----------------------------------------------------------------------===//
// matmul / gemm
//===----------------------------------------------------------------------===//

/// matmul's problem: y[batch..., m, n] = a[aBatch..., m, k] * b[bBatch...,
/// k, n], rank-1 operands promoted (a [K] -> [1, K], b [K] -> [K, 1]).
struct MatmulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> aBatch, bBatch, batch;
};

/// "reduce Sum" and so on, for messages.
const char *reduceName(ReduceKind kind);

/// The extents of `shape` before `axis` (outer), at it (n) and after it
/// (inner).
void splitAtAxis(const std::vector<int64_t> &shape, int64_t axis,
                 int64_t &outer, int64_t &n, int64_t &inner);

/// The axes a reduction of x into y reduces (negative axes count from the
/// end; duplicates and out-of-range axes are errors), checking that y has
/// x's shape with those axes kept as 1 or dropped.
Status checkReduceAxes(const char *what, const Tensor &x,
                       const std::vector<int64_t> &axes, const Tensor &y,
                       std::vector<bool> &reduced);

/// The argument checks of matmul (Kernels.h) on op(a) and op(b), op
/// swapping the last two dims where transA / transB (operands of rank >= 2
/// then); fills `ms` with op(a)'s m and k and op(b)'s n.
Status checkMatmul(const Tensor &a, const Tensor &b, const Tensor &y,
                   MatmulShape &ms, bool transA = false, bool transB = false);

/// The argument checks of gemm (Kernels.h); sets op(a) [m, k], op(b) [k, n].
Status checkGemm(const Tensor &a, const Tensor &b, const Tensor *c, bool transA,
                 bool transB, const Tensor &y, int64_t &m, int64_t &k,
                 int64_t &n);

//===----------------------------------------------------------------------===//
// Window geometry
//===----------------------------------------------------------------------===//

/// A window over up to three spatial dims, padded at the front with unit
/// dims: in/out are spatial sizes, k kernel, s stride, pb/pe pads, d
/// dilation. Trivially copyable, so the CUDA backend passes it to kernels.
struct Geometry {
  int64_t in[3], out[3], k[3], s[3], pb[3], pe[3], d[3];
  int64_t inSize = 1, outSize = 1, kSize = 1;
};

/// Validates `params` for the spatial dims `in` and `out`, fills `g`.
/// `weightKernel` is the kernel a convolution weight implies (null for
/// pooling, where params.kernel is required). Convolution demands the
/// floor-mode output size; pooling (allowCeil) also accepts ceil mode's (one
/// more window whose overhang counts as padding).
Status resolveGeometry(const std::string &what, const WindowParams &params,
                       const std::vector<int64_t> &in,
                       const std::vector<int64_t> &out,
                       const std::vector<int64_t> *weightKernel, bool allowCeil,
                       const char *outName, Geometry &g);

/// Validates a pooling pair x [N, C, in...] / y [N, C, out...] (or dx / dy).
Status resolvePool(const std::string &what, const Tensor &x, const Tensor &y,
                   const WindowParams &params, const char *xName,
                   const char *yName, Geometry &g);

/// maxPoolGrad's dy [N, C, out...] and dx [N, C, in...] as `planes`
/// (n, c) planes of outSize and inSize elements.
struct PoolPlanes {
  int64_t planes = 0, outSize = 0, inSize = 0;
};

/// The argument checks of maxPoolGrad (Kernels.h) but the index values.
Status checkMaxPoolGrad(const Tensor &dy, const Tensor &indices,
                        const Tensor &dx, PoolPlanes &planes);
/// maxPoolGrad's error for an index outside its (n, c) plane of dx.
Status maxPoolIndexError(const Tensor &dx);

/// A convolution x [N, C, in...] * w [M, C / G, k...] -> y [N, M, out...].
struct ConvDims {
  int64_t n = 0, c = 0, m = 0, group = 1, cinG = 0, coutG = 0;
  Geometry geo;
};

/// Validates the three convolution operands (x, w, y or their gradients,
/// named in `names`) and `params`.
Status resolveConvDims(const std::string &what, const Tensor &x,
                       const Tensor &w, const Tensor &y,
                       const WindowParams &params, const char *const names[3],
                       ConvDims &cp);

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// The shapes of a layer norm over dims [axis, rank): `outer` rows of
/// `inner` elements, the statistics' shape and the normalised dims.
struct LayerNormDims {
  int64_t axis = 0, outer = 1, inner = 1;
  std::vector<int64_t> statShape;
  std::vector<int64_t> normShape;
};

/// Validates x, the axis and scale / bias (same dtype as x, broadcasting
/// unidirectionally to the normalised dims) and fills `ln`.
Status resolveLayerNormDims(const std::string &what, const Tensor &x,
                            const Tensor &scale, const Tensor *bias,
                            int64_t axis, LayerNormDims &ln);

/// The remaining checks of layerNorm / layerNormGrad once `ln` is resolved.
Status checkLayerNormOutputs(const Tensor &x, const LayerNormDims &ln,
                             const Tensor &y, const Tensor &mean,
                             const Tensor &invStdDev);
Status checkLayerNormGradOutputs(const Tensor &dy, const Tensor &x,
                                 const Tensor &scale, const Tensor &mean,
                                 const Tensor &invStdDev,
                                 const LayerNormDims &ln, const Tensor &dx,
                                 const Tensor &dscale, const Tensor *dbias);

/// x [N, C, spatial...] seen as N blocks of C planes of `plane` elements.
struct BatchShape {
  int64_t n = 0, c = 0, plane = 1;
  int64_t count() const { return n * plane; } // values per channel
};

/// The argument checks of batchNorm and batchNormGrad (Kernels.h).
Status checkBatchNorm(const Tensor &x, const Tensor &scale, const Tensor &bias,
                      const Tensor &inputMean, const Tensor &inputVar,
                      bool training, const Tensor &y, const Tensor &runningMean,
                      const Tensor &runningVar, const Tensor *savedMean,
                      const Tensor *savedInvStd, bool unbiasedRunningVar,
                      BatchShape &bs);
Status checkBatchNormGrad(const Tensor &dy, const Tensor &x,
                          const Tensor &scale, const Tensor &savedMean,
                          const Tensor &savedInvStd, const Tensor &dx,
                          const Tensor &dscale, const Tensor &dbias,
                          BatchShape &bs);

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// The argument checks of dropout and dropoutGrad (Kernels.h).
Status checkDropout(const Tensor &x, float ratio, const Tensor &y,
                    const Tensor &mask);
Status checkDropoutGrad(const Tensor &dy, const Tensor &mask, float ratio,
                        const Tensor &dx);

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// scores [N, C, d...] seen as N blocks of C rows of `inner` positions;
/// labels [N, d...] index the class of each (n, position).
struct SceShape {
  int64_t n = 0, c = 0, inner = 1;
  int64_t count() const { return n * inner; } // number of labels
};

enum class Reduction : int { None, Sum, Mean };

Status parseReduction(const char *what, const std::string &name, Reduction &r);

/// Validates scores-shaped `probs` (scores or logProb), labels and weights.
Status resolveSce(const std::string &what, const Tensor &probs,
                  const char *probsName, const Tensor &labels,
                  const Tensor *weights, SceShape &ss);

/// The argument checks of softmaxCrossEntropy and its gradient (Kernels.h):
/// fill the problem shape and the parsed reduction.
Status checkSoftmaxCrossEntropy(const Tensor &scores, const Tensor &labels,
                                const Tensor *weights,
                                const std::string &reduction,
                                const Tensor &loss, const Tensor &logProb,
                                SceShape &ss, Reduction &red);
Status checkSoftmaxCrossEntropyGrad(const Tensor &dloss, const Tensor &logProb,
                                    const Tensor &labels, const Tensor *weights,
                                    const std::string &reduction,
                                    const Tensor &dscores, SceShape &ss,
                                    Reduction &red);

//===----------------------------------------------------------------------===//
// Optimisers
//===----------------------------------------------------------------------===//

/// The argument checks of sgdStep and adamStep (Kernels.h).
Status checkSgdStep(const Tensor &param, const Tensor &grad,
                    const Tensor *momentumBuffer, double momentum,
                    double dampening, bool nesterov);
Status checkAdamStep(const Tensor &param, const Tensor &grad, const Tensor &m,
                     const Tensor &v, int64_t step);

} // namespace pp::rt::common

#endif // PP_RUNTIME_COMMON_CHECKS_H
