//===- MPICommCheck.cpp - The MPI communicator under mpirun ----*- C++ -*-===//
//
// Run as `mpirun -np N pp-rt-mpi-check`: a ring of point-to-point messages,
// two ranks sending large messages to each other at once (must not
// deadlock), a sum all-reduce, a split into pairs (their own all-reduce
// and messages), messages matched by order with headers (received in
// another order than sent), and a size mismatch reported as an error.
// With `--kill-rank R`, rank R kills itself (SIGKILL) after the ring and
// the others wait for it: mpirun must stop the job.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Comm.h"

#ifdef PP_COMM_NCCL
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace pp::rt;

static int failures = 0;

static void expect(bool ok, const char *what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what);
    ++failures;
  }
}

#ifdef PP_COMM_NCCL
// NCCL moves device memory: each host vector gets a device mirror, filled
// when viewed and copied back by `sync`.
static std::vector<std::pair<std::vector<float> *, void *>> mirrors;

static Tensor view(std::vector<float> &data) {
  void *device = nullptr;
  cudaMalloc(&device, data.size() * sizeof(float));
  cudaMemcpy(device, data.data(), data.size() * sizeof(float),
             cudaMemcpyHostToDevice);
  mirrors.push_back({&data, device});
  Tensor t;
  t.data = device;
  t.dtype = DType::F32;
  t.shape = {static_cast<int64_t>(data.size())};
  return t;
}

static void syncToHost() {
  cudaDeviceSynchronize();
  for (auto [host, device] : mirrors)
    cudaMemcpy(host->data(), device, host->size() * sizeof(float),
               cudaMemcpyDeviceToHost);
}

static std::unique_ptr<Communicator> create(int *argc, char ***argv) {
  return createNCCLCommunicator(argc, argv);
}

/// The vectors of one check: their mirrors are dropped when it ends, so
/// that a later syncToHost writes into none that is gone.
class MirrorScope {
public:
  ~MirrorScope() { mirrors.resize(mark); }

private:
  size_t mark = mirrors.size();
};
#else
static Tensor view(std::vector<float> &data) {
  Tensor t;
  t.data = data.data();
  t.dtype = DType::F32;
  t.shape = {static_cast<int64_t>(data.size())};
  return t;
}

static void syncToHost() {}

static std::unique_ptr<Communicator> create(int *argc, char ***argv) {
  return createMPICommunicator(argc, argv);
}

class MirrorScope {
public:
  MirrorScope() {} // user-provided: not an unused variable
};
#endif

/// `--kill-rank R`'s R, else -1.
static int parseKillRank(int argc, char **argv) {
  int killRank = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--kill-rank"))
      killRank = std::atoi(argv[i + 1]);
  return killRank;
}

/// Every directed pair: NCCL gives each its own communicator and stream.
static void connectEveryLink(Communicator &comm) {
  int size = comm.size();
  std::vector<std::pair<int, int>> everyLink;
  for (int a = 0; a < size; ++a)
    for (int b = 0; b < size; ++b)
      if (a != b)
        everyLink.push_back({a, b});
  Status connected = comm.connect(everyLink);
  expect(connected.ok(), connected.message.c_str(), comm.rank());
}

/// The ring's messages and neighbours; a later check sends them again
/// while a reduction runs, and the ranks of --kill-rank wait on `inT`.
struct Ring {
  std::vector<float> out = std::vector<float>(5), in = std::vector<float>(5);
  Tensor outT, inT;
  int next = 0, prev = 0;
};

/// Ring: rank r sends [r, r+1, ...] to r+1 and checks what r-1 sent.
static void checkRing(Communicator &comm, Ring &ring) {
  int rank = comm.rank(), size = comm.size();
  for (int i = 0; i < 5; ++i)
    ring.out[i] = static_cast<float>(rank + i);
  ring.outT = view(ring.out);
  ring.inT = view(ring.in);
  ring.next = (rank + 1) % size;
  ring.prev = (rank + size - 1) % size;
  if (size > 1) {
    expect(comm.send(ring.outT, ring.next, 7).ok(), "ring send", rank);
    Status s = comm.recv(ring.inT, ring.prev, 7);
    expect(s.ok(), s.message.c_str(), rank);
    syncToHost();
    for (int i = 0; i < 5; ++i)
      expect(ring.in[i] == static_cast<float>(ring.prev + i), "ring payload",
             rank);
  }
}

