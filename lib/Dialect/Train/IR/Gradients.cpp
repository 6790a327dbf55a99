//===- Gradients.cpp - Vector-Jacobian products of onnx ops -----*- C++ -*-===//
//
// GradientOpInterface models for the onnx ops, attached as external models.
// Each rule builds the operand adjoints from the result adjoints with onnx
// ops where the algebra is simple (broadcasting sums, matmuls, reshapes) and
// with train ops where a dedicated kernel is needed (convolution, pooling,
// normalisation, softmax, gather). Backward ops carry the forward op's
// location fused under "backward".
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;
namespace onnx = pp::onnx;
namespace rt = pp::rt;
namespace train = pp::train;

namespace {

/// Helpers shared by the rules; all ops get the backward location.
struct GradBuilder {
  OpBuilder &b;
  Location loc;

  GradBuilder(OpBuilder &b, Operation *forward)
      : b(b), loc(FusedLoc::get(b.getContext(), {forward->getLoc()},
                                b.getStringAttr("backward"))) {}

  RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  Value splat(RankedTensorType type, double value) {
    Type element = type.getElementType();
    Attribute scalar =
        isa<FloatType>(element)
            ? Attribute(b.getFloatAttr(element, value))
            : Attribute(b.getIntegerAttr(element, int64_t(value)));
    return onnx::ConstantOp::create(b, loc,
                                    DenseElementsAttr::get(type, scalar));
  }
  Value scalar(Value like, double value) {
    return splat(RankedTensorType::get({}, typeOf(like).getElementType()),
                 value);
  }
  Value i64s(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
    return onnx::ConstantOp::create(b, loc,
                                    DenseIntElementsAttr::get(type, values));
  }
  Value add(Value x, Value y) { return onnx::AddOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return onnx::MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return onnx::DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return onnx::NegOp::create(b, loc, x); }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape)
      return x;
    return onnx::ReshapeOp::create(b, loc, x, i64s(shape),
                                   b.getI64IntegerAttr(0));
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    return onnx::TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(perm));
  }
  /// Swaps the last two dims.
  Value transposeLast2(Value x) {
    SmallVector<int64_t> perm(typeOf(x).getRank());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    return transpose(x, perm);
  }
  /// alpha op(x) op(y), op a transpose where tx / ty.
  Value gemm(Value x, Value y, bool tx, bool ty, FloatAttr alpha = {}) {
    return onnx::GemmOp::create(b, loc, x, y, Value(),
                                alpha ? alpha : b.getF32FloatAttr(1.0),
                                b.getF32FloatAttr(0.0), b.getI64IntegerAttr(tx),
                                b.getI64IntegerAttr(ty));
  }
  Value expand(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape)
      return x;
    return onnx::ExpandOp::create(b, loc, x, i64s(shape));
  }
  /// Sums the broadcast dims of `grad` away so it has `target`'s type.
  Value reduceTo(Value grad, Type target) {
    if (grad.getType() == target)
      return grad;
    return train::ReduceSumToOp::create(b, loc, target, grad);
  }
};

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

LogicalResult fail(Operation *op, const Twine &why) {
  return op->emitError() << "no gradient: " << why;
}

/// Resolves auto_pad into explicit begin/end pads for a window op.
SmallVector<int64_t>
resolvePads(ArrayRef<int64_t> spatial, ArrayRef<int64_t> kernel,
            ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
            std::optional<ArrayRef<int64_t>> pads, StringRef autoPad) {
  size_t n = spatial.size();
  if (autoPad == "VALID")
    return SmallVector<int64_t>(2 * n, 0);
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") {
    if (pads && !pads->empty())
      return SmallVector<int64_t>(pads->begin(), pads->end());
    return SmallVector<int64_t>(2 * n, 0);
  }
  SmallVector<int64_t> result(2 * n, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t out = (spatial[i] + strides[i] - 1) / strides[i];
    int64_t effective = dilations[i] * (kernel[i] - 1) + 1;
    int64_t total =
        std::max<int64_t>(0, (out - 1) * strides[i] + effective - spatial[i]);
    int64_t small = total / 2, large = total - small;
    result[i] = autoPad == "SAME_UPPER" ? small : large;
    result[i + n] = autoPad == "SAME_UPPER" ? large : small;
  }
  return result;
}

