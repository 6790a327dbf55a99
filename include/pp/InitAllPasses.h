//===- InitAllPasses.h - Every pass and pipeline of pipeline-opt -*- C++ -*-===//
#ifndef PP_INITALLPASSES_H
#define PP_INITALLPASSES_H

#include "pp/Conversion/Passes.h"
#include "pp/Dialect/ONNX/Transforms/Passes.h"
#include "pp/Dialect/PP/Transforms/Passes.h"
#include "pp/Dialect/Train/Transforms/Passes.h"
#include "pp/Pipelines/Pipelines.h"
#include "pp/Target/Program/Passes.h"

namespace pp {

/// Registers the project's passes and named pipelines with the global
/// registry (pipeline-opt, tests).
inline void registerAllPasses() {
  registerPPONNXPasses();
  registerPPTrainPasses();
  registerPPPipelinePasses();
  registerPPConversionPasses();
  registerPPTargetProgramPasses();
  registerPipelines();
}

} // namespace pp

#endif // PP_INITALLPASSES_H
