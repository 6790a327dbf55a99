//===- Kernels.h - Forward and backward kernels of pipeline-opt -*- C++ -*-===//
//
// The kernel library that the reference interpreter and generated stage
// programs call. One API, several backends: the CPU backend (OpenBLAS GEMM,
// im2col convolution, std::thread parallelism) is built everywhere; the CUDA
// backend (cuBLAS/cuDNN and own kernels) implements the same functions for
// device pointers and is compiled whenever nvcc is found.
//
// Conventions
// - Tensors are dense, row-major (C order) views; the caller owns the memory
//   and allocates every output with its final shape before the call.
// - Shapes follow ONNX: NCHW activations, OIHW weights, numpy broadcasting.
// - Floating kernels support F32 and F64 (F64 for finite-difference checks);
//   integer/bool tensors appear where ONNX allows them (indices, masks,
//   shape data, comparisons).
// - F16 and BF16 tensors hold raw uint16_t bits (Half.h). `cast` converts
//   them to and from every dtype, and kernels that only move elements (copy,
//   fill, transpose, slice, gather, concat, expand, where, ...) accept them.
//   The CPU backend's arithmetic kernels compute them through f32: each
//   16-bit float input is widened to f32 (exactly), the f32 kernel runs (so
//   GEMMs, reductions, softmax and norms accumulate in f32 or wider), and
//   each 16-bit float output, in/out state included (optimiser buffers,
//   running statistics), is rounded once to its dtype, to nearest even. The
//   operands keep the kernel's dtype rules: a BF16 operand where an F32 one
//   must match it is an error. The CUDA backend computes them alike, with
//   the same dtype rules: GEMMs on tensor cores (f32 accumulation, one
//   rounding), convolutions in cuDNN (float compute type; a bias or a
//   non-Relu activation applies to the rounded output), and every other
//   arithmetic kernel (elementwise, reductions, softmax, norms, pooling,
//   dropout, losses, optimiser updates) widening each element to float,
//   running the F32 code (double sums where it has them) and rounding each
//   output once; atomic scatters add into an f32 copy, rounded once.
// - Kernels validate what they read from their arguments and report misuse
//   by returning a Status; they never abort.
// - Randomness (Dropout) is counter based: the mask of element i depends only
//   on (seed, offset + i), so every backend and every run produce the same
//   mask (DropoutHash.h).
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_KERNELS_H
#define PP_RUNTIME_KERNELS_H

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pp::rt {

/// Element types. New dtypes are appended: the values are stable.
enum class DType : int {
  F32,
  F64,
  I64,
  I32,
  I8,
  U8,
  Bool, // one byte, 0 or 1
  F16,  // IEEE binary16 bits (Half.h); CPU arithmetic computes in f32
  BF16, // bfloat16 bits (Half.h); CPU arithmetic computes in f32
  U32,
  U64,
  I16,
  U16
};

/// Size in bytes of one element (Bool is one byte).
int64_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);

/// A non-owning view of a dense row-major tensor.
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Result of a kernel call: empty message on success.
struct Status {
  std::string message;
  bool ok() const { return message.empty(); }
  static Status success() { return {}; }
  static Status error(std::string message) { return {std::move(message)}; }
};

/// An out-of-place optimizer update. A weight-versioned schedule keeps a
/// parameter's value from before an update as a weight version; instead of
/// copying it, the driver names a second buffer, and sgdStep / adamStep read
/// the parameter and write its new value there.
struct UpdateTarget {
  const void *param; // the parameter's buffer: left as it was
  void *updated;     // receives the updated value
  bool written = false;
};

/// Per-thread execution settings (number of CPU threads; the CUDA backend
/// keeps its stream and library handles here).
struct Context {
  int numThreads = 1;
  void *stream = nullptr;
  void *blasHandle = nullptr;
  void *dnnHandle = nullptr;
  /// CUDA backend: F32 GEMMs and convolutions may run on tensor cores in
  /// TF32 (operands rounded to 10 fraction bits, products summed in f32).
  /// Off by default, so F32 results stay full FP32, as the CPU backend's
  /// (the kernel cross-check, the tests); the training driver turns it on
  /// unless `--no-tf32`. The CPU backend ignores it.
  bool allowTF32 = false;
  /// Set by the driver around one update (else null: updates in place).
  std::vector<UpdateTarget> *updateTargets = nullptr;
};

