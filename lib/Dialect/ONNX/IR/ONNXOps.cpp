//===- ONNXOps.cpp - The onnx dialect and its operations --------*- C++ -*-===//
//
// Result-type inference, verifiers, folders (shape sub-graphs fold to
// constants) and FLOP counts of the onnx dialect.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cmath>
#include <numeric>

using namespace mlir;
using namespace pp::onnx;
namespace rt = pp::rt;

#include "pp/Dialect/ONNX/IR/ONNXInterfaces.cpp.inc"
#include "pp/Dialect/ONNX/IR/ONNXOpsDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pp/Dialect/ONNX/IR/ONNXOps.cpp.inc"
      >();
}

Operation *ONNXDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Folding stops at this many elements: shape sub-graphs are tiny, and
/// folding large tensors would bloat the IR.
static constexpr int64_t kMaxFoldElements = 4096;

int64_t pp::onnx::getNumElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return shaped && shaped.hasStaticShape() ? shaped.getNumElements() : 0;
}

bool pp::onnx::areCompatibleResultTypes(TypeRange lhs, TypeRange rhs) {
  if (lhs.size() != rhs.size())
    return false;
  for (auto [l, r] : llvm::zip(lhs, rhs)) {
    if (getElementTypeOrSelf(l) != getElementTypeOrSelf(r) ||
        failed(verifyCompatibleShape(l, r)))
      return false;
  }
  return true;
}

static RankedTensorType rankedType(Value value) {
  return dyn_cast<RankedTensorType>(value.getType());
}

static LogicalResult error(std::optional<Location> loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

/// Normalises a possibly negative axis against `rank`.
static FailureOr<int64_t> normalizeAxis(std::optional<Location> loc,
                                        int64_t axis, int64_t rank,
                                        StringRef what = "axis") {
  if (axis < -rank || axis >= rank)
    return error(loc, what + " " + Twine(axis) + " is out of range for rank " +
                          Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

LogicalResult pp::onnx::inferSameAsOperand(std::optional<Location> loc,
                                           ValueRange operands, unsigned index,
                                           SmallVectorImpl<Type> &out) {
  if (operands.size() <= index)
    return error(loc, "missing operand #" + Twine(index));
  out.push_back(operands[index].getType());
  return success();
}

LogicalResult pp::onnx::inferBroadcast(std::optional<Location> loc,
                                       ValueRange operands, Type elementType,
                                       SmallVectorImpl<Type> &out) {
  SmallVector<int64_t> shape;
  for (Value operand : operands) {
    RankedTensorType type = rankedType(operand);
    if (!type)
      return error(loc, "operands must be ranked tensors");
    SmallVector<int64_t> next;
    if (!mlir::OpTrait::util::getBroadcastedShape(shape, type.getShape(), next))
      return error(loc, "operand shapes are not broadcast-compatible");
    shape = std::move(next);
  }
  if (!elementType)
    elementType = getElementTypeOrSelf(operands.front().getType());
  out.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

std::optional<SmallVector<int64_t>> pp::onnx::getConstantInts(Value value) {
  // --pp-tensor-parallel annotates a constant shape operand as whole on
  // every device (upstream's partition needs every operand annotated): the
  // annotation holds the constant. Matched by name: the onnx dialect does
  // not depend on the shard dialect.
  while (value && value.getDefiningOp() &&
         value.getDefiningOp()->getName().getStringRef() == "shard.shard")
    value = value.getDefiningOp()->getOperand(0);
  DenseIntElementsAttr attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  SmallVector<int64_t> result;
  for (const APInt &v : attr.getValues<APInt>())
    result.push_back(v.getSExtValue());
  return result;
}

Type pp::onnx::getElementTypeForONNXDataType(MLIRContext *ctx,
                                             int64_t dataType) {
  Builder b(ctx);
  // Codes from onnx.proto's TensorProto.DataType.
  switch (dataType) {
  case 1:
    return b.getF32Type();
  case 2:
    return b.getIntegerType(8, /*isSigned=*/false);
  case 3:
    return b.getIntegerType(8);
  case 4:
    return b.getIntegerType(16, /*isSigned=*/false);
  case 5:
    return b.getIntegerType(16);
  case 6:
    return b.getI32Type();
  case 7:
    return b.getI64Type();
  case 9:
    return b.getI1Type();
  case 10:
    return b.getF16Type();
  case 11:
    return b.getF64Type();
  case 12:
    return b.getIntegerType(32, /*isSigned=*/false);
  case 13:
    return b.getIntegerType(64, /*isSigned=*/false);
  case 16:
    return b.getBF16Type();
  default:
    return nullptr;
  }
}

int64_t pp::onnx::getONNXDataTypeForFloat(Type element) {
  if (element.isF64())
    return 11;
  if (element.isF16())
    return 10;
  if (element.isBF16())
    return 16;
  return 1;
}

static SmallVector<int64_t> toVector(std::optional<ArrayRef<int64_t>> values,
                                     size_t size, int64_t fill) {
  if (values && !values->empty())
    return SmallVector<int64_t>(values->begin(), values->end());
  return SmallVector<int64_t>(size, fill);
}

//===----------------------------------------------------------------------===//
// Globals
//===----------------------------------------------------------------------===//

LogicalResult GlobalOp::verify() {
  StringRef kind = getKind();
  if (kind != kTrainable && kind != kState && kind != kConstant)
    return emitOpError("kind must be 'trainable', 'state' or 'constant', got '")
           << kind << "'";
  auto type = cast<RankedTensorType>(getType());
  if (!type.hasStaticShape())
    return emitOpError("type must be statically shaped, got ") << type;
  if (kind == kTrainable && !isa<FloatType>(type.getElementType()))
    return emitOpError("trainable globals must have a float element type");
  if (auto init = getInitialValueAttr(); init && init.getType() != type)
    return emitOpError("initial value type ")
           << init.getType() << " does not match " << type;
  return success();
}

LogicalResult
GlobalReadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto global =
      symbolTable.lookupNearestSymbolFrom<GlobalOp>(*this, getGlobalAttr());
  if (!global)
    return emitOpError("'") << getGlobal() << "' does not name an onnx.global";
  if (global.getType() != getValue().getType())
    return emitOpError("result type ")
           << getValue().getType() << " does not match the global's type "
           << global.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getX(); }

/// Folds an arithmetic op on small constants. Exported shape sub-graphs
/// compute dims with int64 Add/Sub/Mul/Div; float scalars (attention scales)
/// fold the same way. Broadcasting is limited to equal shapes and splats.
template <typename IntFn, typename FloatFn>
static OpFoldResult foldArithmetic(Attribute lhsAttr, Attribute rhsAttr,
                                   Type resultType, IntFn intFn,
                                   FloatFn floatFn) {
  auto lhs = dyn_cast_if_present<DenseElementsAttr>(lhsAttr);
  auto rhs = dyn_cast_if_present<DenseElementsAttr>(rhsAttr);
  auto type = dyn_cast<RankedTensorType>(resultType);
  if (!lhs || !rhs || !type || !type.hasStaticShape() ||
      type.getNumElements() > kMaxFoldElements)
    return {};
  auto fits = [&](DenseElementsAttr a) {
    return a.isSplat() || a.getType().getShape() == type.getShape();
  };
  if (!fits(lhs) || !fits(rhs))
    return {};
  int64_t n = type.getNumElements();
  Type element = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(element)) {
    auto a = llvm::to_vector(lhs.getValues<APFloat>());
    auto b = llvm::to_vector(rhs.getValues<APFloat>());
    SmallVector<APFloat> result;
    for (int64_t i = 0; i < n; ++i) {
      APFloat x = a[lhs.isSplat() ? 0 : i], y = b[rhs.isSplat() ? 0 : i];
      result.push_back(floatFn(x, y));
    }
    return DenseElementsAttr::get(type, result);
  }
  if (!element.isSignlessInteger() || element.isInteger(1))
    return {};
  auto a = llvm::to_vector(lhs.getValues<APInt>());
  auto b = llvm::to_vector(rhs.getValues<APInt>());
  SmallVector<APInt> result;
  for (int64_t i = 0; i < n; ++i) {
    std::optional<APInt> v =
        intFn(a[lhs.isSplat() ? 0 : i], b[rhs.isSplat() ? 0 : i]);
    if (!v)
      return {};
    result.push_back(*v);
  }
  return DenseElementsAttr::get(type, result);
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldArithmetic(
      adaptor.getA(), adaptor.getB(), getType(),
      [](const APInt &x, const APInt &y) -> std::optional<APInt> {
        return x + y;
      },
      [](APFloat x, const APFloat &y) {
        x.add(y, APFloat::rmNearestTiesToEven);
        return x;
      });
}
OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldArithmetic(
      adaptor.getA(), adaptor.getB(), getType(),
      [](const APInt &x, const APInt &y) -> std::optional<APInt> {
        return x - y;
      },
      [](APFloat x, const APFloat &y) {
        x.subtract(y, APFloat::rmNearestTiesToEven);
        return x;
      });
}
OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldArithmetic(
      adaptor.getA(), adaptor.getB(), getType(),
      [](const APInt &x, const APInt &y) -> std::optional<APInt> {
        return x * y;
      },
      [](APFloat x, const APFloat &y) {
        x.multiply(y, APFloat::rmNearestTiesToEven);
        return x;
      });
}
OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  // ONNX integer Div truncates toward zero, like APInt::sdiv.
  return foldArithmetic(
      adaptor.getA(), adaptor.getB(), getType(),
      [](const APInt &x, const APInt &y) -> std::optional<APInt> {
        if (y.isZero())
          return std::nullopt;
        return x.sdiv(y);
      },
      [](APFloat x, const APFloat &y) {
        x.divide(y, APFloat::rmNearestTiesToEven);
        return x;
      });
}

OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  bool floored = getFmod() == 0;
  return foldArithmetic(
      adaptor.getA(), adaptor.getB(), getType(),
      [floored](const APInt &x, const APInt &y) -> std::optional<APInt> {
        if (y.isZero())
          return std::nullopt;
        if (y.isAllOnes()) // MIN % -1 is 0 (srem would overflow)
          return APInt::getZero(x.getBitWidth());
        APInt r = x.srem(y);
        if (floored && !r.isZero() && r.isNegative() != y.isNegative())
          r += y;
        return r;
      },
      [](APFloat x, const APFloat &y) {
        x.mod(y); // C's fmod: the verifier allows only fmod = 1 on floats
        return x;
      });
}

LogicalResult ModOp::verify() {
  if (getFmod() != 0 && getFmod() != 1)
    return emitOpError("fmod must be 0 or 1, not ") << getFmod();
  if (getFmod() == 0 && isa<FloatType>(getElementTypeOrSelf(getA().getType())))
    return emitOpError("fmod must be 1 for floating-point operands (ONNX "
                       "defines no floored remainder of floats)");
  return success();
}

/// The elements of a small constant broadcast (numpy rules) to `type`.
static std::optional<SmallVector<Attribute>>
broadcastElements(Attribute attr, ShapedType type) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !type.hasStaticShape() ||
      type.getNumElements() > kMaxFoldElements)
    return std::nullopt;
  ArrayRef<int64_t> in = dense.getType().getShape(), out = type.getShape();
  if (in.size() > out.size())
    return std::nullopt;
  size_t offset = out.size() - in.size();
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) {
    if (in[d] != 1) {
      if (in[d] != out[d + offset])
        return std::nullopt;
      strides[d + offset] = stride;
    }
    stride *= in[d];
  }
  auto values = llvm::to_vector(dense.getValues<Attribute>());
  SmallVector<Attribute> result;
  for (int64_t i = 0, n = type.getNumElements(); i < n; ++i) {
    int64_t rem = i, source = 0;
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      source += (rem % out[d]) * strides[d];
      rem /= out[d];
    }
    result.push_back(values[source]);
  }
  return result;
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getX());
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return {};
  Type element = dense.getElementType();
  if (isa<FloatType>(element)) {
    SmallVector<APFloat> values;
    for (APFloat v : dense.getValues<APFloat>())
      values.push_back(neg(v));
    return DenseElementsAttr::get(dense.getType(), values);
  }
  if (!element.isSignlessInteger() || element.isInteger(1))
    return {};
  SmallVector<APInt> values;
  for (const APInt &v : dense.getValues<APInt>())
    values.push_back(-v);
  return DenseElementsAttr::get(dense.getType(), values);
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  // Exported shape sub-graphs test dims against -1 (Expand's "keep").
  auto type = cast<ShapedType>(getType());
  auto lhs = broadcastElements(adaptor.getA(), type);
  auto rhs = broadcastElements(adaptor.getB(), type);
  if (!lhs || !rhs)
    return {};
  SmallVector<bool> result;
  for (auto [a, b] : llvm::zip(*lhs, *rhs)) {
    if (auto x = dyn_cast<FloatAttr>(a))
      result.push_back(x.getValue().compare(cast<FloatAttr>(b).getValue()) ==
                       APFloat::cmpEqual);
    else if (auto x = dyn_cast<IntegerAttr>(a))
      result.push_back(x.getValue() == cast<IntegerAttr>(b).getValue());
    else
      return {};
  }
  return DenseElementsAttr::get(type, result);
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto type = cast<ShapedType>(getType());
  auto cond = broadcastElements(adaptor.getCondition(), type);
  auto x = broadcastElements(adaptor.getX(), type);
  auto y = broadcastElements(adaptor.getY(), type);
  if (!cond || !x || !y)
    return {};
  SmallVector<Attribute> result;
  for (auto [c, a, b] : llvm::zip(*cond, *x, *y)) {
    auto flag = dyn_cast<IntegerAttr>(c);
    if (!flag)
      return {};
    result.push_back(flag.getValue().isZero() ? b : a);
  }
  return DenseElementsAttr::get(type, result);
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be 'none' or 'tanh'");
  return success();
}

LogicalResult CeluOp::verify() {
  // Celu divides by alpha.
  if (getAlpha().isZero())
    return emitOpError("alpha must not be 0");
  return success();
}

