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

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pp::cluster {

/// One accelerator.
struct Device {
  std::string name;        ///< Unique within the cluster, e.g. "node0/gpu1".
  std::string kind;        ///< Preset or user kind, e.g. "H100".
  double peakFlopsF32 = 0; ///< FLOP/s (dense, no sparsity).
  double peakFlopsF16 = 0; ///< FLOP/s of fp16/bf16 tensor cores.
  double peakFlopsF64 = 0; ///< FLOP/s.
  int64_t memoryBytes = 0;
  double memoryBandwidth = 0; ///< Bytes/s of device memory.
  int node = 0;               ///< Index into Cluster::nodes.
  /// The processors of its node's shared pool one of its ops occupies
  /// (Cluster::nodeSharedProcessors; e.g. a rank's kernel threads).
  double processors = 1;
};

/// Bandwidth and latency of a kind of link.
struct LinkParams {
  double bandwidth = 0; ///< Bytes/s in each direction.
  double latency = 0;   ///< Seconds.
  bool operator==(const LinkParams &o) const {
    return bandwidth == o.bandwidth && latency == o.latency;
  }
};

/// A point-to-point link between two devices (both directions).
struct Link {
  int a = 0, b = 0;     ///< Device indices.
  double bandwidth = 0; ///< Bytes/s in each direction.
  double latency = 0;   ///< Seconds.
};

struct Cluster {
  std::vector<Device> devices;
  std::vector<std::string> nodes;
  /// Default link parameters between devices of one node / of two nodes,
  /// used for pairs without an explicit Link.
  double intraNodeBandwidth = 0, intraNodeLatency = 0;
  double interNodeBandwidth = 0, interNodeLatency = 0;
  /// Explicit links; they override the defaults above for their pair.
  std::vector<Link> links;
  /// Per node (indexed like `nodes`), the link between two of its devices
  /// when it differs from the intra-node default (NVLink in one node, PCIe
  /// in another). Shorter than `nodes`, or nullopt: the default applies.
  std::vector<std::optional<LinkParams>> nodeIntraLinks;
  /// Per node (indexed like `nodes`), the processors its devices share
  /// (ranks on one CPU's cores, or on one GPU); 0, or shorter than
  /// `nodes`: each device has its own. While its devices' running ops ask
  /// for more, each runs at (shared / asked) of its speed.
  std::vector<double> nodeSharedProcessors;
  /// Optional grouping into virtual workers: device indices per worker, in
  /// pipeline order. Empty: one worker holding every device.
  std::vector<std::vector<int>> virtualWorkers;

  int numDevices() const { return static_cast<int>(devices.size()); }
  /// Index of the device called `name`, or -1.
  int findDevice(llvm::StringRef name) const;
  bool sameNode(int a, int b) const {
    return devices[a].node == devices[b].node;
  }
  /// The explicit link between a and b (either order), or null.
  const Link *findLink(int a, int b) const;

  /// The link from device a to device b: the explicit link if there is one,
  /// else the node's own intra-node link, else the intra- or inter-node
  /// default.
  LinkParams link(int a, int b) const;
  /// Bandwidth (bytes/s) and latency (s) of link(a, b).
  /// A device to itself has infinite bandwidth and no latency.
  double bandwidth(int a, int b) const;
  double latency(int a, int b) const;
  /// Seconds to move `bytes` from device a to device b (0 when a == b):
  /// latency + bytes / bandwidth.
  double transferTime(int a, int b, double bytes) const;
  /// The slowest link inside `group` (devices by index): the least
  /// bandwidth and the largest latency over its pairs; infinite bandwidth
  /// and no latency for fewer than two devices.
  LinkParams slowestLink(llvm::ArrayRef<int> group) const;
  /// Appends to `key` what the cost model and the partitioner see of the
  /// devices `group` (by index, in order): each one's kind, speeds and
  /// memory, and the link between every pair. Groups with equal keys plan
  /// alike (the planners share one plan between them).
  void appendPlanningKey(llvm::ArrayRef<int> group, std::string &key) const;
};

/// Seconds of a ring all-reduce of `bytes` over `n` devices whose slowest
/// link has `bandwidth` and `latency`: a reduce-scatter and an all-gather,
/// each n - 1 steps moving bytes / n:
///   2 (n - 1) / n * bytes / bandwidth + 2 (n - 1) * latency
/// (0 for n <= 1).
double ringAllReduceSeconds(double bytes, unsigned n, double bandwidth,
                            double latency);

/// Known device kinds (V100, A100-40, A100-80, H100, H200, RTX2060, TITANV,
/// P4000, T4, ...), case-insensitive; nullopt when unknown. The result has
/// the canonical kind ("v100" gives kind "V100-32"), no name, and node 0.
std::optional<Device> getPreset(llvm::StringRef kind);
/// Names of all presets (canonical names and aliases), for messages and
/// --help.
std::vector<std::string> getPresetNames();

/// Parses "4xH100" or "2xA100-80,2xV100" (one node per comma-separated
/// group unless `sameNode`), or reads a JSON file (a path ending in .json).
/// Links get the defaults of docs/cluster.md.
llvm::Expected<Cluster> parseClusterSpec(llvm::StringRef spec,
                                         bool sameNode = false);
/// Parses a cluster JSON document; `fileName` names it in errors, which
/// point at the offending field (e.g. "nodes[0].devices[2].memory_bytes").
llvm::Expected<Cluster> parseClusterJSON(llvm::StringRef text,
                                         llvm::StringRef fileName);
/// Virtual workers of `cluster` by one of HetPipe's allocation policies
/// (device indices per worker, in pipeline order):
///   - "np": a worker per node, its devices in order (homogeneous inside
///     when a node holds one kind);
///   - "ed": each worker one device of every kind, kinds fastest first
///     (peak F32 FLOP/s); every kind needs as many devices;
///   - "hd": hybrid: the kinds, fastest first, pair up with the slowest
///     remaining ones (the middle kind of an odd count stays alone); a
///     pair's devices form two workers, each half of either kind, fastest
///     first; every kind needs the same even count.
/// An error names the policy and the counts that do not fit it.
llvm::Expected<std::vector<std::vector<int>>>
groupVirtualWorkers(const Cluster &cluster, llvm::StringRef policy);

/// The cluster as a JSON document that parseClusterJSON reads back to the
/// same cluster (every field explicit; devices must be ordered by node).
llvm::json::Value toJSON(const Cluster &cluster);

/// The physical quantities of the JSON schema.
enum class Quantity {
  Bytes,     ///< "80GB", "16GiB"
  Bandwidth, ///< bytes/s: "900GB/s", "200Gb/s"
  Seconds,   ///< "5us", "1.5ms"
  Flops,     ///< FLOP/s: "989TFLOPS"
};
/// Parses a number with an optional unit of `kind` ("80GB", "5 us") into
/// base units (bytes, bytes/s, s, FLOP/s). SI prefixes are powers of 1000,
/// Ki/Mi/Gi/Ti powers of 1024; a lower-case b is a bit. The sign is kept:
/// callers check the range.
llvm::Expected<double> parseQuantity(llvm::StringRef text, Quantity kind);

} // namespace pp::cluster

#endif // PP_CLUSTER_CLUSTER_H