SmallVector<int64_t> orDefault(std::optional<ArrayRef<int64_t>> values,
                               size_t n, int64_t fill) {
  if (values && !values->empty())
    return SmallVector<int64_t>(values->begin(), values->end());
  return SmallVector<int64_t>(n, fill);
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

using Grads = SmallVectorImpl<Value>;

/// Ops whose adjoint is a train.unary_grad of one kernel kind.
LogicalResult unaryRule(Operation *op, rt::UnaryKind kind, float alpha,
                        float beta, OpBuilder &b, ArrayRef<Value> dys,
                        Grads &dxs) {
  GradBuilder g(b, op);
  Value x = op->getOperand(0), y = op->getResult(0);
  // The kernel reads x or y, never both: name the one it reads twice, so
  // that the backward keeps (stashes) one tensor. Relu reads the sign of
  // x, which is y's (x > 0 iff y > 0, NaN included): y, which the next
  // layer keeps anyway, and x is left to the forward (a convolution can
  // then apply the Relu as it writes).
  if (rt::unaryGradReadsOutput(kind) || kind == rt::UnaryKind::Relu)
    x = y;
  else
    y = x;
  dxs.push_back(train::UnaryGradOp::create(
      b, g.loc, x.getType(), train::UnaryKindAttr::get(b.getContext(), kind), x,
      y, dys[0], b.getF32FloatAttr(alpha), b.getF32FloatAttr(beta)));
  return success();
}

/// Ops running a differentiable unary kernel (their KernelFactsOpInterface
/// says which): the adjoint is that kernel's train.unary_grad.
template <typename OpTy>
std::enable_if_t<OpTy::template hasTrait<onnx::OpTrait::UnaryKernel>(),
                 LogicalResult>
rule(OpTy op, OpBuilder &b, ArrayRef<Value> dys, Grads &dxs) {
  auto facts = cast<onnx::KernelFactsOpInterface>(op.getOperation());
  std::optional<rt::UnaryKind> kind = facts.getUnaryKind();
  if (!kind || !rt::hasUnaryGrad(*kind))
    return op.emitOpError("has no gradient rule");
  return unaryRule(op, *kind, facts.getUnaryAlpha(), facts.getUnaryBeta(), b,
                   dys, dxs);
}

LogicalResult rule(onnx::IdentityOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  dxs.push_back(dys[0]);
  return success();
}

LogicalResult rule(onnx::NegOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  dxs.push_back(GradBuilder(b, op).neg(dys[0]));
  return success();
}

template <typename SoftmaxLike>
LogicalResult softmaxRule(SoftmaxLike op, bool log, OpBuilder &b,
                          ArrayRef<Value> dys, Grads &dxs) {
  GradBuilder g(b, op);
  dxs.push_back(train::SoftmaxGradOp::create(
      b, g.loc, op.getType(), op.getOutput(), dys[0],
      b.getI64IntegerAttr(op.getAxis()), b.getBoolAttr(log)));
  return success();
}
LogicalResult rule(onnx::SoftmaxOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return softmaxRule(op, false, b, dys, dxs);
}
LogicalResult rule(onnx::LogSoftmaxOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return softmaxRule(op, true, b, dys, dxs);
}

LogicalResult rule(onnx::ClipOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  // dy passes where the input was not clipped.
  GradBuilder g(b, op);
  Value unclipped =
      onnx::EqualOp::create(b, g.loc, op.getOutput(), op.getInput());
  Value zero = g.scalar(dys[0], 0.0);
  dxs.push_back(onnx::WhereOp::create(b, g.loc, unclipped, dys[0], zero));
  return success();
}

LogicalResult rule(onnx::CastOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getInput()))
    return dxs.push_back(nullptr), success();
  GradBuilder g(b, op);
  Type inputElement = g.typeOf(op.getInput()).getElementType();
  dxs.push_back(onnx::CastOp::create(
      b, g.loc, dys[0],
      b.getI64IntegerAttr(onnx::getONNXDataTypeForFloat(inputElement))));
  return success();
}

LogicalResult rule(onnx::DropoutOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  bool training = false;
  if (Value mode = op.getTrainingMode()) {
    auto ints = onnx::getConstantInts(mode);
    if (!ints)
      return fail(op, "Dropout training_mode must be a constant");
    training = ints->front() != 0;
  }
  if (!training) {
    dxs.push_back(dys[0]);
    return success();
  }
  float ratio = 0.5f;
  if (Value r = op.getRatio()) {
    DenseFPElementsAttr attr;
    if (!matchPattern(r, m_Constant(&attr)))
      return fail(op, "Dropout ratio must be a constant");
    ratio = (*attr.getValues<APFloat>().begin()).convertToFloat();
  }
  // Ratio 0 keeps every element unscaled.
  if (ratio == 0.f) {
    dxs.push_back(dys[0]);
    return success();
  }
  dxs.push_back(train::DropoutGradOp::create(b, g.loc, dys[0].getType(), dys[0],
                                             op.getMask(),
                                             b.getF32FloatAttr(ratio)));
  return success();
}

LogicalResult rule(onnx::AddOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getC()))
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  dxs.push_back(g.reduceTo(dys[0], op.getA().getType()));
  dxs.push_back(g.reduceTo(dys[0], op.getB().getType()));
  return success();
}

