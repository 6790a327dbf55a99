//===- Decompose.cpp - ONNX ops imported as other onnx ops ----------------===//
//
// Each op here is exactly a short composition of dialect ops, so it gets its
// kernels, gradient, sharding and cost from theirs. The compositions keep
// ONNX's semantics: PRelu's slope broadcasts to X only (unidirectionally),
// LessOrEqual is false on NaN (an Or of Less and Equal, not Not(Greater)).
//
//===----------------------------------------------------------------------===//

#include "Decompose.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace {

enum class Kind {
  Max,
  Min,
  Sum,
  Mean,
  PRelu,
  LessOrEqual,
  GreaterOrEqual,
  ReduceL1,
  ReduceL2,
  ReduceSumSquare,
  ReduceLogSum,
  ReduceLogSumExp,
  None
};

Kind kindOf(StringRef opType) {
  return llvm::StringSwitch<Kind>(opType)
      .Case("Max", Kind::Max)
      .Case("Min", Kind::Min)
      .Case("Sum", Kind::Sum)
      .Case("Mean", Kind::Mean)
      .Case("PRelu", Kind::PRelu)
      .Case("LessOrEqual", Kind::LessOrEqual)
      .Case("GreaterOrEqual", Kind::GreaterOrEqual)
      .Case("ReduceL1", Kind::ReduceL1)
      .Case("ReduceL2", Kind::ReduceL2)
      .Case("ReduceSumSquare", Kind::ReduceSumSquare)
      .Case("ReduceLogSum", Kind::ReduceLogSum)
      .Case("ReduceLogSumExp", Kind::ReduceLogSumExp)
      .Default(Kind::None);
}

bool isReduction(Kind kind) {
  return kind == Kind::ReduceL1 || kind == Kind::ReduceL2 ||
         kind == Kind::ReduceSumSquare || kind == Kind::ReduceLogSum ||
         kind == Kind::ReduceLogSumExp;
}

class Decomposer {
public:
  Decomposer(OpBuilder &b, Location loc,
             const std::function<Value(Operation *)> &fold, std::string &error)
      : b(b), loc(loc), fold(fold), error(error) {}

  FailureOr<Value> build(Kind kind, ArrayRef<Value> operands,
                         const pp::onnx::DecomposedAttrs &attrs) {
    switch (kind) {
    case Kind::Max:
    case Kind::Min:
    case Kind::Sum:
    case Kind::Mean:
      return variadic(kind, operands);
    case Kind::PRelu:
      return prelu(operands, attrs.channelSlope);
    case Kind::LessOrEqual:
    case Kind::GreaterOrEqual:
      return compareOrEqual(kind == Kind::LessOrEqual, operands);
    case Kind::None:
      break;
    default:
      return reduction(kind, operands, attrs);
    }
    return fail("is not decomposed");
  }

private:
  FailureOr<Value> fail(const std::string &message) {
    error = message;
    return failure();
  }

  LogicalResult expectCount(ArrayRef<Value> operands, size_t lo, size_t hi) {
    if (operands.size() >= lo && operands.size() <= hi)
      return success();
    error = "takes " +
            (lo == hi ? std::to_string(lo)
                      : std::to_string(lo) + " to " + std::to_string(hi)) +
            " inputs, not " + std::to_string(operands.size());
    return failure();
  }

  /// Max, Min, Sum: a left-to-right chain of the binary op (one input is
  /// the result itself); Mean: the Sum divided by the count.
  FailureOr<Value> variadic(Kind kind, ArrayRef<Value> operands) {
    if (operands.empty())
      return fail("needs at least 1 input");
    Type element = elementType(operands[0]);
    for (Value operand : operands)
      if (elementType(operand) != element)
        return fail("inputs have different element types");
    if (kind == Kind::Mean && !isa<FloatType>(element))
      return fail("takes float inputs");
    // Broadcasting is checked once for all inputs, so the error names the
    // node's shapes rather than a partial chain's.
    SmallVector<int64_t> shape;
    for (Value operand : operands)
      if (!OpTrait::util::getBroadcastedShape(SmallVector<int64_t>(shape),
                                              shapeOf(operand), shape))
        return fail("input shapes do not broadcast");
    Value result = operands[0];
    for (Value operand : operands.drop_front()) {
      switch (kind) {
      case Kind::Max:
        result = fold(pp::onnx::MaxOp::create(b, loc, result, operand));
        break;
      case Kind::Min:
        result = fold(pp::onnx::MinOp::create(b, loc, result, operand));
        break;
      default:
        result = fold(pp::onnx::AddOp::create(b, loc, result, operand));
        break;
      }
    }
    if (kind == Kind::Mean && operands.size() > 1)
      result = fold(pp::onnx::DivOp::create(
          b, loc, result, scalar(element, double(operands.size()))));
    return result;
  }