template <typename SoftmaxLike>
static LogicalResult verifySoftmax(SoftmaxLike op) {
  int64_t rank = op.getInput().getType().getRank();
  if (failed(normalizeAxis(op.getLoc(), op.getAxis(), rank)))
    return failure();
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifySoftmax(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmax(*this); }

LogicalResult CastOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  Type element = getElementTypeForONNXDataType(context, adaptor.getTo());
  if (!element)
    return error(location, "unsupported ONNX data type " +
                               Twine(adaptor.getTo()) + " in 'to'");
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  inferred.push_back(type.clone(element));
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  auto type = cast<RankedTensorType>(getType());
  if (!input || input.getNumElements() > kMaxFoldElements)
    return {};
  if (input.getType() == type)
    return input;
  Type from = input.getElementType(), to = type.getElementType();
  SmallVector<double> values;
  if (isa<FloatType>(from))
    for (const APFloat &v : input.getValues<APFloat>())
      values.push_back(v.convertToDouble());
  else if (from.isInteger(1))
    for (bool v : input.getValues<bool>())
      values.push_back(v);
  else
    for (const APInt &v : input.getValues<APInt>())
      values.push_back(from.isUnsignedInteger() ? double(v.getZExtValue())
                                                : double(v.getSExtValue()));
  if (auto floatType = dyn_cast<FloatType>(to)) {
    SmallVector<APFloat> result;
    for (double v : values) {
      APFloat f(v);
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      result.push_back(f);
    }
    return DenseElementsAttr::get(type, result);
  }
  unsigned width = to.getIntOrFloatBitWidth();
  SmallVector<APInt> result;
  for (double v : values)
    result.push_back(width == 1 ? APInt(1, v != 0)
                                : APInt(width, int64_t(v), /*isSigned=*/true,
                                        /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, result);
}

void pp::onnx::assignDropoutStreams(Operation *root) {
  int64_t next = 0;
  root->walk([&](DropoutOp op) {
    if (std::optional<int64_t> stream = op.getStream())
      next = std::max(next, *stream + 1);
  });
  root->walk([&](DropoutOp op) {
    if (!op.getStream())
      op.setStreamAttr(Builder(op).getI64IntegerAttr(next++));
  });
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  inferred.push_back(type);
  inferred.push_back(type.clone(IntegerType::get(context, 1)));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions, convolution, normalisation, pooling
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto a = cast<RankedTensorType>(adaptor.getA().getType());
  auto b = cast<RankedTensorType>(adaptor.getB().getType());
  if (a.getRank() == 0 || b.getRank() == 0)
    return error(location, "MatMul operands must have rank >= 1");
  SmallVector<int64_t> aShape(a.getShape()), bShape(b.getShape());
  bool vecA = aShape.size() == 1, vecB = bShape.size() == 1;
  if (vecA)
    aShape.insert(aShape.begin(), 1);
  if (vecB)
    bShape.push_back(1);
  int64_t k = aShape.back(), k2 = bShape[bShape.size() - 2];
  if (!ShapedType::isDynamic(k) && !ShapedType::isDynamic(k2) && k != k2)
    return error(location, "MatMul contraction dims differ: " + Twine(k) +
                               " vs " + Twine(k2));
  SmallVector<int64_t> batch;
  if (!mlir::OpTrait::util::getBroadcastedShape(
          ArrayRef<int64_t>(aShape).drop_back(2),
          ArrayRef<int64_t>(bShape).drop_back(2), batch))
    return error(location, "MatMul batch dims are not broadcast-compatible");
  if (!vecA)
    batch.push_back(aShape[aShape.size() - 2]);
  if (!vecB)
    batch.push_back(bShape.back());
  inferred.push_back(RankedTensorType::get(batch, a.getElementType()));
  return success();
}

double MatMulOp::getForwardFlops() {
  // In double: products of static sizes can pass int64's range.
  double k = getA().getType().getShape().back();
  return 2 * k * getNumElements(getY().getType());
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto a = cast<RankedTensorType>(adaptor.getA().getType());
  auto b = cast<RankedTensorType>(adaptor.getB().getType());
  if (a.getRank() != 2 || b.getRank() != 2)
    return error(location, "Gemm operands A and B must be 2-D");
  int64_t m = a.getDimSize(adaptor.getTransA() ? 1 : 0);
  int64_t ka = a.getDimSize(adaptor.getTransA() ? 0 : 1);
  int64_t kb = b.getDimSize(adaptor.getTransB() ? 1 : 0);
  int64_t n = b.getDimSize(adaptor.getTransB() ? 0 : 1);
  if (ka != kb)
    return error(location, "Gemm contraction dims differ: " + Twine(ka) +
                               " vs " + Twine(kb));
  auto type = RankedTensorType::get({m, n}, a.getElementType());
  if (Value c = adaptor.getC()) {
    SmallVector<int64_t> shape;
    if (!mlir::OpTrait::util::getBroadcastedShape(
            type.getShape(), cast<RankedTensorType>(c.getType()).getShape(),
            shape) ||
        ArrayRef<int64_t>(shape) != type.getShape())
      return error(location, "Gemm C is not unidirectionally broadcastable "
                             "to the result");
  }
  inferred.push_back(type);
  return success();
}

double GemmOp::getForwardFlops() {
  auto a = getA().getType();
  double k = a.getDimSize(getTransA() ? 0 : 1);
  return 2 * k * getNumElements(getY().getType());
}

/// Output spatial sizes of a convolution or pooling window.
static FailureOr<SmallVector<int64_t>>
inferWindowOutput(std::optional<Location> loc, ArrayRef<int64_t> spatial,
                  ArrayRef<int64_t> kernel, StringRef autoPad,
                  std::optional<ArrayRef<int64_t>> padsAttr,
                  std::optional<ArrayRef<int64_t>> stridesAttr,
                  std::optional<ArrayRef<int64_t>> dilationsAttr,
                  bool ceilMode) {
  size_t n = spatial.size();
  if (kernel.size() != n)
    return error(loc, "kernel has " + Twine(kernel.size()) +
                          " dims but the input has " + Twine(n) +
                          " spatial dims");
  SmallVector<int64_t> strides = toVector(stridesAttr, n, 1);
  SmallVector<int64_t> dilations = toVector(dilationsAttr, n, 1);
  SmallVector<int64_t> pads = toVector(padsAttr, 2 * n, 0);
  if (strides.size() != n || dilations.size() != n || pads.size() != 2 * n)
    return error(loc, "strides/dilations need " + Twine(n) +
                          " values and pads " + Twine(2 * n));
  SmallVector<int64_t> out;
  auto overflow = [&](size_t i) {
    return error(
        loc, "spatial dim " + Twine(i) + " (size " + Twine(spatial[i]) +
                 ", kernel " + Twine(kernel[i]) + ", pads " + Twine(pads[i]) +
                 "/" + Twine(pads[i + n]) + ", stride " + Twine(strides[i]) +
                 ", dilation " + Twine(dilations[i]) + ") overflows int64");
  };
  for (size_t i = 0; i < n; ++i) {
    if (strides[i] <= 0 || dilations[i] <= 0 || kernel[i] <= 0)
      return error(loc, "kernel, strides and dilations must be positive");
    if (pads[i] < 0 || pads[i + n] < 0)
      return error(loc, "pads must be >= 0");
    // Attributes come from the model file: every step is overflow-checked.
    std::optional<int64_t> effective =
        llvm::checkedMul(dilations[i], kernel[i] - 1);
    if (effective)
      effective = llvm::checkedAdd(*effective, int64_t(1));
    std::optional<int64_t> rounded =
        llvm::checkedAdd(spatial[i], strides[i] - 1);
    if (!effective || !rounded)
      return overflow(i);
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      out.push_back(*rounded / strides[i]);
      continue;
    }
    std::optional<int64_t> padded = autoPad == "VALID"
                                        ? std::optional<int64_t>(spatial[i])
                                        : llvm::checkedAdd(spatial[i], pads[i]);
    if (padded && autoPad != "VALID")
      padded = llvm::checkedAdd(*padded, pads[i + n]);
    if (!padded)
      return overflow(i);
    int64_t span = *padded - *effective;
    if (span < 0)
      return error(loc, "window of size " + Twine(*effective) +
                            " exceeds the padded input of size " +
                            Twine(*padded));
    int64_t size = (ceilMode ? span / strides[i] + (span % strides[i] != 0)
                             : span / strides[i]) +
                   1;
    // With ceil_mode, a last window that starts inside the right padding is
    // dropped (as in ONNX's reference and PyTorch); spatial + left pad <=
    // padded does not overflow, a start past int64 is past it.
    if (ceilMode) {
      std::optional<int64_t> lastStart = llvm::checkedMul(size - 1, strides[i]);
      if (!lastStart || *lastStart >= spatial[i] + pads[i])
        --size;
    }
    out.push_back(size);
  }
  return out;
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto w = cast<RankedTensorType>(adaptor.getW().getType());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return error(location, "Conv needs X of rank >= 3 and W of the same rank");
  int64_t group = adaptor.getGroup();
  if (group <= 0 || x.getDimSize(1) != w.getDimSize(1) * group)
    return error(location, "Conv input channels " + Twine(x.getDimSize(1)) +
                               " != W channels " + Twine(w.getDimSize(1)) +
                               " x group " + Twine(group));
  if (w.getDimSize(0) % group != 0)
    return error(location, "Conv output channels must be divisible by group");
  if (Value b = adaptor.getB()) {
    auto bt = cast<RankedTensorType>(b.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != w.getDimSize(0))
      return error(location, "Conv bias must be 1-D of size M");
  }
  ArrayRef<int64_t> kernel = w.getShape().drop_front(2);
  if (auto ks = adaptor.getKernelShape(); ks && *ks != kernel)
    return error(location, "kernel_shape does not match W");
  auto spatial = inferWindowOutput(
      location, x.getShape().drop_front(2), kernel, adaptor.getAutoPad(),
      adaptor.getPads(), adaptor.getStrides(), adaptor.getDilations(), false);
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> shape = {x.getDimSize(0), w.getDimSize(0)};
  shape.append(*spatial);
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

/// ConvTranspose's checks and geometry (see the op's description).
template <typename Adaptor>
static FailureOr<ConvTransposeGeometry>
resolveConvTranspose(std::optional<Location> loc, Adaptor adaptor) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto w = cast<RankedTensorType>(adaptor.getW().getType());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return error(loc, "ConvTranspose needs X of rank >= 3 and W of the same "
                      "rank");
  int64_t group = adaptor.getGroup();
  if (group <= 0 || x.getDimSize(1) != w.getDimSize(0) ||
      x.getDimSize(1) % group != 0)
    return error(loc, "ConvTranspose input channels " + Twine(x.getDimSize(1)) +
                          " must equal W's dim 0 (" + Twine(w.getDimSize(0)) +
                          ") and divide by group " + Twine(group));
  if (Value b = adaptor.getB()) {
    auto bt = cast<RankedTensorType>(b.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != w.getDimSize(1) * group)
      return error(loc, "ConvTranspose bias must be 1-D of size M = " +
                            Twine(w.getDimSize(1) * group));
  }
  size_t n = x.getRank() - 2;
  ConvTransposeGeometry g;
  g.kernel.assign(w.getShape().begin() + 2, w.getShape().end());
  if (auto ks = adaptor.getKernelShape(); ks && *ks != ArrayRef(g.kernel))
    return error(loc, "kernel_shape does not match W");
  g.strides = toVector(adaptor.getStrides(), n, 1);
  g.dilations = toVector(adaptor.getDilations(), n, 1);
  g.pads = toVector(adaptor.getPads(), 2 * n, 0);
  SmallVector<int64_t> outputPadding =
      toVector(adaptor.getOutputPadding(), n, 0);
  if (g.strides.size() != n || g.dilations.size() != n ||
      g.pads.size() != 2 * n || outputPadding.size() != n)
    return error(loc, "strides/dilations/output_padding need " + Twine(n) +
                          " values and pads " + Twine(2 * n));
  SmallVector<int64_t> outputShape;
  if (auto os = adaptor.getOutputShape(); os && !os->empty()) {
    // Spatial dims, or the whole shape.
    ArrayRef<int64_t> dims = *os;
    if (dims.size() == n + 2)
      dims = dims.drop_front(2);
    if (dims.size() != n)
      return error(loc, "output_shape needs " + Twine(n) + " spatial dims");
    outputShape.assign(dims.begin(), dims.end());
  }
  StringRef autoPad = adaptor.getAutoPad();
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return error(loc, "unsupported auto_pad '" + autoPad + "'");
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.getDimSize(i + 2), s = g.strides[i], d = g.dilations[i];
    int64_t k = g.kernel[i], op = outputPadding[i];
    if (s <= 0 || d <= 0 || k <= 0 || in > (int64_t(1) << 40) ||
        s > (int64_t(1) << 20) || d > (int64_t(1) << 20) ||
        k > (int64_t(1) << 20))
      return error(loc, "kernel, strides and dilations must be positive "
                        "(and below 2^20)");
    if (op < 0 || op >= s)
      return error(loc, "output_padding " + Twine(op) + " of spatial dim " +
                            Twine(i) +
                            " must be >= 0 and less than the "
                            "stride " +
                            Twine(s));
    int64_t full = s * (in - 1) + op + d * (k - 1) + 1;
    int64_t target = -1;
    if (!outputShape.empty())
      target = outputShape[i];
    else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
      target = in * s;
    if (target >= 0) {
      int64_t total = full - target;
      if (total < 0)
        return error(loc, "output size " + Twine(target) + " of spatial dim " +
                              Twine(i) + " exceeds the " + Twine(full) +
                              " the window reaches (negative pads)");
      // ONNX: SAME_UPPER puts the odd pad at the end, the others at the
      // start.
      int64_t half = total / 2;
      g.pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      g.pads[i + n] = autoPad == "SAME_UPPER" ? total - half : half;
    } else if (autoPad == "VALID") {
      g.pads[i] = g.pads[i + n] = 0;
    }
    if (g.pads[i] < 0 || g.pads[i + n] < 0)
      return error(loc, "pads must be >= 0");
    int64_t out = full - g.pads[i] - g.pads[i + n];
    if (out <= 0)
      return error(loc, "pads leave no output in spatial dim " + Twine(i));
    g.outputSpatial.push_back(out);
  }
  return g;
}

