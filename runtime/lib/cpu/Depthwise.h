//===- Depthwise.h - Direct depthwise convolutions --------------*- C++ -*-===//
//
// Convolutions with one input and one output channel per group (depthwise:
// MobileNet, EfficientNet, ConvNeXt) as direct loops over each channel's
// plane. Linalg.cpp runs them where oneDNN does not take the problem with a
// JIT kernel: im2col + GEMM would run one GEMM of a single row per channel.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_CPU_DEPTHWISE_H
#define PP_RUNTIME_CPU_DEPTHWISE_H

#include "common/Checks.h"
#include "pp/Runtime/Kernels.h"

namespace pp::rt::cpu {

/// Whether every group has exactly one input and one output channel.
inline bool isDepthwise(const common::ConvDims &cp) {
  return cp.cinG == 1 && cp.coutG == 1 && cp.c == cp.group && cp.m == cp.group;
}

/// y = conv(x, w) + bias (bias may be null); T is float or double.
template <typename T>
void depthwiseForward(const Context &ctx, const common::ConvDims &cp,
                      const T *x, const T *w, const T *bias, T *y);
/// dx = the input gradient of dy (overwritten).
template <typename T>
void depthwiseBackwardData(const Context &ctx, const common::ConvDims &cp,
                           const T *dy, const T *w, T *dx);
/// dw = the weight gradient of dy against x (overwritten). Each channel's
/// taps are summed in double over the images, in the same order on any
/// thread count.
template <typename T>
void depthwiseBackwardWeights(const Context &ctx, const common::ConvDims &cp,
                              const T *dy, const T *x, T *dw);

} // namespace pp::rt::cpu

#endif // PP_RUNTIME_CPU_DEPTHWISE_H
