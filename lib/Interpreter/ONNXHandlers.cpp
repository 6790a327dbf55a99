//===- ONNXHandlers.cpp - Interpreter handlers of the onnx dialect -*- C++ -*-//
//
// One handler per onnx op: reads attributes through the generated op classes
// and operand buffers, allocates results of the op's (static) result types,
// and calls the CPU kernels. Shape-like operands (Reshape shape, Slice
// starts, ...) are read from their buffers at run time and checked against
// the static result types, so a wrong folder or importer shows up as an
// error instead of a silently wrong result.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Utils/KernelParams.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Interpreter/Interpreter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace pp::interp;
namespace onnx = pp::onnx;
namespace pipeline = pp::pipeline;
namespace rt = pp::rt;

namespace {

/// Registers `fn(Interpreter &, OpTy)` as the handler of OpTy.
template <typename OpTy, typename Fn> void on(Interpreter &interp, Fn fn) {
  interp.registerHandler(OpTy::getOperationName(),
                         [fn](Interpreter &in, Operation *op) -> LogicalResult {
                           return fn(in, cast<OpTy>(op));
                         });
}

/// Allocates the op's single result and runs `body` on it; a failing status
/// becomes a diagnostic naming `kernel`.
template <typename Body>
LogicalResult withResult(Interpreter &in, Operation *op, StringRef kernel,
                         Body body) {
  auto y = in.allocResult(op, op->getResult(0));
  if (failed(y))
    return failure();
  return in.check(op, body(y->view()), kernel);
}

ArrayRef<int64_t> resultShape(Operation *op, unsigned index = 0) {
  return cast<RankedTensorType>(op->getResult(index).getType()).getShape();
}

/// Fails unless `shape`, computed at run time, is the static result shape.
LogicalResult expectResultShape(Operation *op, ArrayRef<int64_t> shape,
                                unsigned index = 0) {
  ArrayRef<int64_t> expected = resultShape(op, index);
  if (shape == expected)
    return success();
  auto diag = op->emitError() << "run-time shape [";
  llvm::interleaveComma(shape, diag);
  diag << "] differs from the result type " << op->getResult(index).getType();
  return diag;
}

/// Makes `x` the dtype `dtype` (a copy through the cast kernel when needed).
FailureOr<Tensor> castTo(Interpreter &in, Operation *op, const Tensor &x,
                         rt::DType dtype) {
  if (x.dtype() == dtype)
    return x;
  Tensor y(dtype, x.shape());
  if (failed(in.check(op, rt::cast(in.kernelContext(), x.view(), y.view()),
                      "cast")))
    return failure();
  return y;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Every op whose ODS definition names a unary kernel (ONNX_UnaryKernel)
/// runs it: the kind, alpha and beta come from its KernelFactsOpInterface.
template <typename OpTy> void addUnaryKernel(Interpreter &interp) {
  if constexpr (OpTy::template hasTrait<onnx::OpTrait::UnaryKernel>())
    on<OpTy>(interp, [](Interpreter &in, OpTy op) -> LogicalResult {
      auto facts = cast<onnx::KernelFactsOpInterface>(op.getOperation());
      return withResult(in, op, "unary", [&](rt::Tensor &y) {
        return rt::unary(in.kernelContext(), *facts.getUnaryKind(),
                         in.operand(op, 0).view(), y, facts.getUnaryAlpha(),
                         facts.getUnaryBeta());
      });
    });
}

template <typename... Ops> void addUnaryKernels(Interpreter &interp) {
  (addUnaryKernel<Ops>(interp), ...);
}

/// Softmax and LogSoftmax along the op's axis.
template <typename OpTy> void addSoftmax(Interpreter &interp, bool logarithm) {
  on<OpTy>(interp, [logarithm](Interpreter &in, OpTy op) -> LogicalResult {
    const Tensor &x = in.lookup(op.getInput());
    auto axis =
        onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()), x.rank());
    if (failed(axis))
      return failure();
    return withResult(in, op, "softmax", [&](rt::Tensor &y) {
      return rt::softmax(in.kernelContext(), x.view(), *axis, logarithm, y);
    });
  });
}

template <typename OpTy>
void addBinary(Interpreter &interp, rt::BinaryKind kind) {
  on<OpTy>(interp, [kind](Interpreter &in, OpTy op) -> LogicalResult {
    return withResult(in, op, "binary", [&](rt::Tensor &c) {
      return rt::binary(in.kernelContext(), kind, in.operand(op, 0).view(),
                        in.operand(op, 1).view(), c);
    });
  });
}

