//===- Window.cuh - Convolution and pooling window geometry ----*- CUDA -*-===//
//
// The validated geometry of a convolution or pooling window, normalised to
// three spatial dims (missing leading dims have size 1), so that one code
// path serves 1-D, 2-D and 3-D. Validation is shared with the CPU backend.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_CUDA_WINDOW_CUH
#define PP_RUNTIME_CUDA_WINDOW_CUH

#include "Common.cuh"

namespace pp::rt::cuda {

// Geometry and resolveGeometry come from common/Checks.h.
using ::pp::rt::common::Geometry;
using ::pp::rt::common::resolveGeometry;

} // namespace pp::rt::cuda

#endif // PP_RUNTIME_CUDA_WINDOW_CUH