LogicalResult ConvTransposeOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto g = resolveConvTranspose(location, adaptor);
  if (failed(g))
    return failure();
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto w = cast<RankedTensorType>(adaptor.getW().getType());
  int64_t group = adaptor.getGroup();
  SmallVector<int64_t> shape = {x.getDimSize(0), w.getDimSize(1) * group};
  shape.append(g->outputSpatial);
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

ConvTransposeGeometry ConvTransposeOp::getGeometry() {
  return *resolveConvTranspose(getLoc(), Adaptor(*this));
}

double ConvTransposeOp::getForwardFlops() {
  auto w = getW().getType();
  // Each input element meets W's M / group x kernel taps of its channel.
  double perInput =
      2.0 * static_cast<double>(getNumElements(w) / w.getDimSize(0));
  return perInput * getNumElements(getX().getType());
}

double ConvOp::getForwardFlops() {
  auto w = getW().getType();
  double perOutput =
      2.0 * static_cast<double>(getNumElements(w) / w.getDimSize(0));
  return perOutput * getNumElements(getY().getType());
}

LogicalResult BatchNormalizationOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  if (x.getRank() < 2)
    return error(location, "BatchNormalization input must have rank >= 2");
  auto channels = RankedTensorType::get({x.getDimSize(1)}, x.getElementType());
  for (Value v : {adaptor.getScale(), adaptor.getB()})
    if (v.getType() != channels)
      return error(location, "BatchNormalization scale and B must be of type " +
                                 llvm::formatv("{0}", channels).str());
  // The running statistics may be of another float type (ONNX's T2): fp32
  // state under bf16 or fp16 activations.
  Type statistics = adaptor.getInputMean().getType();
  if (adaptor.getInputVar().getType() != statistics ||
      cast<RankedTensorType>(statistics).getShape() != channels.getShape())
    return error(location, "BatchNormalization mean and var must be of one "
                           "type of shape [" +
                               std::to_string(x.getDimSize(1)) + "]");
  inferred.append({x, statistics, statistics});
  return success();
}

LogicalResult LayerNormalizationOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto axis = normalizeAxis(location, adaptor.getAxis(), x.getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = x.getShape().drop_front(*axis);
  for (Value v : {adaptor.getScale(), adaptor.getB()}) {
    if (!v)
      continue;
    SmallVector<int64_t> shape;
    if (!mlir::OpTrait::util::getBroadcastedShape(
            normalized, cast<RankedTensorType>(v.getType()).getShape(),
            shape) ||
        ArrayRef<int64_t>(shape) != normalized)
      return error(location, "LayerNormalization Scale/B must broadcast to "
                             "the normalised dims");
  }
  SmallVector<int64_t> statShape(x.getShape());
  for (int64_t i = *axis; i < x.getRank(); ++i)
    statShape[i] = 1;
  // stash_type 1 keeps the statistics in float32.
  Type statElement = adaptor.getStashType() == 1 ? Float32Type::get(context)
                                                 : x.getElementType();
  auto stats = RankedTensorType::get(statShape, statElement);
  inferred.append({x, stats, stats});
  return success();
}