/// Unary kernels, Identity and the binary arithmetic and comparisons.
void registerArithmetic(Interpreter &interp) {
  addUnaryKernels<
#define GET_OP_LIST
#include "pp/Dialect/ONNX/IR/ONNXOps.cpp.inc"
      >(interp);

  on<onnx::IdentityOp>(
      interp, [](Interpreter &in, onnx::IdentityOp op) -> LogicalResult {
        return in.setResult(op, op.getY(), in.lookup(op.getX()));
      });

  using B = rt::BinaryKind;
  addBinary<onnx::AddOp>(interp, B::Add);
  addBinary<onnx::SubOp>(interp, B::Sub);
  addBinary<onnx::MulOp>(interp, B::Mul);
  addBinary<onnx::DivOp>(interp, B::Div);
  addBinary<onnx::MaxOp>(interp, B::Max);
  addBinary<onnx::MinOp>(interp, B::Min);
  addBinary<onnx::EqualOp>(interp, B::Equal);
  addBinary<onnx::LessOp>(interp, B::Less);
  addBinary<onnx::GreaterOp>(interp, B::Greater);
  addBinary<onnx::AndOp>(interp, B::And);
  addBinary<onnx::OrOp>(interp, B::Or);
  on<onnx::ModOp>(interp, [](Interpreter &in, onnx::ModOp op) -> LogicalResult {
    return withResult(in, op, "binary", [&](rt::Tensor &c) {
      return rt::binary(in.kernelContext(), op.getFmod() ? B::FMod : B::Mod,
                        in.operand(op, 0).view(), in.operand(op, 1).view(), c);
    });
  });

  on<onnx::PowOp>(interp, [](Interpreter &in, onnx::PowOp op) -> LogicalResult {
    const Tensor &x = in.lookup(op.getX()), &y = in.lookup(op.getY());
    if (x.dtype() == y.dtype())
      return withResult(in, op, "binary", [&](rt::Tensor &z) {
        return rt::binary(in.kernelContext(), B::Pow, x.view(), y.view(), z);
      });
    // Mixed element types (ONNX allows e.g. float ** int): compute in f64,
    // then convert to X's type as the result type says.
    auto x64 = castTo(in, op, x, rt::DType::F64);
    auto y64 = castTo(in, op, y, rt::DType::F64);
    if (failed(x64) || failed(y64))
      return failure();
    Tensor z64(rt::DType::F64, resultShape(op));
    if (failed(in.check(op,
                        rt::binary(in.kernelContext(), B::Pow, x64->view(),
                                   y64->view(), z64.view()),
                        "binary")))
      return failure();
    return withResult(in, op, "cast", [&](rt::Tensor &z) {
      return rt::cast(in.kernelContext(), z64.view(), z);
    });
  });
}

/// Where, Clip and Cast pick or convert elements; Dropout masks them.
void registerSelectAndConvert(Interpreter &interp) {
  on<onnx::WhereOp>(interp,
                    [](Interpreter &in, onnx::WhereOp op) -> LogicalResult {
                      return withResult(in, op, "where", [&](rt::Tensor &out) {
                        return rt::where(in.kernelContext(),
                                         in.lookup(op.getCondition()).view(),
                                         in.lookup(op.getX()).view(),
                                         in.lookup(op.getY()).view(), out);
                      });
                    });

  on<onnx::ClipOp>(
      interp, [](Interpreter &in, onnx::ClipOp op) -> LogicalResult {
        const Tensor *lo = in.lookupOptional(op.getMin());
        const Tensor *hi = in.lookupOptional(op.getMax());
        return withResult(in, op, "clip", [&](rt::Tensor &y) {
          return rt::clip(in.kernelContext(), in.lookup(op.getInput()).view(),
                          lo ? &lo->view() : nullptr,
                          hi ? &hi->view() : nullptr, y);
        });
      });

  on<onnx::CastOp>(interp,
                   [](Interpreter &in, onnx::CastOp op) -> LogicalResult {
                     return withResult(in, op, "cast", [&](rt::Tensor &y) {
                       return rt::cast(in.kernelContext(),
                                       in.lookup(op.getInput()).view(), y);
                     });
                   });

  on<onnx::DropoutOp>(
      interp, [](Interpreter &in, onnx::DropoutOp op) -> LogicalResult {
        // ONNX defaults: ratio 0.5, inference mode.
        float ratio = 0.5f;
        if (Value r = op.getRatio())
          ratio = static_cast<float>(in.lookup(r).getDouble(0));
        bool training = false;
        if (Value t = op.getTrainingMode())
          training = in.lookup(t).getInt(0) != 0;
        // The mask follows the op (its stream), the step and the element's
        // position in the whole mini-batch, never the stage or the order of
        // execution (DropoutHash.h).
        uint64_t seed = op.getSeed() ? static_cast<uint64_t>(*op.getSeed())
                                     : in.dropoutSeed(static_cast<uint64_t>(
                                           op.getStream().value_or(0)));
        const Tensor &x = in.lookup(op.getData());
        uint64_t offset = static_cast<uint64_t>(in.getRandomMicroBatch()) *
                          static_cast<uint64_t>(x.numel());
        auto y = in.allocResult(op, op.getOutput());
        auto mask = in.allocResult(op, op.getMask());
        if (failed(y) || failed(mask))
          return failure();
        return in.check(op,
                        rt::dropout(in.kernelContext(), x.view(), ratio,
                                    training, seed, offset, y->view(),
                                    mask->view()),
                        "dropout");
      });
}