LogicalResult rule(onnx::SubOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getC()))
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  dxs.push_back(g.reduceTo(dys[0], op.getA().getType()));
  dxs.push_back(g.reduceTo(g.neg(dys[0]), op.getB().getType()));
  return success();
}

LogicalResult rule(onnx::MulOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getC()))
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  dxs.push_back(g.reduceTo(g.mul(dys[0], op.getB()), op.getA().getType()));
  dxs.push_back(g.reduceTo(g.mul(dys[0], op.getA()), op.getB().getType()));
  return success();
}

LogicalResult rule(onnx::DivOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getC()))
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
  dxs.push_back(g.reduceTo(g.div(dys[0], op.getB()), op.getA().getType()));
  Value db = g.neg(g.div(g.mul(dys[0], op.getC()), op.getB()));
  dxs.push_back(g.reduceTo(db, op.getB().getType()));
  return success();
}

LogicalResult rule(onnx::ModOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getC())) // integer remainders have no gradient
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  // c = a - b trunc(a/b) (fmod = 1, the only float Mod), trunc locally
  // constant: dc/da = 1, dc/db = -trunc(a/b) = -(a - c)/b.
  dxs.push_back(g.reduceTo(dys[0], op.getA().getType()));
  Value quotient = onnx::SubOp::create(b, g.loc, op.getA(), op.getC());
  Value db = g.neg(g.div(g.mul(dys[0], quotient), op.getB()));
  dxs.push_back(g.reduceTo(db, op.getB().getType()));
  return success();
}

/// Max and Min as torch.maximum / torch.minimum: the gradient goes to the
/// operand that was picked, half to each on a tie.
template <typename MaxOrMin>
LogicalResult extremumRule(MaxOrMin op, bool isMax, OpBuilder &b,
                           ArrayRef<Value> dys, Grads &dxs) {
  if (!isFloatTensor(op.getC())) // integer extrema have no gradient
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  Value a = op.getA(), other = op.getB();
  Value aWins = isMax ? Value(onnx::GreaterOp::create(b, g.loc, a, other))
                      : Value(onnx::LessOp::create(b, g.loc, a, other));
  Value bWins = isMax ? Value(onnx::LessOp::create(b, g.loc, a, other))
                      : Value(onnx::GreaterOp::create(b, g.loc, a, other));
  Value tie = onnx::EqualOp::create(b, g.loc, a, other);
  Value zero = g.scalar(dys[0], 0.0);
  Value halfOrZero = onnx::WhereOp::create(
      b, g.loc, tie, g.mul(dys[0], g.scalar(dys[0], 0.5)), zero);
  Value da = onnx::WhereOp::create(b, g.loc, aWins, dys[0], halfOrZero);
  Value db = onnx::WhereOp::create(b, g.loc, bWins, dys[0], halfOrZero);
  dxs.push_back(g.reduceTo(da, a.getType()));
  dxs.push_back(g.reduceTo(db, other.getType()));
  return success();
}

LogicalResult rule(onnx::MaxOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return extremumRule(op, /*isMax=*/true, b, dys, dxs);
}

LogicalResult rule(onnx::MinOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return extremumRule(op, /*isMax=*/false, b, dys, dxs);
}

LogicalResult rule(onnx::PowOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getZ()) || !isFloatTensor(op.getY()))
    return fail(op, "Pow gradient needs float base and exponent");
  GradBuilder g(b, op);
  // dz/dx = y * x^(y-1); dz/dy = z * ln(x).
  Value yMinusOne =
      onnx::SubOp::create(b, g.loc, op.getY(), g.scalar(op.getY(), 1.0));
  Value power = onnx::PowOp::create(b, g.loc, op.getX(), yMinusOne);
  dxs.push_back(
      g.reduceTo(g.mul(dys[0], g.mul(op.getY(), power)), op.getX().getType()));
  Value logX = onnx::LogOp::create(b, g.loc, op.getX());
  dxs.push_back(
      g.reduceTo(g.mul(dys[0], g.mul(op.getZ(), logX)), op.getY().getType()));
  return success();
}

LogicalResult rule(onnx::WhereOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  dxs.push_back(nullptr);
  if (!isFloatTensor(op.getOutput()))
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  Value zero = g.scalar(dys[0], 0.0);
  Value dx = onnx::WhereOp::create(b, g.loc, op.getCondition(), dys[0], zero);
  Value dy = onnx::WhereOp::create(b, g.loc, op.getCondition(), zero, dys[0]);
  dxs.push_back(g.reduceTo(dx, op.getX().getType()));
  dxs.push_back(g.reduceTo(dy, op.getY().getType()));
  return success();
}