template <typename PoolOp>
static LogicalResult inferPool(std::optional<Location> location,
                               typename PoolOp::Adaptor adaptor,
                               SmallVectorImpl<Type> &inferred,
                               std::optional<ArrayRef<int64_t>> dilations) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  if (x.getRank() < 3)
    return error(location, "pooling input must have rank >= 3");
  auto spatial = inferWindowOutput(
      location, x.getShape().drop_front(2), adaptor.getKernelShape(),
      adaptor.getAutoPad(), adaptor.getPads(), adaptor.getStrides(), dilations,
      adaptor.getCeilMode() != 0);
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> shape(x.getShape().take_front(2));
  shape.append(*spatial);
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(inferPool<MaxPoolOp>(location, adaptor, inferred,
                                  adaptor.getDilations())))
    return failure();
  auto y = cast<RankedTensorType>(inferred.back());
  inferred.push_back(y.clone(IntegerType::get(context, 64)));
  return success();
}
double MaxPoolOp::getForwardFlops() {
  double window = 1;
  for (int64_t k : getKernelShape())
    window *= k;
  return window * getNumElements(getY().getType());
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferPool<AveragePoolOp>(location, adaptor, inferred, std::nullopt);
}
double AveragePoolOp::getForwardFlops() {
  double window = 1;
  for (int64_t k : getKernelShape())
    window *= k;
  return window * getNumElements(getY().getType());
}

static LogicalResult inferGlobalPool(std::optional<Location> location, Value x,
                                     SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getRank() < 3)
    return error(location, "global pooling input must have rank >= 3");
  SmallVector<int64_t> shape(type.getShape());
  std::fill(shape.begin() + 2, shape.end(), 1);
  inferred.push_back(type.clone(shape));
  return success();
}
LogicalResult GlobalAveragePoolOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferGlobalPool(location, adaptor.getX(), inferred);
}
double GlobalAveragePoolOp::getForwardFlops() {
  return static_cast<double>(getNumElements(getX().getType()));
}
LogicalResult GlobalMaxPoolOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferGlobalPool(location, adaptor.getX(), inferred);
}
double GlobalMaxPoolOp::getForwardFlops() {
  return static_cast<double>(getNumElements(getX().getType()));
}

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto scores = cast<RankedTensorType>(adaptor.getScores().getType());
  auto labels = cast<RankedTensorType>(adaptor.getLabels().getType());
  if (scores.getRank() < 2 || labels.getRank() != scores.getRank() - 1)
    return error(location, "scores must be [N, C, ...] and labels [N, ...]");
  SmallVector<int64_t> labelShape(scores.getShape());
  labelShape.erase(labelShape.begin() + 1);
  if (failed(verifyCompatibleShape(labelShape, labels.getShape())))
    return error(location, "labels shape does not match scores without C");
  StringRef reduction = adaptor.getReduction();
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return error(location, "reduction must be 'mean', 'sum' or 'none'");
  if (reduction == "none")
    inferred.push_back(labels.clone(scores.getElementType()));
  else
    inferred.push_back(RankedTensorType::get({}, scores.getElementType()));
  inferred.push_back(scores);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(std::optional<Location> location,
                                 RankedTensorType data,
                                 std::optional<ArrayRef<int64_t>> axesIn,
                                 bool keepDims, bool noopWithEmptyAxes,
                                 SmallVectorImpl<Type> &inferred) {
  int64_t rank = data.getRank();
  SmallVector<bool> reduced(rank, false);
  if (!axesIn || axesIn->empty()) {
    if (!noopWithEmptyAxes)
      reduced.assign(rank, true);
  } else {
    for (int64_t axis : *axesIn) {
      auto a = normalizeAxis(location, axis, rank, "reduction axis");
      if (failed(a))
        return failure();
      reduced[*a] = true;
    }
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      shape.push_back(data.getDimSize(i));
    else if (keepDims)
      shape.push_back(1);
  }
  inferred.push_back(data.clone(shape));
  return success();
}

/// ReduceMean, ReduceMax, ReduceMin: axes an attribute (none: all).
template <typename Adaptor>
static LogicalResult inferAttributeAxesReduce(std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferReduce(
      location, cast<RankedTensorType>(adaptor.getData().getType()),
      adaptor.getAxes(), adaptor.getKeepdims() != 0, false, inferred);
}

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  return inferAttributeAxesReduce(location, adaptor, inferred);
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferAttributeAxesReduce(location, adaptor, inferred);
}

LogicalResult ReduceMinOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferAttributeAxesReduce(location, adaptor, inferred);
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  std::optional<SmallVector<int64_t>> axes;
  if (Value axesValue = adaptor.getAxes()) {
    axes = getConstantInts(axesValue);
    if (!axes)
      return error(location, "ReduceSum axes must be a constant");
  }
  std::optional<ArrayRef<int64_t>> axesRef;
  if (axes)
    axesRef = ArrayRef<int64_t>(*axes);
  return inferReduce(location,
                     cast<RankedTensorType>(adaptor.getData().getType()),
                     axesRef, adaptor.getKeepdims() != 0,
                     adaptor.getNoopWithEmptyAxes() != 0, inferred);
}

//===----------------------------------------------------------------------===//
// Data movement and shape ops
//===----------------------------------------------------------------------===//

/// The constant shape operand of a shape-producing op, or an error naming it.
static FailureOr<SmallVector<int64_t>>
requireConstantShape(std::optional<Location> location, Value value,
                     StringRef opName, StringRef operandName) {
  auto ints = getConstantInts(value);
  if (!ints)
    return error(location, opName + " '" + operandName +
                               "' is not a constant: the result shape cannot "
                               "be made static");
  return *ints;
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOfShapeOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto shape = requireConstantShape(location, adaptor.getInput(),
                                    "ConstantOfShape", "input");
  if (failed(shape))
    return failure();
  for (int64_t d : *shape)
    if (d < 0)
      return error(location, "ConstantOfShape dims must be >= 0");
  Type element = Float32Type::get(context);
  if (auto value = adaptor.getValueAttr())
    element = value.getElementType();
  inferred.push_back(RankedTensorType::get(*shape, element));
  return success();
}

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  auto type = cast<RankedTensorType>(getType());
  if (type.getNumElements() > kMaxFoldElements)
    return {};
  Attribute element;
  if (auto value = getValueAttr()) {
    auto dense = dyn_cast<DenseElementsAttr>(value);
    if (!dense || dense.getNumElements() != 1)
      return {};
    element = *dense.value_begin<Attribute>();
  } else {
    element = FloatAttr::get(type.getElementType(), 0.0);
  }
  return DenseElementsAttr::get(type, element);
}

/// [start, end) of Shape's slice of dims, clamped as ONNX specifies.
/// (ODS returns I64Attr values as uint64_t: convert before comparing.)
static std::pair<int64_t, int64_t>
shapeBounds(int64_t start, std::optional<uint64_t> end, int64_t rank) {
  auto clamp = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t first = clamp(start);
  int64_t last = end ? clamp(static_cast<int64_t>(*end)) : rank;
  return {first, std::max(first, last)};
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  int64_t rank = cast<RankedTensorType>(adaptor.getData().getType()).getRank();
  auto [start, end] = shapeBounds(adaptor.getStart(), adaptor.getEnd(), rank);
  inferred.push_back(
      RankedTensorType::get({end - start}, IntegerType::get(context, 64)));
  return success();
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto dataType = getData().getType();
  if (!dataType.hasStaticShape())
    return {};
  auto [start, end] = shapeBounds(getStart(), getEnd(), dataType.getRank());
  SmallVector<int64_t> dims;
  for (int64_t i = start; i < end; ++i)
    dims.push_back(dataType.getDimSize(i));
  return DenseIntElementsAttr::get(cast<RankedTensorType>(getType()), dims);
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t rank = type.getRank();
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return error(location, "Flatten axis out of range");
  // Products of dims a model declares: overflow-checked (a zero elsewhere
  // keeps the tensor itself small).
  std::optional<int64_t> outer = 1, inner = 1;
  for (int64_t i = 0; i < rank && outer && inner; ++i) {
    std::optional<int64_t> &part = i < axis ? outer : inner;
    part = llvm::checkedMul(*part, type.getDimSize(i));
  }
  if (!outer || !inner)
    return error(location, "Flatten of " + Twine(rank) +
                               " dims overflows int64 at axis " + Twine(axis));
  inferred.push_back(type.clone({*outer, *inner}));
  return success();
}