//===----------------------------------------------------------------------===//
// Contractions, convolution, pooling, normalisation
//===----------------------------------------------------------------------===//

/// Rewrites row-major flat MaxPool indices as column-major ones
/// (storage_order = 1): offset (nc, h, w) becomes nc*H*W + w*H + h.
LogicalResult toColumnMajor(Operation *op, ArrayRef<int64_t> xShape,
                            Tensor &indices) {
  if (xShape.size() != 4)
    return op->emitError() << "MaxPool storage_order 1 is supported for 2-D "
                              "pooling only";
  int64_t h = xShape[2], w = xShape[3], plane = h * w;
  auto *data = indices.as<int64_t>();
  for (int64_t i = 0, e = indices.numel(); i < e; ++i) {
    int64_t nc = data[i] / plane, rest = data[i] % plane;
    data[i] = nc * plane + (rest % w) * h + rest / w;
  }
  return success();
}

/// ReduceMean, ReduceMax, ReduceMin: axes an attribute, none meaning all.
template <typename OpTy>
void addAttributeAxesReduce(Interpreter &interp, rt::ReduceKind kind) {
  on<OpTy>(interp, [kind](Interpreter &in, OpTy op) -> LogicalResult {
    const Tensor &x = in.lookup(op.getData());
    std::vector<int64_t> all(x.rank());
    std::iota(all.begin(), all.end(), 0);
    ArrayRef<int64_t> requested = all;
    if (auto axes = op.getAxes(); axes && !axes->empty())
      requested = *axes;
    auto axes = onnx::normalizeAxes(op, requested, x.rank());
    if (failed(axes))
      return failure();
    return withResult(in, op, "reduce", [&](rt::Tensor &y) {
      return rt::reduce(in.kernelContext(), kind, x.view(), *axes, y);
    });
  });
}

/// MatMul, Gemm and the convolutions.
void registerContractions(Interpreter &interp) {
  on<onnx::MatMulOp>(
      interp, [](Interpreter &in, onnx::MatMulOp op) -> LogicalResult {
        return withResult(in, op, "matmul", [&](rt::Tensor &y) {
          return rt::matmul(in.kernelContext(), in.lookup(op.getA()).view(),
                            in.lookup(op.getB()).view(), y);
        });
      });

  on<onnx::GemmOp>(
      interp, [](Interpreter &in, onnx::GemmOp op) -> LogicalResult {
        const Tensor *c = in.lookupOptional(op.getC());
        return withResult(in, op, "gemm", [&](rt::Tensor &y) {
          return rt::gemm(in.kernelContext(), in.lookup(op.getA()).view(),
                          in.lookup(op.getB()).view(), c ? &c->view() : nullptr,
                          op.getAlpha().convertToFloat(),
                          op.getBeta().convertToFloat(), op.getTransA() != 0,
                          op.getTransB() != 0, y, pipeline::getActivation(op));
        });
      });

  on<onnx::ConvOp>(
      interp, [](Interpreter &in, onnx::ConvOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getX()), &w = in.lookup(op.getW());
        const Tensor *b = in.lookupOptional(op.getB());
        if (w.rank() < 3)
          return op.emitError() << "Conv weights must have rank >= 3";
        auto params = onnx::windowParams(
            op, x.shape(), resultShape(op), w.shape().drop_front(2),
            op.getAutoPad(), op.getPads(), op.getStrides(), op.getDilations());
        if (failed(params))
          return failure();
        params->group = static_cast<int64_t>(op.getGroup());
        return withResult(in, op, "conv", [&](rt::Tensor &y) {
          return rt::conv(in.kernelContext(), x.view(), w.view(),
                          b ? &b->view() : nullptr, *params, y,
                          pipeline::getActivation(op));
        });
      });

  on<onnx::ConvTransposeOp>(
      interp, [](Interpreter &in, onnx::ConvTransposeOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getX()), &w = in.lookup(op.getW());
        const Tensor *b = in.lookupOptional(op.getB());
        rt::WindowParams params = onnx::convTransposeParams(op);
        return withResult(in, op, "convTranspose", [&](rt::Tensor &y) {
          return rt::convTranspose(in.kernelContext(), x.view(), w.view(),
                                   b ? &b->view() : nullptr, params, y);
        });
      });
}

