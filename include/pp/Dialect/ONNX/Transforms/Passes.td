//===- Passes.td - Passes over imported onnx models --------*- tablegen -*-===//
#ifndef PP_DIALECT_ONNX_TRANSFORMS_PASSES_TD
#define PP_DIALECT_ONNX_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ModelSummaryPass : Pass<"pp-model-summary", "mlir::ModuleOp"> {
  let summary = "Print ops, parameters and forward FLOPs of an imported model";
  let description = [{
    Counts ops by name, the elements and bytes of trainable parameters, state
    and constants (`onnx.global`s), and the forward FLOPs of every op that
    implements `CostOpInterface`. Prints a table to stdout; the IR is
    unchanged.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", "\"-\"",
           "Where to write the summary ('-' for stdout)">,
  ];
  let dependentDialects = ["pp::onnx::ONNXDialect"];
}

def VerifyStaticShapesPass : Pass<"pp-verify-static-shapes", "mlir::ModuleOp"> {
  let summary = "Fail unless every tensor type in the module is static";
  let description = [{
    Later passes (cost model, memory planning, code generation) need static
    shapes; this pass reports the first op or argument with a dynamic or
    unranked tensor type at its location.
  }];
}

#endif // PP_DIALECT_ONNX_TRANSFORMS_PASSES_TD
