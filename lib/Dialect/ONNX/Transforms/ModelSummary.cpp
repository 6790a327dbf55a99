//===- ModelSummary.cpp - Ops, parameters and FLOPs of a model --*- C++ -*-===//

#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Dialect/ONNX/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace {

/// Sums saturate: a module of many huge globals passes int64's range.
struct GlobalTotals {
  uint64_t tensors = 0, elements = 0, bytes = 0;
};

/// Prints `value` with a metric suffix (12.3M).
std::string humanize(double value) {
  const char *suffixes[] = {"", "K", "M", "G", "T", "P", "E", "Z"};
  int i = 0;
  while (value >= 1000 && i < 7) {
    value /= 1000;
    ++i;
  }
  return llvm::formatv(i ? "{0:f2}{1}" : "{0:f0}{1}", value, suffixes[i]).str();
}

} // namespace

LogicalResult
pp::onnx::writeModelSummary(ModuleOp module,
                            const ModelSummaryPassOptions &options) {
  llvm::MapVector<StringRef, GlobalTotals> globals;
  for (StringRef kind :
       {pp::onnx::kTrainable, pp::onnx::kState, pp::onnx::kConstant})
    globals[kind] = {};
  for (auto global : module.getOps<pp::onnx::GlobalOp>()) {
    auto type = cast<RankedTensorType>(global.getType());
    GlobalTotals &totals = globals[global.getKind()];
    ++totals.tensors;
    uint64_t elements = type.getNumElements();
    totals.elements = llvm::SaturatingAdd(totals.elements, elements);
    totals.bytes = llvm::SaturatingAdd(
        totals.bytes, llvm::SaturatingMultiply(
                          elements, std::max<uint64_t>(
                                        1, type.getElementTypeBitWidth() / 8)));
  }

  // FLOPs in double: a sum over large ops can pass int64's range.
  std::map<std::string, std::pair<int64_t, double>> opCounts;
  int64_t totalOps = 0;
  double totalFlops = 0;
  module.walk([&](pp::onnx::CostOpInterface op) {
    if (isa<pp::onnx::ConstantOp>(op))
      return;
    auto &entry = opCounts[op->getName().getStringRef().str()];
    double flops = op.getForwardFlops();
    ++entry.first;
    entry.second += flops;
    ++totalOps;
    totalFlops += flops;
  });

  std::string errorMessage;
  auto output = openOutputFile(options.outputFile, &errorMessage);
  if (!output) {
    module.emitError() << "cannot open summary output: " << errorMessage;
    return failure();
  }
  llvm::raw_ostream &os = output->os();
  os << "== model summary ==\n";
  for (auto func : module.getOps<func::FuncOp>()) {
    os << "function @" << func.getSymName() << "\n";
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto name = func.getArgAttrOfType<StringAttr>(i, "onnx.name");
      os << "  input  " << (name ? name.getValue() : "") << ": " << type
         << "\n";
    }
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      os << "  output " << (name ? name.getValue() : "") << ": " << type
         << "\n";
    }
  }
  os << "parameters:\n";
  for (auto &[kind, totals] : globals)
    os << llvm::formatv("  {0,-10} {1,5} tensors {2,12} elements {3,10}B\n",
                        kind, totals.tensors, totals.elements,
                        humanize(totals.bytes));
  os << llvm::formatv("ops: {0} (forward FLOPs per step: {1})\n", totalOps,
                      humanize(totalFlops));
  for (auto &[name, entry] : opCounts)
    os << llvm::formatv("  {0,-28} {1,5} {2,10} FLOPs\n", name, entry.first,
                        humanize(entry.second));
  output->keep();
  return success();
}