/// --kill-rank: rank `killRank` kills itself; the others wait for it until
/// the job stops.
static void killOrWaitForKilledRank(Communicator &comm, int killRank,
                                    Ring &ring) {
  int rank = comm.rank();
  if (rank == killRank) {
    std::fprintf(stderr, "rank %d: killing myself\n", rank);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  if (killRank >= 0) {
    // Wait for a message the dead rank never sends.
    Status s = comm.recv(ring.inT, killRank, 99);
    std::fprintf(stderr, "rank %d: %s\n", rank, s.message.c_str());
    comm.abort("lost rank " + std::to_string(killRank));
  }
}

/// Ranks 0 and 1 exchange 8 MB both ways at once (rendezvous sizes).
static void checkBigExchange(Communicator &comm) {
  int rank = comm.rank();
  if (comm.size() < 2 || rank >= 2)
    return;
  MirrorScope scope;
  std::vector<float> big(2 << 20, static_cast<float>(rank)), got(2 << 20);
  Tensor bigT = view(big), gotT = view(got);
  int other = 1 - rank;
  expect(comm.send(bigT, other, 3).ok(), "big send", rank);
  Status s = comm.recv(gotT, other, 3);
  expect(s.ok(), s.message.c_str(), rank);
  syncToHost();
  expect(got.front() == static_cast<float>(other) &&
             got.back() == static_cast<float>(other),
         "big payload", rank);
}

/// Sum all-reduce: every rank contributes rank + 1.
static void checkAllReduce(Communicator &comm) {
  int rank = comm.rank(), size = comm.size();
  MirrorScope scope;
  std::vector<float> value(4, static_cast<float>(rank + 1));
  Tensor valueT = view(value);
  expect(comm.allReduceSum(valueT).ok(), "allReduceSum", rank);
  syncToHost();
  float expected = static_cast<float>(size * (size + 1) / 2);
  expect(value[0] == expected && value[3] == expected, "allReduceSum value",
         rank);
}

/// A message each way inside a pair of two ranks.
static void checkPairMessages(Communicator &pair, int rank) {
  MirrorScope scope;
  Status linked = pair.connect({{0, 1}, {1, 0}});
  expect(linked.ok(), linked.message.c_str(), rank);
  std::vector<float> note(1, static_cast<float>(rank)), heard(1);
  Tensor noteT = view(note), heardT = view(heard);
  int other = 1 - pair.rank();
  expect(pair.send(noteT, other, 5).ok(), "split send", rank);
  Status s = pair.recv(heardT, other, 5);
  expect(s.ok(), s.message.c_str(), rank);
  syncToHost();
  expect(heard[0] == static_cast<float>(rank ^ 1), "split payload", rank);
}

/// Split into pairs (color rank / 2, key -rank: reversed): each pair sums
/// on its own and messages inside it, as data-parallel groups do.
static void checkSplitIntoPairs(Communicator &comm) {
  int rank = comm.rank(), size = comm.size();
  std::string error;
  auto pair = comm.split(rank / 2, -rank, error);
  expect(pair != nullptr, error.c_str(), rank);
  if (!pair)
    return;
  MirrorScope scope;
  int pairSize = std::min(2, size - rank / 2 * 2);
  expect(pair->size() == pairSize, "split size", rank);
  expect(pair->rank() == pairSize - 1 - rank % 2, "split rank order", rank);
  std::vector<float> part(2, static_cast<float>(rank));
  Tensor partT = view(part);
  expect(pair->allReduceSum(partT).ok(), "split allReduceSum", rank);
  syncToHost();
  float sum = pairSize == 2 ? static_cast<float>(2 * rank - rank % 2 * 2 + 1)
                            : static_cast<float>(rank);
  expect(part[0] == sum && part[1] == sum, "split allReduceSum value", rank);
  if (pairSize == 2)
    checkPairMessages(*pair, rank);
}

/// A started all-reduce overlaps a ring message, then completes.
static void checkAllReduceDuringRing(Communicator &comm, Ring &ring) {
  int rank = comm.rank(), size = comm.size();
  MirrorScope scope;
  std::vector<float> started(3, static_cast<float>(rank));
  Tensor startedT = view(started);
  int request = -1;
  expect(comm.startAllReduceSum(startedT, request).ok(), "startAllReduceSum",
         rank);
  if (size > 1) {
    expect(comm.send(ring.outT, ring.next, 8).ok(), "ring send during reduce",
           rank);
    Status s = comm.recv(ring.inT, ring.prev, 8);
    expect(s.ok(), s.message.c_str(), rank);
  }
  Status waited = comm.waitAllReduce(request);
  expect(waited.ok(), waited.message.c_str(), rank);
  syncToHost();
  float rankSum = static_cast<float>(size * (size - 1) / 2);
  expect(started[0] == rankSum && started[2] == rankSum,
         "startAllReduceSum value", rank);
}

/// Two reductions in flight at once (Wave Synchronous Parallel keeps up to
/// D + 1), tested and then waited for in order.
static void checkTwoReductionsInFlight(Communicator &comm) {
  int rank = comm.rank(), size = comm.size();
  MirrorScope scope;
  std::vector<float> first(2, 1.0f), second(2, static_cast<float>(rank));
  Tensor firstT = view(first), secondT = view(second);
  int firstRequest = -1, secondRequest = -1;
  expect(comm.startAllReduceSum(firstT, firstRequest).ok() &&
             comm.startAllReduceSum(secondT, secondRequest).ok(),
         "two startAllReduceSum", rank);
  bool done = false;
  expect(comm.testAllReduce(secondRequest, done).ok(), "testAllReduce", rank);
  expect(comm.waitAllReduce(firstRequest).ok() &&
             comm.waitAllReduce(secondRequest).ok(),
         "two waitAllReduce", rank);
  syncToHost();
  float rankSum = static_cast<float>(size * (size - 1) / 2);
  expect(first[0] == static_cast<float>(size) && second[1] == rankSum,
         "two reductions' values", rank);
}

/// Matched by order with headers: rank 0 sends tags 21, 22, 23 to rank 1,
/// which asks for 23, 21, 22; each receive gets its own message.
static void checkOrderedMessages(Communicator &comm) {
  int rank = comm.rank();
  if (comm.size() < 2 || rank >= 2)
    return;
  MirrorScope scope;
  auto ordered = matchMessagesByOrder(comm, /*headers=*/true);
  std::vector<std::vector<float>> sent = {{1, 2}, {3, 4, 5}, {6}};
  if (rank == 0) {
    for (int i = 0; i < 3; ++i) {
      Tensor t = view(sent[i]);
      expect(ordered->send(t, 1, 21 + i).ok(), "ordered send", rank);
    }
    return;
  }
  for (int i : {2, 0, 1}) {
    MirrorScope scope;
    std::vector<float> got(sent[i].size());
    Tensor t = view(got);
    Status s = ordered->recv(t, 0, 21 + i);
    expect(s.ok(), s.message.c_str(), rank);
    syncToHost();
    expect(got == sent[i], "ordered receive out of send order", rank);
  }
}

/// Posted receives (receive prefetch): rank 1 posts an 8 MB (rendezvous)
/// and a small receive before rank 0 sends them, in send order, and waits
/// for them the other way round; each gets its own message.
static void checkPostedReceives(Communicator &comm) {
  int rank = comm.rank();
  if (comm.size() < 2 || rank >= 2)
    return;
  MirrorScope scope;
  std::vector<float> big(2 << 20, rank == 0 ? 7.0f : 0.0f), small(3);
  if (rank == 0)
    small = {1, 2, 3};
  // (NCCL: the device mirror is filled here.)
  Tensor bigT = view(big), smallT = view(small);
  if (rank == 1) {
    int bigRequest = -1, smallRequest = -1;
    expect(comm.startRecv(bigT, 0, 31, bigRequest).ok() &&
               comm.startRecv(smallT, 0, 32, smallRequest).ok(),
           "startRecv", rank);
    // Rank 0 sends only now: the receives were posted first.
    std::vector<float> go(1, 1.0f);
    Tensor goT = view(go);
    expect(comm.send(goT, 0, 30).ok(), "go send", rank);
    Status s = comm.waitRecv(smallRequest, smallT, 0, 32);
    expect(s.ok(), s.message.c_str(), rank);
    s = comm.waitRecv(bigRequest, bigT, 0, 31);
    expect(s.ok(), s.message.c_str(), rank);
    syncToHost();
    expect(big.front() == 7.0f && big.back() == 7.0f && small[0] == 1.0f &&
               small[2] == 3.0f,
           "posted receives' payloads", rank);
  } else {
    std::vector<float> go(1);
    Tensor goT = view(go);
    Status s = comm.recv(goT, 1, 30);
    expect(s.ok(), s.message.c_str(), rank);
    expect(comm.send(bigT, 1, 31).ok() && comm.send(smallT, 1, 32).ok(),
           "sends to posted receives", rank);
  }
}

/// Posted: a longer and a shorter message than the receive.
static void checkPostedSizeMismatches(Communicator &comm) {
  int rank = comm.rank();
  MirrorScope scope;
  std::vector<float> four(4, 1.0f), two(2, 1.0f), three(3);
  Tensor fourT = view(four), twoT = view(two), threeT = view(three);
  if (rank == 0) {
    comm.send(fourT, 1, 13);
    comm.send(twoT, 1, 14);
    return;
  }
  int longer = -1, shorter = -1;
  expect(comm.startRecv(threeT, 0, 13, longer).ok(), "startRecv", rank);
  Status s = comm.waitRecv(longer, threeT, 0, 13);
  expect(!s.ok() && s.message.find("expected 12 bytes") != std::string::npos,
         "longer posted message reported", rank);
  expect(comm.startRecv(threeT, 0, 14, shorter).ok(), "startRecv", rank);
  s = comm.waitRecv(shorter, threeT, 0, 14);
  expect(!s.ok() && s.message.find("got 8") != std::string::npos,
         "shorter posted message reported", rank);
}

/// A blocking receive of a longer message than it expects.
static void checkReceivedSizeMismatch(Communicator &comm) {
  int rank = comm.rank();
  MirrorScope scope;
  std::vector<float> four(4, 1.0f), three(3);
  Tensor fourT = view(four), threeT = view(three);
  if (rank == 0) {
    comm.send(fourT, 1, 11);
    return;
  }
  Status s = comm.recv(threeT, 0, 11);
  expect(!s.ok() && s.message.find("expected 12 bytes") != std::string::npos,
         "size mismatch reported", rank);
}

int main(int argc, char **argv) {
  int killRank = parseKillRank(argc, argv);
  auto comm = create(&argc, &argv);
  if (!comm)
    return 1;
  int rank = comm->rank(), size = comm->size();
  comm->timeoutSeconds = 20;
  connectEveryLink(*comm);
  Ring ring;
  checkRing(*comm, ring);
  killOrWaitForKilledRank(*comm, killRank, ring);
  checkBigExchange(*comm);
  checkAllReduce(*comm);
  checkSplitIntoPairs(*comm);
  checkAllReduceDuringRing(*comm, ring);
  checkTwoReductionsInFlight(*comm);
  checkOrderedMessages(*comm);
  checkPostedReceives(*comm);
  // A receive of the wrong size is an error, not a crash (NCCL does not
  // see sizes).
  bool checksSizes = std::string(comm->backend()) != "nccl";
  if (checksSizes && size > 1 && rank < 2) {
    checkPostedSizeMismatches(*comm);
    checkReceivedSizeMismatch(*comm);
  }
  std::printf("rank %d of %d: %s\n", rank, size, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
