//===- TrainOps.cpp - The train dialect and its operations ------*- C++ -*-===//

#include "pp/Dialect/Train/IR/TrainOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pp::train;

//===----------------------------------------------------------------------===//
// UnaryKindAttr: the kind by its UnaryKinds.def name
//===----------------------------------------------------------------------===//

namespace mlir {
template <> struct FieldParser<pp::rt::UnaryKind> {
  static FailureOr<pp::rt::UnaryKind> parse(AsmParser &parser) {
    SMLoc loc = parser.getCurrentLocation();
    std::string name;
    if (failed(parser.parseKeywordOrString(&name)))
      return failure();
    if (std::optional<pp::rt::UnaryKind> kind = pp::rt::parseUnaryKind(name))
      return *kind;
    return parser.emitError(loc, "unknown unary kind '") << name << "'";
  }
};
} // namespace mlir

namespace pp::rt {
static AsmPrinter &operator<<(AsmPrinter &printer, UnaryKind kind) {
  printer.printKeywordOrString(toString(kind));
  return printer;
}
} // namespace pp::rt

#include "pp/Dialect/Train/IR/TrainInterfaces.cpp.inc"
#include "pp/Dialect/Train/IR/TrainOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "pp/Dialect/Train/IR/TrainAttrs.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pp/Dialect/Train/IR/TrainOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pp/Dialect/Train/IR/TrainAttrs.cpp.inc"
      >();
}

LogicalResult
GlobalWriteOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto global = symbolTable.lookupNearestSymbolFrom<pp::onnx::GlobalOp>(
      *this, getGlobalAttr());
  if (!global)
    return emitOpError("'") << getGlobal() << "' does not name an onnx.global";
  if (global.getType() != getValue().getType())
    return emitOpError("value type ")
           << getValue().getType() << " does not match the global's type "
           << global.getType();
  if (global.getKind() == pp::onnx::kConstant)
    return emitOpError("cannot write the constant global '")
           << getGlobal() << "'";
  return success();
}

LogicalResult UnaryGradOp::verify() {
  // The kinds with a unaryGrad kernel (pp/Runtime/UnaryKinds.def).
  if (!pp::rt::hasUnaryGrad(getKind()))
    return emitOpError("has no gradient kernel for unary kind '")
           << pp::rt::toString(getKind()) << "'";
  return success();
}

StringRef UnaryGradOp::getFusedElementFunction() {
  return pp::rt::fusedGradFunction(getKind());
}

