//===- CompilePathFuzzer.cpp - libFuzzer harness: import + --pp-compile ---===//
//
// The whole compile path on a hostile model: the bytes are imported as an
// ONNX ModelProto (a symbolic batch dim fixed to 2), and a module that
// comes back runs the --pp-compile pipeline (loss, partition, autodiff,
// optimizer, recompute, split, schedule, fusion, memory plan and plan
// report; no emit-dir, so nothing is written) under one of three option
// sets picked by the input's last byte: 1F1B on 2 devices, interleaved on
// 4, PipeDream-2BW on 2. Errors are expected; a crash, sanitizer report,
// leak, hang or runaway memory is a find. One MLIRContext serves 100 inputs.
// The mutations are ONNXMutator.h's.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Transforms/ShardingInterfaceImpl.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Import/ONNX/ONNXImporter.h"
#include "pp/InitAllPasses.h"
#include "pp/Pipelines/Pipelines.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <memory>

// Debian's MLIR is linked in uninstrumented, and LLVM's BumpPtrAllocator
// poisons the slabs of its slow path (inline, instrumented here) and
// unpoisons each allocation in its fast path (inline, uninstrumented in
// MLIR): MLIRContext's own type storage would read as poisoned. The
// allocator's manual poisoning is off; ASan's own checks stay.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

namespace {
const char *const kCompileOptions[] = {
    "cluster=2xT4 schedule=1f1b microbatches=2 report=",
    "cluster=4xT4 schedule=interleaved microbatches=4 report=",
    "cluster=2xT4 schedule=pipedream-2bw microbatches=4 report=",
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry;
    r->insert<pp::onnx::ONNXDialect, pp::train::TrainDialect,
              pp::pipeline::PPDialect, mlir::func::FuncDialect,
              mlir::emitc::EmitCDialect>();
    pp::train::registerONNXGradients(*r);
    pp::onnx::registerShardingInterfaceExternalModels(*r);
    pp::registerAllPasses();
    return r;
  }();
  static std::unique_ptr<mlir::MLIRContext> context;
  static int uses = 0;
  if (!context || ++uses == 100) {
    uses = 0;
    context = std::make_unique<mlir::MLIRContext>(
        *registry, mlir::MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
  }
  if (size == 0 || size > (1 << 20))
    return 0;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  pp::ONNXImportOptions import;
  import.batchSize = 2;
  mlir::OwningOpRef<mlir::ModuleOp> module = pp::importONNXModel(
      bytes, "/nonexistent-pp-fuzz/model.onnx", context.get(), import);
  if (!module)
    return 0;
  const char *text = kCompileOptions[data[size - 1] % 3];
  std::unique_ptr<pp::CompileOptions> options =
      pp::CompileOptions::createFromString(text);
  if (!options)
    std::abort(); // the harness's own options must parse
  mlir::PassManager pm(context.get());
  pp::buildTrainingPipeline(pm, *options);
  (void)pm.run(*module);
  return 0;
}

#include "ONNXMutator.h"
