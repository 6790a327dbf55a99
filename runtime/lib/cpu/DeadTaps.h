//===- DeadTaps.h - Kernel taps that only read padding ----------*- C++ -*-===//
//
// A convolution tap whose every output reads it from the padding multiplies
// zeros. ImageNet CNNs on CIFAR-sized images are full of them: resnet18 at
// 32x32 runs layer4's 3x3 kernels over 1x1 planes, where only the centre
// tap reads the input, and im2col + GEMM (or oneDNN) still do the other 8/9
// of the work (layer4 took 70 of a step's 142 ms of convolutions). The
// kernels here find the box of taps some output reads inside the input and
// run the convolution with the kernel cut to that box, its pads shrunk by
// the taps dropped, so that every output keeps its position: the same sums
// without the zero products.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_CPU_DEADTAPS_H
#define PP_RUNTIME_CPU_DEADTAPS_H

#include "common/Checks.h"
#include "pp/Runtime/Kernels.h"

#include <optional>

namespace pp::rt::cpu {

/// The taps [first, first + count) of each spatial dim (Geometry's order:
/// leading dims of size 1) that some output reads inside the input.
struct TapBox {
  int64_t first[3] = {0, 0, 0}, count[3] = {1, 1, 1};
};

/// The box of `g`'s live taps; a count of 0 where no tap of a dim reads
/// the input (every output of the convolution is then its bias).
TapBox liveTaps(const common::Geometry &g);

/// A convolution with its kernel cut to the live taps.
struct CroppedKernel {
  TapBox box;
  WindowParams params;              // explicit pads and the cut kernel
  std::vector<int64_t> weightShape; // [M, C / group, box counts...]
};

/// Whether convolutions cut dead taps: yes unless PP_RUNTIME_DEAD_TAPS=keep
/// (the benchmark's peer, bench/dead_taps.py).
bool cutDeadTaps();

/// The cut of `cp` (`rank` spatial dims, `params` its group), or nullopt
/// where every tap is live, none is, a pad would go negative (dilated
/// kernels whose dead taps reach past the padding) or cutting is off.
std::optional<CroppedKernel> cropDeadTaps(const common::ConvDims &cp, int rank,
                                          const WindowParams &params);

/// Copies the box's taps of `w` (the full kernel of `cp`) densely into
/// `out` (crop.weightShape, w's dtype).
void gatherTaps(const common::ConvDims &cp, const CroppedKernel &crop,
                const Tensor &w, void *out);
/// Writes `boxed` (crop.weightShape) into the box of `dw` (the full kernel)
/// and zeros into its other taps.
void scatterTaps(const common::ConvDims &cp, const CroppedKernel &crop,
                 const void *boxed, Tensor &dw);

} // namespace pp::rt::cpu

#endif // PP_RUNTIME_CPU_DEADTAPS_H
