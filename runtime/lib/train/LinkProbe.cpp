//===- LinkProbe.cpp - Measuring the links between ranks ------------------===//
//
// Rank 0 takes the other ranks in turn: a handshake (go or stop, then the
// peer's host name, which classifies the pair as intra- or inter-node),
// then for each size a few unmeasured round trips and the timed ones. The
// other ranks wait in their first receive meanwhile, so one pair runs at a
// time. Messages go through Communicator::send / recv, the calls a
// pipeline's activations and gradients go through, so the times include
// what those add (MPI's private send copy, NCCL's stream waits).
//
//===----------------------------------------------------------------------===//

#include "LinkProbe.h"

#include "Util.h"

#include "pp/Runtime/Memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

constexpr int kProbeTag = 1 << 20;
constexpr int kHostBytes = 64;

const int64_t kSizes[] = {4,       4 << 10, 64 << 10, 256 << 10,
                          1 << 20, 4 << 20, 16 << 20};

/// Timed round trips of one size: enough that each size takes a few ms.
int roundTripsFor(int64_t bytes) {
  return static_cast<int>(
      std::clamp<int64_t>((int64_t(64) << 20) / bytes, 8, 200));
}

Tensor bytesTensor(void *data, int64_t bytes) {
  Tensor t;
  t.data = data;
  t.dtype = DType::U8;
  t.shape = {bytes};
  return t;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string hostName() {
  char name[kHostBytes] = {};
  if (gethostname(name, sizeof(name) - 1) != 0)
    std::strcpy(name, "?");
  return name;
}

std::string quantity(double value, const char *unit, int digits = 4) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*g%s", digits, value, unit);
  return text;
}

std::string jsonArray(const std::vector<int64_t> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string jsonArray(const std::vector<double> &values, double scale) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + jsonNumber(values[i] * scale, 6);
  return text + "]";
}

/// The round trips of one pair, from either side: rank 0 sends first.
Status pingPong(Communicator &comm, int peer, bool first, void *buffer,
                LinkSamples &samples) {
  for (int64_t bytes : kSizes) {
    Tensor message = bytesTensor(buffer, bytes);
    int timed = roundTripsFor(bytes), warmup = 3;
    std::vector<double> roundTrips;
    for (int i = 0; i < warmup + timed; ++i) {
      double start = nowSeconds();
      Status s = first ? comm.send(message, peer, kProbeTag)
                       : comm.recv(message, peer, kProbeTag);
      if (s.ok())
        s = first ? comm.recv(message, peer, kProbeTag)
                  : comm.send(message, peer, kProbeTag);
      if (!s.ok())
        return s;
      if (i >= warmup)
        roundTrips.push_back(nowSeconds() - start);
    }
    samples.bytes.push_back(bytes);
    // Kept as the file writes it (microseconds to 6 digits), so that a fit
    // of the file's times (check_profile.py's) is this probe's fit: a near
    // flat line's slope moved by 0.3% with the rounding alone.
    double oneWayUs = median(roundTrips) / 2 * 1e6;
    samples.oneWaySeconds.push_back(
        std::strtod(jsonNumber(oneWayUs, 6).c_str(), nullptr) / 1e6);
  }
  return Status::success();
}

} // namespace

void pp::rt::train::fitLink(LinkSamples &samples) {
  const auto &b = samples.bytes;
  const auto &t = samples.oneWaySeconds;
  if (b.empty())
    return;
  // Weights 1/t^2: least squares of the relative error, so that the small
  // sizes count as much as the large ones.
  double sw = 0, sb = 0, st = 0, sbb = 0, sbt = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    double w = 1 / (t[i] * t[i]), x = static_cast<double>(b[i]);
    sw += w, sb += w * x, st += w * t[i], sbb += w * x * x, sbt += w * x * t[i];
  }
  double denominator = sw * sbb - sb * sb;
  double slope = denominator > 0 ? (sw * sbt - sb * st) / denominator : 0;
  double intercept = (st - slope * sb) / sw;
  if (!(slope > 0) || !(intercept > 0)) {
    // Noise: the smallest message's time, and the largest's past it.
    intercept = t.front();
    slope = std::max(t.back() - intercept, 1e-12) /
            std::max<double>(static_cast<double>(b.back()), 1);
  }
  samples.latencySeconds = intercept;
  samples.bandwidthBytesPerSecond = 1 / slope;
  samples.worstRelativeError = 0;
  for (size_t i = 0; i < b.size(); ++i)
    samples.worstRelativeError = std::max(
        samples.worstRelativeError,
        std::abs((intercept + slope * static_cast<double>(b[i])) / t[i] - 1));
}

