//===- Depthwise.cpp - Direct depthwise convolutions ------------*- C++ -*-===//
//
// Blocks of 8 channels are copied into zero-bordered scratch planes (the
// geometry's pads on both sides) stored position-major, so every tap of
// every output position is one 8-lane multiply-add without bounds checks.
// Geometry is normalised to three spatial dims (Checks.h), so one loop nest
// serves 1-D, 2-D and 3-D.
//
//===----------------------------------------------------------------------===//

#include "Depthwise.h"
#include "Common.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace pp::rt::cpu {
namespace {

/// Channels per block. The kernels work on blocks of kBlock channels
/// stored position-major ([position][channel]): every tap of an output
/// position is then one multiply-add of kBlock independent lanes, which the
/// compiler vectorises whatever the plane size, stride or dilation (a plane
/// at a time, a 2x2 plane under a 7x7 kernel spent its time in loop
/// overhead).
constexpr int64_t kBlock = 8;

/// acc[j] += a[j] * b[j] for the kBlock lanes.
template <typename T>
inline void multiplyAdd(T *__restrict acc, const T *__restrict a,
                        const T *__restrict b) {
  for (int64_t j = 0; j < kBlock; ++j)
    acc[j] += a[j] * b[j];
}

/// The channel block [c0, c0 + count) of one image, count <= kBlock, in a
/// plane padded by the geometry's pads on both sides (every tap of every
/// output lies inside it: floor-mode output sizes, non-negative pads). Lanes
/// beyond count hold zeros.
struct PaddedBlock {
  const Geometry &g;
  int64_t dims[3];
  int64_t size = kBlock; // elements
  explicit PaddedBlock(const Geometry &geometry) : g(geometry) {
    for (int i = 0; i < 3; ++i) {
      dims[i] = g.in[i] + g.pb[i] + g.pe[i];
      size *= dims[i];
    }
  }
  /// Element offset of the vector that tap (kd, kh, kw = 0) of output
  /// (od, oh, ow = 0) reads.
  int64_t row(int64_t od, int64_t oh, int64_t kd, int64_t kh) const {
    return ((od * g.s[0] + kd * g.d[0]) * dims[1] + oh * g.s[1] + kh * g.d[1]) *
           dims[2] * kBlock;
  }
  /// Element offset of input row (id, ih) inside the padded plane.
  int64_t interior(int64_t id, int64_t ih) const {
    return (((id + g.pb[0]) * dims[1] + ih + g.pb[1]) * dims[2] + g.pb[2]) *
           kBlock;
  }
  /// Copies planes [0, count) of `planes` (plane j at j * inSize) into the
  /// interior; the border is zero from the start and never written.
  template <typename T> void fill(const T *planes, int64_t count, T *xp) const {
    for (int64_t id = 0; id < g.in[0]; ++id)
      for (int64_t ih = 0; ih < g.in[1]; ++ih) {
        T *dst = xp + interior(id, ih);
        const T *src = planes + (id * g.in[1] + ih) * g.in[2];
        for (int64_t iw = 0; iw < g.in[2]; ++iw)
          for (int64_t j = 0; j < kBlock; ++j)
            dst[iw * kBlock + j] = j < count ? src[j * g.inSize + iw] : T(0);
      }
  }
  /// Copies the interior's lanes [0, count) out to the planes.
  template <typename T>
  void drain(const T *xp, int64_t count, T *planes) const {
    for (int64_t id = 0; id < g.in[0]; ++id)
      for (int64_t ih = 0; ih < g.in[1]; ++ih) {
        const T *src = xp + interior(id, ih);
        T *dst = planes + (id * g.in[1] + ih) * g.in[2];
        for (int64_t j = 0; j < count; ++j)
          for (int64_t iw = 0; iw < g.in[2]; ++iw)
            dst[j * g.inSize + iw] = src[iw * kBlock + j];
      }
  }
};

/// `count` planes of `size` elements (plane j at j * size) as [size][kBlock],
/// lanes beyond count zero.
template <typename T>
void gatherPlanes(const T *planes, int64_t size, int64_t count, T *out) {
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < kBlock; ++j)
      out[i * kBlock + j] = j < count ? planes[j * size + i] : T(0);
}

/// Lanes [0, count) of [size][kBlock] back to count planes.
template <typename T>
void scatterPlanes(const T *in, int64_t size, int64_t count, T *planes) {
  for (int64_t j = 0; j < count; ++j)
    for (int64_t i = 0; i < size; ++i)
      planes[j * size + i] = in[i * kBlock + j];
}

int64_t blocksOf(int64_t channels) { return (channels + kBlock - 1) / kBlock; }

/// (image, block) tasks per parallel chunk: about 16K multiply-adds.
int64_t taskGrain(const Geometry &g) {
  return std::max<int64_t>(
      1, 16384 / std::max<int64_t>(1, g.outSize * g.kSize * kBlock));
}

} // namespace

