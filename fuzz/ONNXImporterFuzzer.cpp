//===- ONNXImporterFuzzer.cpp - libFuzzer harness: the ONNX importer ------===//
//
// Feeds the bytes to pp::importONNXModel as a ModelProto; a module that
// comes back must verify. The file name points into a directory that does
// not exist, so external-data lookups find nothing. One MLIRContext serves
// 1000 inputs (loading the dialects per input would cost most of the time);
// the module is destroyed after each. Half of the mutations
// are structure-aware (ONNXMutator.h).
//
//===----------------------------------------------------------------------===//

#include "pp/Import/ONNX/ONNXImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry;
    pp::registerONNXImportDialects(*r);
    return r;
  }();
  static std::unique_ptr<mlir::MLIRContext> context;
  static int uses = 0;
  if (!context || ++uses == 1000) {
    uses = 0;
    context = std::make_unique<mlir::MLIRContext>(
        *registry, mlir::MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
  }
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = pp::importONNXModel(
      bytes, "/nonexistent-pp-fuzz/model.onnx", context.get(), {});
  if (module && mlir::failed(mlir::verify(*module)))
    std::abort(); // the importer handed on IR that does not verify
  return 0;
}

#include "ONNXMutator.h"