static SmallVector<int64_t> transposePermutation(TransposeOp::Adaptor adaptor,
                                                 int64_t rank) {
  if (auto perm = adaptor.getPerm(); perm && !perm->empty())
    return SmallVector<int64_t>(perm->begin(), perm->end());
  SmallVector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);
  return perm;
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  SmallVector<int64_t> perm = transposePermutation(adaptor, type.getRank());
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return error(location, "perm has " + Twine(perm.size()) +
                               " entries for a tensor of rank " +
                               Twine(type.getRank()));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return error(location, "perm is not a permutation");
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  inferred.push_back(type.clone(shape));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_if_present<DenseElementsAttr>(adaptor.getData());
  auto type = getData().getType();
  SmallVector<int64_t> perm =
      transposePermutation(Adaptor(*this), type.getRank());
  if (llvm::equal(perm, llvm::seq<int64_t>(0, type.getRank())))
    return getData();
  if (!input || input.getNumElements() > kMaxFoldElements)
    return {};
  if (input.isSplat())
    return input.resizeSplat(cast<ShapedType>(getType()));
  // Gather the elements in result order.
  auto values = llvm::to_vector(input.getValues<Attribute>());
  auto resultType = cast<RankedTensorType>(getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> inStrides(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i)
    inStrides[i] = inStrides[i + 1] * type.getDimSize(i + 1);
  SmallVector<Attribute> result;
  SmallVector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < resultType.getNumElements(); ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d)
      offset += index[d] * inStrides[perm[d]];
    result.push_back(values[offset]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < resultType.getDimSize(d))
        break;
      index[d] = 0;
    }
  }
  return DenseElementsAttr::get(resultType, result);
}

/// Reinterprets a small constant in a new shape (shared by the reshaping
/// folds).
static OpFoldResult foldReshapeLike(Attribute input, Type resultType) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(input);
  if (!dense || dense.getNumElements() > kMaxFoldElements ||
      !cast<ShapedType>(resultType).hasStaticShape())
    return {};
  return dense.reshape(cast<ShapedType>(resultType));
}

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  auto target =
      requireConstantShape(location, adaptor.getShape(), "Reshape", "shape");
  if (failed(target))
    return failure();
  SmallVector<int64_t> shape = *target;
  int64_t inferIndex = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == 0 && !adaptor.getAllowzero()) {
      if (static_cast<int64_t>(i) >= type.getRank())
        return error(location, "Reshape copies dim " + Twine(i) +
                                   " that the input does not have");
      d = type.getDimSize(i);
    }
    if (d == -1) {
      if (inferIndex >= 0)
        return error(location, "Reshape shape has more than one -1");
      inferIndex = i;
      continue;
    }
    if (d < 0)
      return error(location, "Reshape shape has a negative dim " + Twine(d));
    std::optional<int64_t> product = llvm::checkedMul(known, d);
    if (!product)
      return error(location, "Reshape shape has more than 2^63 elements");
    known = *product;
  }
  int64_t total = type.getNumElements();
  if (inferIndex >= 0) {
    if (known == 0 || total % known != 0)
      return error(location, "Reshape cannot infer the -1 dim of " +
                                 Twine(total) + " elements");
    shape[inferIndex] = total / known;
  } else if (known != total) {
    return error(location, "Reshape from " + Twine(total) + " to " +
                               Twine(known) + " elements");
  }
  inferred.push_back(type.clone(shape));
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType())
    return getData();
  return foldReshapeLike(adaptor.getData(), getType());
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t rank = type.getRank();
  SmallVector<bool> drop(rank, false);
  if (Value axesValue = adaptor.getAxes()) {
    auto axes = requireConstantShape(location, axesValue, "Squeeze", "axes");
    if (failed(axes))
      return failure();
    for (int64_t axis : *axes) {
      auto a = normalizeAxis(location, axis, rank);
      if (failed(a))
        return failure();
      if (type.getDimSize(*a) != 1)
        return error(location, "Squeeze axis " + Twine(axis) + " has size " +
                                   Twine(type.getDimSize(*a)));
      drop[*a] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      drop[i] = type.getDimSize(i) == 1;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      shape.push_back(type.getDimSize(i));
  inferred.push_back(type.clone(shape));
  return success();
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(adaptor.getData(), getType());
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  auto axes =
      requireConstantShape(location, adaptor.getAxes(), "Unsqueeze", "axes");
  if (failed(axes))
    return failure();
  int64_t rank = type.getRank() + axes->size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    auto a = normalizeAxis(location, axis, rank);
    if (failed(a))
      return failure();
    if (inserted[*a])
      return error(location, "Unsqueeze axes repeat " + Twine(axis));
    inserted[*a] = true;
  }
  SmallVector<int64_t> shape;
  int64_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(inserted[i] ? 1 : type.getDimSize(next++));
  inferred.push_back(type.clone(shape));
  return success();
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(adaptor.getData(), getType());
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  auto target =
      requireConstantShape(location, adaptor.getShape(), "Expand", "shape");
  if (failed(target))
    return failure();
  SmallVector<int64_t> shape;
  if (!mlir::OpTrait::util::getBroadcastedShape(type.getShape(), *target,
                                                shape))
    return error(location, "Expand shape is not broadcast-compatible");
  inferred.push_back(type.clone(shape));
  return success();
}

static FailureOr<rt::PadMode> parsePadMode(std::optional<Location> location,
                                           StringRef mode) {
  if (mode == "constant")
    return rt::PadMode::Constant;
  if (mode == "reflect")
    return rt::PadMode::Reflect;
  if (mode == "edge")
    return rt::PadMode::Edge;
  return error(location, "Pad mode '" + mode +
                             "' is not supported (constant, reflect, edge)");
}

/// Begin then end counts of every dim of a Pad, from its constant pads and
/// axes, checked against the data shape.
static FailureOr<SmallVector<int64_t>>
computePads(std::optional<Location> location, PadOp::Adaptor adaptor) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t rank = type.getRank();
  auto mode = parsePadMode(location, adaptor.getMode());
  auto pads = requireConstantShape(location, adaptor.getPads(), "Pad", "pads");
  if (failed(mode) || failed(pads))
    return failure();
  SmallVector<int64_t> axes;
  if (Value v = adaptor.getAxes()) {
    auto a = requireConstantShape(location, v, "Pad", "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  if (static_cast<int64_t>(pads->size()) !=
      2 * static_cast<int64_t>(axes.size()))
    return error(location, "Pad has " + Twine(pads->size()) + " pads for " +
                               Twine(axes.size()) +
                               " axes; it needs two per axis");
  if (Value v = adaptor.getConstantValue()) {
    auto valueType = cast<RankedTensorType>(v.getType());
    if (valueType.getNumElements() != 1 ||
        valueType.getElementType() != type.getElementType())
      return error(location, "Pad constant_value must be one element of the "
                             "data's element type");
    if (!matchPattern(v, m_Constant()))
      return error(location, "Pad 'constant_value' is not a constant");
  }
  SmallVector<int64_t> resolved(2 * rank, 0);
  SmallVector<bool> seen(rank, false);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    auto a = normalizeAxis(location, axis, rank, "Pad axis");
    if (failed(a))
      return failure();
    if (seen[*a])
      return error(location, "Pad axes repeat " + Twine(axis));
    seen[*a] = true;
    resolved[*a] = (*pads)[i];
    resolved[*a + rank] = (*pads)[i + axes.size()];
  }
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = type.getDimSize(d),
            size = dim + resolved[d] + resolved[d + rank];
    if (size < 0)
      return error(location, "Pad crops dim " + Twine(d) + " of size " +
                                 Twine(dim) + " by more than its size");
    if (*mode != rt::PadMode::Constant && dim == 0 && size > 0)
      return error(location, "Pad cannot " + adaptor.getMode() +
                                 "-pad the empty dim " + Twine(d));
  }
  return resolved;
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> location,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto pads = computePads(location, adaptor);
  if (failed(pads))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t d = 0; d < rank; ++d)
    shape[d] += (*pads)[d] + (*pads)[d + rank];
  inferred.push_back(type.clone(shape));
  return success();
}

FailureOr<SmallVector<int64_t>> PadOp::getResolvedPads() {
  return computePads(getLoc(), Adaptor(*this));
}

FailureOr<rt::PadMode> PadOp::getPadMode() {
  return parsePadMode(getLoc(), getMode());
}

