//===- FusedHandler.cpp - The interpreter's pp.fused handler ----*- C++ -*-===//
//
// A pp.fused op is run as the ops it holds: its inputs bind the body's
// arguments, the body runs op by op (each op through its own handler, so a
// fused kernel computes exactly what the unfused ops compute), and the
// value pp.yield names becomes the result.
//
//===----------------------------------------------------------------------===//

#include "FusedHandler.h"

#include "pp/Dialect/PP/IR/PPOps.h"

#include <memory>

using namespace mlir;
using namespace pp::interp;
namespace pipeline = pp::pipeline;

void pp::interp::registerFusedHandlers(Interpreter &interp,
                                       BlockRunner runBody) {
  // What the body's pp.yield names; the body's values die at their last
  // use inside it, so the yield hands the tensor over before that.
  auto yielded = std::make_shared<Tensor>();
  interp.registerHandler(
      pipeline::YieldOp::getOperationName(),
      [yielded](Interpreter &in, Operation *op) -> LogicalResult {
        *yielded = in.operand(op, 0);
        return success();
      });
  interp.registerHandler(
      pipeline::FusedOp::getOperationName(),
      [yielded, runBody](Interpreter &in, Operation *op) -> LogicalResult {
        auto fused = cast<pipeline::FusedOp>(op);
        Block &body = fused.getBody().front();
        for (auto [arg, input] :
             llvm::zip(body.getArguments(), fused.getInputs()))
          if (failed(in.setResult(op, arg, in.lookup(input))))
            return failure();
        if (failed(runBody(body)))
          return failure();
        Tensor result = std::move(*yielded);
        *yielded = Tensor();
        return in.setResult(op, fused.getResult(), std::move(result));
      });
}