/// Where sgdStep / adamStep write `param`'s new value: the buffer the
/// driver named for it (then marked written), else `param`'s own.
inline void *updateTargetOf(Context &ctx, const Tensor &param) {
  if (ctx.updateTargets)
    for (UpdateTarget &target : *ctx.updateTargets)
      if (target.param == param.data) {
        target.written = true;
        return target.updated;
      }
  return param.data;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class UnaryKind : int {
#define PP_UNARY_KIND(Enumerator, Name, UnaryGrad, Fused, FusedGrad) Enumerator,
#include "pp/Runtime/UnaryKinds.def"
};

/// What UnaryKinds.def says of a kind.
struct UnaryKindInfo {
  const char *name;      // "Relu", "LeakyRelu", ...
  bool hasUnaryGrad;     // train.unary_grad takes it
  const char *fused;     // its element function in Fused.h, or ""
  const char *fusedGrad; // its gradient's element function, or ""
};

inline constexpr UnaryKindInfo kUnaryKinds[] = {
#define PP_UNARY_KIND(Enumerator, Name, UnaryGrad, Fused, FusedGrad)           \
  {Name, UnaryGrad, Fused, FusedGrad},
#include "pp/Runtime/UnaryKinds.def"
};

constexpr const UnaryKindInfo &getInfo(UnaryKind kind) {
  return kUnaryKinds[static_cast<int>(kind)];
}
constexpr const char *toString(UnaryKind kind) { return getInfo(kind).name; }
constexpr bool hasUnaryGrad(UnaryKind kind) {
  return getInfo(kind).hasUnaryGrad;
}
/// Whether unaryGrad computes f'(x) from y = f(x) (the kinds where that is
/// cheaper) rather than from x; it reads only one of them.
constexpr bool unaryGradReadsOutput(UnaryKind kind) {
  return kind == UnaryKind::Sigmoid || kind == UnaryKind::Tanh ||
         kind == UnaryKind::Sqrt || kind == UnaryKind::Exp ||
         kind == UnaryKind::Reciprocal;
}
constexpr const char *fusedFunction(UnaryKind kind) {
  return getInfo(kind).fused;
}
constexpr const char *fusedGradFunction(UnaryKind kind) {
  return getInfo(kind).fusedGrad;
}

/// The kind named `name`, if any.
inline std::optional<UnaryKind> parseUnaryKind(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kUnaryKinds)); ++i)
    if (name == kUnaryKinds[i].name)
      return static_cast<UnaryKind>(i);
  return std::nullopt;
}

/// y = f(x); `alpha` is LeakyRelu's slope, `alpha` and `beta` HardSigmoid's
/// max(0, min(1, alpha * x + beta)), `alpha` Elu's, Celu's and
/// ThresholdedRelu's alpha, `alpha` and `beta` Selu's alpha and gamma. x and
/// y have one shape and dtype.
Status unary(Context &ctx, UnaryKind kind, const Tensor &x, Tensor &y,
             float alpha = 0.f, float beta = 0.f);

/// dx = dy * f'(x) for the differentiable unary kinds (all but Floor, Ceil,
/// Round, Not, whose gradient is zero). `y` is f(x) (used where cheaper).
Status unaryGrad(Context &ctx, UnaryKind kind, const Tensor &x, const Tensor &y,
                 const Tensor &dy, Tensor &dx, float alpha = 0.f,
                 float beta = 0.f);

enum class BinaryKind : int {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Equal,
  Less,
  Greater,
  And,
  Or,
  /// ONNX Mod with fmod = 0: the remainder has the divisor's sign (floored,
  /// Python's %).
  Mod,
  /// ONNX Mod with fmod = 1: the remainder has the dividend's sign
  /// (truncated, C's fmod and %).
  FMod,
  /// The larger / smaller of a and b; a NaN operand gives NaN (as
  /// torch.maximum / torch.minimum).
  Max,
  Min
};

/// c = a (op) b with numpy broadcasting; comparisons write Bool.
Status binary(Context &ctx, BinaryKind kind, const Tensor &a, const Tensor &b,
              Tensor &c);

/// out = cond ? x : y with broadcasting of all three.
Status where(Context &ctx, const Tensor &cond, const Tensor &x, const Tensor &y,
             Tensor &out);

