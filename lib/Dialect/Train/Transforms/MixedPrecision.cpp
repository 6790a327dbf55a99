//===- MixedPrecision.cpp - Forward pass in bf16/fp16 over fp32 weights ---===//
//
// Every op that reads a float tensor computes in the low precision; its
// float operands are cast (once per value) and its results re-inferred. The
// casts of the fp32 global reads are where the master weights meet the
// low-precision compute: autodiff's rule for onnx.Cast casts each weight's
// gradient back to fp32 for the optimizer.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
namespace onnx = pp::onnx;

namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Ops that stay in fp32: the loss (a sum over the batch that bf16 cannot
/// hold) and what --pp-add-loss built around it.
bool keepsFullPrecision(Operation *op) {
  if (isa<onnx::SoftmaxCrossEntropyLossOp>(op))
    return true;
  auto name = dyn_cast<NameLoc>(op->getLoc());
  return name && name.getName() == "loss";
}

/// Inserts and remembers the casts of values to other float types.
class Caster {
public:
  explicit Caster(MLIRContext *context) : builder(context) {}

  /// `value` as a tensor of element type `element` (itself when it is one).
  Value get(Value value, Type element) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == element)
      return value;
    Value &cached = casts[{value, element}];
    if (cached)
      return cached;
    if (Operation *def = value.getDefiningOp())
      builder.setInsertionPointAfter(def);
    else
      builder.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
    // Constants fold into constants of the new type, so ops that read a
    // constant operand (Clip's bounds, Pow's exponent) still see one.
    cached = builder.createOrFold<onnx::CastOp>(
        value.getLoc(), value,
        builder.getI64IntegerAttr(onnx::getONNXDataTypeForFloat(element)));
    return cached;
  }

  /// Casts every float operand of `op` to `element`, except `kept` ones.
  void castOperands(Operation *op, Type element,
                    llvm::ArrayRef<unsigned> kept = {}) {
    for (OpOperand &operand : op->getOpOperands())
      if (isFloatTensor(operand.get().getType()) &&
          !llvm::is_contained(kept, operand.getOperandNumber()))
        operand.set(get(operand.get(), element));
  }

private:
  OpBuilder builder;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
};

/// Sets the result types of `op` to what its type inference gives for its
/// (new) operands.
LogicalResult reinferResults(Operation *op) {
  auto inference = dyn_cast<InferTypeOpInterface>(op);
  if (!inference)
    return op->emitError("pp-mixed-precision: cannot infer the result types "
                         "of ")
           << op->getName() << " for low-precision operands";
  SmallVector<Type> inferred;
  if (failed(inference.inferReturnTypes(
          op->getContext(), op->getLoc(), op->getOperands(),
          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
          op->getRegions(), inferred)))
    return failure();
  for (auto [result, type] : llvm::zip(op->getResults(), inferred))
    result.setType(type);
  return success();
}

} // namespace

LogicalResult
pp::train::applyMixedPrecision(ModuleOp module,
                               const pp::MixedPrecisionPassOptions &options) {
  MLIRContext *context = module.getContext();
  Type low;
  if (options.precision == pp::Precision::BF16)
    low = BFloat16Type::get(context);
  else if (options.precision == pp::Precision::FP16)
    low = Float16Type::get(context);
  auto func = pp::pipeline::lookupFunction(module, options.funcName,
                                           "to convert to mixed precision");
  if (!func)
    return failure();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (pp::pipeline::getGradOf(func, i))
      return func.emitError("pp-mixed-precision: @")
             << options.funcName
             << " already has gradients: run it before --pp-autodiff";
  if (!low)
    return success();

  Caster caster(context);
  Type f32 = Float32Type::get(context);
  Block &body = func.getBody().front();
  // The ops of the model as they are now (casts are added as we go).
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    bool readsFloat = llvm::any_of(op->getOperandTypes(), isFloatTensor);
    // The model's own casts name their target type.
    if (!readsFloat || isa<onnx::CastOp>(op))
      continue;
    if (keepsFullPrecision(op)) {
      caster.castOperands(op, f32);
    } else if (isa<onnx::BatchNormalizationOp>(op)) {
      // The running statistics are fp32 state: keep their inputs (and so
      // their results) in fp32.
      caster.castOperands(op, low, /*kept=*/{3, 4});
    } else if (isa<onnx::DropoutOp>(op)) {
      // The ratio is a parameter of the op, not data.
      caster.castOperands(op, low, /*kept=*/{1});
    } else {
      caster.castOperands(op, low);
    }
    if (failed(reinferResults(op)))
      return failure();
  }
  // Constants that were only read through a (folded) cast.
  for (Operation *op : ops)
    if (isa<onnx::ConstantOp>(op) && op->use_empty())
      op->erase();
  // The step's interface keeps the model's types.
  Operation *terminator = body.getTerminator();
  for (auto [operand, type] :
       llvm::zip(terminator->getOpOperands(), func.getResultTypes())) {
    if (operand.get().getType() != type && isFloatTensor(type))
      operand.set(
          caster.get(operand.get(), cast<ShapedType>(type).getElementType()));
  }
  return success();
}