/// MaxPool, with integer inputs pooled through f64, and its indices in the
/// storage order the op asks for.
LogicalResult runMaxPool(Interpreter &in, onnx::MaxPoolOp op) {
  const Tensor &x = in.lookup(op.getX());
  auto params = onnx::windowParams(
      op, x.shape(), resultShape(op), op.getKernelShape(), op.getAutoPad(),
      op.getPads(), op.getStrides(), op.getDilations());
  if (failed(params))
    return failure();
  auto y = in.allocResult(op, op.getY());
  auto indices = in.allocResult(op, op.getIndices());
  if (failed(y) || failed(indices))
    return failure();
  // The kernel pools floats; ONNX also allows integers, which f64 holds
  // exactly (up to 2^53), so pool those in f64.
  bool isFloat = x.dtype() == rt::DType::F32 || x.dtype() == rt::DType::F64;
  Tensor input = x, pooled = *y;
  if (!isFloat) {
    auto converted = castTo(in, op, x, rt::DType::F64);
    if (failed(converted))
      return failure();
    input = *converted;
    pooled = Tensor(rt::DType::F64, y->shape());
  }
  if (failed(in.check(op,
                      rt::maxPool(in.kernelContext(), input.view(), *params,
                                  pooled.view(), &indices->view()),
                      "maxPool")))
    return failure();
  if (!isFloat &&
      failed(in.check(
          op, rt::cast(in.kernelContext(), pooled.view(), y->view()), "cast")))
    return failure();
  if (op.getStorageOrder() != 0)
    return toColumnMajor(op, x.shape(), *indices);
  return success();
}

void registerPooling(Interpreter &interp) {
  on<onnx::MaxPoolOp>(interp, runMaxPool);

  on<onnx::AveragePoolOp>(
      interp, [](Interpreter &in, onnx::AveragePoolOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getX());
        auto params = onnx::windowParams(
            op, x.shape(), resultShape(op), op.getKernelShape(),
            op.getAutoPad(), op.getPads(), op.getStrides(), std::nullopt);
        if (failed(params))
          return failure();
        return withResult(in, op, "avgPool", [&](rt::Tensor &y) {
          return rt::avgPool(in.kernelContext(), x.view(), *params,
                             op.getCountIncludePad() != 0, y);
        });
      });

  // Global pooling is a reduction over the spatial dims (kept as size 1).
  auto globalPool = [](rt::ReduceKind kind) {
    return [kind](Interpreter &in, Operation *op) -> LogicalResult {
      const Tensor &x = in.operand(op, 0);
      std::vector<int64_t> axes(std::max<int64_t>(x.rank() - 2, 0));
      std::iota(axes.begin(), axes.end(), 2);
      return withResult(in, op, "reduce", [&](rt::Tensor &y) {
        return rt::reduce(in.kernelContext(), kind, x.view(), axes, y);
      });
    };
  };
  interp.registerHandler(onnx::GlobalAveragePoolOp::getOperationName(),
                         globalPool(rt::ReduceKind::Mean));
  interp.registerHandler(onnx::GlobalMaxPoolOp::getOperationName(),
                         globalPool(rt::ReduceKind::Max));
}