/// y = min(max(x, lo), hi); absent bounds are null.
Status clip(Context &ctx, const Tensor &x, const Tensor *lo, const Tensor *hi,
            Tensor &y);

/// Converts between any two dtypes: float->int truncates toward zero and
/// saturates (NaN gives 0), int->int wraps, ->bool tests != 0 (NaN is true),
/// ->float rounds to nearest even (F16/BF16 overflow to inf, see Half.h).
Status cast(Context &ctx, const Tensor &x, Tensor &y);

/// y = broadcast of x to y's shape.
Status expand(Context &ctx, const Tensor &x, Tensor &y);

/// y = sum of x over the dims that broadcasting added or stretched, so that
/// y's shape broadcasts to x's (the adjoint of expand).
Status reduceSumTo(Context &ctx, const Tensor &x, Tensor &y);

/// Fills y with one value (converted to y's dtype).
Status fill(Context &ctx, Tensor &y, double value);

//===----------------------------------------------------------------------===//
// Reductions, softmax, normalisation
//===----------------------------------------------------------------------===//

enum class ReduceKind : int { Sum, Mean, Max, Min };

/// Reduces x over `axes` (normalised, ascending); y has the kept shape
/// (size-1 dims where keepdims, dropped otherwise: both layouts are dense).
Status reduce(Context &ctx, ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &y);

/// Softmax or LogSoftmax along `axis`.
Status softmax(Context &ctx, const Tensor &x, int64_t axis, bool log,
               Tensor &y);
/// Gradient of softmax / log-softmax given its output y.
Status softmaxGrad(Context &ctx, const Tensor &y, const Tensor &dy,
                   int64_t axis, bool log, Tensor &dx);

/// LayerNormalization over dims [axis, rank); mean and invStdDev have x's
/// shape with those dims set to 1. bias may be null.
Status layerNorm(Context &ctx, const Tensor &x, const Tensor &scale,
                 const Tensor *bias, int64_t axis, float epsilon, Tensor &y,
                 Tensor &mean, Tensor &invStdDev);
Status layerNormGrad(Context &ctx, const Tensor &dy, const Tensor &x,
                     const Tensor &scale, const Tensor &mean,
                     const Tensor &invStdDev, int64_t axis, Tensor &dx,
                     Tensor &dscale, Tensor *dbias);

/// BatchNormalization over channel dim 1. Training mode normalises with the
/// batch statistics (biased variance), writes them to savedMean /
/// savedInvStd, and updates the running statistics:
/// running = momentum * running + (1 - momentum) * batch, where the batch
/// variance is the biased one (ONNX's reference) or, with
/// unbiasedRunningVar, the unbiased one (PyTorch's update).
/// Inference mode uses inputMean / inputVar and copies them to the running
/// outputs; savedMean / savedInvStd may then be null. `activation`
/// (Identity: none) is applied to y as conv's is.
Status batchNorm(Context &ctx, const Tensor &x, const Tensor &scale,
                 const Tensor &bias, const Tensor &inputMean,
                 const Tensor &inputVar, float epsilon, float momentum,
                 bool training, Tensor &y, Tensor &runningMean,
                 Tensor &runningVar, Tensor *savedMean, Tensor *savedInvStd,
                 bool unbiasedRunningVar = false,
                 UnaryKind activation = UnaryKind::Identity);
/// The batch statistics of training-mode batch norm, as its gradient needs
/// them: per channel (dim 1) the mean and 1 / sqrt(biased var + epsilon),
/// accumulated in double.
Status batchNormStatistics(Context &ctx, const Tensor &x, double epsilon,
                           Tensor &mean, Tensor &invStd);
/// Gradient of training-mode batch norm (batch statistics).
Status batchNormGrad(Context &ctx, const Tensor &dy, const Tensor &x,
                     const Tensor &scale, const Tensor &savedMean,
                     const Tensor &savedInvStd, Tensor &dx, Tensor &dscale,
                     Tensor &dbias);

//===----------------------------------------------------------------------===//
// Contractions and convolution
//===----------------------------------------------------------------------===//

/// numpy matmul of op(a) and op(b): batch dims broadcast; rank-1 operands
/// are promoted and the added dim removed from y. op swaps the last two dims
/// of an operand of rank >= 2 where transA / transB: the GEMMs read it
/// transposed, with no copy.
Status matmul(Context &ctx, const Tensor &a, const Tensor &b, Tensor &y,
              bool transA = false, bool transB = false);

