//===- Memory.cpp - Host buffers of the CPU backend -------------*- C++ -*-===//
//
// Buffers from 2 MiB up are anonymous mappings of their own, 2 MiB aligned
// and marked for transparent huge pages: fresh pages are zero, so they need
// no memset (which faulted in every 4 KiB page of a multi-GB arena before
// the first kernel touched it), and huge pages take one fault per 2 MiB.
// Smaller ones come from aligned_alloc and are zeroed.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#define PP_RUNTIME_HAVE_MMAP 1
#endif

using namespace pp::rt;

namespace {
constexpr int64_t kAlignment = 256;

#ifdef PP_RUNTIME_HAVE_MMAP
constexpr size_t kHugePage = size_t(2) << 20;

/// The mapped buffers and their lengths (freeBuffer tells them from the
/// aligned_alloc ones).
struct Mappings {
  std::mutex mutex;
  std::unordered_map<void *, size_t> lengths;
};
Mappings &mappings() {
  static Mappings *m = new Mappings; // outlives static destructors' frees
  return *m;
}

void *mapZeroed(size_t bytes) {
  size_t length = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Map a huge page more and trim both ends to a 2 MiB aligned range.
  size_t span = length + kHugePage;
  void *raw = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return nullptr;
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start)
    munmap(raw, aligned - start);
  size_t tail = start + span - (aligned + length);
  if (tail > 0)
    munmap(reinterpret_cast<void *>(aligned + length), tail);
  void *buffer = reinterpret_cast<void *>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(buffer, length, MADV_HUGEPAGE); // advice only: failure is harmless
#endif
  Mappings &m = mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.lengths[buffer] = length;
  return buffer;
}
#endif
} // namespace

void *pp::rt::allocateBuffer(int64_t bytes) {
  if (bytes < 0)
    return nullptr;
  // aligned_alloc wants a multiple of the alignment; a zero-byte buffer is
  // still a distinct non-null pointer.
  int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0)
    rounded = kAlignment;
#ifdef PP_RUNTIME_HAVE_MMAP
  if (static_cast<size_t>(rounded) >= kHugePage)
    return mapZeroed(static_cast<size_t>(rounded));
#endif
  void *buffer = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
  if (buffer)
    std::memset(buffer, 0, static_cast<size_t>(rounded));
  return buffer;
}

void pp::rt::freeBuffer(void *buffer) {
  if (!buffer)
    return;
#ifdef PP_RUNTIME_HAVE_MMAP
  {
    Mappings &m = mappings();
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.lengths.find(buffer);
    if (it != m.lengths.end()) {
      munmap(buffer, it->second);
      m.lengths.erase(it);
      return;
    }
  }
#endif
  std::free(buffer);
}

void pp::rt::copyToBuffer(void *dst, const void *hostSrc, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(dst, hostSrc, static_cast<size_t>(bytes));
}

void pp::rt::copyFromBuffer(void *hostDst, const void *src, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(hostDst, src, static_cast<size_t>(bytes));
}

void pp::rt::copyBuffer(void *dst, const void *src, int64_t bytes) {
  // memmove: a stage may copy a value onto storage it overlaps.
  if (bytes > 0 && dst != src)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

const char *pp::rt::backendName() { return "cpu"; }

int pp::rt::backendDeviceCount() { return 1; }

#ifdef PP_RUNTIME_HAVE_OPENBLAS_THREADS
extern "C" void openblas_set_num_threads(int);
#endif

Status pp::rt::createKernelContext(Context &ctx, int) {
#ifdef PP_RUNTIME_HAVE_OPENBLAS_THREADS
  // GEMMs use the kernel thread count too (OpenBLAS otherwise takes every
  // core, per process and per device thread): no oversubscription under
  // mpirun, and the same rounding whichever way the job is launched.
  openblas_set_num_threads(ctx.numThreads > 0 ? ctx.numThreads : 1);
#else
  (void)ctx;
#endif
  return Status::success();
}

Status pp::rt::destroyKernelContext(Context &) { return Status::success(); }

Status pp::rt::synchronizeKernels(Context &) { return Status::success(); }
