//===- pipeline-opt.cpp - The pipeline-opt driver ---------------*- C++ -*-===//
//
// mlir-opt for the project's dialects and passes. An `.onnx` input is first
// imported into the onnx dialect (static shapes) and then handed to the
// usual MlirOptMain pipeline, so every pass and flag applies to it.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Transforms/ShardingInterfaceImpl.h"
#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/Train/IR/TrainOps.h"
#include "pp/Import/ONNX/ONNXImporter.h"
#include "pp/InitAllPasses.h"
#include "pp/Support/FileOutput.h"
#include "pp/Support/InputLimits.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::OptionCategory importCategory("ONNX import options");
static llvm::cl::opt<int64_t> batchSize(
    "batch-size",
    llvm::cl::desc("Batch size for a symbolic leading dim of the ONNX "
                   "model's inputs"),
    llvm::cl::init(0), llvm::cl::cat(importCategory));
static llvm::cl::opt<std::string> frozenParams(
    "frozen-params",
    llvm::cl::desc("Regex of float initializer names to import as constants "
                   "instead of trainable parameters"),
    llvm::cl::init(""), llvm::cl::cat(importCategory));
static llvm::cl::opt<std::string> trainableParams(
    "trainable",
    llvm::cl::desc("Regex of float initializer names to train whatever the "
                   "model's metadata or their values say (--frozen-params "
                   "wins)"),
    llvm::cl::init(""), llvm::cl::cat(importCategory));

static llvm::cl::opt<bool> shapeOnly(
    "shape-only",
    llvm::cl::desc("Do not read initializers' external data (the files may "
                   "be absent): their globals get a type only, enough to "
                   "plan (--pp-partition, --pp-compile up to the plan "
                   "report), not to run or generate code"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));

/// Imports an .onnx file and returns it as MLIR bytecode for MlirOptMain.
static std::unique_ptr<llvm::MemoryBuffer>
importToBuffer(StringRef fileName, DialectRegistry &registry) {
  MLIRContext context(registry);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    pp::printImportDiagnostic(diag, llvm::errs());
    return success();
  });
  pp::ONNXImportOptions options;
  if (batchSize.getNumOccurrences())
    options.batchSize = batchSize;
  options.frozenPattern = frozenParams;
  options.trainablePattern = trainableParams;
  options.shapeOnly = shapeOnly;
  OwningOpRef<ModuleOp> module =
      pp::importONNXFile(fileName, &context, options);
  if (!module)
    return nullptr;
  // --pp-emit-program puts the model next to the generated program (a hard
  // link, else a copy), for its --save-onnx.
  SmallString<256> absolute(fileName);
  llvm::sys::fs::make_absolute(absolute);
  (*module)->setAttr("onnx.source_file",
                     StringAttr::get(&context, absolute.str()));
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (failed(writeBytecodeToFile(*module, os)))
    return nullptr;
  return llvm::MemoryBuffer::getMemBufferCopy(bytes, fileName);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  registry.insert<pp::onnx::ONNXDialect, pp::train::TrainDialect,
                  pp::pipeline::PPDialect, func::FuncDialect,
                  emitc::EmitCDialect>();
  pp::train::registerONNXGradients(registry);
  pp::onnx::registerShardingInterfaceExternalModels(registry);
  pp::registerAllPasses();
  // Upstream's sharding passes, after --pp-tensor-parallel.
  shard::registerShardingPropagation();
  shard::registerPartition();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();

  // A diagnostic at a module or function would print the whole of it (often
  // megabytes of weights): off unless asked for.
  std::vector<char *> args(argv, argv + argc);
  bool printOpGiven = llvm::any_of(args, [](const char *arg) {
    return StringRef(arg).contains("mlir-print-op-on-diagnostic");
  });
  static char noPrintOp[] = "--mlir-print-op-on-diagnostic=false";
  if (!printOpGiven)
    args.insert(args.begin() + 1, noPrintOp);
  argc = static_cast<int>(args.size());
  argv = args.data();
  auto [inputFile, outputFile] = registerAndParseCLIOptions(
      argc, argv, "pipeline-opt: ONNX to pipeline-parallel training programs",
      registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::unique_ptr<llvm::MemoryBuffer> input;
  if (StringRef(inputFile).ends_with_insensitive(".onnx")) {
    input = importToBuffer(inputFile, registry);
    if (!input)
      return 1;
  } else if (inputFile == "-") {
    std::string errorMessage;
    input = openInputFile(inputFile, &errorMessage);
    if (!input) {
      llvm::errs() << errorMessage << "\n";
      return 1;
    }
  } else {
    // A named input must be a regular file of bounded size: /dev/zero or a
    // FIFO would be read forever.
    auto read = pp::limits::readRegularFile(
        inputFile, pp::limits::kMaxMLIRFileBytes, "input file",
        /*isText=*/true);
    if (!read) {
      llvm::errs() << "error: " << llvm::toString(read.takeError()) << "\n";
      return 1;
    }
    input = std::move(*read);
  }
  std::string errorMessage;
  auto output = openOutputFile(outputFile, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }
  bool passed =
      succeeded(MlirOptMain(output->os(), std::move(input), registry, config));
  // A full disk or a closed pipe: say so and fail, rather than let the
  // stream's destructor abort with "IO failure on output stream".
  if (llvm::Error error = pp::finishWriting(output->os(), outputFile)) {
    llvm::errs() << "error: " << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  if (!passed)
    return 1;
  output->keep();
  return 0;
}
