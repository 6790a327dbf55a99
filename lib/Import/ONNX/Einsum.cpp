//===- Einsum.cpp - ONNX Einsum as onnx dialect ops -----------------------===//
//
// Each pair of operands becomes one batched MatMul (or a Mul, when no letter
// is summed): the letters both share
// and the result needs are batch dims, those both share and nothing later
// needs are contracted (K), the others are M and N; letters only one
// operand has and nothing needs are summed first (ReduceSum). A letter
// repeated in one operand takes its diagonal first (a strided Slice), and a
// dim of 1 against a larger one of the same letter broadcasts.
//
//===----------------------------------------------------------------------===//

#include "Einsum.h"
#include "FoldingBuilder.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cctype>
#include <map>

using namespace mlir;

namespace {

/// A value and the letter of each of its dims.
struct Term {
  Value value;
  std::string letters;
};

bool contains(const std::string &letters, char c) {
  return letters.find(c) != std::string::npos;
}

class EinsumBuilder : pp::onnx::FoldingBuilder {
public:
  using FoldingBuilder::FoldingBuilder;

  /// Contracts two terms into one with the letters of either that `needed`
  /// (later operands and the output) still uses.
  Term contract(Term x, Term y, const std::string &needed) {
    auto kept = [&](const Term &t, const Term &other) {
      std::string keep;
      for (char c : t.letters)
        if (contains(needed, c) || contains(other.letters, c))
          keep += c;
      return keep;
    };
    x = sumExcept(x, kept(x, y));
    y = sumExcept(y, kept(y, x));
    std::string batch, contracted, freeX, freeY;
    for (char c : x.letters) {
      if (!contains(y.letters, c))
        freeX += c;
      else if (contains(needed, c))
        batch += c;
      else
        contracted += c;
    }
    for (char c : y.letters)
      if (!contains(x.letters, c))
        freeY += c;
    if (contracted.empty()) {
      // Nothing to sum: an elementwise Mul in x's order, with 1s where one
      // side lacks a letter, rather than a MatMul of K = 1.
      std::string shared;
      for (char c : x.letters)
        if (contains(y.letters, c))
          shared += c;
      y = transpose(y, shared + freeY);
      SmallVector<int64_t> xShape, yShape;
      for (char c : x.letters) {
        xShape.push_back(size(x, c));
        yShape.push_back(contains(y.letters, c) ? size(y, c) : 1);
      }
      for (char c : freeY) {
        xShape.push_back(1);
        yShape.push_back(size(y, c));
      }
      Value product = fold(pp::onnx::MulOp::create(
          b, loc, reshape(x.value, xShape), reshape(y.value, yShape)));
      return {product, x.letters + freeY};
    }
    x = transpose(x, batch + freeX + contracted);
    y = transpose(y, batch + contracted + freeY);
    SmallVector<int64_t> batchDims;
    for (char c : batch)
      batchDims.push_back(size(x, c));
    SmallVector<int64_t> xShape = batchDims, yShape = batchDims;
    xShape.append({product(x, freeX), product(x, contracted)});
    yShape.append({product(y, contracted), product(y, freeY)});
    Value matmul = fold(pp::onnx::MatMulOp::create(
        b, loc, reshape(x.value, xShape), reshape(y.value, yShape)));
    SmallVector<int64_t> shape = batchDims;
    for (char c : freeX)
      shape.push_back(size(x, c));
    for (char c : freeY)
      shape.push_back(size(y, c));
    return {reshape(matmul, shape), batch + freeX + freeY};
  }

  /// Sums the dims whose letters `keep` lacks away.
  Term sumExcept(Term t, const std::string &keep) {
    SmallVector<int64_t> axes;
    std::string rest;
    for (auto [i, c] : llvm::enumerate(t.letters)) {
      if (contains(keep, c))
        rest += c;
      else
        axes.push_back(static_cast<int64_t>(i));
    }
    if (axes.empty())
      return t;
    Value sum = fold(pp::onnx::ReduceSumOp::create(b, loc, t.value, i64s(axes),
                                                   b.getI64IntegerAttr(0),
                                                   b.getI64IntegerAttr(0)));
    return {sum, rest};
  }

