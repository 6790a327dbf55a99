//===- Partitioner.h - Optimal pipeline partitioning of a DAG ---*- C++ -*-===//
//
// Splits a DAG of ops into the stages of one pipeline (a HetPipe virtual
// worker: an ordered list of possibly different GPUs) so that the slowest
// stage is as fast as possible and every stage fits its GPU's memory. This is
// the optimisation core of the partitioner; it knows nothing about MLIR.
//
// A *monotone* assignment puts node v on stage stage(v) in [0, k) with
// stage(u) <= stage(v) for every edge u -> v; stage s runs on device
// order[s]. The search is an exact dynamic program over the downsets (ideals)
// of the DAG: a monotone assignment is a chain D_0 <= D_1 <= ... <= D_{k-1} =
// all nodes of downsets, stage s = D_s \ D_{s-1}, and every cost below depends
// only on (s, D_{s-1}, D_s), so DP[s][D] = min over D' <= D of
// max(DP[s-1][D'], T_s(D', D)) is exact.
//
// Cost model (per micro-batch; d_s = order[s], m = microBatches):
//
//   Every node produces one value of outputBytes. A value crosses boundary b
//   (between stages b and b+1) when its producer is in D_b and some consumer
//   is not. Values are relayed stage to stage over the links of neighbouring
//   stages (what HetPipe's "bytes crossing the outgoing cut" counts), so a
//   value that skips stages is sent once over every boundary it crosses, never
//   twice over one boundary however many consumers it has.
//     cut_b   = sum of outputBytes of the values crossing boundary b
//     n_b     = number of values crossing boundary b
//   A tied group (several nodes sharing one parameter) is split by boundary b
//   when it has members on both sides; its gradient is reduced along the
//   pipeline towards the first holding stage and the result sent back (chain
//   all-reduce), once per mini-batch, so every boundary inside the group's
//   stage span carries its gradientBytes once each way, amortised over m:
//     tg_b    = sum of gradientBytes of the groups split by boundary b
//     tn_b    = number of groups split by boundary b
//   link(s, t, b) = (cut_b + tg_b / m) / bandwidth(d_s, d_t)
//                 + (n_b + tn_b / m) * latency(d_s, d_t)
//   Each transfer is charged to its sender: activations (forward) to the
//   upstream stage of a boundary, their gradients (backward, same bytes) to
//   the downstream one:
//     T_s = sum_{v in stage s} time(v, d_s)
//         + [s < k-1] link(s, s+1, s) + [s > 0] link(s, s-1, s-1)
//   Memory, in bytes, with inflight(s, k) micro-batches in flight on stage s
//   (1F1B: min(k - s, m); GPipe: m; or a user function):
//     M_s = weightScale(s, k) * sum_{v in stage s} weightBytes(v)
//         + sum_{tied groups with a member in stage s} stateBytes(group)
//         + inflight(s, k) * sum_{v in stage s} activationBytes(v)
//   and M_s must not exceed memoryBytes(d_s). Relayed values take no memory.
//   Tensor parallelism: a device may stand for a group of t_d GPUs
//   (PartitionDevice::tensorParallel) that share each stage's work; M_s is
//   then the memory of one GPU of the group, with the parts of the nodes'
//   bytes that the group splits divided by t = t_{d_s} (integer division):
//     weightBytes(v)     -> weightBytes(v) + splitWeightBytes(v) / t
//     activationBytes(v) -> activationBytes(v) + splitActivationBytes(v) / t
//   (with t = 1 the sums of both parts). Times are the caller's: timeFn
//   gives a node's time on the group, its all-reduces included.
//
// Objective: minimise max_s T_s over the memory-feasible assignments. When
// none exists the result is the best-effort assignment: the smallest largest
// overflow max_s max(0, M_s - memoryBytes(d_s)) and, among those, the
// smallest bottleneck; PartitionResult::shortfall then says by how many bytes
// each device is over.
//
// Empty stages: by default every stage holds at least one node whenever the
// graph has at least k nodes (HetPipe uses all k GPUs). With
// allowEmptyStages, stages may be empty; an empty stage keeps its place in the
// chain and relays what crosses it (its link costs count). Leading and
// trailing empty stages cost nothing, so this lets the result use a
// contiguous sub-range of the device order (a subset of the devices when
// combined with tryDeviceOrders).
//
// When the graph has more than maxDownsets downsets, or the DP would visit
// more than maxDownsetPairs states (measured, or extrapolated from a sample),
// the graph is coarsened into blocks, one kind of merge per step: side inputs
// and outputs (sources and sinks whose one neighbour has other inputs or
// outputs) into that neighbour; then the interiors of innermost fork-join
// regions (between a fork and its immediate post-dominator) whose compute is
// at most 1/(2k) of the total; then disjoint pairs along chains; then pairs of
// neighbours in the topological order. Merges that touch a block off the
// "spine" (blocks comparable with all others, which add one downset each)
// come first; of one kind, the lightest merged blocks first and only as many
// as needed (binary search). The result is then optimal over the assignments
// that keep each block on one stage, which PartitionResult::granularity
// states. Coarsening never merges nodes pinned to different stages nor goes
// below k blocks; a graph that cannot be coarsened further is searched
// whatever its size.
//
//===----------------------------------------------------------------------===//

