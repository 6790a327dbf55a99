//===- Einsum.cpp - ONNX Einsum as onnx dialect ops -----------------------===//
//
// Each pair of operands becomes one batched MatMul: the letters both share
// and the result needs are batch dims, those both share and nothing later
// needs are contracted (K), the others are M and N; letters only one
// operand has and nothing needs are summed first (ReduceSum).
//
//===----------------------------------------------------------------------===//

#include "Einsum.h"

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

class EinsumBuilder {
public:
  EinsumBuilder(OpBuilder &builder, Location loc,
                const std::function<Value(Operation *)> &fold)
      : b(builder), loc(loc), fold(fold) {}

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

private:
  static ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  int64_t size(const Term &t, char c) {
    return shapeOf(t.value)[t.letters.find(c)];
  }
  int64_t product(const Term &t, const std::string &letters) {
    int64_t n = 1;
    for (char c : letters)
      n *= size(t, c);
    return n;
  }
  Value i64s(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
    return fold(pp::onnx::ConstantOp::create(
        b, loc, DenseIntElementsAttr::get(type, values)));
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return fold(pp::onnx::ReshapeOp::create(b, loc, x, i64s(shape),
                                            b.getI64IntegerAttr(0)));
  }

  OpBuilder &b;
  Location loc;
  const std::function<Value(Operation *)> &fold;
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
    error = "equation '" + equation.str() + "' has " +
            std::to_string(terms.size()) + " operand terms for " +
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
  // One size per letter; no diagonals.
  std::map<char, int64_t> sizes;
  SmallVector<Term> inputs;
  for (auto [term, original, operand] : llvm::zip(terms, written, operands)) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(operand.getType()).getShape();
    for (auto [i, c] : llvm::enumerate(term)) {
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        error = "term '" + original + "' has the character '" +
                std::string(1, c) + "' (letters and '...' only)";
        return failure();
      }
      if (term.find(c) != i) {
        error = "the letter '" + std::string(1, c) + "' repeats in term '" +
                original + "' (diagonals are not supported)";
        return failure();
      }
      auto [it, inserted] = sizes.insert({c, shape[i]});
      if (!inserted && it->second != shape[i]) {
        error = "the dims of '" + std::string(1, c) +
                "' differ: " + std::to_string(it->second) + " and " +
                std::to_string(shape[i]) + " (broadcasting is not supported)";
        return failure();
      }
    }
    inputs.push_back({operand, term});
  }
  for (auto [i, c] : llvm::enumerate(output))
    if (!sizes.count(c) || output.find(c) != i) {
      error = "output '" + output + "' names '" + std::string(1, c) +
              "' twice or without an input";
      return failure();
    }
  EinsumBuilder einsum(builder, loc, fold);
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