  /// Permutes the dims into `order` (a permutation of the term's letters).
  Term transpose(Term t, const std::string &order) {
    if (t.letters == order)
      return t;
    SmallVector<int64_t> perm;
    for (char c : order)
      perm.push_back(static_cast<int64_t>(t.letters.find(c)));
    Value permuted = fold(pp::onnx::TransposeOp::create(
        b, loc, t.value, b.getDenseI64ArrayAttr(perm)));
    return {permuted, order};
  }

  /// Reads the diagonal of each letter the term repeats: the repeated dims
  /// go last, flatten into one of n^k elements, and a Slice with step
  /// 1 + n + ... + n^(k-1) reads the elements whose k indices are equal.
  FailureOr<Term> takeDiagonals(Term t, const std::string &written,
                                std::string &error) {
    std::string distinct;
    for (char c : t.letters)
      if (!contains(distinct, c))
        distinct += c;
    for (char c : distinct) {
      if (llvm::count(t.letters, c) < 2)
        continue;
      ArrayRef<int64_t> shape = shapeOf(t.value);
      int64_t n = size(t, c);
      SmallVector<int64_t> perm, repeated, kept;
      std::string rest;
      for (auto [j, letter] : llvm::enumerate(t.letters)) {
        if (letter != c) {
          perm.push_back(static_cast<int64_t>(j));
          kept.push_back(shape[j]);
          rest += letter;
        } else {
          repeated.push_back(static_cast<int64_t>(j));
          if (shape[j] != n) {
            error = "the letter '" + std::string(1, c) + "' of term '" +
                    written + "' stands for dims of " + std::to_string(n) +
                    " and " + std::to_string(shape[j]) +
                    " (a diagonal needs equal dims)";
            return failure();
          }
        }
      }
      perm.append(repeated);
      int64_t flat = 1, step = 0;
      for (size_t k = 0; k < repeated.size(); ++k) {
        step += flat;
        flat *= n;
      }
      Value value = t.value;
      if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
        value = fold(pp::onnx::TransposeOp::create(
            b, loc, value, b.getDenseI64ArrayAttr(perm)));
      SmallVector<int64_t> flatShape = kept;
      flatShape.push_back(flat);
      value = reshape(value, flatShape);
      int64_t last = static_cast<int64_t>(kept.size());
      value = fold(pp::onnx::SliceOp::create(
          b, loc, value, i64s({0}), i64s({flat}), i64s({last}), i64s({step})));
      t = {value, rest + c};
    }
    return t;
  }

  /// Drops the dims of size 1 whose letter is larger in another term: the
  /// letter is then that term's alone, which is what broadcasting computes.
  Term dropBroadcastDims(Term t, const std::map<char, int64_t> &sizes) {
    SmallVector<int64_t> shape;
    std::string letters;
    for (char c : t.letters) {
      int64_t n = size(t, c);
      if (n == 1 && sizes.at(c) != 1)
        continue;
      shape.push_back(n);
      letters += c;
    }
    if (letters == t.letters)
      return t;
    return {reshape(t.value, shape), letters};
  }

  int64_t size(const Term &t, char c) {
    return shapeOf(t.value)[t.letters.find(c)];
  }

private:
  int64_t product(const Term &t, const std::string &letters) {
    int64_t n = 1;
    for (char c : letters)
      n *= size(t, c);
    return n;
  }
};

} // namespace

