//===- Training.cu - Dropout, cross-entropy, optimiser CUDA kernels -------===//
//
// Dropout with the counter-based mask of DropoutHash.h (bit-identical to the
// CPU backend), ONNX SoftmaxCrossEntropyLoss and its gradient, and the SGD /
// Adam / AdamW updates of torch.optim. Loss reductions add per-label values
// in one block in a fixed order, so the loss is deterministic. Labels are
// checked on the device; a bad one is reported after a stream
// synchronisation. F16 and BF16 tensors (optimiser state included) are
// widened to float, computed as F32 ones and rounded once on store, as the
// CPU backend computes them; their operands must share the dtype.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "pp/Runtime/DropoutHash.h"

#include <cmath>

namespace pp::rt {

using namespace cuda;

namespace {

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void __launch_bounds__(kThreads)
    dropoutKernel(const T *x, T *y, uint8_t *mask, int64_t n, uint64_t seed,
                  uint64_t offset, uint64_t threshold, Compute<T> scale) {
  PP_GRID_STRIDE(i, n) {
    bool keep = dropouthash::keepElement(seed, offset + uint64_t(i), threshold);
    mask[i] = keep;
    y[i] = narrow<T>(keep ? widen(x[i]) * scale : Compute<T>(0));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    dropoutGradKernel(const T *dy, const uint8_t *mask, T *dx, int64_t n,
                      Compute<T> scale) {
  PP_GRID_STRIDE(i, n) {
    dx[i] = narrow<T>(mask[i] ? widen(dy[i]) * scale : Compute<T>(0));
  }
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

/// The labels and class weights a kernel reads.
template <typename T> struct LabelView {
  const void *labels;
  bool labels64;
  const T *weights;
  int64_t classes;
  bool hasIgnoreIndex;
  int64_t ignoreIndex;

  /// Weight of label i (0 when ignored); false when out of range.
  __device__ bool weightOf(int64_t i, int64_t &label, double &weight) const {
    label = loadIndex(labels, labels64, i);
    if constexpr (isHalfType<T>) {
      // The shared rule without weights (1, or 0 when ignored), then the
      // widened class weight.
      if (!labelClassWeight(label, static_cast<const float *>(nullptr), classes,
                            hasIgnoreIndex, ignoreIndex, weight))
        return false;
      if (weights && weight != 0)
        weight = double(widen(weights[label]));
      return true;
    } else {
      return labelClassWeight(label, weights, classes, hasIgnoreIndex,
                              ignoreIndex, weight);
    }
  }
};

struct FMaxOp {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

/// Log-softmax of label i's class column into logProb, then the weighted
/// loss -w * logp[label] and the weight into perLabel / perWeight. Threads
/// [first, first + step ...) of a group share the column; `reduce` combines
/// their partial values. The arithmetic follows the CPU backend (double;
/// C-rounded log-probabilities).
template <typename T, typename ReduceFn>
__device__ void sceLine(const T *scores, T *logProb, const LabelView<T> &lv,
                        int64_t i, int64_t inner, double *perLabel,
                        double *perWeight, unsigned long long *error,
                        int64_t first, int64_t step, ReduceFn reduce) {
  using C = Compute<T>;
  int64_t n = i / inner, pos = i - n * inner;
  int64_t base = n * lv.classes * inner + pos;
  auto score = [&](int64_t c) {
    return double(widen(scores[base + c * inner]));
  };
  double mx = -INFINITY;
  for (int64_t c = first; c < lv.classes; c += step)
    mx = fmax(mx, score(c));
  mx = reduce(mx, FMaxOp{});
  double sum = 0;
  for (int64_t c = first; c < lv.classes; c += step)
    sum += ::exp(score(c) - mx);
  sum = reduce(sum, SumOp{});
  double logSum = mx + ::log(sum);
  for (int64_t c = first; c < lv.classes; c += step)
    logProb[base + c * inner] = narrow<T>(C(score(c) - logSum));
  if (first != 0)
    return;
  int64_t label;
  double w = 0;
  if (!lv.weightOf(i, label, w)) {
    atomicMin(error, static_cast<unsigned long long>(i));
    perLabel[i] = perWeight[i] = 0;
    return;
  }
  perWeight[i] = w;
  // Recomputed rather than read back from logProb (written by other threads
  // of the group, and for 16 bits rounded past the C value the CPU reads).
  perLabel[i] = w == 0 ? 0.0 : -w * double(C(score(label) - logSum));
}

struct LaneReduce {
  template <typename Op> __device__ double operator()(double v, Op) const {
    return v;
  }
};

struct BlockReduceD {
  double *buf;
  template <typename Op> __device__ double operator()(double v, Op op) const {
    return blockReduce(v, op, buf);
  }
};

/// One thread per label (class columns strided by inner, or few classes).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sceThreadKernel(const T *scores, T *logProb, LabelView<T> lv,
                    int64_t labels, int64_t inner, double *perLabel,
                    double *perWeight, unsigned long long *error) {
  PP_GRID_STRIDE(i, labels) {
    sceLine(scores, logProb, lv, i, inner, perLabel, perWeight, error, 0, 1,
            LaneReduce{});
  }
}

/// One block per label (contiguous class rows of many classes).
template <typename T>
__global__ void sceBlockKernel(const T *scores, T *logProb, LabelView<T> lv,
                               int64_t labels, double *perLabel,
                               double *perWeight, unsigned long long *error) {
  __shared__ double buf[32];
  for (int64_t i = blockIdx.x; i < labels; i += gridDim.x)
    sceLine(scores, logProb, lv, i, 1, perLabel, perWeight, error, threadIdx.x,
            blockDim.x, BlockReduceD{buf});
}

/// Sums perLabel and perWeight over all labels in one block (fixed order)
/// into totals[0..1].
__global__ void __launch_bounds__(1024)
    sumLabelsKernel(const double *perLabel, const double *perWeight,
                    int64_t labels, double *totals) {
  __shared__ double buf[32];
  double a = 0, b = 0;
  for (int64_t i = threadIdx.x; i < labels; i += blockDim.x) {
    a += perLabel ? perLabel[i] : 0.0;
    b += perWeight[i];
  }
  a = blockReduce(a, SumOp{}, buf);
  b = blockReduce(b, SumOp{}, buf);
  if (threadIdx.x == 0) {
    totals[0] = a;
    totals[1] = b;
  }
}

/// ONNX divides by the summed weight of the counted labels; all labels
/// ignored gives 0 / 0 = NaN.
template <typename T>
__global__ void sceLossKernel(const double *perLabel, const double *totals,
                              Reduction red, int64_t labels, T *loss) {
  if (red == Reduction::None) {
    PP_GRID_STRIDE(i, labels) { loss[i] = narrow<T>(perLabel[i]); }
  } else if (blockIdx.x == 0 && threadIdx.x == 0) {
    loss[0] =
        narrow<T>(red == Reduction::Sum ? totals[0] : totals[0] / totals[1]);
  }
}

/// Per-label weights (0 when ignored) for the gradient; flags bad labels.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sceWeightKernel(LabelView<T> lv, int64_t labels, double *weights,
                    unsigned long long *error) {
  PP_GRID_STRIDE(i, labels) {
    int64_t label;
    double w = 0;
    if (!lv.weightOf(i, label, w)) {
      atomicMin(error, static_cast<unsigned long long>(i));
      w = 0;
    }
    weights[i] = w;
  }
}

/// dscores[n, c, pos] = coef_i * (softmax[c] - [c == label_i]) where coef_i
/// is w_i * dloss (scaled by 1 / total weight for mean).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sceGradKernel(const T *logProb, const T *dloss, LabelView<T> lv,
                  const double *weights, const double *totals, Reduction red,
                  int64_t total, int64_t inner, T *dscores) {
  PP_GRID_STRIDE(e, total) {
    int64_t pos = e % inner, r = e / inner;
    int64_t c = r % lv.classes, n = r / lv.classes;
    int64_t i = n * inner + pos;
    double coef = weights[i];
    if (red == Reduction::None)
      coef *= double(widen(dloss[i]));
    else if (red == Reduction::Sum)
      coef *= double(widen(dloss[0]));
    else // all ignored: every coefficient is 0, keep the gradient 0
      coef = coef == 0 ? 0.0 : coef * double(widen(dloss[0])) / totals[1];
    int64_t label = loadIndex(lv.labels, lv.labels64, i);
    dscores[e] =
        narrow<T>(coef == 0 ? 0.0
                            : coef * (::exp(double(widen(logProb[e]))) -
                                      (c == label ? 1.0 : 0.0)));
  }
}

Status labelError(const std::string &what, const Tensor &labels,
                  int64_t position, int64_t classes, cudaStream_t stream) {
  return Status::error(what + ": label " +
                       std::to_string(readDeviceInt(labels, position, stream)) +
                       " at flat position " + std::to_string(position) +
                       " is outside [0, " + std::to_string(classes) +
                       ") and not the ignore index");
}

template <typename T>
LabelView<T> labelView(const Tensor &labels, const Tensor *weights,
                       int64_t classes, bool hasIgnoreIndex,
                       int64_t ignoreIndex) {
  return LabelView<T>{labels.data,
                      labels.dtype == DType::I64,
                      weights ? weights->as<T>() : nullptr,
                      classes,
                      hasIgnoreIndex,
                      ignoreIndex};
}

//===----------------------------------------------------------------------===//
// Optimisers
//===----------------------------------------------------------------------===//

/// The state (momentum buffer, moments) is read as C and stored back once.
template <typename T, typename C = Compute<T>>
__global__ void __launch_bounds__(kThreads)
    sgdKernel(const T *p, T *out, const T *g, T *buf, int64_t n, bool first,
              C lr, C mu, C damp, C wd, bool nesterov) {
  PP_GRID_STRIDE(i, n) {
    C b = buf && !first ? widen(buf[i]) : C(0);
    out[i] = narrow<T>(sgdUpdate(widen(p[i]), widen(g[i]), buf ? &b : nullptr,
                                 first, lr, mu, damp, wd, nesterov));
    if (buf)
      buf[i] = narrow<T>(b);
  }
}

template <typename T, typename C = Compute<T>>
__global__ void __launch_bounds__(kThreads)
    adamKernel(const T *p, T *out, const T *g, T *m, T *v, int64_t n,
               AdamCoefficients<C> c, bool decoupled) {
  PP_GRID_STRIDE(i, n) {
    C mi = widen(m[i]), vi = widen(v[i]);
    out[i] =
        narrow<T>(adamUpdate(widen(p[i]), widen(g[i]), mi, vi, c, decoupled));
    m[i] = narrow<T>(mi);
    v[i] = narrow<T>(vi);
  }
}

} // namespace

Status dropout(Context &ctx, const Tensor &x, float ratio, bool training,
               uint64_t seed, uint64_t offset, Tensor &y, Tensor &mask) {
  const char *what = "dropout";
  if (anyFloat16(x, y))
    PP_RT_TRY(expectSameDType(what, {&x, &y}));
  PP_RT_TRY(checkDropout(checkedAsF32(x), ratio, checkedAsF32(y), mask));
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  cudaStream_t stream = streamOf(ctx);
  // Inference and ratio 0 keep everything unscaled.
  if (!training || ratio == 0.f) {
    if (y.data != x.data)
      PP_CUDA_TRY(what, cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                        cudaMemcpyDeviceToDevice, stream));
    PP_CUDA_TRY(what, cudaMemsetAsync(mask.data, 1, n, stream));
    return Status::success();
  }
  uint64_t threshold = dropouthash::keepThreshold(ratio);
  double scale = dropouthash::keepScale(ratio);
  return visitFloatOr16(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropoutKernel<T><<<gridFor(n), kThreads, 0, stream>>>(
        x.as<T>(), y.as<T>(), mask.as<uint8_t>(), n, seed, offset, threshold,
        Compute<T>(scale));
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status dropoutGrad(Context &ctx, const Tensor &dy, const Tensor &mask,
                   float ratio, Tensor &dx) {
  const char *what = "dropoutGrad";
  if (anyFloat16(dy, dx))
    PP_RT_TRY(expectSameDType(what, {&dy, &dx}));
  PP_RT_TRY(checkDropoutGrad(checkedAsF32(dy), mask, ratio, checkedAsF32(dx)));
  int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  double scale = dropouthash::keepScale(ratio);
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(dy.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropoutGradKernel<T><<<gridFor(n), kThreads, 0, stream>>>(
        dy.as<T>(), mask.as<uint8_t>(), dx.as<T>(), n, Compute<T>(scale));
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status softmaxCrossEntropy(Context &ctx, const Tensor &scores,
                           const Tensor &labels, const Tensor *weights,
                           bool hasIgnoreIndex, int64_t ignoreIndex,
                           const std::string &reduction, Tensor &loss,
                           Tensor &logProb) {
  const std::string what = "softmaxCrossEntropy";
  if (anyFloat16(scores, weights, loss, logProb))
    PP_RT_TRY(expectSameDType(what, {&scores, weights, &loss, &logProb}));
  Tensor weights32 = weights ? checkedAsF32(*weights) : Tensor{};
  SceShape ss;
  Reduction red;
  PP_RT_TRY(checkSoftmaxCrossEntropy(
      checkedAsF32(scores), labels, weights ? &weights32 : nullptr, reduction,
      checkedAsF32(loss), checkedAsF32(logProb), ss, red));
  cudaStream_t stream = streamOf(ctx);
  int64_t count = ss.count();
  Scratch scratch(stream);
  double *work = nullptr;
  unsigned long long *flag = nullptr;
  // [perLabel count][perWeight count][totals 2]
  PP_RT_TRY(scratch.alloc(what, 2 * count + 2, &work));
  PP_RT_TRY(makeErrorFlag(what, scratch, stream, &flag));
  double *perLabel = work, *perWeight = work + count,
         *totals = work + 2 * count;
  PP_RT_TRY(visitFloatOr16(scores.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LabelView<T> lv =
        labelView<T>(labels, weights, ss.c, hasIgnoreIndex, ignoreIndex);
    if (count > 0) {
      if (ss.inner == 1 && ss.c >= 256) {
        unsigned blocks =
            static_cast<unsigned>(std::min<int64_t>(count, int64_t(1) << 20));
        sceBlockKernel<T><<<blocks, kThreads, 0, stream>>>(
            scores.as<T>(), logProb.as<T>(), lv, count, perLabel, perWeight,
            flag);
      } else {
        sceThreadKernel<T><<<gridFor(count), kThreads, 0, stream>>>(
            scores.as<T>(), logProb.as<T>(), lv, count, ss.inner, perLabel,
            perWeight, flag);
      }
      PP_CUDA_LAUNCHED(what);
    }
    if (red != Reduction::None) {
      sumLabelsKernel<<<1, 1024, 0, stream>>>(perLabel, perWeight, count,
                                              totals);
      PP_CUDA_LAUNCHED(what);
    }
    sceLossKernel<T>
        <<<gridFor(std::max<int64_t>(count, 1)), kThreads, 0, stream>>>(
            perLabel, totals, red, count, loss.as<T>());
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  }));
  int64_t position;
  PP_RT_TRY(readErrorFlag(what, stream, flag, position));
  if (position >= 0)
    return labelError(what, labels, position, ss.c, stream);
  return Status::success();
}

Status softmaxCrossEntropyGrad(Context &ctx, const Tensor &dloss,
                               const Tensor &logProb, const Tensor &labels,
                               const Tensor *weights, bool hasIgnoreIndex,
                               int64_t ignoreIndex,
                               const std::string &reduction, Tensor &dscores) {
  const std::string what = "softmaxCrossEntropyGrad";
  if (anyFloat16(dloss, logProb, weights, dscores))
    PP_RT_TRY(expectSameDType(what, {&logProb, weights, &dloss, &dscores}));
  Tensor weights32 = weights ? checkedAsF32(*weights) : Tensor{};
  SceShape ss;
  Reduction red;
  PP_RT_TRY(
      checkSoftmaxCrossEntropyGrad(checkedAsF32(dloss), checkedAsF32(logProb),
                                   labels, weights ? &weights32 : nullptr,
                                   reduction, checkedAsF32(dscores), ss, red));
  cudaStream_t stream = streamOf(ctx);
  int64_t count = ss.count();
  Scratch scratch(stream);
  double *work = nullptr;
  unsigned long long *flag = nullptr;
  // [weights count][totals 2]
  PP_RT_TRY(scratch.alloc(what, count + 2, &work));
  PP_RT_TRY(makeErrorFlag(what, scratch, stream, &flag));
  double *labelWeights = work, *totals = work + count;
  return visitFloatOr16(logProb.dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    LabelView<T> lv =
        labelView<T>(labels, weights, ss.c, hasIgnoreIndex, ignoreIndex);
    if (count > 0) {
      sceWeightKernel<T><<<gridFor(count), kThreads, 0, stream>>>(
          lv, count, labelWeights, flag);
      PP_CUDA_LAUNCHED(what);
    }
    sumLabelsKernel<<<1, 1024, 0, stream>>>(nullptr, labelWeights, count,
                                            totals);
    PP_CUDA_LAUNCHED(what);
    // Every label is validated before anything is written, as on the CPU.
    int64_t position;
    PP_RT_TRY(readErrorFlag(what, stream, flag, position));
    if (position >= 0)
      return labelError(what, labels, position, ss.c, stream);
    int64_t total = dscores.numel();
    if (total == 0)
      return Status::success();
    sceGradKernel<T><<<gridFor(total), kThreads, 0, stream>>>(
        logProb.as<T>(), dloss.as<T>(), lv, labelWeights, totals, red, total,
        ss.inner, dscores.as<T>());
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status sgdStep(Context &ctx, Tensor &param, const Tensor &grad,
               Tensor *momentumBuffer, int64_t step, double lr, double momentum,
               double dampening, double weightDecay, bool nesterov) {
  const char *what = "sgdStep";
  // The buffer is read only with a momentum, as on the CPU.
  Tensor *buffer = momentum != 0.0 ? momentumBuffer : nullptr;
  if (anyFloat16(param, grad, buffer))
    PP_RT_TRY(expectSameDType(what, {&param, &grad, buffer}));
  Tensor buffer32 = momentumBuffer ? checkedAsF32(*momentumBuffer) : Tensor{};
  PP_RT_TRY(checkSgdStep(checkedAsF32(param), checkedAsF32(grad),
                         momentumBuffer ? &buffer32 : nullptr, momentum,
                         dampening, nesterov));
  int64_t n = param.numel();
  if (n == 0)
    return Status::success();
  // torch initialises the buffer with the first gradient: step counts from 1.
  bool first = step <= 1;
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(param.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    T *buf = buffer ? buffer->as<T>() : nullptr;
    sgdKernel<T><<<gridFor(n), kThreads, 0, stream>>>(
        param.as<T>(), static_cast<T *>(updateTargetOf(ctx, param)),
        grad.as<T>(), buf, n, first, C(lr), C(momentum), C(1.0 - dampening),
        C(weightDecay), nesterov);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

Status adamStep(Context &ctx, Tensor &param, const Tensor &grad, Tensor &m,
                Tensor &v, int64_t step, double lr, double beta1, double beta2,
                double epsilon, double weightDecay, bool decoupled) {
  const char *what = "adamStep";
  if (anyFloat16(param, grad, m, v))
    PP_RT_TRY(expectSameDType(what, {&param, &grad, &m, &v}));
  PP_RT_TRY(checkAdamStep(checkedAsF32(param), checkedAsF32(grad),
                          checkedAsF32(m), checkedAsF32(v), step));
  int64_t n = param.numel();
  if (n == 0)
    return Status::success();
  // torch: step_size = lr / (1 - beta1^t), denom = sqrt(v) / sqrt(1 -
  // beta2^t) + eps, p -= step_size * m / denom.
  double bc1 = 1.0 - std::pow(beta1, double(step));
  double bc2Sqrt = std::sqrt(1.0 - std::pow(beta2, double(step)));
  cudaStream_t stream = streamOf(ctx);
  return visitFloatOr16(param.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    adamKernel<T><<<gridFor(n), kThreads, 0, stream>>>(
        param.as<T>(), static_cast<T *>(updateTargetOf(ctx, param)),
        grad.as<T>(), m.as<T>(), v.as<T>(), n,
        AdamCoefficients<C>{C(beta1), C(1.0 - beta1), C(beta2), C(1.0 - beta2),
                            C(epsilon), C(weightDecay), C(lr / bc1), C(bc2Sqrt),
                            C(1.0 - lr * weightDecay)},
        decoupled);
    PP_CUDA_LAUNCHED(what);
    return Status::success();
  });
}

} // namespace pp::rt