template <typename T>
void depthwiseForward(const Context &ctx, const ConvDims &cp, const T *x,
                      const T *w, const T *bias, T *y) {
  const Geometry &g = cp.geo;
  PaddedBlock pad(g);
  int64_t blocks = blocksOf(cp.c);
  parallelFor(
      ctx, cp.n * blocks, taskGrain(g), [&](int64_t begin, int64_t end) {
        std::vector<T> xp(pad.size, T(0)), wb(g.kSize * kBlock),
            yb(g.outSize * kBlock);
        for (int64_t task = begin; task < end; ++task) {
          int64_t n = task / blocks, c0 = task % blocks * kBlock;
          int64_t count = std::min(kBlock, cp.c - c0);
          pad.fill(x + (n * cp.c + c0) * g.inSize, count, xp.data());
          gatherPlanes(w + c0 * g.kSize, g.kSize, count, wb.data());
          T b[kBlock] = {};
          for (int64_t j = 0; bias && j < count; ++j)
            b[j] = bias[c0 + j];
          T *out = yb.data();
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow = 0; ow < g.out[2]; ++ow, out += kBlock) {
                T acc[kBlock];
                std::copy(b, b + kBlock, acc);
                const T *wk = wb.data();
                for (int64_t kd = 0; kd < g.k[0]; ++kd)
                  for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                    const T *in = xp.data() + pad.row(od, oh, kd, kh) +
                                  ow * g.s[2] * kBlock;
                    for (int64_t kw = 0; kw < g.k[2]; ++kw, wk += kBlock)
                      multiplyAdd(acc, wk, in + kw * g.d[2] * kBlock);
                  }
                std::copy(acc, acc + kBlock, out);
              }
          scatterPlanes(yb.data(), g.outSize, count,
                        y + (n * cp.m + c0) * g.outSize);
        }
      });
}

template <typename T>
void depthwiseBackwardData(const Context &ctx, const ConvDims &cp, const T *dy,
                           const T *w, T *dx) {
  const Geometry &g = cp.geo;
  PaddedBlock pad(g);
  int64_t blocks = blocksOf(cp.c);
  parallelFor(
      ctx, cp.n * blocks, taskGrain(g), [&](int64_t begin, int64_t end) {
        std::vector<T> dxp(pad.size), wb(g.kSize * kBlock),
            dyb(g.outSize * kBlock);
        for (int64_t task = begin; task < end; ++task) {
          int64_t n = task / blocks, c0 = task % blocks * kBlock;
          int64_t count = std::min(kBlock, cp.c - c0);
          std::fill(dxp.begin(), dxp.end(), T(0));
          gatherPlanes(w + c0 * g.kSize, g.kSize, count, wb.data());
          gatherPlanes(dy + (n * cp.m + c0) * g.outSize, g.outSize, count,
                       dyb.data());
          const T *grad = dyb.data();
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow = 0; ow < g.out[2]; ++ow, grad += kBlock) {
                const T *wk = wb.data();
                for (int64_t kd = 0; kd < g.k[0]; ++kd)
                  for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                    T *in = dxp.data() + pad.row(od, oh, kd, kh) +
                            ow * g.s[2] * kBlock;
                    for (int64_t kw = 0; kw < g.k[2]; ++kw, wk += kBlock)
                      multiplyAdd(in + kw * g.d[2] * kBlock, wk, grad);
                  }
              }
          pad.drain(dxp.data(), count, dx + (n * cp.c + c0) * g.inSize);
        }
      });
}

template <typename T>
void depthwiseBackwardWeights(const Context &ctx, const ConvDims &cp,
                              const T *dy, const T *x, T *dw) {
  const Geometry &g = cp.geo;
  PaddedBlock pad(g);
  // One channel block per task: its taps sum over all images on one thread,
  // each image's sum in T, the images' in double.
  parallelFor(ctx, blocksOf(cp.c), 1, [&](int64_t begin, int64_t end) {
    std::vector<T> xp(pad.size, T(0)), dyb(g.outSize * kBlock);
    std::vector<double> taps(g.kSize * kBlock);
    for (int64_t block = begin; block < end; ++block) {
      int64_t c0 = block * kBlock, count = std::min(kBlock, cp.c - c0);
      std::fill(taps.begin(), taps.end(), 0.0);
      for (int64_t n = 0; n < cp.n; ++n) {
        pad.fill(x + (n * cp.c + c0) * g.inSize, count, xp.data());
        gatherPlanes(dy + (n * cp.m + c0) * g.outSize, g.outSize, count,
                     dyb.data());
        double *tap = taps.data();
        for (int64_t kd = 0; kd < g.k[0]; ++kd)
          for (int64_t kh = 0; kh < g.k[1]; ++kh)
            for (int64_t kw = 0; kw < g.k[2]; ++kw, tap += kBlock) {
              T acc[kBlock] = {};
              const T *grad = dyb.data();
              for (int64_t od = 0; od < g.out[0]; ++od)
                for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                  const T *in = xp.data() + pad.row(od, oh, kd, kh) +
                                kw * g.d[2] * kBlock;
                  for (int64_t ow = 0; ow < g.out[2]; ++ow, grad += kBlock)
                    multiplyAdd(acc, grad, in + ow * g.s[2] * kBlock);
                }
              for (int64_t j = 0; j < kBlock; ++j)
                tap[j] += double(acc[j]);
            }
      }
      for (int64_t j = 0; j < count; ++j)
        for (int64_t t = 0; t < g.kSize; ++t)
          dw[(c0 + j) * g.kSize + t] = T(taps[t * kBlock + j]);
    }
  });
}

#define PP_RT_DEPTHWISE_INSTANTIATE(T)                                         \
  template void depthwiseForward<T>(const Context &, const ConvDims &,         \
                                    const T *, const T *, const T *, T *);     \
  template void depthwiseBackwardData<T>(const Context &, const ConvDims &,    \
                                         const T *, const T *, T *);           \
  template void depthwiseBackwardWeights<T>(const Context &, const ConvDims &, \
                                            const T *, const T *, T *);
PP_RT_DEPTHWISE_INSTANTIATE(float)
PP_RT_DEPTHWISE_INSTANTIATE(double)
#undef PP_RT_DEPTHWISE_INSTANTIATE

} // namespace pp::rt::cpu
