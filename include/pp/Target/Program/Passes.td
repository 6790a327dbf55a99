//===- Passes.td - Writing a generated training program ----*- tablegen -*-===//
#ifndef PP_TARGET_PROGRAM_PASSES_TD
#define PP_TARGET_PROGRAM_PASSES_TD

include "mlir/Pass/PassBase.td"

def EmitProgramPass : Pass<"pp-emit-program", "mlir::ModuleOp"> {
  let summary = "Write the training program of a scheduled pipeline";
  let description = [{
    Lowers a copy of the module to EmitC (as --pp-lower-to-emitc), cuts
    stage functions of more than `max-function-ops` ops into parts called in
    order, and writes into `dir`: the C++ (upstream EmitC emitter, one source
    for the CPU and the CUDA backend) as translation units of at most
    `max-tu-bytes` each (program.cpp with the table and main, program_N.cpp,
    program.h with what they share), program.data (initial values),
    model.onnx (the imported model, for --save-onnx: a hard link where the
    file system allows) and CMakeLists.txt, which builds the `train`
    executable against this build's runtime (-DPP_CUDA=ON for the CUDA
    backend) and links the data file and the model into its build
    directory. `summary` gets the units and their sizes. The module itself
    is unchanged.
  }];
  let options = [
    Option<"outputDir", "dir", "std::string", "\"\"",
           "Directory of the generated program">,
    Option<"maxFunctionOps", "max-function-ops", "int64_t", "400",
           "Ops of a generated function before it is cut into parts "
           "(0: never)">,
    Option<"maxTuBytes", "max-tu-bytes", "int64_t", "65536",
           "Bytes of C++ of a translation unit before the next one starts "
           "(0: one unit)">,
    Option<"summaryFile", "summary", "std::string", "\"\"",
           "Write the translation units and their sizes here ('-' for "
           "stdout)">,
  ];
  let dependentDialects = ["mlir::emitc::EmitCDialect"];
}

#endif // PP_TARGET_PROGRAM_PASSES_TD
