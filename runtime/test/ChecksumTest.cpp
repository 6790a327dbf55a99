//===- ChecksumTest.cpp - CRC-32C of byte strings ---------------*- C++ -*-===//
//
// crc32c (Checksum.h) against published CRC-32C vectors (RFC 3720's iSCSI
// examples and "123456789"), and its three paths against each other: the
// byte-wise table (the reference), slicing-by-8, and SSE 4.2's crc32
// instruction where the processor has it, on every length up to 80 at every
// alignment of the first byte, in pieces chained through the running CRC,
// and on one larger buffer.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Checksum.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace pp::rt;

namespace {

uint32_t bytewise(const unsigned char *p, size_t size) {
  return ~detail::crc32cBytewise(~0u, p, size);
}

std::vector<unsigned char> pseudoRandomBytes(size_t size) {
  std::vector<unsigned char> bytes(size);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (unsigned char &b : bytes) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    b = static_cast<unsigned char>(state >> 24);
  }
  return bytes;
}

TEST(Crc32c, PublishedVectors) {
  std::string digits = "123456789";
  EXPECT_EQ(crc32c(0, digits.data(), digits.size()), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  EXPECT_EQ(crc32c(0, zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(0, ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(0, up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(0, down.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(0, nullptr, 0), 0u);
}

TEST(Crc32c, EveryPathGivesTheBytewiseValue) {
  std::vector<unsigned char> bytes = pseudoRandomBytes(1 << 20);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size = 0; size <= 80; ++size) {
      const unsigned char *p = bytes.data() + offset;
      uint32_t expected = bytewise(p, size);
      EXPECT_EQ(~detail::crc32cSliced(~0u, p, size), expected)
          << "slicing-by-8, " << size << " bytes at offset " << offset;
#ifdef PP_RT_CRC32C_SSE42
      if (detail::crc32cHasHardware())
        EXPECT_EQ(~detail::crc32cHardware(~0u, p, size), expected)
            << "crc32 instruction, " << size << " bytes at offset " << offset;
#endif
      EXPECT_EQ(crc32c(0, p, size), expected);
    }
  }
  uint32_t whole = bytewise(bytes.data() + 3, bytes.size() - 3);
  EXPECT_EQ(~detail::crc32cSliced(~0u, bytes.data() + 3, bytes.size() - 3),
            whole);
  EXPECT_EQ(crc32c(0, bytes.data() + 3, bytes.size() - 3), whole);
}

TEST(Crc32c, PiecesChainThroughTheRunningValue) {
  std::vector<unsigned char> bytes = pseudoRandomBytes(10007);
  uint32_t whole = bytewise(bytes.data(), bytes.size());
  // Pieces of every length from 1 to 23, so that each path starts and ends
  // off the 8-byte grid.
  uint32_t crc = 0;
  size_t at = 0;
  for (size_t piece = 1; at < bytes.size(); piece = piece % 23 + 1) {
    size_t n = std::min(piece, bytes.size() - at);
    crc = crc32c(crc, bytes.data() + at, n);
    at += n;
  }
  EXPECT_EQ(crc, whole);
}

} // namespace
