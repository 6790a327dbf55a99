//===- Decompose.cpp - ONNX ops imported as other onnx ops ----------------===//
//
// Each op here is exactly a short composition of dialect ops, so it gets its
// kernels, gradient, sharding and cost from theirs. The compositions keep
// ONNX's semantics: PRelu's slope broadcasts to X only (unidirectionally),
// LessOrEqual is false on NaN (an Or of Less and Equal, not Not(Greater)).
//
//===----------------------------------------------------------------------===//

#include "Decompose.h"
#include "FoldingBuilder.h"

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

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
  Resize,
  Trilu,
  InstanceNormalization,
  CastLike,
  IsNaN,
  IsInf,
  Sign,
  NegativeLogLikelihoodLoss,
  GatherElements,
  ArgMax,
  ArgMin,
  Hardmax,
  OneHot,
  CumSum,
  DepthToSpace,
  SpaceToDepth,
  Xor,
  EyeLike,
  Shrink,
  Tan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
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
      .Case("Resize", Kind::Resize)
      .Case("Trilu", Kind::Trilu)
      .Case("InstanceNormalization", Kind::InstanceNormalization)
      .Case("CastLike", Kind::CastLike)
      .Case("IsNaN", Kind::IsNaN)
      .Case("IsInf", Kind::IsInf)
      .Case("Sign", Kind::Sign)
      .Case("NegativeLogLikelihoodLoss", Kind::NegativeLogLikelihoodLoss)
      .Case("GatherElements", Kind::GatherElements)
      .Case("ArgMax", Kind::ArgMax)
      .Case("ArgMin", Kind::ArgMin)
      .Case("Hardmax", Kind::Hardmax)
      .Case("OneHot", Kind::OneHot)
      .Case("CumSum", Kind::CumSum)
      .Case("DepthToSpace", Kind::DepthToSpace)
      .Case("SpaceToDepth", Kind::SpaceToDepth)
      .Case("Xor", Kind::Xor)
      .Case("EyeLike", Kind::EyeLike)
      .Case("Shrink", Kind::Shrink)
      .Case("Tan", Kind::Tan)
      .Case("Sinh", Kind::Sinh)
      .Case("Cosh", Kind::Cosh)
      .Case("Asinh", Kind::Asinh)
      .Case("Acosh", Kind::Acosh)
      .Case("Atanh", Kind::Atanh)
      .Default(Kind::None);
}

bool isReduction(Kind kind) {
  return kind == Kind::ReduceL1 || kind == Kind::ReduceL2 ||
         kind == Kind::ReduceSumSquare || kind == Kind::ReduceLogSum ||
         kind == Kind::ReduceLogSumExp;
}

class Decomposer : pp::onnx::FoldingBuilder {
public:
  Decomposer(OpBuilder &b, Location loc,
             const std::function<Value(Operation *)> &fold, std::string &error)
      : FoldingBuilder(b, loc, fold), error(error) {}