/// BatchNormalization, LayerNormalization, the softmaxes and the softmax
/// cross-entropy loss.
void registerNormalization(Interpreter &interp) {
  on<onnx::BatchNormalizationOp>(
      interp,
      [](Interpreter &in, onnx::BatchNormalizationOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getX());
        bool training = op.getTrainingMode() != 0;
        auto y = in.allocResult(op, op.getY());
        auto mean = in.allocResult(op, op.getRunningMean());
        auto var = in.allocResult(op, op.getRunningVar());
        if (failed(y) || failed(mean) || failed(var))
          return failure();
        // The batch statistics are only needed by the gradient: scratch here.
        int64_t channels = x.rank() > 1 ? x.shape()[1] : 0;
        Tensor savedMean(x.dtype(), {channels}),
            savedInvStd(x.dtype(), {channels});
        return in.check(
            op,
            rt::batchNorm(
                in.kernelContext(), x.view(), in.lookup(op.getScale()).view(),
                in.lookup(op.getB()).view(),
                in.lookup(op.getInputMean()).view(),
                in.lookup(op.getInputVar()).view(),
                op.getEpsilon().convertToFloat(),
                op.getMomentum().convertToFloat(), training, y->view(),
                mean->view(), var->view(),
                training ? &savedMean.view() : nullptr,
                training ? &savedInvStd.view() : nullptr,
                op.getUnbiasedRunningVar(), pipeline::getActivation(op)),
            "batchNorm");
      });

  on<onnx::LayerNormalizationOp>(
      interp,
      [](Interpreter &in, onnx::LayerNormalizationOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getX());
        const Tensor *bias = in.lookupOptional(op.getB());
        auto axis = onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()),
                                        x.rank());
        if (failed(axis))
          return failure();
        // The kernel writes the statistics in their own float type
        // (stash_type 1: float32 whatever x's type).
        auto y = in.allocResult(op, op.getY());
        auto mean = in.allocResult(op, op.getMean());
        auto invStd = in.allocResult(op, op.getInvStdDev());
        if (failed(y) || failed(mean) || failed(invStd))
          return failure();
        return in.check(op,
                        rt::layerNorm(in.kernelContext(), x.view(),
                                      in.lookup(op.getScale()).view(),
                                      bias ? &bias->view() : nullptr, *axis,
                                      op.getEpsilon().convertToFloat(),
                                      y->view(), mean->view(), invStd->view()),
                        "layerNorm");
      });

  addSoftmax<onnx::SoftmaxOp>(interp, /*logarithm=*/false);
  addSoftmax<onnx::LogSoftmaxOp>(interp, /*logarithm=*/true);

  on<onnx::SoftmaxCrossEntropyLossOp>(
      interp,
      [](Interpreter &in, onnx::SoftmaxCrossEntropyLossOp op) -> LogicalResult {
        const Tensor *weights = in.lookupOptional(op.getWeights());
        std::optional<uint64_t> ignore = op.getIgnoreIndex();
        auto loss = in.allocResult(op, op.getOutput());
        auto logProb = in.allocResult(op, op.getLogProb());
        if (failed(loss) || failed(logProb))
          return failure();
        return in.check(
            op,
            rt::softmaxCrossEntropy(
                in.kernelContext(), in.lookup(op.getScores()).view(),
                in.lookup(op.getLabels()).view(),
                weights ? &weights->view() : nullptr, ignore.has_value(),
                ignore ? static_cast<int64_t>(*ignore) : 0,
                op.getReduction().str(), loss->view(), logProb->view()),
            "softmaxCrossEntropy");
      });
}

/// ReduceMean, ReduceMax, ReduceMin (axes an attribute) and ReduceSum (axes
/// an operand).
void registerReductions(Interpreter &interp) {
  addAttributeAxesReduce<onnx::ReduceMeanOp>(interp, rt::ReduceKind::Mean);
  addAttributeAxesReduce<onnx::ReduceMaxOp>(interp, rt::ReduceKind::Max);
  addAttributeAxesReduce<onnx::ReduceMinOp>(interp, rt::ReduceKind::Min);

  on<onnx::ReduceSumOp>(
      interp, [](Interpreter &in, onnx::ReduceSumOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getData());
        std::vector<int64_t> requested;
        if (Value axesValue = op.getAxes())
          requested = in.lookup(axesValue).toInts();
        if (requested.empty()) {
          // ONNX: no axes reduce everything, unless noop_with_empty_axes.
          if (op.getNoopWithEmptyAxes() != 0)
            return in.setResult(op, op.getReduced(), x);
          requested.resize(x.rank());
          std::iota(requested.begin(), requested.end(), 0);
        }
        auto axes = onnx::normalizeAxes(op, requested, x.rank());
        if (failed(axes))
          return failure();
        return withResult(in, op, "reduce", [&](rt::Tensor &y) {
          return rt::reduce(in.kernelContext(), rt::ReduceKind::Sum, x.view(),
                            *axes, y);
        });
      });
}

//===----------------------------------------------------------------------===//
// Globals, constants, data movement and shape ops
//===----------------------------------------------------------------------===//

/// Defines the result as `x` seen with the static result shape (no copy).
LogicalResult aliasResult(Interpreter &in, Operation *op, const Tensor &x) {
  ArrayRef<int64_t> shape = resultShape(op);
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  if (count != x.numel())
    return op->emitError() << "cannot view " << describe(x) << " as "
                           << op->getResult(0).getType();
  return in.setResult(op, op->getResult(0), x.reshaped(shape));
}

