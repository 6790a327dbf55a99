//===- Checksum.h - CRC-32C of byte strings ---------------------*- C++ -*-===//
//
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as iSCSI and ext4
// use it; crc32c("123456789") = 0xE3069283), header-only so that the code
// generator (the data file's checksum in the program table) and the
// training driver (checkpoint manifests, the data file's identity) compute
// the same value without a library between them.
//
// Every checkpoint and every start reads its whole data through it, so it
// must keep up with a disk: x86-64 processors with SSE 4.2 run the crc32
// instruction on 8 bytes at a time (about 20x the byte-wise table here),
// others eight tables over 8 bytes at a time ("slicing-by-8", about 5x).
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_CHECKSUM_H
#define PP_RUNTIME_CHECKSUM_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&        \
    !defined(__CUDACC__)
#define PP_RT_CRC32C_SSE42 1
#include <nmmintrin.h>
#endif

namespace pp::rt {

namespace detail {
/// Table k maps a byte to its CRC followed by k zero bytes.
using Crc32cTables = std::array<std::array<uint32_t, 256>, 8>;

inline const Crc32cTables &crc32cTables() {
  static const Crc32cTables tables = [] {
    Crc32cTables t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t i = 0; i < 256; ++i)
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
    return t;
  }();
  return tables;
}

/// The reference: one table lookup per byte. `crc` is the running
/// (inverted) register.
inline uint32_t crc32cBytewise(uint32_t crc, const unsigned char *p,
                               size_t size) {
  const std::array<uint32_t, 256> &table = crc32cTables()[0];
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

/// Slicing-by-8: eight bytes per step through the eight tables.
inline uint32_t crc32cSliced(uint32_t crc, const unsigned char *p,
                             size_t size) {
  const Crc32cTables &t = crc32cTables();
  for (; size >= 8; p += 8, size -= 8) {
    uint32_t low, high;
    std::memcpy(&low, p, 4);
    std::memcpy(&high, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    low = __builtin_bswap32(low);
    high = __builtin_bswap32(high);
#endif
    low ^= crc;
    crc = t[7][low & 0xFF] ^ t[6][(low >> 8) & 0xFF] ^
          t[5][(low >> 16) & 0xFF] ^ t[4][low >> 24] ^ t[3][high & 0xFF] ^
          t[2][(high >> 8) & 0xFF] ^ t[1][(high >> 16) & 0xFF] ^
          t[0][high >> 24];
  }
  return crc32cBytewise(crc, p, size);
}

#ifdef PP_RT_CRC32C_SSE42
/// SSE 4.2's crc32 instruction computes this very polynomial.
__attribute__((target("sse4.2"))) inline uint32_t
crc32cHardware(uint32_t crc, const unsigned char *p, size_t size) {
  uint64_t c = crc;
  for (; size >= 8; p += 8, size -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; size > 0; ++p, --size)
    c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

inline bool crc32cHasHardware() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#else
inline bool crc32cHasHardware() { return false; }
#endif
} // namespace detail

/// The CRC-32C of `crc`'s bytes followed by `data`: start with 0, and
/// crc32c(crc32c(0, a), b) is the CRC of a then b.
inline uint32_t crc32c(uint32_t crc, const void *data, size_t size) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
#ifdef PP_RT_CRC32C_SSE42
  if (detail::crc32cHasHardware())
    return ~detail::crc32cHardware(~crc, p, size);
#endif
  return ~detail::crc32cSliced(~crc, p, size);
}

} // namespace pp::rt

#endif // PP_RUNTIME_CHECKSUM_H
