//===- Training.cpp - Dropout, cross-entropy and optimisers -----*- C++ -*-===//
//
// Training-only kernels: Dropout with a counter-based mask, ONNX
// SoftmaxCrossEntropyLoss and its gradient, and the SGD / Adam / AdamW
// parameter updates of torch.optim (single-tensor, non-amsgrad variants).
// F16 and BF16 tensors run the f32 code on widened copies (Float16Widening);
// optimiser state in 16 bits is rounded back after every step.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "pp/Runtime/DropoutHash.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace pp::rt {
namespace {

using namespace cpu;

constexpr int64_t elementGrain = int64_t(1) << 15;

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

// The mask is a pure function of (seed, offset + i), shared with the CUDA
// backend through DropoutHash.h, so every backend and every run agree.
using dropouthash::keepElement;
using dropouthash::keepScale;
using dropouthash::keepThreshold;

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

/// Weight of label i (0 when ignored); false when the label is out of range.
template <typename T>
bool labelWeight(const Tensor &labels, const T *weights, int64_t classes,
                 bool hasIgnoreIndex, int64_t ignoreIndex, int64_t i,
                 int64_t &label, double &weight) {
  label = readInt(labels, i);
  return labelClassWeight(label, weights, classes, hasIgnoreIndex, ignoreIndex,
                          weight);
}

Status labelError(const std::string &what, const Tensor &labels, int64_t i,
                  int64_t classes) {
  return Status::error(what + ": label " + std::to_string(readInt(labels, i)) +
                       " at flat position " + std::to_string(i) +
                       " is outside [0, " + std::to_string(classes) +
                       ") and not the ignore index");
}

//===----------------------------------------------------------------------===//
// Optimisers
//===----------------------------------------------------------------------===//

} // namespace

Status dropout(Context &ctx, const Tensor &x, float ratio, bool training,
               uint64_t seed, uint64_t offset, Tensor &y, Tensor &mask) {
  // F16 / BF16 through f32 (the mask passes through).
  if (anyFloat16(x, y)) {
    PP_RT_TRY(expectSameDType("dropout", {&x, &y}));
    Float16Widening w(ctx);
    return w.finish(
        dropout(ctx, w.in(x), ratio, training, seed, offset, w.out(y), mask));
  }
  PP_RT_TRY(checkDropout(x, ratio, y, mask));
  uint8_t *md = mask.as<uint8_t>();
  int64_t count = x.numel();
  // Inference and ratio 0 keep everything unscaled.
  if (!training || ratio == 0.f) {
    if (y.data != x.data && count > 0)
      std::memmove(y.data, x.data, x.bytes());
    if (count > 0)
      std::memset(md, 1, count);
    return Status::success();
  }
  uint64_t threshold = keepThreshold(ratio);
  double scale = keepScale(ratio);
  PP_RT_FLOAT_DISPATCH(x.dtype, "dropout", {
    const T *xd = x.as<T>();
    T *yd = y.as<T>();
    T s = T(scale);
    parallelFor(ctx, count, elementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        bool keep = keepElement(seed, offset + uint64_t(i), threshold);
        md[i] = keep;
        yd[i] = keep ? xd[i] * s : T(0);
      }
    });
  });
  return Status::success();
}

Status dropoutGrad(Context &ctx, const Tensor &dy, const Tensor &mask,
                   float ratio, Tensor &dx) {
  if (anyFloat16(dy, dx)) {
    PP_RT_TRY(expectSameDType("dropoutGrad", {&dy, &dx}));
    Float16Widening w(ctx);
    return w.finish(dropoutGrad(ctx, w.in(dy), mask, ratio, w.out(dx)));
  }
  PP_RT_TRY(checkDropoutGrad(dy, mask, ratio, dx));
  const uint8_t *md = mask.as<uint8_t>();
  double scale = keepScale(ratio);
  PP_RT_FLOAT_DISPATCH(dy.dtype, "dropoutGrad", {
    const T *dyd = dy.as<T>();
    T *dxd = dx.as<T>();
    T s = T(scale);
    parallelFor(ctx, dy.numel(), elementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        dxd[i] = md[i] ? dyd[i] * s : T(0);
    });
  });
  return Status::success();
}

