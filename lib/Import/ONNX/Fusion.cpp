//===- Fusion.cpp - Op chains the importer fuses ----------------*- C++ -*-===//

#include "Fusion.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

namespace pp::onnx {
namespace {

/// Whether `value` is a constant of one float value close to `expected`
/// (relative 1e-6: exporters write sqrt(2) rounded to f32) and has no more
/// elements than one.
bool isScalarConstant(Value value, double expected) {
  DenseFPElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || attr.getNumElements() != 1)
    return false;
  double got = (*attr.getValues<APFloat>().begin()).convertToDouble();
  return std::fabs(got - expected) <= 1e-6 * std::fabs(expected);
}

/// For a binary op with one operand `x` a constant `expected`, the other.
template <typename OpTy> Value otherThanConstant(OpTy op, double expected) {
  if (isScalarConstant(op.getB(), expected))
    return op.getA();
  if (isScalarConstant(op.getA(), expected))
    return op.getB();
  return {};
}

/// The single user of `value` if it is an OpTy, else null.
template <typename OpTy> OpTy singleUser(Value value) {
  if (!value.hasOneUse())
    return {};
  return dyn_cast<OpTy>(*value.getUsers().begin());
}

/// The operand of a binary op that is not `known`, or null when neither or
/// both are.
Value otherOperand(Operation *op, Value known) {
  Value a = op->getOperand(0), b = op->getOperand(1);
  if (a == known && b != known)
    return b;
  if (b == known && a != known)
    return a;
  return {};
}

/// The last op of x * 0.5 * (1 + f) in either association, (x * (1 + f)) *
/// 0.5 or (x * 0.5) * (1 + f), given f (of x's type) with one use; null
/// when that is not what follows f.
Operation *matchHalfXTimesOnePlus(Value f, Value x) {
  Type type = x.getType();
  auto onePlus = singleUser<AddOp>(f);
  if (!onePlus || otherThanConstant(onePlus, 1.0) != f ||
      onePlus.getType() != type)
    return nullptr;
  auto product = singleUser<MulOp>(onePlus.getResult());
  if (!product || product.getType() != type)
    return nullptr;
  Value factor = otherOperand(product, onePlus.getResult());
  if (factor && factor == x) {
    auto half = singleUser<MulOp>(product.getResult());
    if (half && half.getType() == type &&
        otherThanConstant(half, 0.5) == product.getResult())
      return half;
    return nullptr;
  }
  auto halfX = factor ? factor.getDefiningOp<MulOp>() : MulOp();
  if (halfX && halfX.getResult().hasOneUse() &&
      otherThanConstant(halfX, 0.5) == x)
    return product;
  return nullptr;
}

/// Whether `x` has f's type and a float element type.
bool isGeluOperand(Value x, Value f) {
  auto type = dyn_cast<RankedTensorType>(x.getType());
  return type && type == f.getType() && isa<FloatType>(type.getElementType());
}

/// Replaces the chain ending at `root` by onnx.Gelu of x. The chain's last
/// node names the op (profiles and diagnostics).
void replaceByGelu(PatternRewriter &rewriter, Operation *root, Value x,
                   llvm::StringRef approximate) {
  rewriter.setInsertionPoint(root);
  Value gelu = GeluOp::create(rewriter, root->getLoc(), x.getType(), x,
                              rewriter.getStringAttr(approximate));
  rewriter.replaceOp(root, gelu);
}

/// Matched from the Erf: erf(x / sqrt(2)) (or erf(x * (1 / sqrt(2)))), one
/// plus it, then multiplied by x and by 0.5 in either order.
struct FuseErfGelu : OpRewritePattern<ErfOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ErfOp erf,
                                PatternRewriter &rewriter) const override {
    Value x;
    Operation *scale = erf.getX().getDefiningOp();
    if (auto div = dyn_cast_or_null<DivOp>(scale)) {
      if (isScalarConstant(div.getB(), M_SQRT2))
        x = div.getA();
    } else if (auto mul = dyn_cast_or_null<MulOp>(scale)) {
      x = otherThanConstant(mul, M_SQRT1_2);
    }
    if (!x || !scale->getResult(0).hasOneUse() ||
        !isGeluOperand(x, erf.getResult()))
      return rewriter.notifyMatchFailure(erf, "not erf(x / sqrt(2))");
    Operation *root = matchHalfXTimesOnePlus(erf.getResult(), x);
    if (!root)
      return rewriter.notifyMatchFailure(erf, "not x * 0.5 * (1 + erf)");
    replaceByGelu(rewriter, root, x, "none");
    return success();
  }
};

