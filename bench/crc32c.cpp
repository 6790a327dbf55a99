//===- crc32c.cpp - CRC-32C paths against the byte-wise table ---*- C++ -*-===//
//
// Times Checksum.h's three CRC-32C paths on the same 256 MiB buffer,
// alternating `rounds` times: the byte-wise table (the code before
// slicing-by-8 and the crc32 instruction), slicing-by-8, and SSE 4.2's
// crc32 instruction where the processor has it; GB/s of each (best round)
// and its speed-up over the byte-wise table. Every checkpoint and every
// start of `train` runs crc32c over all of its bytes.
// Built by hand (header-only):
//   g++ -O2 -std=c++17 -Iruntime/include bench/crc32c.cpp -o crc32c
// Usage: crc32c [ROUNDS]
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Checksum.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

using namespace pp::rt;

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  std::vector<unsigned char> bytes(size_t(256) << 20);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (unsigned char &b : bytes) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    b = static_cast<unsigned char>(state >> 24);
  }
  struct Path {
    const char *name;
    std::function<uint32_t()> run;
    double best = 1e30;
    uint32_t crc = 0;
  };
  std::vector<Path> paths = {
      {"byte-wise table",
       [&] {
         return ~detail::crc32cBytewise(~0u, bytes.data(), bytes.size());
       }},
      {"slicing-by-8",
       [&] { return ~detail::crc32cSliced(~0u, bytes.data(), bytes.size()); }}};
#ifdef PP_RT_CRC32C_SSE42
  if (detail::crc32cHasHardware())
    paths.push_back({"crc32 instruction", [&] {
                       return ~detail::crc32cHardware(~0u, bytes.data(),
                                                      bytes.size());
                     }});
#endif
  for (int r = 0; r < rounds; ++r)
    for (Path &p : paths) {
      auto t0 = std::chrono::steady_clock::now();
      p.crc = p.run();
      auto t1 = std::chrono::steady_clock::now();
      p.best = std::min(p.best, std::chrono::duration<double>(t1 - t0).count());
    }
  std::printf("CRC-32C of %zu MiB, best of %d alternating rounds\n",
              bytes.size() >> 20, rounds);
  for (const Path &p : paths) {
    std::printf("%-18s %6.2f GB/s  %5.1fx  crc %08x%s\n", p.name,
                bytes.size() / p.best / 1e9, paths[0].best / p.best, p.crc,
                p.crc == paths[0].crc ? "" : "  MISMATCH");
    if (p.crc != paths[0].crc)
      return 1;
  }
  return 0;
}