namespace {

/// Reports a failed message on this rank, aborts the job and frees the
/// probe's buffers; the status to exit with.
int failProbe(Communicator &comm, const Status &s, void *buffer,
              void *control) {
  std::fprintf(stderr, "error: rank %d: measuring links: %s\n", comm.rank(),
               s.message.c_str());
  comm.abort(s.message);
  freeBuffer(buffer);
  freeBuffer(control);
  return 1;
}

/// A rank other than 0: waits for its turn, then answers rank 0's
/// handshake with its host name and its round trips. Frees the buffers.
int answerProbe(Communicator &comm, void *buffer, void *control) {
  Tensor controlMessage = bytesTensor(control, kHostBytes);
  char host[kHostBytes] = {};
  // Wait for rank 0's turn at this rank: a long wait, not a lost peer.
  comm.timeoutSeconds = std::max(comm.timeoutSeconds, 600.0);
  if (Status s = comm.recv(controlMessage, 0, kProbeTag); !s.ok())
    return failProbe(comm, s, buffer, control);
  copyFromBuffer(host, control, kHostBytes);
  int status = 0;
  if (host[0] != 'g') {
    status = 1; // rank 0 reported why
  } else {
    std::strncpy(host, hostName().c_str(), kHostBytes - 1);
    copyToBuffer(control, host, kHostBytes);
    LinkSamples samples;
    Status s = comm.send(controlMessage, 0, kProbeTag);
    if (s.ok())
      s = pingPong(comm, 0, /*first=*/false, buffer, samples);
    if (!s.ok())
      return failProbe(comm, s, buffer, control);
  }
  freeBuffer(buffer);
  freeBuffer(control);
  return status;
}

/// Rank 0: takes the other ranks in turn, telling each to go (when the
/// file can be written) or stop; the fitted samples of each pair in
/// `pairs`.
Status probePeers(Communicator &comm, bool writable, void *buffer,
                  void *control, std::vector<LinkSamples> &pairs) {
  Tensor controlMessage = bytesTensor(control, kHostBytes);
  char host[kHostBytes] = {};
  std::string localHost = hostName();
  for (int peer = 1; peer < comm.size(); ++peer) {
    std::memset(host, 0, sizeof(host));
    host[0] = writable ? 'g' : 's';
    copyToBuffer(control, host, kHostBytes);
    if (Status s = comm.send(controlMessage, peer, kProbeTag); !s.ok())
      return s;
    if (!writable)
      continue;
    if (Status s = comm.recv(controlMessage, peer, kProbeTag); !s.ok())
      return s;
    copyFromBuffer(host, control, kHostBytes);
    host[kHostBytes - 1] = 0;
    LinkSamples &samples = pairs.emplace_back();
    samples.peer = peer;
    samples.sameHost = localHost == host;
    if (Status s = pingPong(comm, peer, /*first=*/true, buffer, samples);
        !s.ok())
      return s;
    fitLink(samples);
  }
  return Status::success();
}

/// The table of the measured pairs on stdout: each pair's fit and its
/// one-way times per size.
void printLinkTable(const char *backend,
                    const std::vector<LinkSamples> &pairs) {
  std::printf("links measured over %s (one-way time: half the median round "
              "trip):\n",
              backend);
  std::printf("  %-10s %-11s %-12s %-14s %-10s", "ranks", "link", "latency",
              "bandwidth", "fit error");
  for (int64_t bytes : kSizes)
    std::printf(" %9s",
                bytes >= (1 << 20)   ? quantity(bytes >> 20, "MiB").c_str()
                : bytes >= (1 << 10) ? quantity(bytes >> 10, "KiB").c_str()
                                     : quantity(bytes, "B").c_str());
  std::printf("  (us)\n");
  for (const LinkSamples &p : pairs) {
    std::string ranks = "0-" + std::to_string(p.peer);
    std::printf("  %-10s %-11s %-12s %-14s %-10s", ranks.c_str(),
                p.sameHost ? "intra_node" : "inter_node",
                quantity(p.latencySeconds * 1e6, " us").c_str(),
                quantity(p.bandwidthBytesPerSecond / 1e9, " GB/s").c_str(),
                quantity(p.worstRelativeError * 100, "%", 2).c_str());
    for (double t : p.oneWaySeconds)
      std::printf(" %9.1f", t * 1e6);
    std::printf("\n");
  }
}

/// The "pairs" entries of the links file: each pair's fit and samples.
std::string pairsJson(const std::vector<LinkSamples> &pairs) {
  std::string json;
  for (const LinkSamples &p : pairs)
    json += std::string(json.empty() ? "" : ",\n") + "    {\"ranks\": [0, " +
            std::to_string(p.peer) + "], \"link\": \"" +
            (p.sameHost ? "intra_node" : "inter_node") +
            "\", \"latency_us\": " + jsonNumber(p.latencySeconds * 1e6, 6) +
            ", \"bandwidth_GBps\": " +
            jsonNumber(p.bandwidthBytesPerSecond / 1e9, 6) +
            ", \"worst_fit_error\": " + jsonNumber(p.worstRelativeError, 3) +
            ",\n     \"bytes\": " + jsonArray(p.bytes) +
            ",\n     \"one_way_us\": " + jsonArray(p.oneWaySeconds, 1e6) + "}";
  return json;
}

/// The "links" entries of the links file: of each class (intra- and
/// inter-node) the median pair (an even count: the mean of the middle two).
std::string linkClassesJson(const std::vector<LinkSamples> &pairs) {
  std::string json;
  for (bool sameHost : {true, false}) {
    std::vector<double> latency, bandwidth;
    for (const LinkSamples &p : pairs)
      if (p.sameHost == sameHost) {
        latency.push_back(p.latencySeconds);
        bandwidth.push_back(p.bandwidthBytesPerSecond);
      }
    if (latency.empty())
      continue;
    json += std::string(json.empty() ? "" : ",\n") + "    \"" +
            (sameHost ? "intra_node" : "inter_node") +
            "\": {\"bandwidth\": \"" +
            quantity(median(bandwidth) / 1e9, "GB/s") + "\", \"latency\": \"" +
            quantity(median(latency) * 1e6, "us") + "\"}";
  }
  return json;
}

} // namespace