LogicalResult rule(onnx::MatMulOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  if (g.typeOf(op.getA()).getRank() < 2 || g.typeOf(op.getB()).getRank() < 2)
    return fail(op, "MatMul gradient with a rank-1 operand is not supported");
  auto aType = g.typeOf(op.getA());
  if (aType.getRank() > 2 && g.typeOf(op.getB()).getRank() == 2) {
    // A layer's weight B against activations A of [..., K]: with the batch
    // dims folded into rows, dA = dY B^T and dB = A^T dY are each one GEMM
    // (dB's sum over the batch is the GEMM's own), where the batched
    // product would write one K x N matrix per batch element to be summed.
    int64_t rows = aType.getNumElements() / aType.getShape().back();
    Value dY = g.reshape(dys[0], {rows, g.typeOf(dys[0]).getShape().back()});
    Value a = g.reshape(op.getA(), {rows, aType.getShape().back()});
    dxs.push_back(
        g.reshape(g.gemm(dY, op.getB(), false, true), aType.getShape()));
    dxs.push_back(g.gemm(a, dY, true, false));
    return success();
  }
  // dA = dY B^T and dB = A^T dY, summed over broadcast batch dims.
  Value dA =
      onnx::MatMulOp::create(b, g.loc, dys[0], g.transposeLast2(op.getB()));
  Value dB =
      onnx::MatMulOp::create(b, g.loc, g.transposeLast2(op.getA()), dys[0]);
  dxs.push_back(g.reduceTo(dA, op.getA().getType()));
  dxs.push_back(g.reduceTo(dB, op.getB().getType()));
  return success();
}

LogicalResult rule(onnx::GemmOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  FloatAttr alpha =
      op.getAlphaAttr() ? op.getAlphaAttr() : b.getF32FloatAttr(1.0);
  auto gemm = [&](Value x, Value y, bool tx, bool ty) {
    return g.gemm(x, y, tx, ty, alpha);
  };
  bool ta = op.getTransA() != 0, tb = op.getTransB() != 0;
  Value dY = dys[0];
  // op(A) op(B): dop(A) = dY op(B)^T, dop(B) = op(A)^T dY; transpose back.
  dxs.push_back(ta ? gemm(op.getB(), dY, tb, true)
                   : gemm(dY, op.getB(), false, !tb));
  dxs.push_back(tb ? gemm(dY, op.getA(), true, ta)
                   : gemm(op.getA(), dY, !ta, false));
  if (Value c = op.getC()) {
    float beta = op.getBeta().convertToFloat();
    Value dC = beta == 1.0f ? dY : g.mul(dY, g.scalar(dY, beta));
    dxs.push_back(g.reduceTo(dC, c.getType()));
  }
  return success();
}

LogicalResult rule(onnx::ConvOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  auto x = g.typeOf(op.getX());
  auto w = g.typeOf(op.getW());
  size_t n = x.getRank() - 2;
  ArrayRef<int64_t> kernel = w.getShape().drop_front(2);
  SmallVector<int64_t> strides = orDefault(op.getStrides(), n, 1);
  SmallVector<int64_t> dilations = orDefault(op.getDilations(), n, 1);
  SmallVector<int64_t> pads =
      resolvePads(x.getShape().drop_front(2), kernel, strides, dilations,
                  op.getPads(), op.getAutoPad());
  auto window = [&](auto &&create) {
    return create(b.getDenseI64ArrayAttr(dilations),
                  b.getI64IntegerAttr(op.getGroup()),
                  b.getDenseI64ArrayAttr(kernel), b.getDenseI64ArrayAttr(pads),
                  b.getDenseI64ArrayAttr(strides));
  };
  dxs.push_back(window([&](auto d, auto gr, auto k, auto p, auto s) -> Value {
    return train::ConvGradInputOp::create(b, g.loc, x, dys[0], op.getW(), d, gr,
                                          k, p, s);
  }));
  dxs.push_back(window([&](auto d, auto gr, auto k, auto p, auto s) -> Value {
    return train::ConvGradWeightOp::create(b, g.loc, w, dys[0], op.getX(), d,
                                           gr, k, p, s);
  }));
  if (op.getB()) {
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 2; i < x.getRank(); ++i)
      axes.push_back(i);
    dxs.push_back(onnx::ReduceSumOp::create(b, g.loc, dys[0], g.i64s(axes),
                                            b.getI64IntegerAttr(0),
                                            b.getI64IntegerAttr(0)));
  }
  return success();
}