/// y = activation(alpha * op(a) * op(b) + beta * c) (c unidirectionally
/// broadcast, may be null). The CPU backend applies a Relu inside oneDNN's
/// matmul where that runs the GEMM (a post-op), else in a pass over y.
Status gemm(Context &ctx, const Tensor &a, const Tensor &b, const Tensor *c,
            float alpha, float beta, bool transA, bool transB, Tensor &y,
            UnaryKind activation = UnaryKind::Identity);

/// Geometry of a convolution or pooling window over the spatial dims.
struct WindowParams {
  std::vector<int64_t> kernel;    // spatial kernel sizes
  std::vector<int64_t> strides;   // per spatial dim
  std::vector<int64_t> pads;      // begin pads then end pads (ONNX order)
  std::vector<int64_t> dilations; // per spatial dim
  int64_t group = 1;              // convolution only
};

/// N-d convolution (1-3 spatial dims), grouped and dilated; bias may be null.
/// `activation` (Identity: none) is applied to y as it is written: a Relu
/// the graph applies to the convolution's output, fused into it (oneDNN's
/// post-op on the CPU; any other kind or backend runs unary on y after).
Status conv(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *b,
            const WindowParams &params, Tensor &y,
            UnaryKind activation = UnaryKind::Identity);
/// dx from dy and w (the transposed convolution).
Status convGradInput(Context &ctx, const Tensor &dy, const Tensor &w,
                     const WindowParams &params, Tensor &dx);
/// dw from dy and x.
Status convGradWeight(Context &ctx, const Tensor &dy, const Tensor &x,
                      const WindowParams &params, Tensor &dw);
/// ONNX ConvTranspose: y = convGradInput(x, w) (x in the place of a
/// convolution's dy; w [C, M / group, k...]) plus b per output channel (b
/// may be null). `params` holds the explicit pads; y's spatial dims are
/// those a convolution of y with `params` maps to x's.
Status convTranspose(Context &ctx, const Tensor &x, const Tensor &w,
                     const Tensor *b, const WindowParams &params, Tensor &y);

/// Max pooling; indices (I64, may be null) are flat offsets into x's NCHW
/// layout per ONNX (storage_order 0). Padding never wins the max.
Status maxPool(Context &ctx, const Tensor &x, const WindowParams &params,
               Tensor &y, Tensor *indices);
/// Scatters dy to the argmax positions (indices from maxPool).
Status maxPoolGrad(Context &ctx, const Tensor &dy, const Tensor &indices,
                   Tensor &dx);
/// Average pooling; countIncludePad follows ONNX's count_include_pad.
Status avgPool(Context &ctx, const Tensor &x, const WindowParams &params,
               bool countIncludePad, Tensor &y);
Status avgPoolGrad(Context &ctx, const Tensor &dy, const WindowParams &params,
                   bool countIncludePad, Tensor &dx);

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Status transpose(Context &ctx, const Tensor &x,
                 const std::vector<int64_t> &perm, Tensor &y);
/// y[i] = x[starts + i * steps] per dim (starts/steps have x's rank, already
/// clamped; y's shape gives the counts).
Status slice(Context &ctx, const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, Tensor &y);
/// The adjoint of slice: dx = 0 except dx[starts + i * steps] = dy[i].
Status sliceGrad(Context &ctx, const Tensor &dy,
                 const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, Tensor &dx);
Status concat(Context &ctx, const std::vector<const Tensor *> &inputs,
              int64_t axis, Tensor &y);
Status split(Context &ctx, const Tensor &x, int64_t axis,
             const std::vector<Tensor *> &outputs);
/// ONNX Gather along `axis` (negative indices count from the end).
Status gather(Context &ctx, const Tensor &data, const Tensor &indices,
              int64_t axis, Tensor &y);
/// The adjoint of gather: ddata = 0, then ddata[..., idx, ...] += dy.
Status gatherGrad(Context &ctx, const Tensor &dy, const Tensor &indices,
                  int64_t axis, Tensor &ddata);
