//===- Reduce.cpp - Reduction and softmax CPU kernels -----------*- C++ -*-===//
//
// Sum / Mean / Max over a set of axes, and softmax / log-softmax with their
// gradient. Float sums accumulate in double (as PyTorch's CPU kernels do);
// softmax subtracts the row max before exponentiating.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Dnnl.h"

namespace pp::rt {

using namespace cpu;

namespace {

/// Elements per thread below which a loop is not worth splitting.
constexpr int64_t kGrain = 1 << 14;

/// The index space of a reduction, split into kept dims (in output order)
/// and reduced dims, each with x's strides and coalesced.
struct ReducePlan {
  std::vector<int64_t> keptShape;
  std::array<std::vector<int64_t>, 1> keptStrides;
  std::vector<int64_t> redShape;
  std::array<std::vector<int64_t>, 1> redStrides;
  int64_t outputs = 1; // number of output elements
  int64_t count = 1;   // elements reduced into each output
};

ReducePlan makePlan(const std::vector<int64_t> &shape,
                    const std::vector<bool> &reduced) {
  ReducePlan plan;
  std::vector<int64_t> strides = stridesOf(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      plan.redShape.push_back(shape[d]);
      plan.redStrides[0].push_back(strides[d]);
      plan.count *= shape[d];
    } else {
      plan.keptShape.push_back(shape[d]);
      plan.keptStrides[0].push_back(strides[d]);
      plan.outputs *= shape[d];
    }
  }
  coalesceDims(plan.keptShape, plan.keptStrides);
  coalesceDims(plan.redShape, plan.redStrides);
  return plan;
}

/// y[o] = finish(fold of combine over the reduced elements of output o).
template <typename T, typename Acc, typename Combine, typename Finish>
void reduceLoop(const Context &ctx, const ReducePlan &plan, const T *px, T *py,
                Acc init, Combine combine, Finish finish) {
  int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(plan.count, 1));
  if (plan.redShape.size() == 1 && plan.keptShape.size() == 1 &&
      plan.keptStrides[0][0] == 1 && plan.redStrides[0][0] == plan.outputs) {
    // x is [count, outputs] reduced over rows (a bias gradient, say): walk
    // the rows contiguously with one accumulator per column rather than
    // striding down each column. The fold order per output is unchanged.
    parallelFor(ctx, plan.outputs, grain, [&](int64_t begin, int64_t end) {
      std::vector<Acc> acc(end - begin, init);
      for (int64_t r = 0; r < plan.count; ++r) {
        const T *row = px + r * plan.outputs + begin;
        for (int64_t k = 0; k < end - begin; ++k)
          acc[k] = combine(acc[k], row[k]);
      }
      for (int64_t k = 0; k < end - begin; ++k)
        py[begin + k] = finish(acc[k]);
    });
    return;
  }
  parallelFor(ctx, plan.outputs, grain, [&](int64_t begin, int64_t end) {
    forEachStrided(
        plan.keptShape, plan.keptStrides, begin, end,
        [&](int64_t o, const std::array<int64_t, 1> &base) {
          const T *start = px + base[0];
          Acc acc = init;
          if (plan.redShape.size() <= 1) {
            // The common case: one (coalesced) reduced dim, a plain loop.
            int64_t step = plan.redShape.empty() ? 0 : plan.redStrides[0][0];
            for (int64_t j = 0; j < plan.count; ++j)
              acc = combine(acc, start[j * step]);
          } else {
            forEachStrided(plan.redShape, plan.redStrides, 0, plan.count,
                           [&](int64_t, const std::array<int64_t, 1> &off) {
                             acc = combine(acc, start[off[0]]);
                           });
          }
          py[o] = finish(acc);
        });
  });
}