/// The ONNX Reshape target of `x` for `shape` (0 copies, -1 infers).
FailureOr<std::vector<int64_t>> reshapeTarget(Operation *op,
                                              ArrayRef<int64_t> input,
                                              std::vector<int64_t> shape,
                                              bool allowZero) {
  int64_t total = 1, known = 1, inferIndex = -1;
  for (int64_t d : input)
    total *= d;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == 0 && !allowZero) {
      if (i >= input.size())
        return op->emitError()
               << "Reshape copies dim " << i << " that the input does not have";
      d = input[i];
    }
    if (d == -1) {
      if (inferIndex >= 0)
        return op->emitError() << "Reshape shape has more than one -1";
      inferIndex = i;
      continue;
    }
    if (d < 0)
      return op->emitError() << "Reshape shape has a negative dim " << d;
    known *= d;
  }
  if (inferIndex >= 0) {
    if (known == 0 || total % known != 0)
      return op->emitError() << "Reshape cannot infer the -1 dim";
    shape[inferIndex] = total / known;
  }
  return shape;
}

/// GlobalRead, Constant and ConstantOfShape: values that come from no
/// operand.
void registerValueSources(Interpreter &interp) {
  on<onnx::GlobalReadOp>(
      interp, [](Interpreter &in, onnx::GlobalReadOp op) -> LogicalResult {
        const Tensor *value = in.getGlobal(op.getGlobal());
        if (!value)
          return op.emitError() << "no global named '" << op.getGlobal() << "'";
        return in.setResult(op, op.getValue(), *value);
      });

  on<onnx::ConstantOp>(
      interp, [](Interpreter &in, onnx::ConstantOp op) -> LogicalResult {
        auto value = in.getConstant(op, op.getValue());
        if (failed(value))
          return failure();
        return in.setResult(op, op.getOutput(), **value);
      });

  on<onnx::ConstantOfShapeOp>(
      interp, [](Interpreter &in, onnx::ConstantOfShapeOp op) -> LogicalResult {
        std::vector<int64_t> shape = in.lookup(op.getInput()).toInts();
        if (failed(expectResultShape(op, shape)))
          return failure();
        auto y = in.allocResult(op, op.getOutput());
        if (failed(y))
          return failure();
        if (!op.getValueAttr())
          return success(); // zeros
        auto value = in.getConstant(op, op.getValueAttr());
        if (failed(value))
          return failure();
        if ((*value)->numel() != 1)
          return op.emitError()
                 << "ConstantOfShape value must have one element";
        // Broadcast the value (as a scalar) exactly, whatever its dtype.
        Tensor scalar = (*value)->reshaped({});
        return in.check(
            op, rt::expand(in.kernelContext(), scalar.view(), y->view()),
            "expand");
      });
}

/// Shape and the ops that only view their input with another shape.
void registerShapeViews(Interpreter &interp) {
  on<onnx::ShapeOp>(
      interp, [](Interpreter &in, onnx::ShapeOp op) -> LogicalResult {
        ArrayRef<int64_t> dims = in.lookup(op.getData()).shape();
        int64_t rank = dims.size();
        auto clampDim = [&](int64_t v) {
          return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank);
        };
        int64_t start = clampDim(static_cast<int64_t>(op.getStart()));
        int64_t end =
            op.getEnd() ? clampDim(static_cast<int64_t>(*op.getEnd())) : rank;
        std::vector<int64_t> values(dims.begin() + start,
                                    dims.begin() + std::max(start, end));
        return in.setResult(
            op, op.getShape(),
            Tensor::fromValues<int64_t>(rt::DType::I64,
                                        {int64_t(values.size())}, values));
      });

  on<onnx::FlattenOp>(interp,
                      [](Interpreter &in, onnx::FlattenOp op) -> LogicalResult {
                        return aliasResult(in, op, in.lookup(op.getInput()));
                      });

  on<onnx::ReshapeOp>(
      interp, [](Interpreter &in, onnx::ReshapeOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getData());
        auto target =
            reshapeTarget(op, x.shape(), in.lookup(op.getShape()).toInts(),
                          op.getAllowzero() != 0);
        if (failed(target) || failed(expectResultShape(op, *target)))
          return failure();
        return aliasResult(in, op, x);
      });

  on<onnx::SqueezeOp>(
      interp, [](Interpreter &in, onnx::SqueezeOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getData());
        std::vector<bool> drop(x.rank(), false);
        if (Value axesValue = op.getAxes()) {
          auto axes =
              onnx::normalizeAxes(op, in.lookup(axesValue).toInts(), x.rank());
          if (failed(axes))
            return failure();
          for (int64_t a : *axes)
            drop[a] = true;
        } else {
          for (int64_t i = 0; i < x.rank(); ++i)
            drop[i] = x.shape()[i] == 1;
        }
        std::vector<int64_t> shape;
        for (int64_t i = 0; i < x.rank(); ++i) {
          if (drop[i] && x.shape()[i] != 1)
            return op.emitError()
                   << "Squeeze axis " << i << " has size " << x.shape()[i];
          if (!drop[i])
            shape.push_back(x.shape()[i]);
        }
        if (failed(expectResultShape(op, shape)))
          return failure();
        return aliasResult(in, op, x);
      });

  on<onnx::UnsqueezeOp>(
      interp, [](Interpreter &in, onnx::UnsqueezeOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getData());
        std::vector<int64_t> requested = in.lookup(op.getAxes()).toInts();
        int64_t rank = x.rank() + requested.size();
        auto axes = onnx::normalizeAxes(op, requested, rank);
        if (failed(axes))
          return failure();
        if (axes->size() != requested.size())
          return op.emitError() << "Unsqueeze axes repeat";
        std::vector<int64_t> shape;
        for (int64_t i = 0, next = 0; i < rank; ++i)
          shape.push_back(llvm::is_contained(*axes, i) ? 1 : x.shape()[next++]);
        if (failed(expectResultShape(op, shape)))
          return failure();
        return aliasResult(in, op, x);
      });
}

