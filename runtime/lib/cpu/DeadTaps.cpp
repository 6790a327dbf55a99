//===- DeadTaps.cpp - Kernel taps that only read padding ------------------===//

#include "DeadTaps.h"

#include <cstdlib>
#include <cstring>

namespace pp::rt::cpu {

using common::ConvDims;
using common::Geometry;

TapBox liveTaps(const Geometry &g) {
  TapBox box;
  for (int i = 0; i < 3; ++i) {
    int64_t first = -1, last = -1;
    for (int64_t t = 0; t < g.k[i]; ++t) {
      // Output o reads tap t at o * s - pb + t * d: live when one of them
      // lands inside [0, in).
      int64_t base = t * g.d[i] - g.pb[i];
      bool live = false;
      for (int64_t o = 0; o < g.out[i] && !live; ++o) {
        int64_t pos = base + o * g.s[i];
        live = pos >= 0 && pos < g.in[i];
        if (pos >= g.in[i])
          break;
      }
      if (live) {
        first = first < 0 ? t : first;
        last = t;
      }
    }
    box.first[i] = first < 0 ? 0 : first;
    box.count[i] = first < 0 ? 0 : last - first + 1;
  }
  return box;
}

bool cutDeadTaps() {
  static const bool cut = [] {
    const char *value = std::getenv("PP_RUNTIME_DEAD_TAPS");
    return !(value && std::strcmp(value, "keep") == 0);
  }();
  return cut;
}

std::optional<CroppedKernel> cropDeadTaps(const ConvDims &cp, int rank,
                                          const WindowParams &params) {
  if (!cutDeadTaps())
    return std::nullopt;
  const Geometry &g = cp.geo;
  CroppedKernel crop;
  crop.box = liveTaps(g);
  bool whole = true;
  for (int i = 0; i < 3; ++i) {
    if (crop.box.count[i] == 0)
      return std::nullopt;
    whole = whole && crop.box.count[i] == g.k[i];
  }
  if (whole)
    return std::nullopt;
  crop.weightShape = {cp.m, cp.cinG};
  std::vector<int64_t> begin, end;
  for (int i = 3 - rank; i < 3; ++i) {
    int64_t dropBefore = crop.box.first[i];
    int64_t dropAfter = g.k[i] - dropBefore - crop.box.count[i];
    int64_t pb = g.pb[i] - dropBefore * g.d[i];
    int64_t pe = g.pe[i] - dropAfter * g.d[i];
    if (pb < 0 || pe < 0)
      return std::nullopt;
    crop.params.kernel.push_back(crop.box.count[i]);
    crop.params.strides.push_back(g.s[i]);
    crop.params.dilations.push_back(g.d[i]);
    begin.push_back(pb);
    end.push_back(pe);
    crop.weightShape.push_back(crop.box.count[i]);
  }
  crop.params.pads = begin;
  crop.params.pads.insert(crop.params.pads.end(), end.begin(), end.end());
  crop.params.group = params.group;
  return crop;
}

namespace {

/// Calls fn(full offset, boxed offset, row elements) for each contiguous
/// row of the box in every [M][C / group] plane of the kernel.
template <typename Fn>
void forEachBoxRow(const ConvDims &cp, const TapBox &box, Fn &&fn) {
  const Geometry &g = cp.geo;
  int64_t planes = cp.m * cp.cinG;
  int64_t fullPlane = g.k[0] * g.k[1] * g.k[2];
  int64_t boxPlane = box.count[0] * box.count[1] * box.count[2];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t a = 0; a < box.count[0]; ++a)
      for (int64_t b = 0; b < box.count[1]; ++b) {
        int64_t full =
            p * fullPlane +
            ((box.first[0] + a) * g.k[1] + box.first[1] + b) * g.k[2] +
            box.first[2];
        int64_t boxed = p * boxPlane + (a * box.count[1] + b) * box.count[2];
        fn(full, boxed, box.count[2]);
      }
}

} // namespace

void gatherTaps(const ConvDims &cp, const CroppedKernel &crop, const Tensor &w,
                void *out) {
  size_t size = static_cast<size_t>(dtypeSize(w.dtype));
  const char *src = static_cast<const char *>(w.data);
  char *dst = static_cast<char *>(out);
  forEachBoxRow(cp, crop.box, [&](int64_t full, int64_t boxed, int64_t n) {
    std::memcpy(dst + boxed * size, src + full * size, n * size);
  });
}

void scatterTaps(const ConvDims &cp, const CroppedKernel &crop,
                 const void *boxed, Tensor &dw) {
  size_t size = static_cast<size_t>(dtypeSize(dw.dtype));
  std::memset(dw.data, 0, static_cast<size_t>(dw.bytes()));
  const char *src = static_cast<const char *>(boxed);
  char *dst = static_cast<char *>(dw.data);
  forEachBoxRow(cp, crop.box, [&](int64_t full, int64_t boxedAt, int64_t n) {
    std::memcpy(dst + full * size, src + boxedAt * size, n * size);
  });
}

} // namespace pp::rt::cpu