Status softmaxCrossEntropy(Context &ctx, const Tensor &scores,
                           const Tensor &labels, const Tensor *weights,
                           bool hasIgnoreIndex, int64_t ignoreIndex,
                           const std::string &reduction, Tensor &loss,
                           Tensor &logProb) {
  const std::string what = "softmaxCrossEntropy";
  // F16 / BF16 through f32 (the labels pass through).
  if (anyFloat16(scores, weights, loss, logProb)) {
    PP_RT_TRY(expectSameDType(what, {&scores, weights, &loss, &logProb}));
    Float16Widening w(ctx);
    return w.finish(softmaxCrossEntropy(
        ctx, w.in(scores), labels, w.in(weights), hasIgnoreIndex, ignoreIndex,
        reduction, w.out(loss), w.out(logProb)));
  }
  SceShape ss;
  Reduction red;
  PP_RT_TRY(checkSoftmaxCrossEntropy(scores, labels, weights, reduction, loss,
                                     logProb, ss, red));
  std::vector<double> perLabel(ss.count()), perWeight(ss.count());
  std::vector<uint8_t> bad(ss.count(), 0);
  PP_RT_FLOAT_DISPATCH(scores.dtype, what, {
    const T *sd = scores.as<T>();
    T *lp = logProb.as<T>();
    const T *wd = weights ? weights->as<T>() : nullptr;
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ss.c));
    // One task per label: log-softmax over the class column, then pick.
    parallelFor(ctx, ss.count(), grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t n = i / ss.inner, pos = i % ss.inner;
        int64_t base = n * ss.c * ss.inner + pos;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < ss.c; ++c)
          mx = std::max(mx, double(sd[base + c * ss.inner]));
        double sum = 0;
        for (int64_t c = 0; c < ss.c; ++c)
          sum += std::exp(double(sd[base + c * ss.inner]) - mx);
        double logSum = mx + std::log(sum);
        for (int64_t c = 0; c < ss.c; ++c)
          lp[base + c * ss.inner] = T(double(sd[base + c * ss.inner]) - logSum);
        int64_t label;
        double w = 0;
        if (!labelWeight(labels, wd, ss.c, hasIgnoreIndex, ignoreIndex, i,
                         label, w)) {
          bad[i] = 1;
          continue;
        }
        perWeight[i] = w;
        perLabel[i] = w == 0 ? 0.0 : -w * double(lp[base + label * ss.inner]);
      }
    });
    for (int64_t i = 0; i < ss.count(); ++i)
      if (bad[i])
        return labelError(what, labels, i, ss.c);
    T *ld = loss.as<T>();
    if (red == Reduction::None) {
      for (int64_t i = 0; i < ss.count(); ++i)
        ld[i] = T(perLabel[i]);
    } else {
      double total = 0;
      double totalWeight = 0;
      for (int64_t i = 0; i < ss.count(); ++i) {
        total += perLabel[i];
        totalWeight += perWeight[i];
      }
      // ONNX divides by the summed weight of the counted labels (their
      // number without weights); all labels ignored gives 0 / 0 = NaN.
      ld[0] = T(red == Reduction::Sum ? total : total / totalWeight);
    }
  });
  return Status::success();
}