/// y = convTranspose(x, W) + b, the adjoint of a convolution of y-shaped
/// inputs by W: dx is that convolution of dy (an onnx.Conv with the same
/// window), dW the convolution's weight gradient with x in the place of its
/// output gradient and dy of its input.
LogicalResult rule(onnx::ConvTransposeOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  onnx::ConvTransposeGeometry geo = op.getGeometry();
  auto dilations = b.getDenseI64ArrayAttr(geo.dilations);
  auto group = b.getI64IntegerAttr(op.getGroup());
  auto kernel = b.getDenseI64ArrayAttr(geo.kernel);
  auto pads = b.getDenseI64ArrayAttr(geo.pads);
  auto strides = b.getDenseI64ArrayAttr(geo.strides);
  dxs.push_back(onnx::ConvOp::create(
      b, g.loc, op.getX().getType(), dys[0], op.getW(), Value(),
      b.getStringAttr("NOTSET"), dilations, group, kernel, pads, strides));
  dxs.push_back(train::ConvGradWeightOp::create(b, g.loc, g.typeOf(op.getW()),
                                                op.getX(), dys[0], dilations,
                                                group, kernel, pads, strides));
  if (op.getB()) {
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 2; i < g.typeOf(op.getX()).getRank(); ++i)
      axes.push_back(i);
    dxs.push_back(onnx::ReduceSumOp::create(b, g.loc, dys[0], g.i64s(axes),
                                            b.getI64IntegerAttr(0),
                                            b.getI64IntegerAttr(0)));
  }
  return success();
}

LogicalResult rule(onnx::MaxPoolOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!dys[0])
    return dxs.push_back(nullptr), success();
  GradBuilder g(b, op);
  dxs.push_back(train::MaxPoolGradOp::create(b, g.loc, op.getX().getType(),
                                             dys[0], op.getIndices()));
  return success();
}

LogicalResult rule(onnx::AveragePoolOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  auto x = g.typeOf(op.getX());
  size_t n = x.getRank() - 2;
  if (op.getCeilMode())
    return fail(op, "AveragePool gradient with ceil_mode is not supported");
  SmallVector<int64_t> strides = orDefault(op.getStrides(), n, 1);
  SmallVector<int64_t> ones(n, 1);
  SmallVector<int64_t> pads =
      resolvePads(x.getShape().drop_front(2), op.getKernelShape(), strides,
                  ones, op.getPads(), op.getAutoPad());
  dxs.push_back(train::AvgPoolGradOp::create(
      b, g.loc, x, dys[0], b.getDenseI64ArrayAttr(op.getKernelShape()),
      b.getDenseI64ArrayAttr(pads), b.getDenseI64ArrayAttr(strides),
      b.getI64IntegerAttr(op.getCountIncludePad())));
  return success();
}

LogicalResult rule(onnx::GlobalAveragePoolOp op, OpBuilder &b,
                   ArrayRef<Value> dys, Grads &dxs) {
  GradBuilder g(b, op);
  auto x = g.typeOf(op.getX());
  int64_t window = 1;
  for (int64_t d : x.getShape().drop_front(2))
    window *= d;
  Value scaled = g.div(dys[0], g.scalar(dys[0], double(window)));
  dxs.push_back(g.expand(scaled, x.getShape()));
  return success();
}

LogicalResult rule(onnx::BatchNormalizationOp op, OpBuilder &b,
                   ArrayRef<Value> dys, Grads &dxs) {
  if (!op.getTrainingMode())
    return fail(op, "BatchNormalization gradient needs training_mode = 1");
  if (!dys[0])
    return dxs.append(5, nullptr), success();
  GradBuilder g(b, op);
  auto grad = train::BatchNormGradOp::create(
      b, g.loc,
      TypeRange{op.getX().getType(), op.getScale().getType(),
                op.getB().getType()},
      dys[0], op.getX(), op.getScale(),
      op.getEpsilonAttr() ? op.getEpsilonAttr() : b.getF32FloatAttr(1e-5f));
  dxs.append(
      {grad.getDx(), grad.getDscale(), grad.getDbias(), nullptr, nullptr});
  return success();
}

LogicalResult rule(onnx::LayerNormalizationOp op, OpBuilder &b,
                   ArrayRef<Value> dys, Grads &dxs) {
  if (!dys[0])
    return fail(op, "LayerNormalization gradient through Mean/InvStdDev only");
  GradBuilder g(b, op);
  Type biasType = op.getB() ? op.getB().getType() : op.getScale().getType();
  auto grad = train::LayerNormGradOp::create(
      b, g.loc,
      TypeRange{op.getX().getType(), op.getScale().getType(), biasType}, dys[0],
      op.getX(), op.getScale(), op.getMean(), op.getInvStdDev(),
      b.getI64IntegerAttr(op.getAxis()));
  dxs.append({grad.getDx(), grad.getDscale()});
  if (op.getB())
    dxs.push_back(grad.getDbias());
  return success();
}

LogicalResult rule(onnx::SoftmaxCrossEntropyLossOp op, OpBuilder &b,
                   ArrayRef<Value> dys, Grads &dxs) {
  if (!dys[0])
    return fail(op, "SoftmaxCrossEntropyLoss gradient through log_prob only");
  GradBuilder g(b, op);
  dxs.push_back(train::SoftmaxCrossEntropyGradOp::create(
      b, g.loc, op.getScores().getType(), dys[0], op.getLogProb(),
      op.getLabels(), op.getWeights(), op.getIgnoreIndexAttr(),
      b.getStringAttr(op.getReduction())));
  dxs.push_back(nullptr);
  if (op.getWeights())
    dxs.push_back(nullptr);
  return success();
}

