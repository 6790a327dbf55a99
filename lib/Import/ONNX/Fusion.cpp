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
    if (!x || !scale->getResult(0).hasOneUse())
      return rewriter.notifyMatchFailure(erf, "not erf(x / sqrt(2))");
    auto type = dyn_cast<RankedTensorType>(x.getType());
    if (!type || type != erf.getType() ||
        !isa<FloatType>(type.getElementType()))
      return rewriter.notifyMatchFailure(erf, "x is not shaped as the erf");

    auto onePlus = singleUser<AddOp>(erf.getResult());
    if (!onePlus || otherThanConstant(onePlus, 1.0) != erf.getResult() ||
        onePlus.getType() != type)
      return rewriter.notifyMatchFailure(erf, "not 1 + erf");
    // (x * (1 + erf)) * 0.5, or (x * 0.5) * (1 + erf).
    auto product = singleUser<MulOp>(onePlus.getResult());
    if (!product || product.getType() != type)
      return rewriter.notifyMatchFailure(erf, "1 + erf is not multiplied");
    Value factor = otherOperand(product, onePlus.getResult());
    Operation *root = nullptr;
    if (factor == x) {
      auto half = singleUser<MulOp>(product.getResult());
      if (half && half.getType() == type &&
          otherThanConstant(half, 0.5) == product.getResult())
        root = half;
    } else if (auto halfX = factor ? factor.getDefiningOp<MulOp>() : MulOp()) {
      if (halfX.getResult().hasOneUse() && otherThanConstant(halfX, 0.5) == x)
        root = product;
    }
    if (!root)
      return rewriter.notifyMatchFailure(erf, "not x * 0.5 * (1 + erf)");
    // The chain's last node names the op (profiles and diagnostics).
    rewriter.setInsertionPoint(root);
    Value gelu = GeluOp::create(rewriter, root->getLoc(), type, x,
                                rewriter.getStringAttr("none"));
    rewriter.replaceOp(root, gelu);
    return success();
  }
};

} // namespace

void populateImportFusionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseErfGelu>(patterns.getContext());
}

} // namespace pp::onnx