#ifndef PP_PARTITION_PARTITIONER_H
#define PP_PARTITION_PARTITIONER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace pp::partition {

/// One op (or any unit that must stay on one stage).
struct PartitionNode {
  std::string name;
  /// Forward + backward seconds of one micro-batch, indexed by device kind
  /// (PartitionDevice::kind). Ignored when PartitionGraph::timeFn is set.
  std::vector<double> time;
  /// Bytes resident for the whole run: weights, gradients, optimizer state.
  uint64_t weightBytes = 0;
  /// Bytes one micro-batch leaves on the stage until its backward.
  uint64_t activationBytes = 0;
  /// Bytes of the node's output value, sent when a later stage consumes it.
  uint64_t outputBytes = 0;
  /// Further weight and activation bytes that a tensor-parallel device
  /// group splits over its GPUs (see the cost model): counted whole on a
  /// device of tensorParallel 1, divided by the degree otherwise.
  uint64_t splitWeightBytes = 0;
  uint64_t splitActivationBytes = 0;
};

/// A DAG whose node indices are a topological order.
struct PartitionGraph {
  std::vector<PartitionNode> nodes;
  /// Producer -> consumer (the consumer reads the producer's output value);
  /// producer < consumer. Duplicates are ignored.
  std::vector<std::pair<unsigned, unsigned>> edges;
  /// Optional per-device compute time (seconds, forward + backward of one
  /// micro-batch), used instead of PartitionNode::time when set.
  std::function<double(unsigned node, unsigned device)> timeFn;

  unsigned addNode(PartitionNode node) {
    nodes.push_back(std::move(node));
    return nodes.size() - 1;
  }
  void addEdge(unsigned from, unsigned to) { edges.emplace_back(from, to); }
  size_t size() const { return nodes.size(); }
};

/// Devices (stages) of one pipeline the partitioner handles.
constexpr unsigned kMaxPartitionDevices = 64;

/// One accelerator.
struct PartitionDevice {
  std::string name;
  /// Index into PartitionNode::time.
  unsigned kind = 0;
  /// Of one GPU (of the group when tensorParallel > 1).
  uint64_t memoryBytes = 0;
  /// GPUs of the tensor-parallel group this device stands for (>= 1).
  unsigned tensorParallel = 1;
};

/// The devices of one pipeline and the links between them.
class PartitionDevices {
public:
  std::vector<PartitionDevice> devices;
  /// Link parameters of pairs without an explicit link.
  double defaultBandwidth = 1e10; ///< Bytes/s.
  double defaultLatency = 0;      ///< Seconds per transfer.