template <typename T>
Status reduceTyped(const Context &ctx, ReduceKind kind, const ReducePlan &plan,
                   const Tensor &x, Tensor &y) {
  const T *px = x.as<const T>();
  T *py = y.as<T>();
  const int64_t count = plan.count;
  if (kind == ReduceKind::Max) {
    // The max of an empty set is -inf (or the type's lowest), as ONNX says.
    T lowest = std::numeric_limits<T>::has_infinity
                   ? -std::numeric_limits<T>::infinity()
                   : std::numeric_limits<T>::lowest();
    reduceLoop(
        ctx, plan, px, py, lowest,
        [](T acc, T v) {
          // NaN wins, as in torch.amax.
          if constexpr (std::is_floating_point_v<T>)
            return (v > acc || std::isnan(v)) && !std::isnan(acc) ? v : acc;
          else
            return v > acc ? v : acc;
        },
        [](T acc) { return acc; });
    return Status::success();
  }
  if (kind == ReduceKind::Min) {
    // The min of an empty set is +inf (or the type's highest).
    T highest = std::numeric_limits<T>::has_infinity
                    ? std::numeric_limits<T>::infinity()
                    : std::numeric_limits<T>::max();
    reduceLoop(
        ctx, plan, px, py, highest,
        [](T acc, T v) {
          // NaN wins, as in torch.amin.
          if constexpr (std::is_floating_point_v<T>)
            return (v < acc || std::isnan(v)) && !std::isnan(acc) ? v : acc;
          else
            return v < acc ? v : acc;
        },
        [](T acc) { return acc; });
    return Status::success();
  }
  bool mean = kind == ReduceKind::Mean;
  if constexpr (std::is_floating_point_v<T>) {
    reduceLoop(
        ctx, plan, px, py, 0.0,
        [](double acc, T v) { return acc + static_cast<double>(v); },
        [=](double acc) {
          // 0 / 0 gives NaN for the mean of an empty set, as torch.mean.
          return static_cast<T>(mean ? acc / static_cast<double>(count) : acc);
        });
  } else {
    // Integer sums wrap in 64 bits; integer means truncate toward zero.
    reduceLoop(
        ctx, plan, px, py, uint64_t(0),
        [](uint64_t acc, T v) {
          return acc + static_cast<uint64_t>(static_cast<int64_t>(v));
        },
        [=](uint64_t acc) {
          if constexpr (std::is_unsigned_v<T>) {
            if (mean)
              acc = count > 0 ? acc / static_cast<uint64_t>(count) : 0;
            return static_cast<T>(acc);
          } else {
            int64_t sum = static_cast<int64_t>(acc);
            if (mean)
              sum = count > 0 ? sum / count : 0;
            return static_cast<T>(sum);
          }
        });
  }
  return Status::success();
}

/// Softmax along rows of length n strided by `inner`. With inner == 1 a row
/// is contiguous; otherwise each thread keeps `inner` running maxima and
/// sums so it still walks memory contiguously.
template <typename T>
void softmaxLoop(const Context &ctx, const T *px, T *py, int64_t outer,
                 int64_t n, int64_t inner, bool log) {
  int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(n * inner, 1));
  if (inner == 1) {
    parallelFor(ctx, outer, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T *xo = px + o * n;
        T *yo = py + o * n;
        T maxv = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < n; ++j)
          maxv = std::max(maxv, xo[j]);
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          T e = std::exp(xo[j] - maxv);
          sum += e;
          if (!log)
            yo[j] = e;
        }
        if (log) {
          T lse = static_cast<T>(std::log(sum));
          for (int64_t j = 0; j < n; ++j)
            yo[j] = (xo[j] - maxv) - lse;
        } else {
          T inv = static_cast<T>(1.0 / sum);
          for (int64_t j = 0; j < n; ++j)
            yo[j] *= inv;
        }
      }
    });
    return;
  }
  parallelFor(ctx, outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<T> maxv(inner);
    std::vector<double> sum(inner);
    for (int64_t o = begin; o < end; ++o) {
      const T *xo = px + o * n * inner;
      T *yo = py + o * n * inner;
      std::fill(maxv.begin(), maxv.end(), -std::numeric_limits<T>::infinity());
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i)
          maxv[i] = std::max(maxv[i], xo[j * inner + i]);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          T e = std::exp(xo[j * inner + i] - maxv[i]);
          sum[i] += e;
          if (!log)
            yo[j * inner + i] = e;
        }
      if (log) {
        // y = (x - max) - log(sum), the order PyTorch uses.
        for (int64_t i = 0; i < inner; ++i)
          sum[i] = std::log(sum[i]);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i)
            yo[j * inner + i] =
                (xo[j * inner + i] - maxv[i]) - static_cast<T>(sum[i]);
      } else {
        for (int64_t i = 0; i < inner; ++i)
          sum[i] = 1.0 / sum[i];
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i)
            yo[j * inner + i] *= static_cast<T>(sum[i]);
      }
    }
  });
}

/// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) *
/// sum(dy). The sums run along the axis.
template <typename T>
void softmaxGradLoop(const Context &ctx, const T *py, const T *pdy, T *pdx,
                     int64_t outer, int64_t n, int64_t inner, bool log) {
  int64_t grain =
      std::max<int64_t>(1, kGrain / std::max<int64_t>(n * inner, 1));
  parallelFor(ctx, outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> sum(inner);
    for (int64_t o = begin; o < end; ++o) {
      int64_t base = o * n * inner;
      const T *yo = py + base, *dyo = pdy + base;
      T *dxo = pdx + base;
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t k = j * inner + i;
          sum[i] += log ? static_cast<double>(dyo[k])
                        : static_cast<double>(dyo[k]) * yo[k];
        }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t k = j * inner + i;
          T s = static_cast<T>(sum[i]);
          dxo[k] = log ? dyo[k] - std::exp(yo[k]) * s : yo[k] * (dyo[k] - s);
        }
    }
  });
}

} // namespace