int pp::rt::train::measureLinks(Communicator &comm, const std::string &path,
                                const std::string &programName) {
  int rank = comm.rank(), size = comm.size();
  if (size < 2) {
    if (rank == 0)
      std::fprintf(stderr,
                   "%s: error: --measure-links needs 2 ranks or more "
                   "(mpirun -np 2, or --local on a program of 2 devices)\n",
                   programName.c_str());
    return 2;
  }
  std::vector<std::pair<int, int>> links;
  for (int peer = 1; peer < size; ++peer)
    links.push_back({0, peer}), links.push_back({peer, 0});
  if (Status s = comm.connect(links); !s.ok()) {
    std::fprintf(stderr, "error: rank %d: %s\n", rank, s.message.c_str());
    comm.abort(s.message);
    return 1;
  }

  int64_t largest = *std::max_element(std::begin(kSizes), std::end(kSizes));
  void *buffer = allocateBuffer(largest);
  void *control = allocateBuffer(kHostBytes);
  if (rank != 0)
    return answerProbe(comm, buffer, control);

  std::string error;
  bool writable = checkWritablePath(path, error);
  if (!writable)
    std::fprintf(stderr, "%s: error: --measure-links: %s\n",
                 programName.c_str(), error.c_str());
  std::vector<LinkSamples> pairs;
  if (Status s = probePeers(comm, writable, buffer, control, pairs); !s.ok())
    return failProbe(comm, s, buffer, control);
  freeBuffer(buffer);
  freeBuffer(control);
  if (!writable)
    return 1;

  printLinkTable(comm.backend(), pairs);
  std::string json = "{\n  \"backend\": \"" + std::string(comm.backend()) +
                     "\",\n  \"links\": {\n" + linkClassesJson(pairs) +
                     "\n  },\n  \"pairs\": [\n" + pairsJson(pairs) +
                     "\n  ]\n}\n";
  if (!writeWholeFile(path, json, error)) {
    std::fprintf(stderr, "%s: error: --measure-links: %s\n",
                 programName.c_str(), error.c_str());
    return 1;
  }
  std::printf("links written to %s\n", path.c_str());
  return 0;
}
