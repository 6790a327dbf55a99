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
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Comm.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

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
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
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
    ncclResult_t rc =
        ncclSend(value.data, value.bytes(), ncclUint8, peer, comm_, stream_);
    return check(rc, "ncclSend to rank " + std::to_string(peer));
  }

  Status recv(Tensor &value, int peer, int tag) override {
    (void)tag;
    ncclResult_t rc =
        ncclRecv(value.data, value.bytes(), ncclUint8, peer, comm_, stream_);
    if (Status s = check(rc, "ncclRecv from rank " + std::to_string(peer));
        !s.ok())
      return s;
    return wait("a message from rank " + std::to_string(peer));
  }

  Status allReduceSum(Tensor &value) override {
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

  /// Waits for the stream, giving up after the timeout.
  Status wait(const std::string &what) {
    return waitUntil(what, [&] { return cudaStreamQuery(stream_); });
  }

  /// Polls `query` (a stream or event query) until it succeeds, an error,
  /// NCCL's asynchronous error, or the timeout.
  template <typename Query>
  Status waitUntil(const std::string &what, Query query) {
    auto deadline = this->deadline();
    while (true) {
      cudaError_t e = query();
      if (e == cudaSuccess)
        return Status::success();
      if (e != cudaErrorNotReady)
        return Status::error("waiting for " + what + ": " +
                             cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess)
        return Status::error("waiting for " + what + ": " +
                             ncclGetErrorString(async));
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm_);
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
  int nextRequest_ = 0;
};

} // namespace

std::unique_ptr<Communicator> pp::rt::createNCCLCommunicator(int *argc,
                                                             char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  }
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
