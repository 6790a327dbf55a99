//===- Window.cuh - Convolution and pooling window geometry ----*- CUDA -*-===//
//
// The validated geometry of a convolution or pooling window, normalised to
// three spatial dims (missing leading dims have size 1) as in the CPU
// backend, so that one code path serves 1-D, 2-D and 3-D.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_CUDA_WINDOW_CUH
#define PP_RUNTIME_CUDA_WINDOW_CUH

#include "Common.cuh"

namespace pp::rt::cuda {

/// in/out are spatial sizes, k kernel, s stride, pb/pe pads, d dilation.
/// Passed to kernels by value.
struct Geometry {
  int64_t in[3], out[3], k[3], s[3], pb[3], pe[3], d[3];
  int64_t inSize = 1, outSize = 1, kSize = 1;
};

/// Validates `params` for the spatial dims `in` and `out` and fills `g`.
/// `weightKernel` is the kernel a convolution weight implies (null for
/// pooling, where params.kernel is required). Convolution demands the
/// floor-mode output size; pooling (allowCeil) also accepts ceil mode's.
Status resolveGeometry(const std::string &what, const WindowParams &params,
                       const std::vector<int64_t> &in,
                       const std::vector<int64_t> &out,
                       const std::vector<int64_t> *weightKernel, bool allowCeil,
                       const char *outName, Geometry &g);

} // namespace pp::rt::cuda

#endif // PP_RUNTIME_CUDA_WINDOW_CUH
