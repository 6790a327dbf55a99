//===- Passes.td - Writing a generated training program ----*- tablegen -*-===//
#ifndef PP_TARGET_PROGRAM_PASSES_TD
#define PP_TARGET_PROGRAM_PASSES_TD

include "mlir/Pass/PassBase.td"

def EmitProgramPass : Pass<"pp-emit-program", "mlir::ModuleOp"> {
  let summary = "Write the training program of a scheduled pipeline";
  let description = [{
    Lowers a copy of the module to EmitC (as --pp-lower-to-emitc) and writes
    into `dir`: program.cpp (C++ from the upstream EmitC emitter, one source
    for the CPU and the CUDA backend), program.data (initial values),
    model.onnx (the imported model, for --save-onnx) and CMakeLists.txt,
    which builds the `train` executable against this build's runtime
    (-DPP_CUDA=ON for the CUDA backend). The module itself is unchanged.
  }];
  let options = [
    Option<"outputDir", "dir", "std::string", "\"\"",
           "Directory of the generated program">,
  ];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
}

#endif // PP_TARGET_PROGRAM_PASSES_TD