/// x's shape with the reduced dims (none: all) set to 1.
SmallVector<int64_t> keptShape(RankedTensorType x, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(x.getShape());
  for (int64_t i = 0; i < x.getRank(); ++i)
    if (axes.empty())
      kept[i] = 1;
  for (int64_t axis : axes)
    kept[axis < 0 ? axis + x.getRank() : axis] = 1;
  return kept;
}

template <typename ReduceOp>
LogicalResult reduceRule(ReduceOp op, ArrayRef<int64_t> axes, bool mean,
                         OpBuilder &b, ArrayRef<Value> dys, Grads &dxs) {
  GradBuilder g(b, op);
  auto x = g.typeOf(op.getData());
  SmallVector<int64_t> kept = keptShape(x, axes);
  Value dy = g.reshape(dys[0], kept);
  if (mean) {
    // The reduced dims' product (a kept dim of 1 counts 1).
    int64_t count = 1;
    for (auto [size, keptSize] : llvm::zip(x.getShape(), kept))
      if (keptSize == 1)
        count *= size;
    dy = g.div(dy, g.scalar(dy, double(count)));
  }
  dxs.push_back(g.expand(dy, x.getShape()));
  return success();
}
LogicalResult rule(onnx::ReduceMeanOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  SmallVector<int64_t> axes = orDefault(op.getAxes(), 0, 0);
  return reduceRule(op, axes, true, b, dys, dxs);
}
/// ReduceMax / ReduceMin as torch.amax / torch.amin: the gradient is split
/// evenly among the elements equal to the extremum.
template <typename ReduceOp>
LogicalResult reduceExtremumRule(ReduceOp op, OpBuilder &b, ArrayRef<Value> dys,
                                 Grads &dxs) {
  if (!isFloatTensor(op.getReduced()))
    return dxs.push_back(nullptr), success();
  GradBuilder g(b, op);
  SmallVector<int64_t> axes = orDefault(op.getAxes(), 0, 0);
  SmallVector<int64_t> kept = keptShape(g.typeOf(op.getData()), axes);
  Value hit = onnx::EqualOp::create(b, g.loc, op.getData(),
                                    g.reshape(op.getReduced(), kept));
  Value mask = onnx::WhereOp::create(b, g.loc, hit, g.scalar(dys[0], 1.0),
                                     g.scalar(dys[0], 0.0));
  Value count = onnx::ReduceSumOp::create(
      b, g.loc, mask, axes.empty() ? Value() : g.i64s(axes),
      b.getI64IntegerAttr(1), b.getI64IntegerAttr(0));
  dxs.push_back(g.mul(mask, g.div(g.reshape(dys[0], kept), count)));
  return success();
}
LogicalResult rule(onnx::ReduceMaxOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return reduceExtremumRule(op, b, dys, dxs);
}
LogicalResult rule(onnx::ReduceMinOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return reduceExtremumRule(op, b, dys, dxs);
}
LogicalResult rule(onnx::ReduceSumOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  SmallVector<int64_t> axes;
  if (Value a = op.getAxes()) {
    auto ints = onnx::getConstantInts(a);
    if (!ints)
      return fail(op, "ReduceSum axes must be a constant");
    axes = *ints;
  }
  if (axes.empty() && op.getNoopWithEmptyAxes())
    return dxs.push_back(dys[0]), success();
  LogicalResult result = reduceRule(op, axes, false, b, dys, dxs);
  if (op.getAxes())
    dxs.push_back(nullptr);
  return result;
}

/// Reshape-like ops: the adjoint reshapes back; shape operands get none.
LogicalResult reshapeRule(Operation *op, OpBuilder &b, ArrayRef<Value> dys,
                          Grads &dxs) {
  GradBuilder g(b, op);
  dxs.push_back(g.reshape(dys[0], g.typeOf(op->getOperand(0)).getShape()));
  dxs.append(op->getNumOperands() - 1, nullptr);
  return success();
}
LogicalResult rule(onnx::ReshapeOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return reshapeRule(op, b, dys, dxs);
}
LogicalResult rule(onnx::FlattenOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return reshapeRule(op, b, dys, dxs);
}
LogicalResult rule(onnx::SqueezeOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return reshapeRule(op, b, dys, dxs);
}
LogicalResult rule(onnx::UnsqueezeOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  return reshapeRule(op, b, dys, dxs);
}

