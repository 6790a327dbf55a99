//===- DropoutHash.h - Counter-based dropout mask ---------------*- C++ -*-===//
//
// The dropout mask of Kernels.h is a pure function of (seed, element
// position) so that every backend and every run agree bit for bit. This
// header holds that function once, for host code and (under nvcc) device
// code alike: element i of a call with `offset` is at position p = offset + i,
//
//   keep(p) = (splitmix64(seed ^ (p * 0x9E3779B97F4A7C15)) >> 11)
//             < floor((1 - (double)ratio) * 2^53)
//
// and kept elements are scaled by 1 / (1 - ratio) (0 when ratio is 1).
//
// The seed of a Dropout op without an ONNX `seed` is streamSeed(run seed,
// the op's `stream`, step), and the offset of micro-batch m is m * numel, so
// a mask depends on the op, the step and the element's position in the whole
// mini-batch only: not on the stages, the schedule or the micro-batch count
// (docs/cli.md, "Dropout masks").
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_DROPOUTHASH_H
#define PP_RUNTIME_DROPOUTHASH_H

#include <cstdint>

#ifdef __CUDACC__
#define PP_RT_HOST_DEVICE __host__ __device__
#else
#define PP_RT_HOST_DEVICE
#endif

namespace pp::rt::dropouthash {

/// Steele, Lea and Flood's SplitMix64 finaliser (the seeding generator of
/// xoroshiro): a bijective mix of a 64-bit counter.
PP_RT_HOST_DEVICE inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// floor((1 - ratio) * 2^53): the 53-bit draw of a kept element lies below
/// it. The product is exact in double on every IEEE-754 target, so host and
/// device agree.
PP_RT_HOST_DEVICE inline uint64_t keepThreshold(float ratio) {
  double keep = 1.0 - static_cast<double>(ratio);
  return static_cast<uint64_t>(keep * 9007199254740992.0); // 2^53
}

/// Whether the element at position `p` survives dropout under `seed`.
PP_RT_HOST_DEVICE inline bool keepElement(uint64_t seed, uint64_t p,
                                          uint64_t threshold) {
  return (splitmix64(seed ^ (p * 0x9E3779B97F4A7C15ull)) >> 11) < threshold;
}

/// The mask seed of Dropout stream `stream` at (0-based) training step
/// `step` of a run seeded with `runSeed`: chained splitmix64, so nearby
/// triples give unrelated masks.
PP_RT_HOST_DEVICE inline uint64_t streamSeed(uint64_t runSeed, uint64_t stream,
                                             uint64_t step) {
  return splitmix64(splitmix64(splitmix64(runSeed) + stream) + step);
}

/// 1 / (1 - ratio); 0 when everything is dropped (ratio 1), so outputs are
/// zero instead of 0 * inf.
PP_RT_HOST_DEVICE inline double keepScale(float ratio) {
  return ratio >= 1.f ? 0.0 : 1.0 / (1.0 - static_cast<double>(ratio));
}

} // namespace pp::rt::dropouthash

#endif // PP_RUNTIME_DROPOUTHASH_H
