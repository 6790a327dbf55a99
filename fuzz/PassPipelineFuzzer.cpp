//===- PassPipelineFuzzer.cpp - libFuzzer harness: pass pipeline options --===//
//
// The input is a textual pass pipeline over the project's passes and named
// pipelines (registerAllPasses), e.g. `pp-compile{cluster=4xH100
// schedule=1f1b}`: mlir::parsePassPipeline builds it (parsing every option
// of --pp-compile and of the passes it wraps). A pipeline that parses is
// printed and the printed text parsed again. Nothing is run, so no option
// naming a file or a directory is acted on.
//
//===----------------------------------------------------------------------===//

#include "pp/InitAllPasses.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool registered = (pp::registerAllPasses(), true);
  (void)registered;
  if (size > 4096)
    return 0;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string errors;
  llvm::raw_string_ostream os(errors);
  mlir::OpPassManager pm("builtin.module");
  if (mlir::failed(mlir::parsePassPipeline(text, pm, os)))
    return 0;
  std::string printed;
  llvm::raw_string_ostream printedOS(printed);
  pm.printAsTextualPipeline(printedOS);
  mlir::OpPassManager again("builtin.module");
  (void)mlir::parsePassPipeline(printed, again, os);
  return 0;
}