LogicalResult rule(onnx::TransposeOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  int64_t rank = g.typeOf(op.getData()).getRank();
  SmallVector<int64_t> perm;
  if (auto p = op.getPerm(); p && !p->empty())
    perm.assign(p->begin(), p->end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  dxs.push_back(g.transpose(dys[0], inverse));
  return success();
}

LogicalResult rule(onnx::ExpandOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  dxs.append({g.reduceTo(dys[0], op.getInput().getType()), nullptr});
  return success();
}

LogicalResult rule(onnx::ConcatOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  auto type = g.typeOf(op.getConcatResult());
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += type.getRank();
  int64_t offset = 0;
  for (Value input : op.getInputs()) {
    int64_t size = g.typeOf(input).getDimSize(axis);
    dxs.push_back(onnx::SliceOp::create(b, g.loc, dys[0], g.i64s({offset}),
                                        g.i64s({offset + size}), g.i64s({axis}),
                                        Value()));
    offset += size;
  }
  return success();
}

LogicalResult rule(onnx::SplitOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  SmallVector<Value> pieces;
  for (auto [result, dy] : llvm::zip(op.getOutputs(), dys))
    pieces.push_back(dy ? dy : g.splat(g.typeOf(result), 0.0));
  int64_t axis = static_cast<int64_t>(op.getAxis());
  dxs.push_back(
      onnx::ConcatOp::create(b, g.loc, pieces, b.getI64IntegerAttr(axis)));
  if (op.getSplit())
    dxs.push_back(nullptr);
  return success();
}

LogicalResult rule(onnx::SliceOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  auto bounds = op.getBounds();
  if (failed(bounds))
    return failure();
  dxs.push_back(
      train::SliceGradOp::create(b, g.loc, op.getData().getType(), dys[0],
                                 b.getDenseI64ArrayAttr(bounds->starts),
                                 b.getDenseI64ArrayAttr(bounds->steps)));
  dxs.append(op->getNumOperands() - 1, nullptr);
  return success();
}

LogicalResult rule(onnx::PadOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  auto pads = op.getResolvedPads();
  auto mode = op.getPadMode();
  if (failed(pads) || failed(mode))
    return failure();
  if (!isFloatTensor(op.getData())) {
    dxs.append(op->getNumOperands(), nullptr);
    return success();
  }
  auto type = g.typeOf(op.getData());
  int64_t rank = type.getRank();
  bool grows = llvm::all_of(*pads, [](int64_t p) { return p >= 0; });
  if (*mode == rt::PadMode::Constant && grows) {
    // The padding is constant: dx is the slice of dy that read x.
    SmallVector<int64_t> starts, ends, axes;
    for (int64_t d = 0; d < rank; ++d) {
      if ((*pads)[d] == 0 && (*pads)[d + rank] == 0)
        continue;
      starts.push_back((*pads)[d]);
      ends.push_back((*pads)[d] + type.getDimSize(d));
      axes.push_back(d);
    }
    dxs.push_back(onnx::SliceOp::create(b, g.loc, dys[0], g.i64s(starts),
                                        g.i64s(ends), g.i64s(axes), Value()));
  } else {
    // Reflected and replicated (or cropped) positions: scatter-add.
    dxs.push_back(train::PadGradOp::create(b, g.loc, type, dys[0],
                                           b.getDenseI64ArrayAttr(*pads),
                                           op.getModeAttr()));
  }
  dxs.append(op->getNumOperands() - 1, nullptr);
  return success();
}

LogicalResult rule(onnx::GatherOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getData()))
    return dxs.append({nullptr, nullptr}), success();
  GradBuilder g(b, op);
  dxs.push_back(train::GatherGradOp::create(b, g.loc, op.getData().getType(),
                                            dys[0], op.getIndices(),
                                            b.getI64IntegerAttr(op.getAxis())));
  dxs.push_back(nullptr);
  return success();
}

