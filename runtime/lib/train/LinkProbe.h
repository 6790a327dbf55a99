//===- LinkProbe.h - Measuring the links between ranks ----------*- C++ -*-===//
//
// train --measure-links: ping-pong between rank 0 and every other rank over
// the communicator a training run uses (MPI, NCCL or in-process), timed
// message by message, fitted to the cost model's link (latency + bytes /
// bandwidth) and written as the "links" of a cluster file.
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_LINKPROBE_H
#define PP_RUNTIME_TRAIN_LINKPROBE_H

#include "pp/Runtime/Comm.h"

#include <string>
#include <vector>

namespace pp::rt::train {

/// One pair's one-way times: half the median round trip of each size.
struct LinkSamples {
  int peer = 0;
  bool sameHost = true;
  std::vector<int64_t> bytes;
  std::vector<double> oneWaySeconds;
  double latencySeconds = 0;
  double bandwidthBytesPerSecond = 0;
  /// The largest |fitted / measured - 1| over the sizes.
  double worstRelativeError = 0;
};

/// The line latency + bytes / bandwidth through the one-way times with the
/// least squared relative error (a memory hierarchy bends the real curve:
/// `worstRelativeError` says by how much the line misses).
void fitLink(LinkSamples &samples);

/// Collective over `comm` (at least 2 ranks): rank 0 writes `path` (JSON:
/// "links" with "intra_node" and/or "inter_node" as --pp-compile's cluster
/// reads them, the median over the pairs of that class, and every pair's
/// samples) and prints a table. Returns the exit status.
int measureLinks(Communicator &comm, const std::string &path,
                 const std::string &programName);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_LINKPROBE_H
