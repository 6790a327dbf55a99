//===- CheckpointFuzzer.cpp - libFuzzer harness: checkpoint files ---------===//
//
// The first byte chooses the reader of the rest: a MANIFEST as read
// (parseManifest), a MANIFEST body to which the harness appends its correct
// "crc32c" line (so the fields behind the check get fuzzed too), or a
// rank<r>.ckpt (decodeRankCheckpoint), as read or after the "PPCKPT01"
// magic.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Util.h"

#include "pp/Runtime/Checksum.h"

#include <cstdint>

using namespace pp::rt::train;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string bytes(reinterpret_cast<const char *>(data) + 1, size - 1);
  std::string error;
  switch (data[0] % 4) {
  case 0: {
    CheckpointManifest m;
    (void)parseManifest("MANIFEST", bytes, m, error);
    break;
  }
  case 1: {
    if (!bytes.empty() && bytes.back() != '\n')
      bytes += '\n';
    bytes += "crc32c " +
             pp::rt::train::hex32(pp::rt::crc32c(0, bytes.data(), bytes.size())) +
             "\n";
    CheckpointManifest m;
    (void)parseManifest("MANIFEST", bytes, m, error);
    break;
  }
  case 2: {
    RankCheckpoint ckpt;
    (void)decodeRankCheckpoint("rank0.ckpt", bytes, ckpt, error);
    break;
  }
  case 3: {
    RankCheckpoint ckpt;
    (void)decodeRankCheckpoint("rank0.ckpt", "PPCKPT01" + bytes, ckpt, error);
    break;
  }
  }
  return 0;
}
