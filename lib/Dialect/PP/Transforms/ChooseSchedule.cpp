//===- ChooseSchedule.cpp - schedule=auto ---------------------------------===//
//
// Compiles a copy of the module with each candidate schedule and keeps the
// one whose simulated step trains the most samples per second; a schedule
// that does not fit the devices fails in --pp-partition and drops out.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/PP/IR/PPOps.h"
#include "pp/Dialect/PP/Transforms/ReportFile.h"
#include "pp/Dialect/PP/Transforms/Transforms.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
namespace pipeline = pp::pipeline;

/// A --pp-compile option value, quoted when it holds a space.
static std::string quoteOption(llvm::StringRef key, llvm::StringRef value) {
  if (value.contains(' '))
    return " " + key.str() + "=\"" + value.str() + "\"";
  return " " + key.str() + "=" + value.str();
}

LogicalResult
pipeline::buildCandidatePipeline(const pp::ChooseSchedulePassOptions &options,
                                 pp::kinds::ScheduleKind schedule, bool final,
                                 OpPassManager &pm, llvm::raw_ostream &errors) {
  std::string text = options.compileOptions +
                     quoteOption("schedule", pp::kinds::toString(schedule));
  text += quoteOption("report", final ? options.reportFile : "");
  if (final && !options.emitDir.empty())
    text += quoteOption("emit-dir", options.emitDir);
  if (final && !options.planDir.empty())
    text += quoteOption("plan-dir", options.planDir);
  return parsePassPipeline("pp-compile{" + text + "}", pm, errors);
}

LogicalResult pipeline::chooseSchedule(
    ModuleOp module, const pp::ChooseSchedulePassOptions &options,
    llvm::function_ref<LogicalResult(OpPassManager &, ModuleOp)> runPipeline) {
  if (options.candidates.empty()) {
    module.emitError() << "schedule=auto: no schedule to try "
                          "(auto-schedules is empty)";
    return failure();
  }
  struct Tried {
    pp::kinds::ScheduleKind kind;
    std::string schedule;
    double samplesPerSecond = -1; // -1: failed
    std::string why;
  };
  std::vector<Tried> tried;
  for (pp::kinds::ScheduleKind kind : options.candidates) {
    Tried &entry = tried.emplace_back();
    entry.kind = kind;
    entry.schedule = pp::kinds::toString(kind);
    std::string errors;
    llvm::raw_string_ostream errorStream(errors);
    // A pass manager of its own: the copy is not nested in the module.
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    if (failed(buildCandidatePipeline(options, kind, /*final=*/false, pm,
                                      errorStream))) {
      module.emitError() << "schedule=auto: " << entry.schedule << ": "
                         << errors;
      return failure();
    }
    OwningOpRef<ModuleOp> copy(module.clone());
    // The candidate's errors are its reason to drop out, not the run's.
    std::string first;
    LogicalResult ran = success();
    {
      ScopedDiagnosticHandler keep(module.getContext(), [&](Diagnostic &diag) {
        if (diag.getSeverity() == DiagnosticSeverity::Error && first.empty())
          first = diag.str();
        return success();
      });
      ran = pm.run(*copy);
    }
    auto rate = (*copy)->getAttrOfType<FloatAttr>(
        PPDialect::PredictedSamplesPerSecondAttrHelper::getNameStr());
    if (failed(ran) || !rate) {
      entry.why = first.empty() ? "did not compile" : first;
      continue;
    }
    entry.samplesPerSecond = rate.getValueAsDouble();
  }
  const Tried *best = nullptr;
  for (const Tried &entry : tried)
    if (entry.samplesPerSecond >= 0 &&
        (!best || entry.samplesPerSecond > best->samplesPerSecond))
      best = &entry;
  std::string summary = "schedule auto: ";
  if (best)
    summary += llvm::formatv("{0}, the most predicted samples/s of {1} "
                             "tried:",
                             best->schedule, tried.size())
                   .str();
  else
    summary += "no schedule compiles:";
  for (const Tried &entry : tried)
    summary += entry.samplesPerSecond >= 0
                   ? llvm::formatv(" {0} {1:f0};", entry.schedule,
                                   entry.samplesPerSecond)
                         .str()
                   : " " + entry.schedule + " dropped (" + entry.why + ");";
  if (!best) {
    module.emitError() << summary;
    return failure();
  }
  if (!options.reportFile.empty() &&
      failed(pp::writeReportFile(
          module, options.reportFile,
          [&](llvm::raw_ostream &os) { os << summary << "\n"; })))
    return failure();
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  OpPassManager pm(ModuleOp::getOperationName());
  if (failed(buildCandidatePipeline(options, best->kind, /*final=*/true, pm,
                                    errorStream))) {
    module.emitError() << "schedule=auto: " << errors;
    return failure();
  }
  return runPipeline(pm, module);
}
