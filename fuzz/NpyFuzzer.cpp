//===- NpyFuzzer.cpp - libFuzzer harness: the training driver's .npy reader ===//
//
// Feeds the bytes to pp::rt::train::parseNpy (whose header parser maps
// the --data inputs). An array that parses must hold exactly
// the bytes its dtype and shape describe. The parser is pp/Runtime/Npy.h's,
// which pp-interpret's .npy inputs go through too.
//
//===----------------------------------------------------------------------===//

#include "HostTensor.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), error;
  pp::rt::train::HostTensor tensor;
  if (pp::rt::train::parseNpy("fuzz.npy", bytes, tensor, error) &&
      tensor.bytes.size() !=
          size_t(tensor.numel() * pp::rt::dtypeSize(tensor.dtype)))
    std::abort();
  return 0;
}