LogicalResult MatMulOp::verify() {
  auto a = cast<RankedTensorType>(getA().getType());
  auto b = cast<RankedTensorType>(getB().getType());
  auto y = cast<RankedTensorType>(getY().getType());
  if (a.getElementType() != b.getElementType() ||
      a.getElementType() != y.getElementType())
    return emitOpError("operand and result element types differ");
  if (a.getRank() < 2 || b.getRank() < 2)
    return emitOpError("operands need rank >= 2, got ")
           << a.getRank() << " and " << b.getRank();
  SmallVector<int64_t> as(a.getShape()), bs(b.getShape());
  if (getTransA())
    std::swap(as[as.size() - 2], as.back());
  if (getTransB())
    std::swap(bs[bs.size() - 2], bs.back());
  if (as.back() != bs[bs.size() - 2])
    return emitOpError("contraction dims differ: ")
           << as.back() << " vs " << bs[bs.size() - 2];
  SmallVector<int64_t> shape;
  if (!mlir::OpTrait::util::getBroadcastedShape(
          ArrayRef<int64_t>(as).drop_back(2),
          ArrayRef<int64_t>(bs).drop_back(2), shape))
    return emitOpError("batch dims do not broadcast");
  shape.push_back(as[as.size() - 2]);
  shape.push_back(bs.back());
  if (y.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("result type ")
           << y << " is not the product's shape "
           << RankedTensorType::get(shape, a.getElementType());
  return success();
}

double MatMulOp::getForwardFlops() {
  // In double: products of static sizes can pass int64's range.
  auto a = cast<RankedTensorType>(getA().getType());
  double k = a.getDimSize(a.getRank() - (getTransA() ? 2 : 1));
  return 2 * k * static_cast<double>(getY().getType().getNumElements());
}

LogicalResult ReduceSumToOp::verify() {
  auto from = cast<RankedTensorType>(getX().getType());
  auto to = cast<RankedTensorType>(getY().getType());
  SmallVector<int64_t> shape;
  if (from.getElementType() != to.getElementType() ||
      !mlir::OpTrait::util::getBroadcastedShape(to.getShape(), from.getShape(),
                                                shape) ||
      ArrayRef<int64_t>(shape) != from.getShape())
    return emitOpError("result type ")
           << to << " does not broadcast to the operand type " << from;
  return success();
}

OpFoldResult ReduceSumToOp::fold(FoldAdaptor) {
  if (getX().getType() == getY().getType())
    return getX();
  return {};
}

LogicalResult SliceGradOp::verify() {
  auto dy = cast<RankedTensorType>(getDy().getType());
  auto dx = cast<RankedTensorType>(getDx().getType());
  if (dy.getRank() != dx.getRank() ||
      static_cast<int64_t>(getStarts().size()) != dx.getRank() ||
      static_cast<int64_t>(getSteps().size()) != dx.getRank())
    return emitOpError("starts and steps need one entry per dim of rank ")
           << dx.getRank();
  for (int64_t d = 0; d < dx.getRank(); ++d) {
    int64_t last = getStarts()[d] + (dy.getDimSize(d) - 1) * getSteps()[d];
    if (dy.getDimSize(d) > 0 &&
        (getStarts()[d] < 0 || getStarts()[d] >= dx.getDimSize(d) || last < 0 ||
         last >= dx.getDimSize(d)))
      return emitOpError("slice of dim ") << d << " is out of bounds";
  }
  return success();
}

FailureOr<pp::rt::PadMode> PadGradOp::getPadMode() {
  StringRef mode = getMode();
  if (mode == "constant")
    return pp::rt::PadMode::Constant;
  if (mode == "reflect")
    return pp::rt::PadMode::Reflect;
  if (mode == "edge")
    return pp::rt::PadMode::Edge;
  return emitOpError("mode must be 'constant', 'reflect' or 'edge', got '")
         << mode << "'";
}

LogicalResult PadGradOp::verify() {
  auto dy = cast<RankedTensorType>(getDy().getType());
  auto dx = cast<RankedTensorType>(getDx().getType());
  if (failed(getPadMode()))
    return failure();
  if (dy.getElementType() != dx.getElementType())
    return emitOpError("dy and dx differ in element type");
  int64_t rank = dx.getRank();
  if (dy.getRank() != rank ||
      static_cast<int64_t>(getPads().size()) != 2 * rank)
    return emitOpError("pads need two entries per dim of rank ") << rank;
  for (int64_t d = 0; d < rank; ++d)
    if (dx.getDimSize(d) + getPads()[d] + getPads()[d + rank] !=
        dy.getDimSize(d))
      return emitOpError("dim ")
             << d << " of dx padded by [" << getPads()[d] << ", "
             << getPads()[d + rank] << "] is not dy's " << dy.getDimSize(d);
  return success();
}

LogicalResult SGDOp::verify() {
  bool hasBuffer = static_cast<bool>(getMomentumBuffer());
  if (hasBuffer != static_cast<bool>(getNewMomentumBuffer()))
    return emitOpError("a momentum buffer operand needs a buffer result");
  if (hasBuffer != (getMomentum().convertToDouble() != 0.0))
    return emitOpError("a momentum buffer is required exactly when momentum "
                       "is non-zero");
  if (getNesterov() && !hasBuffer)
    return emitOpError("Nesterov momentum needs momentum");
  return success();
}

#define GET_OP_CLASSES
#include "pp/Dialect/Train/IR/TrainOps.cpp.inc"

//===----------------------------------------------------------------------===//
// train.grad_all_reduce (tensor parallelism)
//===----------------------------------------------------------------------===//

void pp::train::setGradAllReduce(Operation *op, const GradAllReduce &value) {
  Builder b(op->getContext());
  op->setAttr(kGradAllReduceAttrName,
              b.getDictionaryAttr(
                  {b.getNamedAttr("grid", value.grid),
                   b.getNamedAttr("axes", b.getDenseI16ArrayAttr(value.axes)),
                   b.getNamedAttr("operands",
                                  b.getDenseI64ArrayAttr(value.operands))}));
}

std::optional<GradAllReduce> pp::train::getGradAllReduce(Operation *op) {
  auto dict = op->getAttrOfType<DictionaryAttr>(kGradAllReduceAttrName);
  if (!dict)
    return std::nullopt;
  auto grid = dict.getAs<FlatSymbolRefAttr>("grid");
  auto axes = dict.getAs<DenseI16ArrayAttr>("axes");
  auto operands = dict.getAs<DenseI64ArrayAttr>("operands");
  if (!grid || !axes || !operands)
    return std::nullopt;
  return GradAllReduce{grid, llvm::to_vector(axes.asArrayRef()),
                       llvm::to_vector(operands.asArrayRef())};
}
