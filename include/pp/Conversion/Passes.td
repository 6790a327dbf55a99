//===- Passes.td - Conversion passes -----------------------*- tablegen -*-===//
#ifndef PP_CONVERSION_PASSES_TD
#define PP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToEmitCPass : Pass<"pp-lower-to-emitc", "mlir::ModuleOp"> {
  let summary = "Lower a scheduled pipeline to the EmitC dialect";
  let description = [{
    Replaces the module by its generated program in the EmitC dialect: one
    `emitc.func` per stage function (a StageContext and the micro-batch in;
    every tensor a view of the arena offset --pp-memory-plan gave it; every
    op calls of the runtime kernels, Kernels.h, with their status checked;
    each `pp.fused` op of --pp-fuse-elementwise one generated per-element
    kernel; pp ops calls of the StageContext), then the program table
    (globals, constants, inputs, outputs, functions, each device's actions)
    and main(). Needs --pp-memory-plan (pp.offsets, pp.arena_bytes).
    `mlir-translate --mlir-to-cpp` prints the result as C++;
    --pp-emit-program does both and writes the build files.
  }];
  let options = [
    Option<"dataFile", "data-file", "std::string", "\"\"",
           "Write the initial values of globals and constants here">,
  ];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
}

#endif // PP_CONVERSION_PASSES_TD