Status softmaxCrossEntropyGrad(Context &ctx, const Tensor &dloss,
                               const Tensor &logProb, const Tensor &labels,
                               const Tensor *weights, bool hasIgnoreIndex,
                               int64_t ignoreIndex,
                               const std::string &reduction, Tensor &dscores) {
  const std::string what = "softmaxCrossEntropyGrad";
  if (anyFloat16(dloss, logProb, weights, dscores)) {
    PP_RT_TRY(expectSameDType(what, {&logProb, weights, &dloss, &dscores}));
    Float16Widening w(ctx);
    return w.finish(softmaxCrossEntropyGrad(
        ctx, w.in(dloss), w.in(logProb), labels, w.in(weights), hasIgnoreIndex,
        ignoreIndex, reduction, w.out(dscores)));
  }
  SceShape ss;
  Reduction red;
  PP_RT_TRY(checkSoftmaxCrossEntropyGrad(dloss, logProb, labels, weights,
                                         reduction, dscores, ss, red));
  PP_RT_FLOAT_DISPATCH(logProb.dtype, what, {
    const T *lp = logProb.as<T>();
    const T *wd = weights ? weights->as<T>() : nullptr;
    const T *dl = dloss.as<T>();
    T *ds = dscores.as<T>();
    // Per-label coefficient w_i * dloss_i (scaled by 1 / total weight for
    // mean); validates every label before writing anything.
    std::vector<double> coef(ss.count());
    double totalWeight = 0;
    for (int64_t i = 0; i < ss.count(); ++i) {
      int64_t label;
      if (!labelWeight(labels, wd, ss.c, hasIgnoreIndex, ignoreIndex, i, label,
                       coef[i]))
        return labelError(what, labels, i, ss.c);
      totalWeight += coef[i];
    }
    for (int64_t i = 0; i < ss.count(); ++i) {
      if (red == Reduction::None)
        coef[i] *= double(dl[i]);
      else if (red == Reduction::Sum)
        coef[i] *= double(dl[0]);
      else // all ignored: every coefficient is 0, keep the gradient 0
        coef[i] = coef[i] == 0 ? 0.0 : coef[i] * double(dl[0]) / totalWeight;
    }
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ss.c));
    // d(-w * logp[label]) / dscores[c] = w * (softmax[c] - [c == label]).
    parallelFor(ctx, ss.count(), grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t n = i / ss.inner, pos = i % ss.inner;
        int64_t base = n * ss.c * ss.inner + pos;
        int64_t label = readInt(labels, i);
        for (int64_t c = 0; c < ss.c; ++c) {
          int64_t at = base + c * ss.inner;
          double g = coef[i] == 0 ? 0.0
                                  : coef[i] * (std::exp(double(lp[at])) -
                                               (c == label ? 1.0 : 0.0));
          ds[at] = T(g);
        }
      }
    });
  });
  return Status::success();
}

Status sgdStep(Context &ctx, Tensor &param, const Tensor &grad,
               Tensor *momentumBuffer, int64_t step, double lr, double momentum,
               double dampening, double weightDecay, bool nesterov) {
  // F16 / BF16: param and the momentum buffer (read only with a momentum)
  // are widened, updated in f32 and rounded back.
  Tensor *buffer = momentum != 0.0 ? momentumBuffer : nullptr;
  void *target = updateTargetOf(ctx, param);
  if (target != param.data && anyFloat16(param, grad, buffer)) {
    // 16 bits are widened anyway: update a copy in place.
    PP_RT_TRY(expectSameDType("sgdStep", {&param, &grad, buffer}));
    std::memcpy(target, param.data, static_cast<size_t>(param.bytes()));
    Tensor updated{target, param.dtype, param.shape};
    return sgdStep(ctx, updated, grad, momentumBuffer, step, lr, momentum,
                   dampening, weightDecay, nesterov);
  }
  if (anyFloat16(param, grad, buffer)) {
    PP_RT_TRY(expectSameDType("sgdStep", {&param, &grad, buffer}));
    Float16Widening w(ctx);
    return w.finish(sgdStep(ctx, w.inout(param), w.in(grad), w.inout(buffer),
                            step, lr, momentum, dampening, weightDecay,
                            nesterov));
  }
  PP_RT_TRY(
      checkSgdStep(param, grad, momentumBuffer, momentum, dampening, nesterov));
  // torch initialises the buffer with the first gradient: step counts from 1.
  bool first = step <= 1;
  PP_RT_FLOAT_DISPATCH(param.dtype, "sgdStep", {
    const T *p = param.as<T>();
    T *out = static_cast<T *>(target); // p itself unless out of place
    const T *g = grad.as<T>();
    T *buf = momentum != 0.0 ? momentumBuffer->as<T>() : nullptr;
    T lrT = T(lr);
    T mu = T(momentum);
    // torch computes 1 - dampening and 1 - lr * wd in double, then rounds.
    T damp = T(1.0 - dampening);
    T wd = T(weightDecay);
    // Plain SGD gets its own loop: one fused multiply-add per element, which
    // the compiler vectorises (the general loop's branches stay inside).
    if (!buf && wd == T(0)) {
      parallelFor(ctx, param.numel(), elementGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      out[i] = p[i] - lrT * g[i];
                  });
      return Status::success();
    }
    parallelFor(ctx, param.numel(), elementGrain,
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    out[i] = sgdUpdate(p[i], g[i], buf ? buf + i : nullptr,
                                       first, lrT, mu, damp, wd, nesterov);
                });
  });
  return Status::success();
}

