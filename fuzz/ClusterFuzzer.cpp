//===- ClusterFuzzer.cpp - libFuzzer harness: cluster JSON and specs ------===//
//
// The input is a cluster JSON document, a spec string ("2xA100-80,2xV100")
// and a quantity ("80GB"): each parser gets it. A cluster that parses is
// written back with toJSON and read again, and its links are queried.
//
//===----------------------------------------------------------------------===//

#include "pp/Cluster/Cluster.h"

#include <cstdint>
#include <cstdlib>

using namespace pp::cluster;

static void exercise(const Cluster &cluster) {
  int n = std::min(cluster.numDevices(), 16);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      (void)cluster.transferTime(a, b, 1 << 20);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << toJSON(cluster);
  llvm::Expected<Cluster> again = parseClusterJSON(text, "round-trip.json");
  if (!again)
    llvm::consumeError(again.takeError());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  if (llvm::Expected<Cluster> c = parseClusterJSON(text, "fuzz.json"))
    exercise(*c);
  else
    llvm::consumeError(c.takeError());
  // A spec ending in .json names a file: only strings that are not one.
  if (!text.ends_with_insensitive(".json") && text.size() < 4096) {
    for (bool sameNode : {false, true}) {
      if (llvm::Expected<Cluster> c = parseClusterSpec(text, sameNode))
        exercise(*c);
      else
        llvm::consumeError(c.takeError());
    }
  }
  for (Quantity q : {Quantity::Bytes, Quantity::Bandwidth, Quantity::Seconds,
                     Quantity::Flops})
    if (llvm::Expected<double> v = parseQuantity(text, q); !v)
      llvm::consumeError(v.takeError());
  return 0;
}