  unsigned addDevice(PartitionDevice device) {
    devices.push_back(std::move(device));
    return devices.size() - 1;
  }
  /// Sets the link between `a` and `b` in both directions.
  void setLink(unsigned a, unsigned b, double bandwidth, double latency) {
    setDirectedLink(a, b, bandwidth, latency);
    setDirectedLink(b, a, bandwidth, latency);
  }
  /// Sets the link from `from` to `to` only.
  void setDirectedLink(unsigned from, unsigned to, double bandwidth,
                       double latency) {
    links[{from, to}] = {bandwidth, latency};
  }
  /// Bytes/s from `from` to `to` (may be +infinity).
  double bandwidth(unsigned from, unsigned to) const;
  /// Seconds per transfer from `from` to `to`.
  double latency(unsigned from, unsigned to) const;
  uint64_t memory(unsigned device) const { return devices[device].memoryBytes; }
  /// Compute time of `node` on `device` (PartitionGraph::timeFn or the
  /// node's time of the device's kind).
  double time(const PartitionGraph &graph, unsigned node,
              unsigned device) const;
  size_t size() const { return devices.size(); }

private:
  llvm::DenseMap<std::pair<unsigned, unsigned>, std::pair<double, double>>
      links;
};

/// How many micro-batches of activations a stage holds.
enum class PipelineSchedule {
  OneFOneB, ///< min(k - s, m) on stage s of k.
  GPipe,    ///< m on every stage.
  Custom,   ///< PartitionOptions::inflight.
};

/// Nodes sharing one parameter (e.g. tied embedding and output projection).
/// The shared parameter's bytes belong to the group, not to its nodes.
struct TiedGroup {
  std::vector<unsigned> nodes;
  /// Weights + gradients + optimizer state of the shared parameter, paid by
  /// every stage holding a member.
  uint64_t stateBytes = 0;
  /// Bytes of its gradient, exchanged once per mini-batch when the group is
  /// split across stages (see the cost model above).
  uint64_t gradientBytes = 0;
};

/// What to model and how hard to search.
struct PartitionOptions {
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// Micro-batches per mini-batch (m).
  unsigned microBatches = 8;
  /// In-flight micro-batches of stage `stage` of `numStages` (Custom only).
  std::function<uint64_t(unsigned stage, unsigned numStages)> inflight;
  /// Multiplies the weight bytes (weights, gradients, optimizer state) of
  /// stage `stage` of `numStages` in its memory: weight-versioned schedules
  /// keep older versions of a stage's weights. Unset: 1.
  std::function<double(unsigned stage, unsigned numStages)> weightScale;
  /// Nodes fixed to a stage: (node, stage).
  std::vector<std::pair<unsigned, unsigned>> pins;
  /// Sets of nodes that must share a stage (with everything between them).
  std::vector<std::vector<unsigned>> colocate;
  std::vector<TiedGroup> tiedGroups;
  /// Whether stages may be empty; they always may when the graph has fewer
  /// nodes than there are devices.
  bool allowEmptyStages = false;
  /// Coarsen the graph until it has at most this many downsets.
  uint64_t maxDownsets = 200000;
  /// Work limit of one dynamic program, in states visited (a downset with one
  /// of its sub-downsets); beyond it the graph is coarsened further.
  uint64_t maxDownsetPairs = 20000000;
  /// A level of more than twice this many blocks is searched with the
  /// optimum of its coarsening to about this many downsets as an upper
  /// bound (the result is the same; the DP skips the states above the
  /// bound, and the device orders are tried best first). 0: never.
  unsigned boundingBlocks = 256;
  /// Also try other orders of the devices (distinct up to devices that are
  /// interchangeable: same kind, memory, times and links) and keep the best.
  bool tryDeviceOrders = false;
  /// The most device orders tried, the given order first.
  unsigned maxDeviceOrders = 720;
  /// Work limit of the device-order search of one level, over all its
  /// orders, in stage evaluations (each DP state times the stages it may
  /// end, plus the tables' k entries per downset): once spent, the orders
  /// not yet tried are left out (PartitionResult::ordersTried and
  /// ordersTruncated say so). The first order is always searched.
  uint64_t orderSearchWork = 20000000;
};

