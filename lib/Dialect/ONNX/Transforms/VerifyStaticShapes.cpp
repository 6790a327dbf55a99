//===- VerifyStaticShapes.cpp - Require static tensor types -----*- C++ -*-===//

#include "pp/Dialect/ONNX/Transforms/Passes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace pp {
#define GEN_PASS_DEF_VERIFYSTATICSHAPESPASS
#include "pp/Dialect/ONNX/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;

namespace {

bool isStatic(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return !shaped || shaped.hasStaticShape();
}

struct VerifyStaticShapesPass
    : public pp::impl::VerifyStaticShapesPassBase<VerifyStaticShapesPass> {
  void runOnOperation() override {
    WalkResult result = getOperation().walk([](Operation *op) {
      if (auto func = dyn_cast<FunctionOpInterface>(op))
        for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
          if (!isStatic(type)) {
            op->emitError()
                << "argument #" << i << " has a dynamic type " << type;
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
    if (result.wasInterrupted())
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
