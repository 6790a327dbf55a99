//===- NCCL.cpp - GPU buffers between ranks over NCCL -----------*- C++ -*-===//
//
// One process per GPU, launched by mpirun: MPI carries NCCL's unique id from
// rank 0 to the others (and the abort), NCCL moves the tensors, which live in
// device memory, on the communicator's stream. Each rank uses the GPU
// numbered by its rank on the node (OMPI_COMM_WORLD_LOCAL_RANK, else rank
// modulo the GPUs it sees).
//
// Receives wait on an event with the communicator's timeout and abort the
// NCCL communicator when it passes, so a lost peer is an error, not a hang.
//
// Point-to-point: `connect` gives each directed link (sender, receiver) a
// communicator of its two ranks and a stream of its own, so a send that
// waits for its receiver never holds up a receive or a collective (on one
// stream, ncclSend to a peer that is itself sending would deadlock). A send
// copies its tensor to a staging buffer on the link's stream first and
// returns: the caller may reuse the tensor, as with MPI_Isend. NCCL has no
// tags; matchMessagesByOrder (Ordered.cpp) restores them where needed.
//
//===----------------------------------------------------------------------===//

#include "MPIShared.h"
#include "pp/Runtime/Comm.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <thread>
#include <vector>

using namespace pp::rt;

namespace {

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::F64:
    return ncclFloat64;
  case DType::F16:
    return ncclFloat16;
  case DType::BF16:
    return ncclBfloat16;
  case DType::I64:
    return ncclInt64;
  case DType::I32:
    return ncclInt32;
  default:
    return ncclUint8;
  }
}

