//===- PPToEmitCPass.cpp - --pp-lower-to-emitc ------------------*- C++ -*-===//
//
// The pass over lowerPipelineToEmitC: the module is replaced by its generated
// program in the EmitC dialect; the initial values go to `data-file`.
//
//===----------------------------------------------------------------------===//

#include "pp/Conversion/Passes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
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
    options.fuseElementwise = fuseElementwise;
    std::string bytes;
    auto lowered = pp::lowerPipelineToEmitC(module, options, bytes);
    if (failed(lowered))
      return signalPassFailure();
    if (!dataFile.empty() && failed(pp::writeFileBytes(module, dataFile, bytes)))
      return signalPassFailure();
    // The module becomes the program.
    module.getBody()->clear();
    for (auto attr : llvm::to_vector(module->getAttrs()))
      module->removeAttr(attr.getName());
    Block *from = (*lowered)->getBody();
    while (!from->empty())
      from->front().moveBefore(module.getBody(), module.getBody()->end());
  }
};

} // namespace