FailureOr<Value>
pp::onnx::buildEinsum(OpBuilder &builder, Location loc, StringRef equation,
                      ArrayRef<Value> operands,
                      const std::function<Value(Operation *)> &fold,
                      std::string &error) {
  if (operands.empty()) {
    error = "Einsum needs at least one input";
    return failure();
  }
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c)))
      eq += c;
  size_t arrow = eq.find("->");
  bool explicitOutput = arrow != std::string::npos;
  std::string lhs = eq.substr(0, arrow);
  std::string rhs = explicitOutput ? eq.substr(arrow + 2) : "";
  for (Value operand : operands)
    if (!isa<RankedTensorType>(operand.getType())) {
      error = "Einsum needs ranked inputs";
      return failure();
    }
  SmallVector<std::string> terms;
  for (StringRef term : llvm::split(StringRef(lhs), ','))
    terms.push_back(term.str());
  if (terms.size() != operands.size()) {
    error = "it has " + std::to_string(terms.size()) + " operand terms for " +
            std::to_string(operands.size()) + " inputs";
    return failure();
  }
  // "..." stands for the same dims in every term, right-aligned: fresh
  // letters the equation does not use.
  std::string fresh;
  for (char c = 'A'; c <= 'z'; ++c)
    if (std::isalpha(static_cast<unsigned char>(c)) && !contains(eq, c))
      fresh += c;
  SmallVector<int64_t> ellipsisRanks;
  int64_t ellipsisRank = 0;
  for (auto [term, operand] : llvm::zip(terms, operands)) {
    int64_t rank = cast<RankedTensorType>(operand.getType()).getRank();
    size_t dots = term.find("...");
    int64_t letters =
        static_cast<int64_t>(term.size()) - (dots == std::string::npos ? 0 : 3);
    int64_t spread = dots == std::string::npos ? 0 : rank - letters;
    if (spread < 0 || (dots == std::string::npos && letters != rank)) {
      error = "term '" + term + "' does not fit an input of rank " +
              std::to_string(rank);
      return failure();
    }
    ellipsisRanks.push_back(spread);
    ellipsisRank = std::max(ellipsisRank, spread);
  }
  if (ellipsisRank > static_cast<int64_t>(fresh.size())) {
    error = "'...' spans more dims than there are free letters";
    return failure();
  }
  std::string ellipsis = fresh.substr(0, ellipsisRank);
  SmallVector<std::string> written = terms; // for messages
  for (auto [term, spread] : llvm::zip(terms, ellipsisRanks))
    if (size_t dots = term.find("..."); dots != std::string::npos)
      term.replace(dots, 3, ellipsis.substr(ellipsisRank - spread));
  std::string output;
  if (explicitOutput) {
    output = rhs;
    if (size_t dots = output.find("..."); dots != std::string::npos)
      output.replace(dots, 3, ellipsis);
  } else {
    // Implicit: the "..." dims, then the letters used once, sorted.
    std::map<char, int> uses;
    for (const std::string &term : terms)
      for (char c : term)
        ++uses[c];
    output = ellipsis;
    for (auto [c, count] : uses)
      if (count == 1 && !contains(ellipsis, c))
        output += c;
  }
  EinsumBuilder einsum(builder, loc, fold);
  // A letter repeated within a term reads that term's diagonal; dims of one
  // letter that are 1 in some terms broadcast against the others' size.
  std::map<char, int64_t> sizes;
  SmallVector<Term> inputs;
  for (auto [term, original, operand] : llvm::zip(terms, written, operands)) {
    for (char c : term)
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        error = "term '" + original + "' has the character '" +
                std::string(1, c) + "' (letters and '...' only)";
        return failure();
      }
    FailureOr<Term> diagonal =
        einsum.takeDiagonals({operand, term}, original, error);
    if (failed(diagonal))
      return failure();
    for (char c : diagonal->letters) {
      int64_t n = einsum.size(*diagonal, c);
      auto [it, inserted] = sizes.insert({c, n});
      if (inserted || it->second == n || n == 1)
        continue;
      if (it->second != 1) {
        error = "the dims of '" + std::string(1, c) +
                "' differ: " + std::to_string(it->second) + " and " +
                std::to_string(n) +
                " (and neither is 1, so they do not "
                "broadcast)";
        return failure();
      }
      it->second = n;
    }
    inputs.push_back(*diagonal);
  }
  for (Term &input : inputs)
    input = einsum.dropBroadcastDims(input, sizes);
  for (auto [i, c] : llvm::enumerate(output))
    if (!sizes.count(c) || output.find(c) != i) {
      error = "output '" + output + "' names '" + std::string(1, c) +
              "' twice or without an input";
      return failure();
    }
  Term result = inputs.front();
  for (size_t i = 1; i < inputs.size(); ++i) {
    std::string needed = output;
    for (size_t j = i + 1; j < inputs.size(); ++j)
      needed += inputs[j].letters;
    result = einsum.contract(result, inputs[i], needed);
  }
  result = einsum.sumExcept(result, output);
  return einsum.transpose(result, output).value;
}