class NCCLCommunicator : public Communicator {
public:
  /// `world`: the communicator of every rank, which finalises MPI when
  /// it goes (a split one only destroys its NCCL communicator).
  NCCLCommunicator(ncclComm_t comm, cudaStream_t stream, int rank, int size,
                   bool world)
      : comm_(comm), stream_(stream), rank_(rank), size_(size), world_(world) {}
  ~NCCLCommunicator() override {
    for (auto &[request, event] : reductions_)
      cudaEventDestroy(event);
    for (auto &[request, posted] : receives_)
      cudaEventDestroy(posted.first);
    // Sends in flight finish (or time out) before their buffers go.
    for (auto &[key, link] : links_) {
      if (link.sending)
        (void)waitUntil(
            "the sends to rank " + std::to_string(key.second),
            [&] { return cudaStreamQuery(link.stream); }, link.comm);
      reclaim(link, /*all=*/true);
      ncclCommDestroy(link.comm);
      cudaStreamDestroy(link.stream);
    }
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
    if (copyStream_)
      cudaStreamDestroy(copyStream_);
    if (!world_)
      return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *backend() const override { return "nccl"; }

  Status send(const Tensor &value, int peer, int tag) override {
    // NCCL orders messages per peer pair; the tag is for the other backends.
    (void)tag;
    auto found = links_.find({rank_, peer});
    if (found == links_.end())
      return Status::error("send: rank " + std::to_string(rank_) +
                           " has no link to rank " + std::to_string(peer) +
                           " (connect was not called for it)");
    Link &link = found->second;
    reclaim(link, /*all=*/false);
    if (Status s = settleCopies(); !s.ok())
      return s;
    // The copy runs on a stream of its own and is waited for, so the
    // caller may reuse `value` at once; the link's stream may still hold
    // sends waiting for their receiver, which the copy must not wait for.
    if (!copyStream_ && cudaStreamCreateWithFlags(
                            &copyStream_, cudaStreamNonBlocking) != cudaSuccess)
      return Status::error("send: cannot create the staging stream");
    Staged staged;
    staged.bytes = value.bytes();
    if (staged.bytes > 0 &&
        (cudaMallocAsync(&staged.data, staged.bytes, copyStream_) !=
             cudaSuccess ||
         cudaMemcpyAsync(staged.data, value.data, staged.bytes,
                         cudaMemcpyDeviceToDevice,
                         copyStream_) != cudaSuccess ||
         cudaStreamSynchronize(copyStream_) != cudaSuccess))
      return Status::error("send: cannot stage " +
                           std::to_string(staged.bytes) + " bytes for rank " +
                           std::to_string(peer) + " (out of device memory?)");
    ncclResult_t rc = ncclSend(staged.data, staged.bytes, ncclUint8, link.peer,
                               link.comm, link.stream);
    if (Status s = check(rc, "ncclSend to rank " + std::to_string(peer));
        !s.ok())
      return s;
    if (cudaEventCreateWithFlags(&staged.done, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventRecord(staged.done, link.stream) != cudaSuccess)
      return Status::error("ncclSend: cannot record its event");
    link.staged.push_back(staged);
    link.sending = true;
    return Status::success();
  }

  /// A posted receive waited for at once.
  Status recv(Tensor &value, int peer, int tag) override {
    int request = -1;
    if (Status s = startRecv(value, peer, tag, request); !s.ok())
      return s;
    return waitRecv(request, value, peer, tag);
  }

  /// ncclRecv on the link's stream now, with an event after it that
  /// waitRecv waits for: the transfer runs while the caller computes.
  Status startRecv(Tensor &value, int peer, int tag, int &request) override {
    (void)tag;
    auto found = links_.find({peer, rank_});
    if (found == links_.end())
      return Status::error("recv: rank " + std::to_string(rank_) +
                           " has no link from rank " + std::to_string(peer) +
                           " (connect was not called for it)");
    Link &link = found->second;
    if (Status s = settleCopies(); !s.ok())
      return s;
    ncclResult_t rc = ncclRecv(value.data, value.bytes(), ncclUint8, link.peer,
                               link.comm, link.stream);
    if (Status s = check(rc, "ncclRecv from rank " + std::to_string(peer));
        !s.ok())
      return s;
    cudaEvent_t event;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventRecord(event, link.stream) != cudaSuccess)
      return Status::error("ncclRecv: cannot record its event");
    request = nextRequest_++;
    receives_[request] = {event, link.comm};
    return Status::success();
  }

  Status waitRecv(int request, Tensor &value, int peer, int tag) override {
    std::pair<cudaEvent_t, ncclComm_t> posted;
    if (!transport::takePosted(receives_, request, posted))
      return Communicator::waitRecv(request, value, peer, tag);
    auto [event, comm] = posted;
    Status s = waitUntil(
        "a message from rank " + std::to_string(peer),
        [&] { return cudaEventQuery(event); }, comm);
    cudaEventDestroy(event);
    return s;
  }

  Status connect(const std::vector<std::pair<int, int>> &links) override {
    // One split per link, every rank taking part in each (NCCL_SPLIT_NOCOLOR
    // where it is neither end), in the order of the list all ranks share.
    for (auto [index, link] : enumerateLinks(links)) {
      auto [from, to] = link;
      if (from < 0 || to < 0 || from >= size_ || to >= size_ || from == to)
        return Status::error(
            "connect: no link from rank " + std::to_string(from) + " to rank " +
            std::to_string(to) + " among " + std::to_string(size_));
      bool member = rank_ == from || rank_ == to;
      ncclComm_t created = nullptr;
      ncclResult_t rc =
          ncclCommSplit(comm_, member ? index : NCCL_SPLIT_NOCOLOR,
                        rank_ == from ? 0 : 1, &created, nullptr);
      if (rc != ncclSuccess)
        return Status::error("connect: ncclCommSplit for the link from rank " +
                             std::to_string(from) + " to rank " +
                             std::to_string(to) +
                             " failed: " + ncclGetErrorString(rc));
      if (!member || links_.count(link))
        continue;
      Link &made = links_[link];
      made.comm = created;
      made.peer = rank_ == from ? 1 : 0;
      cudaStreamCreateWithFlags(&made.stream, cudaStreamNonBlocking);
    }
    return Status::success();
  }

  Status allReduceSum(Tensor &value) override {
    if (Status s = settleCopies(); !s.ok())
      return s;
    ncclResult_t rc =
        ncclAllReduce(value.data, value.data, value.numel(),
                      ncclType(value.dtype), ncclSum, comm_, stream_);
    if (Status s = check(rc, "ncclAllReduce"); !s.ok())
      return s;
    return wait("the all-reduce");
  }

  /// Enqueued on the communicator's stream, with an event after it that
  /// testAllReduce and waitAllReduce query (several may be in flight).
  Status startAllReduceSum(Tensor &value, int &request) override {
    if (Status s = settleCopies(); !s.ok())
      return s;
    ncclResult_t rc =
        ncclAllReduce(value.data, value.data, value.numel(),
                      ncclType(value.dtype), ncclSum, comm_, stream_);
    if (Status s = check(rc, "ncclAllReduce"); !s.ok())
      return s;
    cudaEvent_t event;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventRecord(event, stream_) != cudaSuccess)
      return Status::error("ncclAllReduce: cannot record its event");
    request = nextRequest_++;
    reductions_[request] = event;
    return Status::success();
  }

  Status testAllReduce(int request, bool &done) override {
    auto it = reductions_.find(request);
    if (it == reductions_.end())
      return unknownReduction("testAllReduce", request);
    cudaError_t e = cudaEventQuery(it->second);
    if (e != cudaSuccess && e != cudaErrorNotReady)
      return Status::error(std::string("the all-reduce: ") +
                           cudaGetErrorString(e));
    done = e == cudaSuccess;
    return Status::success();
  }

  Status waitAllReduce(int request) override {
    auto it = reductions_.find(request);
    if (it == reductions_.end())
      return unknownReduction("waitAllReduce", request);
    cudaEvent_t event = it->second;
    reductions_.erase(it);
    Status s =
        waitUntil("the all-reduce", [&] { return cudaEventQuery(event); });
    cudaEventDestroy(event);
    return s;
  }