/// Split into the sizes of its `split` operand or, without it, in equal
/// parts; every part checked against its static result shape.
LogicalResult runSplit(Interpreter &in, onnx::SplitOp op) {
  const Tensor &x = in.lookup(op.getInput());
  auto axis =
      onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()), x.rank());
  if (failed(axis))
    return failure();
  int64_t dim = x.shape()[*axis];
  std::vector<int64_t> sizes;
  if (Value split = op.getSplit()) {
    sizes = in.lookup(split).toInts();
    if (llvm::any_of(sizes, [](int64_t s) { return s < 0; }) ||
        std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
      return op.emitError() << "Split sizes do not sum to dim " << dim;
  } else {
    // Equal parts, the last one smaller (ONNX 18's num_outputs rule).
    int64_t n = op->getNumResults(), chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  if (sizes.size() != op->getNumResults())
    return op.emitError() << "Split into " << sizes.size()
                          << " parts, but the op has " << op->getNumResults()
                          << " results";
  std::vector<Tensor> outputs;
  std::vector<rt::Tensor *> views;
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
    shape[*axis] = sizes[i];
    if (failed(expectResultShape(op, shape, i)))
      return failure();
    auto y = in.allocResult(op, result);
    if (failed(y))
      return failure();
    outputs.push_back(*y);
  }
  for (Tensor &t : outputs)
    views.push_back(&t.view());
  return in.check(op, rt::split(in.kernelContext(), x.view(), *axis, views),
                  "split");
}

/// Transpose and Expand: copies that permute or broadcast the input.
void registerPermuteAndBroadcast(Interpreter &interp) {
  on<onnx::TransposeOp>(
      interp, [](Interpreter &in, onnx::TransposeOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getData());
        std::vector<int64_t> perm(x.rank());
        if (auto attr = op.getPerm(); attr && !attr->empty())
          perm.assign(attr->begin(), attr->end());
        else
          std::iota(perm.rbegin(), perm.rend(), 0);
        return withResult(in, op, "transpose", [&](rt::Tensor &y) {
          return rt::transpose(in.kernelContext(), x.view(), perm, y);
        });
      });

  on<onnx::ExpandOp>(
      interp, [](Interpreter &in, onnx::ExpandOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getInput());
        std::vector<int64_t> target = in.lookup(op.getShape()).toInts();
        // numpy broadcast of the input shape and the requested shape.
        size_t rank = std::max<size_t>(x.rank(), target.size());
        std::vector<int64_t> shape(rank);
        for (size_t i = 0; i < rank; ++i) {
          int64_t a =
              i < rank - x.rank() ? 1 : x.shape()[i - (rank - x.rank())];
          int64_t b =
              i < rank - target.size() ? 1 : target[i - (rank - target.size())];
          if (a != b && a != 1 && b != 1)
            return op.emitError() << "Expand shape is not broadcast-compatible";
          shape[i] = a == 1 ? b : a;
        }
        if (failed(expectResultShape(op, shape)))
          return failure();
        return withResult(in, op, "expand", [&](rt::Tensor &y) {
          return rt::expand(in.kernelContext(), x.view(), y);
        });
      });
}