  FailureOr<Value> build(Kind kind, ArrayRef<Value> operands,
                         const pp::onnx::DecomposedAttrs &attrs) {
    if (kind == Kind::Resize)
      return resize(operands, attrs);
    if (kind == Kind::Trilu)
      return trilu(operands, attrs);
    if (kind == Kind::NegativeLogLikelihoodLoss)
      return nllLoss(operands, attrs);
    // Only Resize, Trilu and NegativeLogLikelihoodLoss have optional inputs.
    for (auto [i, operand] : llvm::enumerate(operands))
      if (!operand)
        return fail("input " + std::to_string(i) + " is absent");
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
    case Kind::InstanceNormalization:
      return instanceNorm(operands, attrs);
    case Kind::CastLike:
      return castLike(operands);
    case Kind::IsNaN:
    case Kind::IsInf:
    case Kind::Sign:
      return classify(kind, operands, attrs);
    case Kind::GatherElements:
      return gatherElements(operands, attrs);
    case Kind::ArgMax:
    case Kind::ArgMin:
    case Kind::Hardmax:
      return argExtremum(kind, operands, attrs);
    case Kind::OneHot:
      return oneHot(operands, attrs);
    case Kind::CumSum:
      return cumSum(operands, attrs);
    case Kind::DepthToSpace:
    case Kind::SpaceToDepth:
      return depthSpace(kind == Kind::DepthToSpace, operands, attrs);
    case Kind::Xor: {
      if (failed(expectCount(operands, 2, 2)))
        return failure();
      Value a = operands[0], c = operands[1];
      Value either = fold(pp::onnx::OrOp::create(b, loc, a, c));
      Value both = fold(pp::onnx::AndOp::create(b, loc, a, c));
      return fold(pp::onnx::AndOp::create(
          b, loc, either, fold(pp::onnx::NotOp::create(b, loc, both))));
    }
    case Kind::EyeLike:
      return eyeLike(operands, attrs);
    case Kind::Shrink:
      return shrink(operands, attrs);
    case Kind::Tan:
    case Kind::Sinh:
    case Kind::Cosh:
    case Kind::Asinh:
    case Kind::Acosh:
    case Kind::Atanh:
      return elementary(kind, operands);
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

  /// Refuses a constant of `rows` x `cols` elements above the limit.
  LogicalResult checkBuiltSize(int64_t rows, int64_t cols, StringRef what) {
    if (rows <= pp::limits::kMaxBuiltConstantElements &&
        cols <= pp::limits::kMaxBuiltConstantElements &&
        rows * cols <= pp::limits::kMaxBuiltConstantElements)
      return success();
    error = "its " + what.str() + " would hold " + std::to_string(rows) +
            " x " + std::to_string(cols) +
            " elements, more than the limit of " +
            std::to_string(pp::limits::kMaxBuiltConstantElements);
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

  /// Resize's output size and scale per dim, from scales or sizes
  /// (constants; over `axes` where given).
  LogicalResult resizeTarget(Value x, Value scalesValue, Value sizesValue,
                             const pp::onnx::DecomposedAttrs &attrs,
                             SmallVector<int64_t> &out,
                             SmallVector<double> &scale) {
    ArrayRef<int64_t> in = shapeOf(x);
    int64_t rank = static_cast<int64_t>(in.size());
    auto present = [](Value v) {
      return v && cast<ShapedType>(v.getType()).getNumElements() > 0;
    };
    if (present(scalesValue) == present(sizesValue)) {
      error = "needs exactly one of scales and sizes";
      return failure();
    }
    SmallVector<int64_t> axes;
    for (int64_t a : attrs.axes ? *attrs.axes : SmallVector<int64_t>()) {
      if (a < -rank || a >= rank) {
        error = "axis " + std::to_string(a) + " is out of range for rank " +
                std::to_string(rank);
        return failure();
      }
      axes.push_back(a < 0 ? a + rank : a);
    }
    if (!attrs.axes)
      for (int64_t a = 0; a < rank; ++a)
        axes.push_back(a);
    SmallVector<double> values;
    if (present(sizesValue)) {
      auto sizes = pp::onnx::getConstantInts(sizesValue);
      if (!sizes) {
        error = "sizes is not a constant: the result shape cannot be made "
                "static";
        return failure();
      }
      values.assign(sizes->begin(), sizes->end());
    } else {
      DenseElementsAttr attr;
      if (!matchPattern(scalesValue, m_Constant(&attr)) ||
          !isa<FloatType>(attr.getElementType())) {
        error = "scales is not a float constant: the result shape cannot be "
                "made static";
        return failure();
      }
      for (const APFloat &v : attr.getValues<APFloat>())
        values.push_back(v.convertToDouble());
    }
    if (values.size() != axes.size()) {
      error = std::string(present(sizesValue) ? "sizes" : "scales") + " has " +
              std::to_string(values.size()) + " values for " +
              std::to_string(axes.size()) + " axes";
      return failure();
    }
    out.assign(in.begin(), in.end());
    scale.assign(rank, 1.0);
    for (auto [axis, value] : llvm::zip(axes, values)) {
      if (in[axis] <= 0) {
        error = "axis " + std::to_string(axis) + " of the input is empty";
        return failure();
      }
      // Checked as a double first: converting a huge one is undefined.
      double size = present(sizesValue) ? value : std::floor(in[axis] * value);
      if (!(size >= 1) || size > double(1 << 24)) {
        char shown[32];
        std::snprintf(shown, sizeof(shown), "%.6g", size);
        error = "the output size of axis " + std::to_string(axis) + " (" +
                shown + ") is not in [1, 2^24]";
        return failure();
      }
      out[axis] = static_cast<int64_t>(size);
      scale[axis] =
          present(sizesValue) ? size / static_cast<double>(in[axis]) : value;
    }
    return success();
  }

  /// The input coordinate of output index i along an axis (ONNX's
  /// coordinate_transformation_mode).
  static double sourceCoordinate(StringRef mode, int64_t i, int64_t inSize,
                                 int64_t outSize, double scale) {
    double o = static_cast<double>(i);
    if (mode == "pytorch_half_pixel")
      return outSize > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
    if (mode == "align_corners")
      return outSize == 1 ? 0.0 : o * (inSize - 1) / (outSize - 1);
    if (mode == "asymmetric")
      return o / scale;
    if (mode == "tf_half_pixel_for_nn") // opset 10's
      return (o + 0.5) / scale;
    if (mode == "half_pixel_symmetric") {
      double adjustment = outSize / (scale * inSize);
      double center = inSize / 2.0;
      return center * (1 - adjustment) + (o + 0.5) / scale - 0.5;
    }
    return (o + 0.5) / scale - 0.5; // half_pixel
  }

  /// ONNX's nearest_mode rounding.
  static double roundNearest(StringRef mode, double x) {
    double floor = std::floor(x);
    if (mode == "floor")
      return floor;
    if (mode == "ceil")
      return std::ceil(x);
    if (x - floor == 0.5)
      return mode == "round_prefer_ceil" ? floor + 1 : floor;
    return std::round(x);
  }

  /// Resize: nearest or linear over the constant scales or sizes. Integer
  /// upsampling that repeats every element (nearest with asymmetric + floor
  /// or a half-pixel mode + rounding) is a Reshape, Expand and Reshape; any
  /// other resized axis is a MatMul by its [in, out] interpolation matrix.
  FailureOr<Value> resize(ArrayRef<Value> operands,
                          const pp::onnx::DecomposedAttrs &attrs) {
    if (operands.empty() || !operands[0] || operands.size() > 4)
      return fail("takes X and at most roi, scales and sizes");
    Value x = operands[0];
    std::string modeName = attrs.mode.value_or("nearest");
    StringRef mode = modeName, coord = attrs.coordinateMode;
    if (mode != "nearest" && mode != "linear")
      return fail("mode '" + modeName +
                  "' is not supported (nearest and linear are)");
    if (coord == "tf_crop_and_resize")
      return fail("coordinate_transformation_mode 'tf_crop_and_resize' is not "
                  "supported");
    if (coord != "half_pixel" && coord != "pytorch_half_pixel" &&
        coord != "align_corners" && coord != "asymmetric" &&
        coord != "half_pixel_symmetric" && coord != "tf_half_pixel_for_nn")
      return fail("unknown coordinate_transformation_mode '" +
                  attrs.coordinateMode + "'");
    StringRef nearest = attrs.nearestMode;
    if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" &&
        nearest != "floor" && nearest != "ceil")
      return fail("unknown nearest_mode '" + attrs.nearestMode + "'");
    if (attrs.antialias)
      return fail("antialias is not supported");
    if (attrs.keepAspectRatioPolicy != "stretch")
      return fail("keep_aspect_ratio_policy '" + attrs.keepAspectRatioPolicy +
                  "' is not supported");
    SmallVector<int64_t> out;
    SmallVector<double> scale;
    if (failed(resizeTarget(x, operands.size() > 2 ? operands[2] : Value(),
                            operands.size() > 3 ? operands[3] : Value(), attrs,
                            out, scale)))
      return failure();
    ArrayRef<int64_t> in = shapeOf(x);
    // Whether output index i along an axis reads input i / factor alone.
    auto repeats = [&](size_t d) {
      if (out[d] % in[d] != 0 || scale[d] != double(out[d] / in[d]))
        return false;
      for (int64_t i = 0; i < out[d]; ++i) {
        double src = sourceCoordinate(coord, i, in[d], out[d], scale[d]);
        double idx = roundNearest(nearest, src);
        idx = std::clamp(idx, 0.0, double(in[d] - 1));
        if (static_cast<int64_t>(idx) != i / (out[d] / in[d]))
          return false;
      }
      return true;
    };
    bool allRepeat = mode == "nearest";
    for (size_t d = 0; d < in.size() && allRepeat; ++d)
      allRepeat = repeats(d);
    if (allRepeat)
      return repeatElements(x, out);
    if (!isa<FloatType>(elementType(x)))
      return fail("resizes integer tensors only by repeating elements "
                  "(nearest, integer factors)");
    Value y = x;
    for (size_t d = 0; d < in.size(); ++d) {
      if (out[d] == in[d] && scale[d] == 1.0)
        continue;
      if (failed(checkBuiltSize(in[d], out[d], "interpolation matrix")))
        return failure();
      y = resizeAxis(y, d, mode, attrs, out[d], scale[d]);
    }
    return y;
  }

  /// Trilu: x times a constant mask of its last two dims (upper: column -
  /// row >= k, lower: <= k), so batch dims broadcast and the gradient is a
  /// Where's.
  FailureOr<Value> trilu(ArrayRef<Value> operands,
                         const pp::onnx::DecomposedAttrs &attrs) {
    if (operands.empty() || !operands[0] || operands.size() > 2)
      return fail("takes input and an optional k");
    Value x = operands[0];
    ArrayRef<int64_t> shape = shapeOf(x);
    if (shape.size() < 2)
      return fail("needs an input of rank >= 2");
    int64_t k = 0;
    if (operands.size() == 2 && operands[1]) {
      auto ks = pp::onnx::getConstantInts(operands[1]);
      if (!ks || ks->size() != 1)
        return fail("k is not a constant scalar (the mask is built at import)");
      k = (*ks)[0];
    }
    int64_t rows = shape[shape.size() - 2], cols = shape.back();
    if (failed(checkBuiltSize(rows, cols, "mask")))
      return failure();
    SmallVector<bool> keep;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        keep.push_back(attrs.upper ? j - i >= k : j - i <= k);
    Value mask = fold(pp::onnx::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            RankedTensorType::get({rows, cols}, b.getI1Type()), keep)));
    return fold(pp::onnx::WhereOp::create(b, loc, mask, x,
                                          scalar(elementType(x), 0.0)));
  }

  /// NegativeLogLikelihoodLoss: -input[n, target, ...] (times the class
  /// weight) picked by a one-hot mask (target == class index), none where
  /// target is ignore_index; mean divides by the picked weights' sum.
  FailureOr<Value> nllLoss(ArrayRef<Value> operands,
                           const pp::onnx::DecomposedAttrs &attrs) {
    if (operands.size() < 2 || operands.size() > 3 || !operands[0] ||
        !operands[1])
      return fail("takes input, target and an optional weight");
    Value input = operands[0], target = operands[1];
    Value weight = operands.size() == 3 ? operands[2] : Value();
    ArrayRef<int64_t> shape = shapeOf(input), targetShape = shapeOf(target);
    Type element = elementType(input);
    if (!isa<FloatType>(element) || shape.size() < 2)
      return fail("needs a float input of rank >= 2");
    SmallVector<int64_t> expectedTarget = {shape[0]};
    expectedTarget.append(shape.begin() + 2, shape.end());
    if (targetShape != ArrayRef<int64_t>(expectedTarget) ||
        !isa<IntegerType>(elementType(target)))
      return fail("target must be an integer tensor of input's shape without "
                  "dim 1");
    if (weight && (shapeOf(weight) != ArrayRef<int64_t>{shape[1]} ||
                   elementType(weight) != element))
      return fail("weight must be 1-D of the " + std::to_string(shape[1]) +
                  " classes");
    if (attrs.reduction != "none" && attrs.reduction != "sum" &&
        attrs.reduction != "mean")
      return fail("unknown reduction '" + attrs.reduction + "'");
    int64_t classes = shape[1], rank = shape.size();
    if (failed(checkBuiltSize(classes, 1, "class range")))
      return failure();
    // Classes along dim 1, ones elsewhere; the target with a dim 1 there.
    SmallVector<int64_t> classShape(rank, 1), targetKept(shape);
    classShape[1] = classes;
    targetKept[1] = 1;
    Type targetElement = elementType(target);
    SmallVector<APInt> ids;
    for (int64_t c = 0; c < classes; ++c)
      ids.push_back(APInt(targetElement.getIntOrFloatBitWidth(), c, true));
    Value classValues = fold(pp::onnx::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get(classShape, targetElement),
                               ids)));
    Value t = reshape(target, targetKept);
    Value hit = fold(pp::onnx::EqualOp::create(b, loc, t, classValues));
    if (attrs.ignoreIndex) {
      Value ignore = fold(pp::onnx::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, targetElement),
                                 APInt(targetElement.getIntOrFloatBitWidth(),
                                       *attrs.ignoreIndex, true))));
      Value kept = fold(pp::onnx::NotOp::create(
          b, loc, fold(pp::onnx::EqualOp::create(b, loc, t, ignore))));
      hit = fold(pp::onnx::AndOp::create(b, loc, hit, kept));
    }
    Value zero = scalar(element, 0.0);
    Value picked = fold(pp::onnx::WhereOp::create(b, loc, hit, input, zero));
    Value classWeight =
        weight ? reshape(weight, classShape) : scalar(element, 1.0);
    if (weight)
      picked = fold(pp::onnx::MulOp::create(b, loc, picked, classWeight));
    auto sum = [&](Value v, ArrayRef<int64_t> axes, int64_t keep) {
      return fold(pp::onnx::ReduceSumOp::create(
          b, loc, v, axes.empty() ? Value() : i64s(axes),
          b.getI64IntegerAttr(keep), b.getI64IntegerAttr(0)));
    };
    Value loss = fold(pp::onnx::NegOp::create(b, loc, sum(picked, {1}, 0)));
    if (attrs.reduction == "none")
      return loss;
    Value total = sum(loss, {}, 0);
    if (attrs.reduction == "sum")
      return total;
    Value weights = fold(pp::onnx::WhereOp::create(
        b, loc, hit, weight ? classWeight : scalar(element, 1.0), zero));
    return fold(pp::onnx::DivOp::create(b, loc, total, sum(weights, {}, 0)));
  }

  /// 0 .. n - 1 of `element` along `axis` of a rank-`rank` shape of ones.
  Value range(int64_t n, Type element, int64_t rank, int64_t axis) {
    SmallVector<int64_t> shape(rank, 1);
    shape[axis] = n;
    auto type = RankedTensorType::get(shape, element);
    if (auto integer = dyn_cast<IntegerType>(element)) {
      SmallVector<APInt> values;
      for (int64_t i = 0; i < n; ++i)
        values.push_back(APInt(integer.getWidth(), i, true));
      return fold(pp::onnx::ConstantOp::create(
          b, loc, DenseElementsAttr::get(type, values)));
    }
    SmallVector<double> values;
    for (int64_t i = 0; i < n; ++i)
      values.push_back(static_cast<double>(i));
    return fold(pp::onnx::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type,
                               toFloats(values, cast<FloatType>(element)))));
  }

  /// `axis` normalised against `rank`, or an error.
  FailureOr<int64_t> normalizedAxis(int64_t axis, int64_t rank) {
    if (axis < -rank || axis >= rank) {
      error = "axis " + std::to_string(axis) + " is out of range for rank " +
              std::to_string(rank);
      return failure();
    }
    return axis < 0 ? axis + rank : axis;
  }

  /// `shape` with a dim of 1 inserted at `at`.
  static SmallVector<int64_t> withOne(ArrayRef<int64_t> shape, int64_t at) {
    SmallVector<int64_t> result(shape);
    result.insert(result.begin() + at, 1);
    return result;
  }

  /// Negative indices counted from the end of a dim of `size`.
  Value wrapIndices(Value indices, int64_t size) {
    Type element = elementType(indices);
    Value zero = scalar(element, 0.0);
    Value wrapped = fold(pp::onnx::AddOp::create(
        b, loc, indices, scalar(element, static_cast<double>(size))));
    return fold(pp::onnx::WhereOp::create(
        b, loc, fold(pp::onnx::LessOp::create(b, loc, indices, zero)), wrapped,
        indices));
  }

  /// GatherElements: output element e reads data where e's index along
  /// `axis` is indices[e]: a mask indices[e] == d over a new dim d next to
  /// the axis selects data, summed over d (so data's gradient is a Where's).
  FailureOr<Value> gatherElements(ArrayRef<Value> operands,
                                  const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 2, 2)))
      return failure();
    Value data = operands[0], indices = operands[1];
    ArrayRef<int64_t> shape = shapeOf(data), outShape = shapeOf(indices);
    int64_t rank = shape.size();
    FailureOr<int64_t> axis = normalizedAxis(attrs.axis.value_or(0), rank);
    if (failed(axis))
      return failure();
    if (int64_t(outShape.size()) != rank)
      return fail("indices must have data's rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && outShape[d] != shape[d])
        return fail("indices differ from data in dim " + std::to_string(d) +
                    " (only the axis may differ)");
    int64_t size = shape[*axis];
    if (failed(checkBuiltSize(size, 1, "index range")))
      return failure();
    Value idx =
        reshape(wrapIndices(indices, size), withOne(outShape, *axis + 1));
    Value hit = fold(pp::onnx::EqualOp::create(
        b, loc, idx, range(size, elementType(indices), rank + 1, *axis + 1)));
    Value spread = reshape(data, withOne(shape, *axis));
    Value picked = fold(pp::onnx::WhereOp::create(
        b, loc, hit, spread, scalar(elementType(data), 0.0)));
    return fold(pp::onnx::ReduceSumOp::create(b, loc, picked, i64s({*axis + 1}),
                                              b.getI64IntegerAttr(0),
                                              b.getI64IntegerAttr(0)));
  }

  /// ArgMax / ArgMin: the least (or, select_last_index, the greatest) index
  /// along the axis where data equals its extremum (NaN counts as the
  /// extremum where there is one, as numpy's); Hardmax: 1 at ArgMax's
  /// index, 0 elsewhere.
  FailureOr<Value> argExtremum(Kind kind, ArrayRef<Value> operands,
                               const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 1, 1)))
      return failure();
    Value data = operands[0];
    ArrayRef<int64_t> shape = shapeOf(data);
    int64_t rank = shape.size();
    int64_t axisAttr = attrs.axis.value_or(kind == Kind::Hardmax ? -1 : 0);
    FailureOr<int64_t> axis = normalizedAxis(axisAttr, rank);
    if (failed(axis))
      return failure();
    auto axes = b.getDenseI64ArrayAttr({*axis});
    Value extremum = kind == Kind::ArgMin
                         ? fold(pp::onnx::ReduceMinOp::create(
                               b, loc, data, axes, b.getI64IntegerAttr(1)))
                         : fold(pp::onnx::ReduceMaxOp::create(
                               b, loc, data, axes, b.getI64IntegerAttr(1)));
    Value hit = fold(pp::onnx::EqualOp::create(b, loc, data, extremum));
    if (isa<FloatType>(elementType(data))) {
      Value nan = fold(pp::onnx::NotOp::create(
          b, loc, fold(pp::onnx::EqualOp::create(b, loc, data, data))));
      hit = fold(pp::onnx::OrOp::create(b, loc, hit, nan));
    }
    int64_t size = shape[*axis];
    if (failed(checkBuiltSize(size, 1, "index range")))
      return failure();
    Value ids = range(size, b.getI64Type(), rank, *axis);
    bool last = attrs.selectLastIndex && kind != Kind::Hardmax;
    Value candidates = fold(pp::onnx::WhereOp::create(
        b, loc, hit, ids,
        scalar(b.getI64Type(), last ? -1.0 : static_cast<double>(size))));
    int64_t keep = kind == Kind::Hardmax ? 1 : attrs.keepdims;
    Value index =
        last ? fold(pp::onnx::ReduceMaxOp::create(b, loc, candidates, axes,
                                                  b.getI64IntegerAttr(keep)))
             : fold(pp::onnx::ReduceMinOp::create(b, loc, candidates, axes,
                                                  b.getI64IntegerAttr(keep)));
    if (kind != Kind::Hardmax)
      return index;
    Type element = elementType(data);
    return fold(pp::onnx::WhereOp::create(
        b, loc, fold(pp::onnx::EqualOp::create(b, loc, ids, index)),
        scalar(element, 1.0), scalar(element, 0.0)));
  }

  /// OneHot: values[1] where the index (negative: from the end) equals the
  /// position along the new axis, values[0] elsewhere.
  FailureOr<Value> oneHot(ArrayRef<Value> operands,
                          const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 3, 3)))
      return failure();
    Value indices = operands[0], values = operands[2];
    auto depth = pp::onnx::getConstantInts(operands[1]);
    if (!depth || depth->size() != 1 || (*depth)[0] <= 0)
      return fail("depth is not a positive constant scalar: the result shape "
                  "cannot be made static");
    if (shapeOf(values) != ArrayRef<int64_t>{2})
      return fail("values must hold [off, on]");
    int64_t rank = shapeOf(indices).size() + 1;
    FailureOr<int64_t> axis = normalizedAxis(attrs.axis.value_or(-1), rank);
    if (failed(axis))
      return failure();
    int64_t n = (*depth)[0];
    if (failed(checkBuiltSize(n, 1, "index range")))
      return failure();
    Value idx =
        reshape(wrapIndices(indices, n), withOne(shapeOf(indices), *axis));
    Value hit = fold(pp::onnx::EqualOp::create(
        b, loc, idx, range(n, elementType(indices), rank, *axis)));
    auto pick = [&](int64_t i) {
      Value at = fold(pp::onnx::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                 APInt(64, i))));
      return fold(pp::onnx::GatherOp::create(b, loc, values, at,
                                             b.getI64IntegerAttr(0)));
    };
    return fold(pp::onnx::WhereOp::create(b, loc, hit, pick(1), pick(0)));
  }

  /// CumSum along the (constant) axis: a MatMul by the [n, n] 0/1 matrix of
  /// which inputs each output sums (exclusive: not its own; reverse: from
  /// the end), with the axis moved last and back.
  FailureOr<Value> cumSum(ArrayRef<Value> operands,
                          const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 2, 2)))
      return failure();
    Value x = operands[0];
    auto axisValue = pp::onnx::getConstantInts(operands[1]);
    if (!axisValue || axisValue->size() != 1)
      return fail(
          "axis is not a constant scalar (the sums are built at import)");
    if (!isa<FloatType>(elementType(x)))
      return fail("takes float inputs");
    int64_t rank = shapeOf(x).size();
    FailureOr<int64_t> axis = normalizedAxis((*axisValue)[0], rank);
    if (failed(axis))
      return failure();
    int64_t n = shapeOf(x)[*axis];
    if (failed(checkBuiltSize(n, n, "prefix-sum matrix")))
      return failure();
    std::vector<double> sums(n * n, 0.0);
    for (int64_t i = 0; i < n; ++i)     // input
      for (int64_t j = 0; j < n; ++j) { // output
        bool in = attrs.reverse ? i >= j : i <= j;
        if (attrs.exclusive && i == j)
          in = false;
        sums[i * n + j] = in ? 1.0 : 0.0;
      }
    return matmulAlong(x, *axis, sums, n);
  }

  /// x with axis `d` multiplied by the [in, out] matrix `weights` (row
  /// major): the axis moved last by a Transpose, a MatMul, moved back.
  Value matmulAlong(Value x, int64_t d, ArrayRef<double> weights,
                    int64_t outSize) {
    int64_t rank = shapeOf(x).size(), inSize = shapeOf(x)[d];
    auto element = cast<FloatType>(elementType(x));
    Value matrix = fold(pp::onnx::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            RankedTensorType::get({inSize, outSize}, element),
            toFloats(weights, element))));
    SmallVector<int64_t> perm, inverse(rank);
    for (int64_t i = 0; i < rank; ++i)
      if (i != d)
        perm.push_back(i);
    perm.push_back(d);
    for (int64_t i = 0; i < rank; ++i)
      inverse[perm[i]] = i;
    bool last = d == rank - 1;
    Value moved = last ? x
                       : fold(pp::onnx::TransposeOp::create(
                             b, loc, x, b.getDenseI64ArrayAttr(perm)));
    Value product = fold(pp::onnx::MatMulOp::create(b, loc, moved, matrix));
    return last ? product
                : fold(pp::onnx::TransposeOp::create(
                      b, loc, product, b.getDenseI64ArrayAttr(inverse)));
  }

  /// DepthToSpace (DCR or CRD) and SpaceToDepth: a Reshape, a Transpose and
  /// a Reshape.
  FailureOr<Value> depthSpace(bool toSpace, ArrayRef<Value> operands,
                              const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 1, 1)))
      return failure();
    Value x = operands[0];
    ArrayRef<int64_t> s = shapeOf(x);
    int64_t bs = attrs.blocksize;
    if (s.size() != 4 || bs <= 0 || bs > (int64_t(1) << 20))
      return fail("needs a rank-4 input and a blocksize in [1, 2^20]");
    int64_t n = s[0], c = s[1], h = s[2], w = s[3];
    SmallVector<int64_t> split, perm, out;
    if (toSpace) {
      std::string mode = attrs.mode.value_or("DCR");
      if (c % (bs * bs) != 0)
        return fail("channels " + std::to_string(c) +
                    " do not divide by blocksize^2");
      if (mode == "DCR") {
        split = {n, bs, bs, c / (bs * bs), h, w};
        perm = {0, 3, 4, 1, 5, 2};
      } else if (mode == "CRD") {
        split = {n, c / (bs * bs), bs, bs, h, w};
        perm = {0, 1, 4, 2, 5, 3};
      } else {
        return fail("unknown mode '" + mode + "'");
      }
      out = {n, c / (bs * bs), h * bs, w * bs};
    } else {
      if (h % bs != 0 || w % bs != 0)
        return fail("spatial dims do not divide by blocksize");
      split = {n, c, h / bs, bs, w / bs, bs};
      perm = {0, 3, 5, 1, 2, 4};
      out = {n, c * bs * bs, h / bs, w / bs};
    }
    Value moved = fold(pp::onnx::TransposeOp::create(
        b, loc, reshape(x, split), b.getDenseI64ArrayAttr(perm)));
    return reshape(moved, out);
  }

  /// EyeLike: a constant of input's shape (rank 2) with ones where column -
  /// row == k, in dtype (default the input's).
  FailureOr<Value> eyeLike(ArrayRef<Value> operands,
                           const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 1, 1)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(operands[0]);
    if (shape.size() != 2)
      return fail("needs a rank-2 input");
    if (failed(checkBuiltSize(shape[0], shape[1], "result")))
      return failure();
    Type element = elementType(operands[0]);
    if (attrs.dtype) {
      element =
          pp::onnx::getElementTypeForONNXDataType(b.getContext(), *attrs.dtype);
      if (!element)
        return fail("dtype " + std::to_string(*attrs.dtype) +
                    " is not supported");
    }
    auto type = RankedTensorType::get(shape, element);
    SmallVector<Attribute> values;
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j) {
        double v = j - i == attrs.k ? 1.0 : 0.0;
        values.push_back(
            isa<FloatType>(element)
                ? Attribute(b.getFloatAttr(element, v))
                : Attribute(b.getIntegerAttr(element, int64_t(v))));
      }
    return fold(pp::onnx::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, values)));
  }

  /// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
  FailureOr<Value> shrink(ArrayRef<Value> operands,
                          const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 1, 1)))
      return failure();
    Value x = operands[0];
    Type element = elementType(x);
    Value bias = scalar(element, attrs.bias);
    Value below = fold(
        pp::onnx::LessOp::create(b, loc, x, scalar(element, -attrs.lambd)));
    Value above = fold(
        pp::onnx::GreaterOp::create(b, loc, x, scalar(element, attrs.lambd)));
    Value upper = fold(pp::onnx::WhereOp::create(
        b, loc, above, fold(pp::onnx::SubOp::create(b, loc, x, bias)),
        scalar(element, 0.0)));
    return fold(pp::onnx::WhereOp::create(
        b, loc, below, fold(pp::onnx::AddOp::create(b, loc, x, bias)), upper));
  }

  /// Tan = sin / cos, Sinh and Cosh by exponentials, Asinh, Acosh and Atanh
  /// by logarithms.
  FailureOr<Value> elementary(Kind kind, ArrayRef<Value> operands) {
    if (failed(expectCount(operands, 1, 1)))
      return failure();
    Value x = operands[0];
    Type element = elementType(x);
    if (!isa<FloatType>(element))
      return fail("takes float inputs");
    auto add = [&](Value p, Value q) {
      return fold(pp::onnx::AddOp::create(b, loc, p, q));
    };
    auto sub = [&](Value p, Value q) {
      return fold(pp::onnx::SubOp::create(b, loc, p, q));
    };
    auto mul = [&](Value p, Value q) {
      return fold(pp::onnx::MulOp::create(b, loc, p, q));
    };
    auto div = [&](Value p, Value q) {
      return fold(pp::onnx::DivOp::create(b, loc, p, q));
    };
    Value one = scalar(element, 1.0), half = scalar(element, 0.5);
    switch (kind) {
    case Kind::Tan:
      return div(fold(pp::onnx::SinOp::create(b, loc, x)),
                 fold(pp::onnx::CosOp::create(b, loc, x)));
    case Kind::Sinh:
    case Kind::Cosh: {
      Value up = fold(pp::onnx::ExpOp::create(b, loc, x));
      Value down = fold(pp::onnx::ExpOp::create(
          b, loc, fold(pp::onnx::NegOp::create(b, loc, x))));
      return mul(kind == Kind::Sinh ? sub(up, down) : add(up, down), half);
    }
    case Kind::Asinh:
    case Kind::Acosh: {
      Value root = fold(pp::onnx::SqrtOp::create(
          b, loc,
          kind == Kind::Asinh ? add(mul(x, x), one) : sub(mul(x, x), one)));
      return fold(pp::onnx::LogOp::create(b, loc, add(x, root)));
    }
    default: // Atanh
      return mul(
          fold(pp::onnx::LogOp::create(b, loc, div(add(one, x), sub(one, x)))),
          half);
    }
  }

  /// InstanceNormalization: each (sample, channel) normalised over its
  /// spatial dims (biased variance), then scale and B per channel.
  FailureOr<Value> instanceNorm(ArrayRef<Value> operands,
                                const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 3, 3)))
      return failure();
    Value x = operands[0], scale = operands[1], bias = operands[2];
    ArrayRef<int64_t> shape = shapeOf(x);
    if (!isa<FloatType>(elementType(x)) || shape.size() < 3)
      return fail("needs a float input of rank >= 3");
    for (Value v : {scale, bias})
      if (shapeOf(v) != ArrayRef<int64_t>{shape[1]} ||
          elementType(v) != elementType(x))
        return fail("scale and B must be 1-D of the " +
                    std::to_string(shape[1]) + " channels");
    SmallVector<int64_t> spatial, perChannel(shape.size() - 1, 1);
    for (int64_t d = 2; d < int64_t(shape.size()); ++d)
      spatial.push_back(d);
    perChannel[0] = shape[1];
    auto mean = [&](Value v) {
      return fold(pp::onnx::ReduceMeanOp::create(
          b, loc, v, b.getDenseI64ArrayAttr(spatial), b.getI64IntegerAttr(1)));
    };
    Value centered = fold(pp::onnx::SubOp::create(b, loc, x, mean(x)));
    Value var = mean(fold(pp::onnx::MulOp::create(b, loc, centered, centered)));
    Value std = fold(pp::onnx::SqrtOp::create(
        b, loc,
        fold(pp::onnx::AddOp::create(b, loc, var,
                                     scalar(elementType(x), attrs.epsilon)))));
    Value normed = fold(pp::onnx::DivOp::create(b, loc, centered, std));
    Value scaled = fold(
        pp::onnx::MulOp::create(b, loc, normed, reshape(scale, perChannel)));
    return fold(
        pp::onnx::AddOp::create(b, loc, scaled, reshape(bias, perChannel)));
  }

  /// CastLike: a Cast to the element type of `target_type`.
  FailureOr<Value> castLike(ArrayRef<Value> operands) {
    if (failed(expectCount(operands, 2, 2)))
      return failure();
    Type target = elementType(operands[1]);
    // The ONNX data type code of the target (the dialect's own table).
    for (int64_t code = 1; code <= 16; ++code)
      if (pp::onnx::getElementTypeForONNXDataType(b.getContext(), code) ==
          target)
        return fold(pp::onnx::CastOp::create(
            b, loc, RankedTensorType::get(shapeOf(operands[0]), target),
            operands[0], b.getI64IntegerAttr(code)));
    return fail("target_type's element type is not supported");
  }

  /// IsNaN as x != x; IsInf as x == +-inf (per detect_negative /
  /// detect_positive); Sign as 1, -1 or 0 by comparisons, NaN kept.
  FailureOr<Value> classify(Kind kind, ArrayRef<Value> operands,
                            const pp::onnx::DecomposedAttrs &attrs) {
    if (failed(expectCount(operands, 1, 1)))
      return failure();
    Value x = operands[0];
    Type element = elementType(x);
    if (!isa<FloatType>(element) && kind != Kind::Sign)
      return fail("takes float inputs");
    auto equal = [&](Value a, Value c) {
      return fold(pp::onnx::EqualOp::create(b, loc, a, c));
    };
    if (kind == Kind::IsNaN)
      return fold(pp::onnx::NotOp::create(b, loc, equal(x, x)));
    if (kind == Kind::IsInf) {
      double inf = std::numeric_limits<double>::infinity();
      Value positive = equal(x, scalar(element, inf));
      Value negative = equal(x, scalar(element, -inf));
      if (attrs.detectPositive && attrs.detectNegative)
        return fold(pp::onnx::OrOp::create(b, loc, positive, negative));
      if (attrs.detectPositive)
        return positive;
      if (attrs.detectNegative)
        return negative;
      return fold(pp::onnx::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              RankedTensorType::get(shapeOf(x), b.getI1Type()), false)));
    }
    Value zero = scalar(element, 0.0);
    Value negativeOrZero = fold(pp::onnx::WhereOp::create(
        b, loc, fold(pp::onnx::LessOp::create(b, loc, x, zero)),
        scalar(element, -1.0), zero));
    Value sign = fold(pp::onnx::WhereOp::create(
        b, loc, fold(pp::onnx::GreaterOp::create(b, loc, x, zero)),
        scalar(element, 1.0), negativeOrZero));
    if (!isa<FloatType>(element))
      return sign;
    return fold(pp::onnx::WhereOp::create(b, loc, equal(x, x), sign, x));
  }

  /// x [.., d, ..] viewed as [.., d, 1, ..], expanded to [.., d, r, ..]
  /// and flattened to [.., d r, ..].
  Value repeatElements(Value x, ArrayRef<int64_t> out) {
    ArrayRef<int64_t> in = shapeOf(x);
    SmallVector<int64_t> spread, expanded;
    for (auto [i, o] : llvm::zip(in, out)) {
      spread.append({i, 1});
      expanded.append({i, o / i});
    }
    Value view = reshape(x, spread);
    Value wide = fold(pp::onnx::ExpandOp::create(b, loc, view, i64s(expanded)));
    return reshape(wide, out);
  }

  /// Resizes axis d of y by a MatMul with its interpolation matrix.
  Value resizeAxis(Value y, int64_t d, StringRef mode,
                   const pp::onnx::DecomposedAttrs &attrs, int64_t outSize,
                   double scale) {
    int64_t inSize = shapeOf(y)[d];
    std::vector<double> weights(inSize * outSize, 0.0);
    for (int64_t i = 0; i < outSize; ++i) {
      double src =
          sourceCoordinate(attrs.coordinateMode, i, inSize, outSize, scale);
      auto clampIndex = [&](double v) {
        return static_cast<int64_t>(std::clamp(v, 0.0, double(inSize - 1)));
      };
      if (mode == "nearest") {
        weights[clampIndex(roundNearest(attrs.nearestMode, src)) * outSize +
                i] = 1.0;
        continue;
      }
      double low = std::floor(src), ratio = src - low;
      weights[clampIndex(low) * outSize + i] += 1.0 - ratio;
      weights[clampIndex(low + 1) * outSize + i] += ratio;
    }
    return matmulAlong(y, d, weights, outSize);
  }

  Value scalar(Type element, double value) {
    auto type = RankedTensorType::get({}, element);
    Attribute attr = isa<FloatType>(element)
                         ? Attribute(b.getFloatAttr(element, value))
                         : Attribute(b.getIntegerAttr(element, int64_t(value)));
    return fold(pp::onnx::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, attr)));
  }

  std::string &error;
};

} // namespace