  void abort(const std::string &reason) override {
    std::fprintf(stderr, "rank %d: %s\n", rank_, reason.c_str());
    std::fflush(stderr);
    for (auto &[key, link] : links_)
      ncclCommAbort(link.comm);
    ncclCommAbort(comm_);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override {
    ncclComm_t created;
    if (ncclResult_t rc = ncclCommSplit(comm_, color, key, &created, nullptr);
        rc != ncclSuccess) {
      error =
          std::string("split: ncclCommSplit failed: ") + ncclGetErrorString(rc);
      return nullptr;
    }
    int rank = 0, size = 1;
    ncclCommUserRank(created, &rank);
    ncclCommCount(created, &size);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    auto sub = std::make_unique<NCCLCommunicator>(created, stream, rank, size,
                                                  /*world=*/false);
    sub->timeoutSeconds = timeoutSeconds;
    return sub;
  }

private:
  Status check(ncclResult_t rc, const std::string &what) {
    if (rc == ncclSuccess)
      return Status::success();
    return Status::error(what + " failed: " + ncclGetErrorString(rc));
  }

  /// Waits for the copies queued on the legacy default stream (the
  /// runtime's cudaMemcpy of device to device returns before it is done),
  /// which this communicator's non-blocking streams do not wait for.
  Status settleCopies() {
    cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
    return e == cudaSuccess ? Status::success()
                            : Status::error(std::string("before a transfer: ") +
                                            cudaGetErrorString(e));
  }

  /// A send's staging buffer and the event after its ncclSend.
  struct Staged {
    void *data = nullptr;
    int64_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  /// A directed link's own communicator (this rank and `peer`) and stream.
  struct Link {
    ncclComm_t comm = nullptr;
    int peer = 0;
    cudaStream_t stream = nullptr;
    std::deque<Staged> staged;
    bool sending = false;
  };

  /// The links in list order, numbered (the split colours), once each.
  static std::vector<std::pair<int, std::pair<int, int>>>
  enumerateLinks(const std::vector<std::pair<int, int>> &links) {
    std::vector<std::pair<int, std::pair<int, int>>> out;
    for (const auto &link : links)
      out.push_back({static_cast<int>(out.size()), link});
    return out;
  }

  /// Frees the staging buffers of the sends that have finished (all: the
  /// stream is idle).
  void reclaim(Link &link, bool all) {
    while (!link.staged.empty()) {
      Staged &front = link.staged.front();
      if (!all && cudaEventQuery(front.done) != cudaSuccess)
        break;
      cudaEventDestroy(front.done);
      if (front.data)
        cudaFreeAsync(front.data, link.stream);
      link.staged.pop_front();
    }
    link.sending = !link.staged.empty();
  }

  /// Waits for the stream, giving up after the timeout.
  Status wait(const std::string &what) {
    return waitUntil(what, [&] { return cudaStreamQuery(stream_); });
  }

  /// Polls `query` (a stream or event query) until it succeeds, an error,
  /// NCCL's asynchronous error on `comm` (default: this communicator's), or
  /// the timeout.
  template <typename Query>
  Status waitUntil(const std::string &what, Query query,
                   ncclComm_t comm = nullptr) {
    if (!comm)
      comm = comm_;
    auto deadline = this->deadline();
    while (true) {
      cudaError_t e = query();
      if (e == cudaSuccess)
        return Status::success();
      if (e != cudaErrorNotReady)
        return Status::error("waiting for " + what + ": " +
                             cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess)
        return Status::error("waiting for " + what + ": " +
                             ncclGetErrorString(async));
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm);
        return Status::error("rank " + std::to_string(rank_) + " waited for " +
                             what + " for " + std::to_string(timeoutSeconds) +
                             " s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_;
  bool world_;
  /// All-reduces in flight: the event recorded after each.
  std::map<int, cudaEvent_t> reductions_;
  /// Receives posted by startRecv: the event after each and its link.
  std::map<int, std::pair<cudaEvent_t, ncclComm_t>> receives_;
  /// (sender, receiver) -> the link, for the links with this rank at an end.
  std::map<std::pair<int, int>, Link> links_;
  /// Where sends copy their tensor to its staging buffer.
  cudaStream_t copyStream_ = nullptr;
  int nextRequest_ = 0;
};

} // namespace

std::unique_ptr<Communicator> pp::rt::createNCCLCommunicator(int *argc,
                                                             char ***argv) {
  transport::initMPI(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "rank %d: no CUDA device for NCCL\n", rank);
    return nullptr;
  }
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  cudaSetDevice(local ? std::atoi(local) % devices : rank % devices);
  ncclUniqueId id;
  if (rank == 0)
    ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  if (ncclResult_t rc = ncclCommInitRank(&comm, size, id, rank);
      rc != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank,
                 ncclGetErrorString(rc));
    return nullptr;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  return std::make_unique<NCCLCommunicator>(comm, stream, rank, size,
                                            /*world=*/true);
}