/// Whether `cube` is x^3 with one use: Pow(x, 3), x * (x * x) or
/// (x * x) * x.
bool isCubeOf(Value cube, Value x) {
  if (!cube || !cube.hasOneUse())
    return false;
  if (auto pow = cube.getDefiningOp<PowOp>())
    return pow.getX() == x && isScalarConstant(pow.getY(), 3.0);
  auto mul = cube.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  Value square = otherOperand(mul, x);
  auto squareMul = square ? square.getDefiningOp<MulOp>() : MulOp();
  return squareMul && square.hasOneUse() && squareMul.getA() == x &&
         squareMul.getB() == x;
}

/// Matched from the Tanh: tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)), one
/// plus it, then multiplied by x and by 0.5 in either order (torch's
/// GELU(approximate='tanh') before opset 20, GPT-2's gelu_new).
struct FuseTanhGelu : OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TanhOp tanh,
                                PatternRewriter &rewriter) const override {
    constexpr double sqrt2OverPi = 0.79788456080286535588, kappa = 0.044715;
    auto scale = tanh.getX().getDefiningOp<MulOp>();
    Value inner = scale ? otherThanConstant(scale, sqrt2OverPi) : Value();
    auto sum = inner ? inner.getDefiningOp<AddOp>() : AddOp();
    if (!sum || !scale.getResult().hasOneUse() || !inner.hasOneUse())
      return rewriter.notifyMatchFailure(tanh, "not tanh(c * (x + ...))");
    // x + kappa * x^3, either operand order.
    Value x;
    for (auto [candidate, term] : {std::pair(sum.getA(), sum.getB()),
                                   std::pair(sum.getB(), sum.getA())}) {
      auto cubic = term.getDefiningOp<MulOp>();
      if (cubic && term.hasOneUse() &&
          isCubeOf(otherThanConstant(cubic, kappa), candidate))
        x = candidate;
    }
    if (!x || !isGeluOperand(x, tanh.getResult()))
      return rewriter.notifyMatchFailure(tanh, "not x + 0.044715 * x^3");
    Operation *root = matchHalfXTimesOnePlus(tanh.getResult(), x);
    if (!root)
      return rewriter.notifyMatchFailure(tanh, "not x * 0.5 * (1 + tanh)");
    replaceByGelu(rewriter, root, x, "tanh");
    return success();
  }
};

/// A Dropout that keeps every element (inference mode, or ratio 0: torch
/// exports nn.Dropout(p=0.0) in training mode, as swin_t and vit_b_32 have)
/// and whose mask nobody reads is its input: no copy of x and no mask
/// forward, no masked copy of the gradient backward.
struct DropIdentityDropout : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DropoutOp dropout,
                                PatternRewriter &rewriter) const override {
    if (!dropout.getMask().use_empty())
      return rewriter.notifyMatchFailure(dropout, "its mask is read");
    bool training = false;
    if (Value mode = dropout.getTrainingMode()) {
      std::optional<SmallVector<int64_t>> ints = getConstantInts(mode);
      if (!ints || ints->size() != 1)
        return rewriter.notifyMatchFailure(dropout, "training_mode unknown");
      training = ints->front() != 0;
    }
    // ONNX's default ratio is 0.5.
    if (training &&
        (!dropout.getRatio() || !isScalarConstant(dropout.getRatio(), 0.0)))
      return rewriter.notifyMatchFailure(dropout, "drops elements");
    rewriter.replaceAllUsesWith(dropout.getOutput(), dropout.getData());
    rewriter.eraseOp(dropout);
    return success();
  }
};

} // namespace

void populateImportFusionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseErfGelu, FuseTanhGelu, DropIdentityDropout>(
      patterns.getContext());
}

} // namespace pp::onnx
