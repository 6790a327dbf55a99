//===- FoldTransposes.cpp - 2-D transposes into GEMM flags ----------------===//
//
// torch exports a Linear of a 3-D input as MatMul(x, Transpose(W)), and the
// gradients of such a product transpose again: each step copied every such
// weight three times (the forward's transpose, the backward's recomputed
// one, and the transpose of its gradient). A GEMM reads either operand
// transposed for free, so the transposes become its transA / transB (also
// through the Cast mixed precision puts on a transposed weight).
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
namespace onnx = pp::onnx;

namespace {

/// The matrix `value` is the transpose of, when a 2-D Transpose makes it.
Value transposedMatrix(Value value) {
  auto transpose = value.getDefiningOp<onnx::TransposeOp>();
  if (!transpose || cast<RankedTensorType>(value.getType()).getRank() != 2)
    return {};
  std::optional<ArrayRef<int64_t>> perm = transpose.getPerm();
  if (perm && !perm->empty() && *perm != ArrayRef<int64_t>{1, 0})
    return {};
  return transpose.getData();
}

/// Creates ops in place of `replaced`, with its location and its
/// discardable attributes (stage, phase).
class Replacer {
public:
  Replacer(RewriterBase &rewriter, Operation *replaced)
      : rewriter(rewriter), replaced(replaced) {
    rewriter.setInsertionPoint(replaced);
  }

  Value reshape(Value value, ArrayRef<int64_t> shape) {
    if (cast<RankedTensorType>(value.getType()).getShape() == shape)
      return value;
    auto type = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                      rewriter.getI64Type());
    Value constant = onnx::ConstantOp::create(
        rewriter, loc(), DenseIntElementsAttr::get(type, shape));
    return tag(onnx::ReshapeOp::create(rewriter, loc(), value, constant,
                                       rewriter.getI64IntegerAttr(0)));
  }

  /// The matrix whose transpose `value` is: a 2-D Transpose's input, or for
  /// a Cast of one (mixed precision casts the transposed weight) a copy of
  /// the Cast on the Transpose's input.
  Value untransposed(Value value) {
    if (Value matrix = transposedMatrix(value))
      return matrix;
    auto castOp = value.getDefiningOp<onnx::CastOp>();
    Value matrix = castOp ? transposedMatrix(castOp.getInput()) : Value();
    if (!matrix)
      return {};
    Operation *copy = rewriter.clone(*castOp);
    copy->setOperand(0, matrix);
    copy->getResult(0).setType(castOp.getType().clone(
        cast<RankedTensorType>(matrix.getType()).getShape()));
    return copy->getResult(0);
  }

  Value gemm(Value a, Value b, FloatAttr alpha, bool transA, bool transB) {
    return tag(onnx::GemmOp::create(
        rewriter, loc(), a, b, Value(),
        alpha ? alpha : rewriter.getF32FloatAttr(1.0),
        rewriter.getF32FloatAttr(0.0), rewriter.getI64IntegerAttr(transA),
        rewriter.getI64IntegerAttr(transB)));
  }

private:
  Location loc() { return replaced->getLoc(); }
  Value tag(Operation *op) {
    op->setDiscardableAttrs(replaced->getDiscardableAttrDictionary());
    return op->getResult(0);
  }

  RewriterBase &rewriter;
  Operation *replaced;
};

/// Gemm(Transpose(a), b) reads a with transA flipped; the same for b.
void foldOperands(onnx::GemmOp gemm, RewriterBase &rewriter) {
  Replacer replace(rewriter, gemm);
  Value a = replace.untransposed(gemm.getA());
  Value b = replace.untransposed(gemm.getB());
  if (!a && !b)
    return;
  rewriter.modifyOpInPlace(gemm, [&] {
    if (a) {
      gemm.getAMutable().assign(a);
      gemm.setTransA(!gemm.getTransA());
    }
    if (b) {
      gemm.getBMutable().assign(b);
      gemm.setTransB(!gemm.getTransB());
    }
  });
}

/// Transpose(Gemm(a, b)) of a Gemm without C that nothing else reads is
/// Gemm(b, a) with the flags swapped and flipped: (A B)^T = B^T A^T. True
/// when the Transpose is replaced (and erased).
bool foldTransposeOfGemm(onnx::TransposeOp transpose, RewriterBase &rewriter) {
  Value product = transposedMatrix(transpose.getResult());
  auto gemm = product ? product.getDefiningOp<onnx::GemmOp>() : nullptr;
  if (!gemm || gemm.getC() || !gemm->hasOneUse())
    return false;
  Value swapped = Replacer(rewriter, gemm)
                      .gemm(gemm.getB(), gemm.getA(), gemm.getAlphaAttr(),
                            !gemm.getTransB(), !gemm.getTransA());
  rewriter.replaceOp(transpose, swapped);
  rewriter.eraseOp(gemm);
  return true;
}

/// MatMul(x [..., K], Transpose(W)) with W 2-D (N x K) is one Gemm of x's
/// rows against W with transB, between Reshapes (views); a 2-D MatMul of
/// a transposed x is a Gemm too.
void foldMatMulOfTranspose(onnx::MatMulOp matmul, RewriterBase &rewriter) {
  auto aType = cast<RankedTensorType>(matmul.getA().getType());
  auto bType = cast<RankedTensorType>(matmul.getB().getType());
  if (bType.getRank() != 2 || aType.getRank() < 2)
    return;
  Replacer replace(rewriter, matmul);
  Value a = matmul.getA(), b = matmul.getB();
  bool transA = false, transB = false;
  if (Value w = replace.untransposed(b)) {
    b = w;
    transB = true;
  }
  if (Value x = aType.getRank() == 2 ? replace.untransposed(a) : Value()) {
    a = x;
    transA = true;
  }
  if (!transA && !transB)
    return;
  int64_t k = aType.getShape().back();
  if (!transA)
    a = replace.reshape(a, {aType.getNumElements() / k, k});
  Value product = replace.gemm(a, b, FloatAttr(), transA, transB);
  rewriter.replaceOp(matmul,
                     replace.reshape(product, matmul.getType().getShape()));
}

} // namespace

void pp::pipeline::foldTransposes(func::FuncOp func) {
  IRRewriter rewriter(func.getContext());
  SmallVector<Operation *> candidates;
  func.walk([&](Operation *op) {
    if (isa<onnx::MatMulOp, onnx::GemmOp, onnx::TransposeOp>(op) ||
        (isa<onnx::CastOp>(op) && transposedMatrix(op->getOperand(0))))
      candidates.push_back(op);
  });
  // In order: a Transpose comes after the Gemm it may swap, which is
  // erased then, after its own visit.
  llvm::DenseSet<Operation *> unfolded; // Transposes and Casts of them
  for (Operation *op : candidates) {
    if (isa<onnx::CastOp>(op)) {
      unfolded.insert(op);
    } else if (auto transpose = dyn_cast<onnx::TransposeOp>(op)) {
      if (!foldTransposeOfGemm(transpose, rewriter))
        unfolded.insert(op);
    } else if (auto gemm = dyn_cast<onnx::GemmOp>(op)) {
      foldOperands(gemm, rewriter);
    } else {
      foldMatMulOfTranspose(cast<onnx::MatMulOp>(op), rewriter);
    }
  }
  // Transposes (and their Casts) nothing reads any more; later ones first,
  // so that a Cast's Transpose goes too.
  for (Operation *op : llvm::reverse(candidates))
    if (unfolded.contains(op) && op->use_empty())
      rewriter.eraseOp(op);
}