Status adamStep(Context &ctx, Tensor &param, const Tensor &grad, Tensor &m,
                Tensor &v, int64_t step, double lr, double beta1, double beta2,
                double epsilon, double weightDecay, bool decoupled) {
  void *target = updateTargetOf(ctx, param);
  if (target != param.data && anyFloat16(param, grad, m, v)) {
    // 16 bits are widened anyway: update a copy in place.
    PP_RT_TRY(expectSameDType("adamStep", {&param, &grad, &m, &v}));
    std::memcpy(target, param.data, static_cast<size_t>(param.bytes()));
    Tensor updated{target, param.dtype, param.shape};
    return adamStep(ctx, updated, grad, m, v, step, lr, beta1, beta2, epsilon,
                    weightDecay, decoupled);
  }
  // F16 / BF16: param, m and v are widened, updated in f32, rounded back.
  if (anyFloat16(param, grad, m, v)) {
    PP_RT_TRY(expectSameDType("adamStep", {&param, &grad, &m, &v}));
    Float16Widening w(ctx);
    return w.finish(adamStep(ctx, w.inout(param), w.in(grad), w.inout(m),
                             w.inout(v), step, lr, beta1, beta2, epsilon,
                             weightDecay, decoupled));
  }
  PP_RT_TRY(checkAdamStep(param, grad, m, v, step));
  // torch: step_size = lr / (1 - beta1^t), denom = sqrt(v) / sqrt(1 -
  // beta2^t) + eps, p -= step_size * m / denom.
  double bc1 = 1.0 - std::pow(beta1, double(step));
  double bc2Sqrt = std::sqrt(1.0 - std::pow(beta2, double(step)));
  PP_RT_FLOAT_DISPATCH(param.dtype, "adamStep", {
    const T *p = param.as<T>();
    T *out = static_cast<T *>(target); // p itself unless out of place
    T *md = m.as<T>();
    T *vd = v.as<T>();
    const T *g = grad.as<T>();
    // Field by field: the dispatch macro would split a braced list.
    AdamCoefficients<T> c;
    c.b1 = T(beta1);
    c.oneMinusB1 = T(1.0 - beta1);
    c.b2 = T(beta2);
    c.oneMinusB2 = T(1.0 - beta2);
    c.eps = T(epsilon);
    c.wd = T(weightDecay);
    c.stepSize = T(lr / bc1);
    c.bc2 = T(bc2Sqrt);
    c.decay = T(1.0 - lr * weightDecay);
    parallelFor(ctx, param.numel(), elementGrain,
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    out[i] = adamUpdate(p[i], g[i], md[i], vd[i], c, decoupled);
                });
  });
  return Status::success();
}

} // namespace pp::rt