/// ONNX ScatterND reductions.
enum class ScatterReduction : int {
  None = 0,
  Add = 1,
  Mul = 2,
  Max = 3,
  Min = 4
};
/// ONNX ScatterND: y = data, then for each index tuple of `indices` (its
/// last dim k addresses data's first k dims; negative values count from the
/// end), in order, the slice of y it addresses is replaced by (or combined
/// with, by `reduction`) the matching slice of `updates`, whose shape is
/// indices.shape[:-1] + data.shape[k:]. y may be data (in place).
Status scatterND(Context &ctx, const Tensor &data, const Tensor &indices,
                 const Tensor &updates, ScatterReduction reduction, Tensor &y);
/// ONNX Pad modes.
enum class PadMode : int { Constant = 0, Reflect = 1, Edge = 2 };
/// ONNX Pad. `pads` holds x's rank begin counts, then as many end counts;
/// negative ones crop. y has x's shape plus begin + end per dim, and y[o]
/// reads x at o - begin per dim; a position outside x takes `value`
/// (Constant, converted as `fill` does), its mirror image without repeating
/// the border (Reflect, numpy's "reflect", repeatedly for wide pads) or the
/// nearest border element (Edge). Reflect and Edge cannot pad an empty dim.
/// Any dtype.
Status pad(Context &ctx, const Tensor &x, const std::vector<int64_t> &pads,
           PadMode mode, double value, Tensor &y);
/// The adjoint of pad: dx = 0, then dx[source(o)] += dy[o] for every o that
/// reads x (F32, F64; F16 and BF16 through f32 on the CPU).
Status padGrad(Context &ctx, const Tensor &dy, const std::vector<int64_t> &pads,
               PadMode mode, Tensor &dx);
/// Copies bytes (Reshape, Flatten, Squeeze, Unsqueeze, Identity).
Status copy(Context &ctx, const Tensor &x, Tensor &y);

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

/// Dropout with keep probability 1 - ratio and scaling 1 / (1 - ratio);
/// mask (Bool) is true where kept. training == false copies x, mask = true.
/// Element i draws the value of position offset + i under `seed`, so a
/// micro-batch m of n elements with offset m * n draws its slice of the
/// whole mini-batch's mask.
Status dropout(Context &ctx, const Tensor &x, float ratio, bool training,
               uint64_t seed, uint64_t offset, Tensor &y, Tensor &mask);
Status dropoutGrad(Context &ctx, const Tensor &dy, const Tensor &mask,
                   float ratio, Tensor &dx);

/// ONNX SoftmaxCrossEntropyLoss. scores [N, C, d...], labels [N, d...];
/// weights [C] or null; ignoreIndex applies when hasIgnoreIndex; reduction
/// "mean" divides by the total weight of the counted labels.
Status softmaxCrossEntropy(Context &ctx, const Tensor &scores,
                           const Tensor &labels, const Tensor *weights,
                           bool hasIgnoreIndex, int64_t ignoreIndex,
                           const std::string &reduction, Tensor &loss,
                           Tensor &logProb);
/// dscores from the loss gradient (scalar, or per-label for "none").
Status softmaxCrossEntropyGrad(Context &ctx, const Tensor &dloss,
                               const Tensor &logProb, const Tensor &labels,
                               const Tensor *weights, bool hasIgnoreIndex,
                               int64_t ignoreIndex,
                               const std::string &reduction, Tensor &dscores);

/// SGD as torch.optim.SGD: g = grad + weightDecay * p; with momentum,
/// buf = momentum * buf + (1 - dampening) * g (buf = g on the first step),
/// g = nesterov ? g + momentum * buf : buf; p -= lr * g. With an
/// UpdateTarget for `param` (Context::updateTargets), p is left unchanged
/// and the result written to the target.
Status sgdStep(Context &ctx, Tensor &param, const Tensor &grad,
               Tensor *momentumBuffer, int64_t step, double lr, double momentum,
               double dampening, double weightDecay, bool nesterov);
/// Adam / AdamW as torch.optim: `step` counts from 1; decoupled selects
/// AdamW's weight decay (p *= 1 - lr * wd) over Adam's L2 term; out of
/// place as sgdStep with an UpdateTarget.
Status adamStep(Context &ctx, Tensor &param, const Tensor &grad, Tensor &m,
                Tensor &v, int64_t step, double lr, double beta1, double beta2,
                double epsilon, double weightDecay, bool decoupled);

} // namespace pp::rt

#endif // PP_RUNTIME_KERNELS_H
