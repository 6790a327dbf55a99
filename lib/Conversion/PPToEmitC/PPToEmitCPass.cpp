//===- PPToEmitCPass.cpp - --pp-lower-to-emitc ------------------*- C++ -*-===//
//
// The pass over pp::convertPipelineToEmitC: the module becomes its
// generated program in the EmitC dialect; the initial values go to
// `data-file`.
//
//===----------------------------------------------------------------------===//

#include "pp/Conversion/Passes.h"

#include "llvm/Support/Path.h"

namespace pp {
#define GEN_PASS_DEF_LOWERTOEMITCPASS
#include "pp/Conversion/Passes.h.inc"
} // namespace pp

using namespace mlir;

namespace {

struct LowerToEmitCPass
    : public pp::impl::LowerToEmitCPassBase<LowerToEmitCPass> {
  using LowerToEmitCPassBase::LowerToEmitCPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    pp::EmitProgramOptions options;
    if (!dataFile.empty())
      options.dataFileName = llvm::sys::path::filename(dataFile).str();
    std::string bytes;
    if (failed(pp::convertPipelineToEmitC(module, options, bytes)) ||
        (!dataFile.empty() &&
         failed(pp::writeFileBytes(module, dataFile, bytes))))
      signalPassFailure();
  }
};

} // namespace