  /// x > 0 ? x : slope * x (x = 0 takes the slope branch, as torch's
  /// prelu_backward does).
  FailureOr<Value> prelu(ArrayRef<Value> operands, bool channelSlope) {
    if (failed(expectCount(operands, 2, 2)))
      return failure();
    Value x = operands[0], slope = operands[1];
    ArrayRef<int64_t> xShape = shapeOf(x), slopeShape = shapeOf(slope);
    if (channelSlope && slopeShape.size() == 1 && xShape.size() > 2 &&
        slopeShape[0] == xShape[1]) {
      SmallVector<int64_t> perChannel(xShape.size() - 1, 1);
      perChannel[0] = slopeShape[0];
      auto shapeType =
          RankedTensorType::get({int64_t(perChannel.size())}, b.getI64Type());
      slope = fold(pp::onnx::ReshapeOp::create(
          b, loc, slope,
          fold(pp::onnx::ConstantOp::create(
              b, loc, DenseIntElementsAttr::get(shapeType, perChannel))),
          b.getI64IntegerAttr(0)));
    }
    if (elementType(x) != elementType(slope) || !isa<FloatType>(elementType(x)))
      return fail("X and slope need one float element type");
    SmallVector<int64_t> shape;
    if (!OpTrait::util::getBroadcastedShape(shapeOf(x), shapeOf(slope),
                                            shape) ||
        ArrayRef<int64_t>(shape) != shapeOf(x))
      return fail("slope's shape does not broadcast to X's");
    Value positive = fold(
        pp::onnx::GreaterOp::create(b, loc, x, scalar(elementType(x), 0.0)));
    Value scaled = fold(pp::onnx::MulOp::create(b, loc, x, slope));
    return fold(pp::onnx::WhereOp::create(b, loc, positive, x, scaled));
  }

  FailureOr<Value> compareOrEqual(bool less, ArrayRef<Value> operands) {
    if (failed(expectCount(operands, 2, 2)))
      return failure();
    Value a = operands[0], other = operands[1];
    if (elementType(a) != elementType(other))
      return fail("inputs have different element types");
    SmallVector<int64_t> shape;
    if (!OpTrait::util::getBroadcastedShape(shapeOf(a), shapeOf(other), shape))
      return fail("input shapes do not broadcast");
    Value strict = less ? fold(pp::onnx::LessOp::create(b, loc, a, other))
                        : fold(pp::onnx::GreaterOp::create(b, loc, a, other));
    Value equal = fold(pp::onnx::EqualOp::create(b, loc, a, other));
    return fold(pp::onnx::OrOp::create(b, loc, strict, equal));
  }