/// A partition and its costs.
struct PartitionResult {
  /// Stage of every node.
  std::vector<unsigned> stageOf;
  /// Device index of every stage.
  std::vector<unsigned> deviceOrder;
  /// T_s and M_s of every stage (see the cost model).
  std::vector<double> stageTime;
  std::vector<uint64_t> stageMemory;
  /// max_s T_s.
  double bottleneck = 0;
  /// Whether every stage fits its device's memory.
  bool feasible = true;
  /// Bytes over the memory of each device (indexed by device), 0 when it fits.
  std::vector<uint64_t> shortfall;
  /// The largest entry of `shortfall`.
  uint64_t maxShortfall = 0;

  /// The bottleneck as the search computed it (equal to `bottleneck` up to
  /// rounding; the brute force sets it to `bottleneck`).
  double searchBottleneck = 0;
  /// Whether the result is optimal over all monotone assignments (false when
  /// the graph was coarsened into blocks).
  bool exact = true;
  /// Block of every node; the result is optimal over assignments that keep
  /// each block on one stage.
  std::vector<unsigned> blockOf;
  unsigned numBlocks = 0;
  /// E.g. "exact over 120 ops" or "optimal over 37 blocks of 120 ops".
  std::string granularity;
  /// Downsets of the (coarsened) graph and DP states visited.
  uint64_t numDownsets = 0;
  uint64_t numPairsVisited = 0;
  /// Device orders searched, and whether maxDeviceOrders or
  /// orderSearchWork cut the list short.
  unsigned ordersTried = 0;
  bool ordersTruncated = false;
  /// Distinct device orders listed (at most maxDeviceOrders), and whether
  /// there were more.
  unsigned ordersListed = 0;
  bool moreOrders = false;
  /// " (of N: ...)" when some orders were left out, else "".
  std::string ordersNote() const;
};

/// The optimal partition of `graph` over `devices` (see the file comment).
/// Fails on malformed input or when no monotone assignment satisfies the
/// pins, colocation and non-empty-stage constraints; memory shortage is not
/// an error but a result with `feasible` false.
llvm::Expected<PartitionResult> partition(const PartitionGraph &graph,
                                          const PartitionDevices &devices,
                                          const PartitionOptions &options);

/// The same optimum found by enumerating every monotone assignment of every
/// candidate device order (exponential: for tests on small graphs).
llvm::Expected<PartitionResult>
bruteForcePartition(const PartitionGraph &graph,
                    const PartitionDevices &devices,
                    const PartitionOptions &options);

/// Costs of a given assignment under the model. Fails when the assignment is
/// not monotone or breaks a pin, a colocation or the non-empty-stage rule.
llvm::Expected<PartitionResult>
evaluatePartition(const PartitionGraph &graph, const PartitionDevices &devices,
                  const PartitionOptions &options,
                  llvm::ArrayRef<unsigned> deviceOrder,
                  llvm::ArrayRef<unsigned> stageOf);

/// In-flight micro-batches of `stage` of `numStages` under `options`.
uint64_t inflightMicroBatches(const PartitionOptions &options, unsigned stage,
                              unsigned numStages);

/// The device orders `partition` tries: the given order first, then the
/// other distinct orders (up to interchangeable devices) in lexicographic
/// order, at most maxDeviceOrders (empty on malformed input). `truncated`
/// says whether some were left out.
std::vector<std::vector<unsigned>>
candidateDeviceOrders(const PartitionGraph &graph,
                      const PartitionDevices &devices,
                      const PartitionOptions &options, bool *truncated);

} // namespace pp::partition

#endif // PP_PARTITION_PARTITIONER_H