LogicalResult rule(onnx::ScatterNDOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (!isFloatTensor(op.getData()))
    return dxs.append({nullptr, nullptr, nullptr}), success();
  if (op.getReduction() != "none")
    return fail(op, "ScatterND's gradient is built for reduction 'none' only");
  GradBuilder g(b, op);
  auto dataType = g.typeOf(op.getData());
  auto updatesType = g.typeOf(op.getUpdates());
  ArrayRef<int64_t> shape = dataType.getShape();
  ArrayRef<int64_t> indexShape = g.typeOf(op.getIndices()).getShape();
  int64_t k = indexShape.back();
  // The overwritten elements of data reach y no more: ddata = dy with them
  // zeroed (ScatterND of zeros).
  dxs.push_back(onnx::ScatterNDOp::create(
      b, g.loc, dataType, dys[0], op.getIndices(), g.splat(updatesType, 0.0),
      op.getReductionAttr()));
  // dupdates = dy at the tuples (GatherND): dy flattened over the first k
  // dims, gathered at each tuple's row.
  SmallVector<int64_t> tupleShape(indexShape.drop_back());
  Value rows;
  if (std::optional<SmallVector<int64_t>> constantRows = op.getConstantRows()) {
    rows = g.reshape(g.i64s(*constantRows), tupleShape);
  } else if (k == 1) {
    rows = g.reshape(op.getIndices(), tupleShape);
  } else {
    return fail(op, "ScatterND's updates gradient needs constant indices "
                    "when an index tuple has more than one element");
  }
  int64_t leading = 1;
  for (int64_t d : shape.take_front(k))
    leading *= d;
  SmallVector<int64_t> flatShape{leading};
  llvm::append_range(flatShape, shape.drop_front(k));
  Value gathered = onnx::GatherOp::create(b, g.loc, updatesType,
                                          g.reshape(dys[0], flatShape), rows,
                                          b.getI64IntegerAttr(0));
  dxs.push_back(nullptr);
  dxs.push_back(gathered);
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives of a tensor-parallel program (shard dialect). Every device runs
// the same program on its part; a value the collective leaves whole is equal
// on every device, and so is its adjoint.
//===----------------------------------------------------------------------===//

/// y = sum of the devices' partial x: each partial contributed to the whole
/// y with weight one, so dx = dy on every device.
LogicalResult rule(shard::AllReduceOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  if (op.getReduction() != shard::ReductionKind::Sum)
    return op->emitError() << "no gradient rule for a shard.all_reduce of "
                           << shard::stringifyReductionKind(op.getReduction())
                           << " (only sum)";
  if (op.getInput().getType() != op.getType())
    return op->emitError() << "no gradient rule for a shard.all_reduce that "
                              "changes the type";
  dxs.push_back(dys[0]);
  return success();
}

/// y = this device's slice of a whole x: x's adjoint is the sum over the
/// devices of their slices' adjoints put in place, i.e. the gathered dy.
LogicalResult rule(shard::AllSliceOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  dxs.push_back(shard::AllGatherOp::create(
      b, g.loc, op.getInput().getType(), op.getGridAttr(), op.getGridAxesAttr(),
      dys[0], op.getSliceAxisAttr()));
  return success();
}

/// y = the devices' parts of x gathered: y is whole, so is dy, and each
/// device's part takes its slice of it.
LogicalResult rule(shard::AllGatherOp op, OpBuilder &b, ArrayRef<Value> dys,
                   Grads &dxs) {
  GradBuilder g(b, op);
  dxs.push_back(shard::AllSliceOp::create(
      b, g.loc, op.getInput().getType(), op.getGridAttr(), op.getGridAxesAttr(),
      dys[0], op.getGatherAxisAttr()));
  return success();
}

/// The external model: forwards to the overload of `rule` for the op class.
template <typename OpTy>
struct GradientModel
    : public train::GradientOpInterface::ExternalModel<GradientModel<OpTy>,
                                                       OpTy> {
  LogicalResult buildGradient(Operation *op, OpBuilder &builder,
                              ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) const {
    return rule(cast<OpTy>(op), builder, resultGrads, operandGrads);
  }
};

template <typename... OpTys> void attach(MLIRContext *ctx) {
  (OpTys::template attachInterface<GradientModel<OpTys>>(*ctx), ...);
}

} // namespace

void pp::train::registerONNXGradients(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, onnx::ONNXDialect *) {
    attach<onnx::ReluOp, onnx::LeakyReluOp, onnx::EluOp, onnx::SeluOp,
           onnx::CeluOp, onnx::ThresholdedReluOp, onnx::SoftplusOp,
           onnx::SoftsignOp, onnx::SinOp, onnx::CosOp, onnx::SigmoidOp,
           onnx::HardSigmoidOp, onnx::HardSwishOp, onnx::TanhOp, onnx::ErfOp,
           onnx::GeluOp, onnx::SqrtOp, onnx::ExpOp, onnx::LogOp, onnx::AbsOp,
           onnx::ReciprocalOp, onnx::IdentityOp, onnx::NegOp, onnx::SoftmaxOp,
           onnx::LogSoftmaxOp, onnx::ClipOp, onnx::CastOp, onnx::DropoutOp,
           onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp, onnx::PowOp,
           onnx::ModOp, onnx::MaxOp, onnx::MinOp, onnx::WhereOp, onnx::MatMulOp,
           onnx::GemmOp, onnx::ConvOp, onnx::ConvTransposeOp, onnx::MaxPoolOp,
           onnx::AveragePoolOp, onnx::GlobalAveragePoolOp,
           onnx::BatchNormalizationOp, onnx::LayerNormalizationOp,
           onnx::SoftmaxCrossEntropyLossOp, onnx::ReduceMeanOp,
           onnx::ReduceSumOp, onnx::ReduceMaxOp, onnx::ReduceMinOp,
           onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
           onnx::TransposeOp, onnx::ExpandOp, onnx::ConcatOp, onnx::SplitOp,
           onnx::SliceOp, onnx::PadOp, onnx::GatherOp, onnx::ScatterNDOp>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    attach<shard::AllReduceOp, shard::AllSliceOp, shard::AllGatherOp>(ctx);
  });
}