/// Concat, Split, Slice and Pad: copies that join, cut or pad along axes.
void registerConcatSplitSlicePad(Interpreter &interp) {
  on<onnx::ConcatOp>(
      interp, [](Interpreter &in, onnx::ConcatOp op) -> LogicalResult {
        std::vector<const rt::Tensor *> inputs;
        for (Value v : op.getInputs())
          inputs.push_back(&in.lookup(v).view());
        auto axis = onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()),
                                        resultShape(op).size());
        if (failed(axis))
          return failure();
        return withResult(in, op, "concat", [&](rt::Tensor &y) {
          return rt::concat(in.kernelContext(), inputs, *axis, y);
        });
      });

  on<onnx::SplitOp>(interp, runSplit);

  on<onnx::SliceOp>(
      interp, [](Interpreter &in, onnx::SliceOp op) -> LogicalResult {
        const Tensor &x = in.lookup(op.getData());
        std::vector<int64_t> starts = in.lookup(op.getStarts()).toInts();
        std::vector<int64_t> ends = in.lookup(op.getEnds()).toInts();
        std::vector<int64_t> axes, steps;
        if (Value v = op.getAxes())
          axes = in.lookup(v).toInts();
        else
          for (size_t i = 0; i < starts.size(); ++i)
            axes.push_back(i);
        if (Value v = op.getSteps())
          steps = in.lookup(v).toInts();
        else
          steps.assign(starts.size(), 1);
        std::vector<int64_t> first, step, shape;
        if (failed(onnx::sliceParams(op, x.shape(), starts, ends, axes, steps,
                                     first, step, shape)))
          return failure();
        if (failed(expectResultShape(op, shape)))
          return failure();
        return withResult(in, op, "slice", [&](rt::Tensor &y) {
          return rt::slice(in.kernelContext(), x.view(), first, step, y);
        });
      });

  on<onnx::PadOp>(interp, [](Interpreter &in, onnx::PadOp op) -> LogicalResult {
    const Tensor &x = in.lookup(op.getData());
    std::vector<int64_t> pads = in.lookup(op.getPads()).toInts(), axes;
    if (Value v = op.getAxes())
      axes = in.lookup(v).toInts();
    double value = 0.0;
    if (Value v = op.getConstantValue())
      value = in.lookup(v).getDouble(0);
    auto mode = op.getPadMode();
    std::vector<int64_t> resolved, shape;
    if (failed(mode) ||
        failed(onnx::padParams(op, x.shape(), pads, axes, resolved, shape)) ||
        failed(expectResultShape(op, shape)))
      return failure();
    return withResult(in, op, "pad", [&](rt::Tensor &y) {
      return rt::pad(in.kernelContext(), x.view(), resolved, *mode, value, y);
    });
  });
}

void registerGatherScatter(Interpreter &interp) {
  on<onnx::GatherOp>(
      interp, [](Interpreter &in, onnx::GatherOp op) -> LogicalResult {
        const Tensor &data = in.lookup(op.getData());
        auto axis = onnx::normalizeAxis(op, static_cast<int64_t>(op.getAxis()),
                                        data.rank());
        if (failed(axis))
          return failure();
        return withResult(in, op, "gather", [&](rt::Tensor &y) {
          return rt::gather(in.kernelContext(), data.view(),
                            in.lookup(op.getIndices()).view(), *axis, y);
        });
      });

  on<onnx::ScatterNDOp>(
      interp, [](Interpreter &in, onnx::ScatterNDOp op) -> LogicalResult {
        FailureOr<rt::ScatterReduction> reduction = op.getScatterReduction();
        if (failed(reduction))
          return failure();
        return withResult(in, op, "scatterND", [&](rt::Tensor &y) {
          return rt::scatterND(
              in.kernelContext(), in.lookup(op.getData()).view(),
              in.lookup(op.getIndices()).view(),
              in.lookup(op.getUpdates()).view(), *reduction, y);
        });
      });
}

} // namespace

void pp::interp::registerONNXHandlers(Interpreter &interp) {
  registerArithmetic(interp);
  registerSelectAndConvert(interp);
  registerContractions(interp);
  registerPooling(interp);
  registerNormalization(interp);
  registerReductions(interp);
  registerValueSources(interp);
  registerShapeViews(interp);
  registerPermuteAndBroadcast(interp);
  registerConcatSplitSlicePad(interp);
  registerGatherScatter(interp);
}
