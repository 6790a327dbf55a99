//===- MemoryTest.cpp - Host buffers of the backend -------------*- C++ -*-===//
//
// allocateBuffer's contract (Memory.h): zero-filled, 256-byte aligned,
// distinct non-null pointers, null for a negative size. The CPU backend
// maps buffers from 2 MiB up on their own (zero pages, huge-page advice)
// and takes the smaller ones from aligned_alloc: both sides of the
// threshold are checked, a freed buffer's memory comes back zeroed, and
// freeBuffer(nullptr) is a no-op.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace pp::rt;

namespace {

bool allZero(const void *p, int64_t bytes) {
  const unsigned char *c = static_cast<const unsigned char *>(p);
  for (int64_t i = 0; i < bytes; ++i)
    if (c[i] != 0)
      return false;
  return true;
}

TEST(Memory, BuffersAreZeroedAlignedAndReusable) {
  const int64_t sizes[] = {0,
                           1,
                           255,
                           4096,
                           (int64_t(2) << 20) - 256,
                           int64_t(2) << 20,
                           (int64_t(3) << 20) + 7,
                           int64_t(64) << 20};
  for (int round = 0; round < 2; ++round) {
    std::vector<void *> held;
    for (int64_t bytes : sizes) {
      SCOPED_TRACE(::testing::Message() << bytes << " bytes, round " << round);
      void *p = allocateBuffer(bytes);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
      EXPECT_TRUE(allZero(p, bytes));
      // Dirty it: the next round's buffer of the same size, perhaps the
      // same memory, must still come back zeroed.
      std::memset(p, 0xab, static_cast<size_t>(bytes));
      for (void *q : held)
        EXPECT_NE(p, q);
      held.push_back(p);
    }
    for (void *p : held)
      freeBuffer(p);
  }
  EXPECT_EQ(allocateBuffer(-1), nullptr);
  freeBuffer(nullptr);
}

} // namespace