Status reduce(Context &ctx, ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &y) {
  const char *what = reduceName(kind);
  if (Status s = expectValid(x, what); !s.ok())
    return s;
  if (x.dtype == DType::Bool)
    return Status::error(std::string(what) + ": unsupported dtype " +
                         dtypeName(x.dtype));
  if (Status s = expectDType(y, x.dtype, what); !s.ok())
    return s;
  std::vector<bool> reduced;
  if (Status s = checkReduceAxes(what, x, axes, y, reduced); !s.ok())
    return s;
  if (Status s = expectValid(y, what); !s.ok())
    return s;
  // F16 / BF16 (y has x's dtype): accumulated in double as f32 is.
  if (anyFloat16(x)) {
    Float16Widening w(ctx);
    return w.finish(reduce(ctx, kind, w.in(x), axes, w.out(y)));
  }
  ReducePlan plan = makePlan(x.shape, reduced);
  if (plan.outputs == 0)
    return Status::success();
  return visitDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return reduceTyped<T>(ctx, kind, plan, x, y);
  });
}

Status softmax(Context &ctx, const Tensor &x, int64_t axis, bool log,
               Tensor &y) {
  const char *what = log ? "logSoftmax" : "softmax";
  if (Status s = expectValid(x, what); !s.ok())
    return s;
  if (Status s = expectDType(y, x.dtype, what); !s.ok())
    return s;
  if (Status s = expectShape(y, x.shape, what); !s.ok())
    return s;
  int64_t a = axis;
  if (!normalizeAxis(a, x.rank()))
    return Status::error(std::string(what) + ": axis " + std::to_string(axis) +
                         " out of range for rank " + std::to_string(x.rank()));
  // F16 / BF16 (y has x's dtype): through f32.
  if (anyFloat16(x)) {
    Float16Widening w(ctx);
    return w.finish(softmax(ctx, w.in(x), axis, log, w.out(y)));
  }
  int64_t outer, n, inner;
  splitAtAxis(x.shape, a, outer, n, inner);
  // F32 on oneDNN where it has a vectorised kernel (its exp is; the loop's
  // std::exp is not): 5x forward, 12x backward on maxvit_t's 49-wide rows.
  if (x.dtype == DType::F32 &&
      dnnlSoftmax(ctx, log, outer, n, inner, x.as<const float>(), nullptr,
                  nullptr, y.as<float>()))
    return Status::success();
  PP_RT_FLOAT_DISPATCH(x.dtype, what, {
    if (x.numel() > 0)
      softmaxLoop<T>(ctx, x.as<const T>(), y.as<T>(), outer, n, inner, log);
  });
  return Status::success();
}

Status softmaxGrad(Context &ctx, const Tensor &y, const Tensor &dy,
                   int64_t axis, bool log, Tensor &dx) {
  const char *what = log ? "logSoftmaxGrad" : "softmaxGrad";
  if (Status s = expectValid(y, what); !s.ok())
    return s;
  if (Status s = expectDType(dy, y.dtype, what); !s.ok())
    return s;
  if (Status s = expectShape(dy, y.shape, what); !s.ok())
    return s;
  if (Status s = expectDType(dx, y.dtype, what); !s.ok())
    return s;
  if (Status s = expectShape(dx, y.shape, what); !s.ok())
    return s;
  int64_t a = axis;
  if (!normalizeAxis(a, y.rank()))
    return Status::error(std::string(what) + ": axis " + std::to_string(axis) +
                         " out of range for rank " + std::to_string(y.rank()));
  // F16 / BF16 (dy and dx have y's dtype): through f32.
  if (anyFloat16(y)) {
    Float16Widening w(ctx);
    return w.finish(softmaxGrad(ctx, w.in(y), w.in(dy), axis, log, w.out(dx)));
  }
  int64_t outer, n, inner;
  splitAtAxis(y.shape, a, outer, n, inner);
  if (y.dtype == DType::F32 &&
      dnnlSoftmax(ctx, log, outer, n, inner, nullptr, y.as<const float>(),
                  dy.as<const float>(), dx.as<float>()))
    return Status::success();
  PP_RT_FLOAT_DISPATCH(y.dtype, what, {
    if (y.numel() > 0)
      softmaxGradLoop<T>(ctx, y.as<const T>(), dy.as<const T>(), dx.as<T>(),
                         outer, n, inner, log);
  });
  return Status::success();
}

} // namespace pp::rt