  /// ReduceSum of |x| (L1), of x * x (L2, then Sqrt; SumSquare), of x
  /// (LogSum, then Log) or of e^(x - max) (LogSumExp, then Log, plus the
  /// max: no overflow), with the node's axes, keepdims and
  /// noop_with_empty_axes (no axes and noop: x itself, as ONNX's reference).
  FailureOr<Value> reduction(Kind kind, ArrayRef<Value> operands,
                             const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 1, 2)))
      return failure();
    Value x = operands[0];
    if (kind != Kind::ReduceL1 && kind != Kind::ReduceSumSquare &&
        !isa<FloatType>(elementType(x)))
      return fail("takes float inputs");
    std::optional<SmallVector<int64_t>> axisList = attrs.axes;
    if (operands.size() == 2) {
      if (attrs.axes)
        return fail("has both an axes attribute and an axes input");
      axisList = pp::onnx::getConstantInts(operands[1]);
      if (!axisList)
        return fail("axes is not a constant: the result shape cannot be made "
                    "static");
    }
    // Checked here: ReduceSum's builder cannot report a bad axis.
    int64_t rank = static_cast<int64_t>(shapeOf(x).size());
    for (int64_t axis : axisList ? *axisList : SmallVector<int64_t>())
      if (axis < -rank || axis >= rank)
        return fail("axis " + std::to_string(axis) +
                    " is out of range for rank " + std::to_string(rank));
    if ((!axisList || axisList->empty()) && attrs.noopWithEmptyAxes)
      return x;
    Value axes;
    if (axisList && !axisList->empty()) {
      auto type =
          RankedTensorType::get({int64_t(axisList->size())}, b.getI64Type());
      axes = fold(pp::onnx::ConstantOp::create(
          b, loc, DenseIntElementsAttr::get(type, *axisList)));
    }
    Value summed = x, max;
    if (kind == Kind::ReduceLogSumExp) {
      auto axesAttr = axisList && !axisList->empty()
                          ? b.getDenseI64ArrayAttr(*axisList)
                          : DenseI64ArrayAttr();
      max = fold(pp::onnx::ReduceMaxOp::create(b, loc, x, axesAttr,
                                               b.getI64IntegerAttr(1)));
      summed = fold(pp::onnx::ExpOp::create(
          b, loc, fold(pp::onnx::SubOp::create(b, loc, x, max))));
    }
    if (kind == Kind::ReduceL1)
      summed = fold(pp::onnx::AbsOp::create(b, loc, x));
    else if (kind == Kind::ReduceL2 || kind == Kind::ReduceSumSquare)
      summed = fold(pp::onnx::MulOp::create(b, loc, x, x));
    Value sum = fold(pp::onnx::ReduceSumOp::create(
        b, loc, summed, axes, b.getI64IntegerAttr(attrs.keepdims),
        b.getI64IntegerAttr(attrs.noopWithEmptyAxes)));
    if (kind == Kind::ReduceL2)
      return fold(pp::onnx::SqrtOp::create(b, loc, sum));
    if (kind == Kind::ReduceLogSum)
      return fold(pp::onnx::LogOp::create(b, loc, sum));
    if (kind == Kind::ReduceLogSumExp) {
      ArrayRef<int64_t> shape = shapeOf(sum);
      auto shapeType =
          RankedTensorType::get({int64_t(shape.size())}, b.getI64Type());
      Value maxAsSum = fold(pp::onnx::ReshapeOp::create(
          b, loc, max,
          fold(pp::onnx::ConstantOp::create(
              b, loc, DenseIntElementsAttr::get(shapeType, shape))),
          b.getI64IntegerAttr(0)));
      return fold(pp::onnx::AddOp::create(
          b, loc, fold(pp::onnx::LogOp::create(b, loc, sum)), maxAsSum));
    }
    return sum;
  }

  static Type elementType(Value v) {
    return cast<ShapedType>(v.getType()).getElementType();
  }
  static ArrayRef<int64_t> shapeOf(Value v) {
    return cast<ShapedType>(v.getType()).getShape();
  }
  Value scalar(Type element, double value) {
    auto type = RankedTensorType::get({}, element);
    Attribute attr = isa<FloatType>(element)
                         ? Attribute(b.getFloatAttr(element, value))
                         : Attribute(b.getIntegerAttr(element, int64_t(value)));
    return fold(pp::onnx::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, attr)));
  }

  OpBuilder &b;
  Location loc;
  const std::function<Value(Operation *)> &fold;
  std::string &error;
};

} // namespace

bool pp::onnx::isDecomposedOp(StringRef opType) {
  return kindOf(opType) != Kind::None;
}

ArrayRef<StringRef> pp::onnx::decomposedAttrNames(StringRef opType) {
  static const StringRef reductionAttrs[] = {"axes", "keepdims",
                                             "noop_with_empty_axes"};
  if (isReduction(kindOf(opType)))
    return reductionAttrs;
  return {};
}

FailureOr<Value> pp::onnx::buildDecomposed(
    OpBuilder &builder, Location loc, StringRef opType,
    ArrayRef<Value> operands, const DecomposedAttrs &attrs,
    const std::function<Value(Operation *)> &fold, std::string &error) {
  return Decomposer(builder, loc, fold, error)
      .build(kindOf(opType), operands, attrs);
}