bool pp::onnx::isDecomposedOp(StringRef opType) {
  return kindOf(opType) != Kind::None;
}

ArrayRef<StringRef> pp::onnx::decomposedAttrNames(StringRef opType) {
  static const StringRef reductionAttrs[] = {"axes", "keepdims",
                                             "noop_with_empty_axes"};
  // cubic_coeff_a and extrapolation_value matter only to the modes Resize
  // refuses (cubic, tf_crop_and_resize).
  static const StringRef resizeAttrs[] = {"mode",
                                          "coordinate_transformation_mode",
                                          "nearest_mode",
                                          "cubic_coeff_a",
                                          "exclude_outside",
                                          "extrapolation_value",
                                          "antialias",
                                          "axes",
                                          "keep_aspect_ratio_policy"};
  static const StringRef triluAttrs[] = {"upper"};
  static const StringRef normAttrs[] = {"epsilon"};
  static const StringRef isInfAttrs[] = {"detect_negative", "detect_positive"};
  static const StringRef nllAttrs[] = {"reduction", "ignore_index"};
  static const StringRef axisAttrs[] = {"axis"};
  static const StringRef argAttrs[] = {"axis", "keepdims", "select_last_index"};
  static const StringRef cumSumAttrs[] = {"exclusive", "reverse"};
  static const StringRef blockAttrs[] = {"blocksize", "mode"};
  static const StringRef eyeAttrs[] = {"dtype", "k"};
  static const StringRef shrinkAttrs[] = {"bias", "lambd"};
  Kind kind = kindOf(opType);
  if (isReduction(kind))
    return reductionAttrs;
  if (kind == Kind::Resize)
    return resizeAttrs;
  if (kind == Kind::Trilu)
    return triluAttrs;
  if (kind == Kind::InstanceNormalization)
    return normAttrs;
  if (kind == Kind::IsInf)
    return isInfAttrs;
  if (kind == Kind::NegativeLogLikelihoodLoss)
    return nllAttrs;
  if (kind == Kind::GatherElements || kind == Kind::Hardmax ||
      kind == Kind::OneHot)
    return axisAttrs;
  if (kind == Kind::ArgMax || kind == Kind::ArgMin)
    return argAttrs;
  if (kind == Kind::CumSum)
    return cumSumAttrs;
  if (kind == Kind::DepthToSpace || kind == Kind::SpaceToDepth)
    return blockAttrs;
  if (kind == Kind::EyeLike)
    return eyeAttrs;
  if (kind == Kind::Shrink)
    return shrinkAttrs;
  return {};
}

FailureOr<Value> pp::onnx::buildDecomposed(
    OpBuilder &builder, Location loc, StringRef opType,
    ArrayRef<Value> operands, const DecomposedAttrs &attrs,
    const std::function<Value(Operation *)> &fold, std::string &error) {
  return Decomposer(builder, loc, fold, error)
      .build(kindOf(opType), operands, attrs);
}
