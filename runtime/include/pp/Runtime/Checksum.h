//===- Checksum.h - CRC-32C of byte strings ---------------------*- C++ -*-===//
//
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as iSCSI and ext4
// use it; crc32c("123456789") = 0xE3069283), header-only so that the code
// generator (the data file's checksum in the program table) and the
// training driver (checkpoint manifests, the data file's identity) compute
// the same value without a library between them.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_CHECKSUM_H
#define PP_RUNTIME_CHECKSUM_H

#include <array>
#include <cstddef>
#include <cstdint>

namespace pp::rt {

namespace detail {
inline const std::array<uint32_t, 256> &crc32cTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}
} // namespace detail

/// The CRC-32C of `crc`'s bytes followed by `data`: start with 0, and
/// crc32c(crc32c(0, a), b) is the CRC of a then b.
inline uint32_t crc32c(uint32_t crc, const void *data, size_t size) {
  const std::array<uint32_t, 256> &table = detail::crc32cTable();
  const unsigned char *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

} // namespace pp::rt

#endif // PP_RUNTIME_CHECKSUM_H
