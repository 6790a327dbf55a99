//===- Cluster.h - Description of a (heterogeneous) GPU cluster -*- C++ -*-===//
//
// The devices a model is partitioned over: their speed and memory, the links
// between them, and their grouping into nodes and virtual workers (HetPipe).
// Read from JSON (docs/cluster.md) or built from presets ("4xH100",
// "2xA100-80,2xV100").
//
//===----------------------------------------------------------------------===//

#ifndef PP_CLUSTER_CLUSTER_H
#define PP_CLUSTER_CLUSTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pp::cluster {

/// One accelerator.
struct Device {
  std::string name;        ///< Unique within the cluster, e.g. "node0/gpu1".
  std::string kind;        ///< Preset or user kind, e.g. "H100-SXM".
  double peakFlopsF32 = 0; ///< FLOP/s (dense, no sparsity).
  double peakFlopsF16 = 0; ///< FLOP/s of fp16/bf16 tensor cores.
  double peakFlopsF64 = 0;
  int64_t memoryBytes = 0;
  double memoryBandwidth = 0; ///< Bytes/s of device memory.
  int node = 0;               ///< Index into Cluster::nodes.
};

/// A point-to-point link between two devices (both directions).
struct Link {
  int a = 0, b = 0;     ///< Device indices.
  double bandwidth = 0; ///< Bytes/s.
  double latency = 0;   ///< Seconds.
};

struct Cluster {
  std::vector<Device> devices;
  std::vector<std::string> nodes;
  /// Default link parameters between devices of one node / of two nodes,
  /// used for pairs without an explicit Link.
  double intraNodeBandwidth = 0, intraNodeLatency = 0;
  double interNodeBandwidth = 0, interNodeLatency = 0;
  std::vector<Link> links;
  /// Optional grouping into virtual workers: device indices per worker, in
  /// pipeline order. Empty: one worker holding every device.
  std::vector<std::vector<int>> virtualWorkers;

  /// Bandwidth (bytes/s) and latency (s) from device a to device b.
  double bandwidth(int a, int b) const;
  double latency(int a, int b) const;
  /// Seconds to move `bytes` from device a to device b (0 when a == b).
  double transferTime(int a, int b, double bytes) const;
};

/// Known device kinds (V100, A100-40, A100-80, H100, H200, RTX2060, TITANV,
/// P4000, T4, ...), case-insensitive; nullopt when unknown.
std::optional<Device> getPreset(llvm::StringRef kind);
/// Names of all presets, for messages and --help.
std::vector<std::string> getPresetNames();

/// Parses "4xH100" or "2xA100-80,2xV100" (one node per comma-separated
/// group unless `sameNode`), or a JSON file path (ending in .json).
llvm::Expected<Cluster> parseClusterSpec(llvm::StringRef spec);
/// Parses a cluster JSON document; `fileName` names it in errors, which
/// point at the offending field (e.g. "devices[2].memory_bytes").
llvm::Expected<Cluster> parseClusterJSON(llvm::StringRef text,
                                         llvm::StringRef fileName);

} // namespace pp::cluster

#endif // PP_CLUSTER_CLUSTER_H