double PadOp::getPadValue() {
  DenseElementsAttr value;
  if (!getConstantValue() ||
      !matchPattern(getConstantValue(), m_Constant(&value)))
    return 0.0;
  Attribute element = *value.value_begin<Attribute>();
  if (auto f = dyn_cast<FloatAttr>(element))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(element))
    return i.getType().isUnsignedInteger() || i.getType().isInteger(1)
               ? double(i.getValue().getZExtValue())
               : double(i.getValue().getSExtValue());
  return 0.0;
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  // torchvision's DenseNet pads by zeros in front of its average pools.
  if (getData().getType() == getType()) {
    auto pads = computePads(std::nullopt, Adaptor(*this));
    if (succeeded(pads) &&
        llvm::all_of(*pads, [](int64_t p) { return p == 0; }))
      return getData();
  }
  return {};
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  auto type = cast<ShapedType>(getType());
  if (getInput().getType() == type)
    return getInput();
  auto input = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  if (input && input.isSplat())
    return input.resizeSplat(type);
  auto values = broadcastElements(input, type);
  if (!values)
    return {};
  return DenseElementsAttr::get(type, *values);
}

OpFoldResult SizeOp::fold(FoldAdaptor) {
  auto data = cast<ShapedType>(getData().getType());
  if (!data.hasStaticShape())
    return {};
  return DenseElementsAttr::get(cast<ShapedType>(getType()),
                                ArrayRef<int64_t>{data.getNumElements()});
}

/// Range's scalars as doubles (exact for the shape-sized integers it makes).
static FailureOr<std::array<double, 3>>
rangeOperands(std::optional<Location> location, RangeOp::Adaptor adaptor) {
  std::array<double, 3> values;
  Value operands[] = {adaptor.getStart(), adaptor.getLimit(),
                      adaptor.getDelta()};
  const char *names[] = {"start", "limit", "delta"};
  Type element = getElementTypeOrSelf(operands[0].getType());
  for (int i = 0; i < 3; ++i) {
    DenseElementsAttr dense;
    auto type = cast<RankedTensorType>(operands[i].getType());
    if (type.getNumElements() != 1 || type.getElementType() != element)
      return error(location, "Range " + Twine(names[i]) +
                                 " must be one element of start's type");
    if (!matchPattern(operands[i], m_Constant(&dense)))
      return error(location, "Range '" + Twine(names[i]) +
                                 "' is not a constant: the result shape "
                                 "cannot be made static");
    Attribute v = *dense.value_begin<Attribute>();
    if (auto f = dyn_cast<FloatAttr>(v))
      values[i] = f.getValueAsDouble();
    else
      values[i] = double(cast<IntegerAttr>(v).getValue().getSExtValue());
  }
  if (values[2] == 0)
    return error(location, "Range delta must not be 0");
  return values;
}

static int64_t rangeCount(const std::array<double, 3> &v) {
  return std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((v[1] - v[0]) / v[2])));
}

LogicalResult RangeOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto values = rangeOperands(location, adaptor);
  if (failed(values))
    return failure();
  int64_t count = rangeCount(*values);
  if (count > kMaxFoldElements)
    return error(location, "Range of " + Twine(count) +
                               " elements: more than the " +
                               Twine(kMaxFoldElements) + " that fold");
  inferred.push_back(RankedTensorType::get(
      {count}, getElementTypeOrSelf(adaptor.getStart().getType())));
  return success();
}

