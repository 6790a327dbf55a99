//===- FoldTransposes.cpp - Transposes into GEMM flags
//---------------------===//
//
// torch exports a Linear of a 3-D input as MatMul(x, Transpose(W)), and the
// gradients of such a product transpose again: each step copied every such
// weight three times (the forward's transpose, the backward's recomputed
// one, and the transpose of its gradient). A GEMM reads either operand
// transposed for free, so the transposes become its transA / transB (also
// through the Cast mixed precision puts on a transposed weight). Batched
// products (attention's q k^T and its gradients, which transpose the last
// two dims of both operands and of a result) become train.matmul with the
// same flags.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
namespace onnx = pp::onnx;
namespace train = pp::train;

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

/// The value `value` is `value`'s last two dims swapped of, when a
/// Transpose that swaps only those (rank >= 2) makes it.
Value lastTwoSwapped(Value value) {
  auto transpose = value.getDefiningOp<onnx::TransposeOp>();
  if (!transpose)
    return {};
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  if (rank < 2)
    return {};
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[rank - 2], swap[rank - 1]);
  std::optional<ArrayRef<int64_t>> perm = transpose.getPerm();
  // No perm reverses the dims: a swap of the last two only in 2-D.
  if ((!perm || perm->empty()) ? rank != 2 : *perm != ArrayRef(swap))
    return {};
  return transpose.getData();
}

/// Unwraps the Transposes of the last two dims that make `value`, flipping
/// `transposed` at each.
Value throughSwaps(Value value, bool &transposed) {
  while (Value inner = lastTwoSwapped(value)) {
    value = inner;
    transposed = !transposed;
  }
  return value;
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

  /// op(a) op(b), batch dims broadcast: an onnx.MatMul when neither operand
  /// is read transposed, else a train.matmul.
  Value batchedProduct(Value a, Value b, bool transA, bool transB, Type type) {
    if (!transA && !transB)
      return tag(onnx::MatMulOp::create(rewriter, loc(), type, a, b));
    auto product = train::MatMulOp::create(rewriter, loc(), type, a, b);
    product.setTransA(transA);
    product.setTransB(transB);
    return tag(product);
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

/// A MatMul whose operands (rank >= 2) come through Transposes of their
/// last two dims reads the Transposes' inputs through train.matmul's flags
/// (an onnx.MatMul when the swaps cancel). True when it is replaced.
bool foldBatchedMatMul(onnx::MatMulOp matmul, RewriterBase &rewriter) {
  auto aType = cast<RankedTensorType>(matmul.getA().getType());
  auto bType = cast<RankedTensorType>(matmul.getB().getType());
  if (aType.getRank() < 2 || bType.getRank() < 2)
    return false;
  bool transA = false, transB = false;
  Value a = throughSwaps(matmul.getA(), transA);
  Value b = throughSwaps(matmul.getB(), transB);
  if (a == matmul.getA() && b == matmul.getB())
    return false;
  Value product = Replacer(rewriter, matmul)
                      .batchedProduct(a, b, transA, transB, matmul.getType());
  rewriter.replaceOp(matmul, product);
  return true;
}

/// A Transpose of the last two dims of a product (rank >= 3; 2-D ones are
/// Gemms' above) that nothing else reads is the swapped product:
/// (A B)^T = B^T A^T, batch by batch. True when the Transpose is replaced
/// (and erased).
bool foldTransposeOfProduct(onnx::TransposeOp transpose,
                            RewriterBase &rewriter) {
  Value product = lastTwoSwapped(transpose.getResult());
  Operation *op = product ? product.getDefiningOp() : nullptr;
  if (!op || !op->hasOneUse() ||
      cast<RankedTensorType>(product.getType()).getRank() < 3)
    return false;
  Value a, b;
  bool transA = false, transB = false;
  if (auto matmul = dyn_cast<onnx::MatMulOp>(op)) {
    if (cast<RankedTensorType>(matmul.getA().getType()).getRank() < 2 ||
        cast<RankedTensorType>(matmul.getB().getType()).getRank() < 2)
      return false;
    a = matmul.getA();
    b = matmul.getB();
  } else if (auto batched = dyn_cast<train::MatMulOp>(op)) {
    a = batched.getA();
    b = batched.getB();
    transA = batched.getTransA();
    transB = batched.getTransB();
  } else {
    return false;
  }
  Value swapped =
      Replacer(rewriter, op)
          .batchedProduct(b, a, !transB, !transA, transpose.getType());
  rewriter.replaceOp(transpose, swapped);
  rewriter.eraseOp(op);
  return true;
}

/// MatMul(x [..., K], Transpose(W)) with W 2-D (N x K) is one Gemm of x's
/// rows against W with transB, between Reshapes (views); a 2-D MatMul of
/// a transposed x is a Gemm too. Other MatMuls of Transposes of the last
/// two dims are batched products (foldBatchedMatMul).
void foldMatMulOfTranspose(onnx::MatMulOp matmul, RewriterBase &rewriter) {
  auto aType = cast<RankedTensorType>(matmul.getA().getType());
  auto bType = cast<RankedTensorType>(matmul.getB().getType());
  if (bType.getRank() != 2 || aType.getRank() < 2) {
    foldBatchedMatMul(matmul, rewriter);
    return;
  }
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
  if (!transA && !transB) {
    foldBatchedMatMul(matmul, rewriter);
    return;
  }
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
      if (!foldTransposeOfGemm(transpose, rewriter) &&
          !foldTransposeOfProduct(transpose, rewriter))
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
