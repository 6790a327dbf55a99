//===- VerifyStaticShapes.cpp - Require static tensor types -----*- C++ -*-===//

#include "pp/Dialect/ONNX/Transforms/Transforms.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace {

bool isStatic(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return !shaped || shaped.hasStaticShape();
}

} // namespace

LogicalResult pp::onnx::verifyStaticShapes(Operation *root) {
  WalkResult result = root->walk([](Operation *op) {
    if (auto func = dyn_cast<FunctionOpInterface>(op))
      for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
        if (!isStatic(type)) {
          op->emitError() << "argument #" << i << " has a dynamic type "
                          << type;
          return WalkResult::interrupt();
        }
    for (Value result : op->getResults())
      if (!isStatic(result.getType())) {
        op->emitError() << "result #"
                        << cast<OpResult>(result).getResultNumber()
                        << " has a dynamic type " << result.getType();
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}