OpFoldResult RangeOp::fold(FoldAdaptor) {
  auto values = rangeOperands(std::nullopt, Adaptor(*this));
  if (failed(values))
    return {};
  auto type = cast<ShapedType>(getType());
  Type element = type.getElementType();
  SmallVector<Attribute> result;
  auto [start, limit, delta] = *values;
  for (int64_t i = 0, n = type.getNumElements(); i < n; ++i) {
    double v = start + double(i) * delta;
    if (isa<FloatType>(element))
      result.push_back(FloatAttr::get(element, v));
    else
      result.push_back(IntegerAttr::get(element, static_cast<int64_t>(v)));
  }
  (void)limit;
  return DenseElementsAttr::get(type, result);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return error(location, "Concat needs at least one input");
  auto first = cast<RankedTensorType>(adaptor.getInputs().front().getType());
  if (first.getRank() == 0)
    return error(location, "Concat needs inputs of rank >= 1");
  auto axis = normalizeAxis(location, adaptor.getAxis(), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  std::optional<int64_t> total = 0;
  for (Value input : adaptor.getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return error(location, "Concat inputs differ in rank or element type");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != *axis && type.getDimSize(d) != first.getDimSize(d))
        return error(location, "Concat inputs differ in dim " + Twine(d));
    total = llvm::checkedAdd(*total, type.getDimSize(*axis));
    if (!total)
      return error(location,
                   "Concat's dim " + Twine(*axis) + " overflows int64");
  }
  shape[*axis] = *total;
  inferred.push_back(first.clone(shape));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  auto type = cast<RankedTensorType>(getType());
  if (getInputs().size() == 1)
    return getInputs().front();
  // Shape vectors, and small index tables (swin_t's ScatterND indices);
  // larger constants are left alone.
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return {};
  auto axis = normalizeAxis(getLoc(), getAxis(), type.getRank());
  if (failed(axis))
    return {};
  int64_t outer = 1;
  for (int64_t d : type.getShape().take_front(*axis))
    outer *= d;
  SmallVector<SmallVector<Attribute>> inputs;
  SmallVector<int64_t> chunks; // elements of one outer row, per input
  for (auto [attr, value] : llvm::zip(adaptor.getInputs(), getInputs())) {
    auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
    if (!dense)
      return {};
    inputs.push_back(llvm::to_vector(dense.getValues<Attribute>()));
    chunks.push_back(outer ? static_cast<int64_t>(inputs.back().size()) / outer
                           : 0);
  }
  SmallVector<Attribute> values;
  for (int64_t o = 0; o < outer; ++o)
    for (auto [input, chunk] : llvm::zip(inputs, chunks))
      values.append(input.begin() + o * chunk, input.begin() + (o + 1) * chunk);
  return DenseElementsAttr::get(type, values);
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  auto axis = normalizeAxis(location, adaptor.getAxis(), type.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (Value split = adaptor.getSplit()) {
    auto s = requireConstantShape(location, split, "Split", "split");
    if (failed(s))
      return failure();
    sizes = *s;
    if (llvm::any_of(sizes, [](int64_t size) { return size < 0; }))
      return error(location, "Split sizes must not be negative");
    if (std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
      return error(location, "Split sizes do not sum to dim " + Twine(dim));
  } else {
    int64_t n = adaptor.getNumOutputs()
                    ? static_cast<int64_t>(*adaptor.getNumOutputs())
                    : 0;
    if (n <= 0 || n > std::max<int64_t>(dim, 1))
      return error(location, "Split needs 'split' or 1 <= num_outputs <= " +
                                 Twine(std::max<int64_t>(dim, 1)));
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    inferred.push_back(type.clone(shape));
  }
  return success();
}

static FailureOr<SliceBounds> computeSlice(std::optional<Location> location,
                                           SliceOp::Adaptor adaptor) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t rank = type.getRank();
  auto starts =
      requireConstantShape(location, adaptor.getStarts(), "Slice", "starts");
  auto ends =
      requireConstantShape(location, adaptor.getEnds(), "Slice", "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (Value v = adaptor.getAxes()) {
    auto a = requireConstantShape(location, v, "Slice", "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
  }
  if (Value v = adaptor.getSteps()) {
    auto s = requireConstantShape(location, v, "Slice", "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return error(location,
                 "Slice starts, ends, axes and steps differ in length");
  SliceBounds bounds;
  bounds.starts.assign(rank, 0);
  bounds.steps.assign(rank, 1);
  bounds.sizes = llvm::to_vector(type.getShape());
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalizeAxis(location, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = type.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return error(location, "Slice step must not be 0");
    auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v += dim;
      return std::clamp(v, lo, hi);
    };
    int64_t start, end;
    if (step > 0) {
      start = clampIndex((*starts)[i], 0, dim);
      end = clampIndex((*ends)[i], 0, dim);
    } else {
      start = clampIndex((*starts)[i], 0, dim - 1);
      end = clampIndex((*ends)[i], -1, dim - 1);
    }
    int64_t size = step > 0 ? (end - start + step - 1) / step
                            : (start - end + (-step) - 1) / (-step);
    bounds.starts[*axis] = start;
    bounds.steps[*axis] = step;
    bounds.sizes[*axis] = std::max<int64_t>(size, 0);
  }
  return bounds;
}

FailureOr<SliceBounds> SliceOp::getBounds() {
  return computeSlice(getLoc(), Adaptor(*this));
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto bounds = computeSlice(location, adaptor);
  if (failed(bounds))
    return failure();
  inferred.push_back(
      cast<RankedTensorType>(adaptor.getData().getType()).clone(bounds->sizes));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  // Any rank: torch computes Pad's pads by reversing a [rank, 2] table.
  auto input = dyn_cast_if_present<DenseElementsAttr>(adaptor.getData());
  if (!input || input.getNumElements() > kMaxFoldElements)
    return {};
  auto bounds = computeSlice(std::nullopt, Adaptor(*this));
  if (failed(bounds))
    return {};
  auto values = llvm::to_vector(input.getValues<Attribute>());
  auto type = cast<ShapedType>(getType());
  ArrayRef<int64_t> inShape = input.getType().getShape();
  int64_t rank = inShape.size();
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * inShape[d + 1];
  SmallVector<Attribute> result;
  for (int64_t i = 0, n = type.getNumElements(); i < n; ++i) {
    int64_t rem = i, offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t index = rem % bounds->sizes[d];
      rem /= bounds->sizes[d];
      offset += (bounds->starts[d] + index * bounds->steps[d]) * strides[d];
    }
    result.push_back(values[offset]);
  }
  return DenseElementsAttr::get(type, result);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto data = cast<RankedTensorType>(adaptor.getData().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  if (data.getRank() == 0)
    return error(location, "Gather data must have rank >= 1");
  auto axis = normalizeAxis(location, adaptor.getAxis(), data.getRank());
  if (failed(axis))
    return failure();
  // Constant indices (embedding rows, shape dims) are checked against the dim.
  if (auto constIndices = getConstantInts(adaptor.getIndices())) {
    int64_t dim = data.getDimSize(*axis);
    for (int64_t index : *constIndices)
      if (index < -dim || index >= dim)
        return error(location, "Gather index " + Twine(index) +
                                   " is out of range for dim of size " +
                                   Twine(dim));
  }
  SmallVector<int64_t> shape(data.getShape().take_front(*axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(*axis + 1));
  inferred.push_back(data.clone(shape));
  return success();
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  // Folds the Shape -> Gather pattern of exported shape sub-graphs.
  auto data = dyn_cast_if_present<DenseElementsAttr>(adaptor.getData());
  auto indices =
      dyn_cast_if_present<DenseIntElementsAttr>(adaptor.getIndices());
  if (!data || !indices || data.getType().getRank() != 1 ||
      data.getNumElements() > kMaxFoldElements)
    return {};
  int64_t dim = data.getNumElements();
  auto values = llvm::to_vector(data.getValues<Attribute>());
  SmallVector<Attribute> result;
  for (const APInt &index : indices.getValues<APInt>()) {
    int64_t i = index.getSExtValue();
    if (i < 0)
      i += dim;
    if (i < 0 || i >= dim)
      return {};
    result.push_back(values[i]);
  }
  return DenseElementsAttr::get(cast<ShapedType>(getType()), result);
}

/// `[2, 3]`: a shape in an error message.
static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    text += (i ? ", " : "") + std::to_string(d);
  return text + "]";
}

static std::optional<rt::ScatterReduction>
parseScatterReduction(StringRef reduction) {
  return llvm::StringSwitch<std::optional<rt::ScatterReduction>>(reduction)
      .Case("none", rt::ScatterReduction::None)
      .Case("add", rt::ScatterReduction::Add)
      .Case("mul", rt::ScatterReduction::Mul)
      .Case("max", rt::ScatterReduction::Max)
      .Case("min", rt::ScatterReduction::Min)
      .Default(std::nullopt);
}

FailureOr<rt::ScatterReduction> ScatterNDOp::getScatterReduction() {
  if (std::optional<rt::ScatterReduction> reduction =
          parseScatterReduction(getReduction()))
    return *reduction;
  return emitOpError("unknown reduction '")
         << getReduction() << "' (expected none, add, mul, max or min)";
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto data = cast<RankedTensorType>(adaptor.getData().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  auto updates = cast<RankedTensorType>(adaptor.getUpdates().getType());
  if (!parseScatterReduction(adaptor.getReduction()))
    return error(location, "ScatterND reduction '" + adaptor.getReduction() +
                               "' is not none, add, mul, max or min");
  if (data.getRank() == 0 || indices.getRank() == 0)
    return error(location, "ScatterND data and indices must have rank >= 1");
  int64_t k = indices.getShape().back();
  if (k < 1 || k > data.getRank())
    return error(location, "ScatterND indices' last dim " + Twine(k) +
                               " must be in [1, data rank " +
                               Twine(data.getRank()) + "]");
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, data.getShape().drop_front(k));
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return error(location, "ScatterND updates have shape " +
                               shapeString(updates.getShape()) +
                               ", expected indices.shape[:-1] + "
                               "data.shape[k:] = " +
                               shapeString(expected));
  if (auto constIndices = getConstantInts(adaptor.getIndices()))
    for (auto [i, index] : llvm::enumerate(*constIndices)) {
      int64_t dim = data.getDimSize(static_cast<int64_t>(i) % k);
      if (index < -dim || index >= dim)
        return error(location, "ScatterND index " + Twine(index) +
                                   " is out of range for dim " +
                                   Twine(static_cast<int64_t>(i) % k) +
                                   " of size " + Twine(dim));
    }
  inferred.push_back(data);
  return success();
}

std::optional<SmallVector<int64_t>> ScatterNDOp::getConstantRows() {
  std::optional<SmallVector<int64_t>> values = getConstantInts(getIndices());
  if (!values)
    return std::nullopt;
  ArrayRef<int64_t> shape = getData().getType().getShape();
  int64_t k = getIndices().getType().getShape().back();
  SmallVector<int64_t> rows;
  for (size_t n = 0; n < values->size() / k; ++n) {
    int64_t row = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t index = (*values)[n * k + d];
      if (index < 0)
        index += shape[d];
      if (index < 0 || index >= shape[d])
        return std::nullopt;
      row = row * shape[d] + index;
    }
    rows.push_back(row);
  }
  return rows;
}

OpFoldResult ScatterNDOp::fold(FoldAdaptor adaptor) {
  // Folds the masks models build from constants (swin_t's shifted-window
  // attention mask: zeros, then slices set to region numbers).
  auto data = dyn_cast_if_present<DenseElementsAttr>(adaptor.getData());
  auto updates = dyn_cast_if_present<DenseElementsAttr>(adaptor.getUpdates());
  auto type = cast<RankedTensorType>(getType());
  if (!data || !updates || getReduction() != "none" ||
      type.getNumElements() > kMaxFoldElements)
    return {};
  std::optional<SmallVector<int64_t>> rows = getConstantRows();
  if (!rows)
    return {};
  int64_t k = getIndices().getType().getShape().back();
  int64_t slice = 1;
  for (int64_t d : type.getShape().drop_front(k))
    slice *= d;
  auto result = llvm::to_vector(data.getValues<Attribute>());
  auto values = llvm::to_vector(updates.getValues<Attribute>());
  for (auto [n, row] : llvm::enumerate(*rows))
    for (int64_t s = 0; s < slice; ++s)
      result[row * slice + s] =
          values[updates.isSplat() ? 0 : static_cast<int64_t>(n) * slice + s];
  return DenseElementsAttr::get(type, result);
}

#define GET_OP_CLASSES
#include "pp/Dialect/ONNX/IR/ONNXOps.cpp.inc"
