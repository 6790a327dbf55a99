//===- PPToEmitC.cpp - Scheduled pipeline to EmitC --------------*- C++ -*-===//
//
// The type converter, the pattern set and the two steps of
// pp/Conversion/PPToEmitC/PPToEmitC.h: a partial dialect conversion of the
// stage functions (every other op of the module is legal and left alone),
// then the program (Program.cpp).
//
//===----------------------------------------------------------------------===//

#include "pp/Conversion/PPToEmitC/PPToEmitC.h"

#include "PPToEmitCCommon.h"
#include "Program.h"

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Support/FileOutput.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pp::emitc_lowering;
namespace pipeline = pp::pipeline;

pp::PPToEmitCTypeConverter::PPToEmitCTypeConverter(MLIRContext *context) {
  addConversion([](Type type) -> std::optional<Type> {
    if (emitc::isSupportedEmitCType(type) && !isa<TensorType>(type))
      return type;
    return std::nullopt;
  });
  addConversion([context](RankedTensorType) -> Type {
    return emitc::OpaqueType::get(context, kTensorType);
  });
}

void pp::populatePPToEmitCPatterns(TypeConverter &typeConverter,
                                   RewritePatternSet &patterns) {
  populatePipelinePatterns(typeConverter, patterns);
  populateElementwisePatterns(typeConverter, patterns);
  populateLinalgPatterns(typeConverter, patterns);
  populateNormPatterns(typeConverter, patterns);
  populateMovementPatterns(typeConverter, patterns);
  populateTrainPatterns(typeConverter, patterns);
}

namespace {

/// Whether `op` is a stage function or in one (being lowered or not).
bool isInStageFunction(Operation *op) {
  for (; op; op = op->getParentOp()) {
    if (isa<emitc::FuncOp>(op))
      return true;
    if (isa<func::FuncOp>(op))
      return pipeline::getStage(op).has_value();
  }
  return false;
}

} // namespace

LogicalResult pp::convertStageFunctionsToEmitC(ModuleOp module) {
  MLIRContext *context = module.getContext();
  context->getOrLoadDialect<emitc::EmitCDialect>();
  PPToEmitCTypeConverter typeConverter(context);
  RewritePatternSet patterns(context);
  populatePPToEmitCPatterns(typeConverter, patterns);

  // EmitC is legal, and so is everything outside stage functions; what is
  // in them has no legality of its own, so that an op no pattern lowers is
  // reported below with its own message rather than the driver's.
  ConversionTarget target(*context);
  target.addLegalDialect<emitc::EmitCDialect>();
  target.markUnknownOpDynamicallyLegal(
      [](Operation *op) -> std::optional<bool> {
        if (isInStageFunction(op))
          return std::nullopt;
        return true;
      });
  DenseSet<Operation *> unlowered;
  ConversionConfig config;
  config.unlegalizedOps = &unlowered;
  // Fold nothing: onnx folders would rewrite shape sub-graphs on the way.
  config.foldingMode = DialectConversionFoldingMode::Never;
  // Where an op is left unlowered, casts between it and its lowered
  // neighbours keep the IR valid until it is reported below.
  config.buildMaterializations = false;

  // Where the patterns reported errors.
  DenseSet<Location> reported;
  {
    ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        reported.insert(diag.getLocation());
      return failure(); // and on to the next handler
    });
    if (failed(applyPartialConversion(module, target, std::move(patterns),
                                      config)))
      return failure();
  }
  if (unlowered.empty()) {
    // Every op is lowered, so no value needs a cast any more.
    WalkResult casts = module.walk([](UnrealizedConversionCastOp cast) {
      cast.emitError() << "code generation left a cast between "
                       << cast.getOperandTypes() << " and "
                       << cast.getResultTypes();
      return WalkResult::interrupt();
    });
    return failure(casts.wasInterrupted());
  }
  // Ops of stage functions that are left: a diagnostic at each that has no
  // pattern's (ops of a function that could not be lowered have their
  // function's).
  module.walk([&](Operation *op) {
    if (!unlowered.contains(op) || reported.contains(op->getLoc()))
      return;
    if (isa<func::FuncOp>(op)) {
      op->emitError() << "code generation could not lower this stage function";
      return;
    }
    if (isa<func::FuncOp>(op->getParentOp()))
      return;
    op->emitError() << "code generation does not support this op yet";
  });
  return failure();
}

LogicalResult pp::convertPipelineToEmitC(ModuleOp module,
                                         const EmitProgramOptions &options,
                                         std::string &dataBytes) {
  // The table reads the pipeline IR, so it comes first.
  auto table = collectProgramTable(module);
  if (failed(table) || failed(convertStageFunctionsToEmitC(module)) ||
      failed(buildProgram(module, *table, options)))
    return failure();
  dataBytes = std::move(table->dataBytes);
  return success();
}

FailureOr<OwningOpRef<ModuleOp>>
pp::lowerPipelineToEmitC(ModuleOp module, const EmitProgramOptions &options,
                         std::string &dataBytes) {
  OwningOpRef<ModuleOp> copy = module.clone();
  if (failed(convertPipelineToEmitC(*copy, options, dataBytes)))
    return failure();
  return copy;
}

LogicalResult pp::writeFileBytes(Operation *anchor, StringRef path,
                                 StringRef bytes) {
  if (llvm::Error error = pp::writeFileContents(path, bytes))
    return anchor->emitError() << llvm::toString(std::move(error));
  return success();
}
