//===- Passes.cpp - Model passes over Transforms.h --------------*- C++ -*-===//
//
// Each pass hands its options to the function of Transforms.h that does
// the work; both only read the module.
//
//===----------------------------------------------------------------------===//

#include "pp/Dialect/ONNX/Transforms/Transforms.h"
#include "pp/Support/PassAdapter.h"

namespace pp {
#define GEN_PASS_DEF_MODELSUMMARYPASS
#define GEN_PASS_DEF_VERIFYSTATICSHAPESPASS
#include "pp/Dialect/ONNX/Transforms/Passes.h.inc"
} // namespace pp

using namespace mlir;
using pp::PassAdapter;

namespace {

struct ModelSummaryPass
    : PassAdapter<ModelSummaryPass, pp::impl::ModelSummaryPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    markAllAnalysesPreserved();
    return pp::onnx::writeModelSummary(module, {.outputFile = outputFile});
  }
};

struct VerifyStaticShapesPass
    : PassAdapter<VerifyStaticShapesPass,
                  pp::impl::VerifyStaticShapesPassBase> {
  using PassAdapter::PassAdapter;
  LogicalResult run(ModuleOp module) {
    markAllAnalysesPreserved();
    return pp::onnx::verifyStaticShapes(module);
  }
};

} // namespace
