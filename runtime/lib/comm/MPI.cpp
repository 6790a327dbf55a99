//===- MPI.cpp - One process per rank, over MPI -----------------*- C++ -*-===//
//
// Sends are non-blocking (MPI_Isend from a private copy), so two stages that
// send to each other at once (activations one way, gradients the other) do
// not wait on each other; receives poll so they can give up after the
// timeout, and may be posted ahead (startRecv: MPI_Irecv). A killed process is
// reported by mpirun, which stops the job.
//
//===----------------------------------------------------------------------===//

#include "MPIShared.h"
#include "pp/Runtime/Comm.h"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

using namespace pp::rt;

namespace {

/// Waiting for a peer: the first 200 us yield the core between polls (a
/// pipeline's message usually arrives within that), then each poll sleeps
/// 20 us, so that a long wait leaves the core to others. Linux's default
/// timer slack (50 us) made each such sleep about 70 us, late to every
/// message after a long wait: the waiting thread's slack is cut to 1 us.
class PollBackoff {
public:
  void pause() {
    if (std::chrono::steady_clock::now() - start_ <
        std::chrono::microseconds(200)) {
      std::this_thread::yield();
      return;
    }
#ifdef __linux__
    if (!slackSet_) {
      prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
      slackSet_ = true;
    }
#endif
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

private:
  std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
  bool slackSet_ = false;
};

class MPICommunicator : public Communicator {
public:
  /// `comm` is MPI_COMM_WORLD (finalised with this communicator) or a
  /// communicator split from it (freed with this one).
  explicit MPICommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Errors come back as codes (a posted receive's truncation is reported
    // with the sizes, not as MPI's abort).
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MPICommunicator() override {
    completeSends(/*wait=*/true);
    // Receives posted for a step that did not run (a failed job).
    for (auto &[request, handle] : receives_) {
      MPI_Cancel(&handle);
      MPI_Request_free(&handle);
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    if (comm_ != MPI_COMM_WORLD)
      MPI_Comm_free(&comm_);
    else
      MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *backend() const override { return "mpi"; }

  Status send(const Tensor &value, int peer, int tag) override {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return Status::error("send: rank " + std::to_string(rank_) +
                           " cannot send to rank " + std::to_string(peer));
    completeSends(/*wait=*/false);
    Pending &p = sends_.emplace_back();
    p.bytes.resize(static_cast<size_t>(value.bytes()));
    if (!p.bytes.empty())
      std::memcpy(p.bytes.data(), value.data, p.bytes.size());
    int rc = MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()),
                       MPI_BYTE, peer, tag, comm_, &p.request);
    if (rc != MPI_SUCCESS)
      return Status::error("send: MPI_Isend to rank " + std::to_string(peer) +
                           " failed");
    return Status::success();
  }

  Status recv(Tensor &value, int peer, int tag) override {
    // Probe first: a message of the wrong size is reported, not truncated.
    auto deadline = this->deadline();
    MPI_Status status;
    int arrived = 0;
    PollBackoff backoff;
    while (true) {
      MPI_Iprobe(peer, tag, comm_, &arrived, &status);
      if (arrived)
        break;
      completeSends(/*wait=*/false);
      if (std::chrono::steady_clock::now() > deadline)
        return lostPeer(peer, tag);
      backoff.pause();
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != value.bytes()) {
      std::vector<char> discard(static_cast<size_t>(count));
      MPI_Recv(discard.data(), count, MPI_BYTE, peer, tag, comm_,
               MPI_STATUS_IGNORE);
      return wrongSize(value, peer, tag, std::to_string(count));
    }
    if (MPI_Recv(value.data, count, MPI_BYTE, peer, tag, comm_,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return Status::error("recv: MPI_Recv from rank " + std::to_string(peer) +
                           " failed");
    return Status::success();
  }

  /// MPI_Irecv now: a message that arrives before waitRecv is matched (and,
  /// past the eager size, copied) at the next MPI call of this rank.
  Status startRecv(Tensor &value, int peer, int tag, int &request) override {
    MPI_Request handle;
    if (MPI_Irecv(value.data, static_cast<int>(value.bytes()), MPI_BYTE, peer,
                  tag, comm_, &handle) != MPI_SUCCESS)
      return Status::error("recv: MPI_Irecv from rank " + std::to_string(peer) +
                           " failed");
    request = nextRequest_++;
    receives_[request] = handle;
    return Status::success();
  }

  Status waitRecv(int request, Tensor &value, int peer, int tag) override {
    MPI_Request handle;
    if (!transport::takePosted(receives_, request, handle))
      return Communicator::waitRecv(request, value, peer, tag);
    auto deadline = this->deadline();
    MPI_Status status;
    PollBackoff backoff;
    int rc = MPI_SUCCESS;
    while (true) {
      int finished = 0;
      rc = MPI_Test(&handle, &finished, &status);
      if (finished || rc != MPI_SUCCESS)
        break;
      completeSends(/*wait=*/false);
      if (std::chrono::steady_clock::now() > deadline) {
        MPI_Cancel(&handle);
        MPI_Request_free(&handle);
        return lostPeer(peer, tag);
      }
      backoff.pause();
    }
    // A longer message is cut at the posted size (MPI_ERR_TRUNCATE; MPI_Test
    // returns a completed receive's error).
    int errorClass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
      MPI_Error_class(rc, &errorClass);
    if (errorClass == MPI_ERR_TRUNCATE)
      return wrongSize(value, peer, tag, "more");
    if (rc != MPI_SUCCESS)
      return Status::error("recv: MPI_Irecv from rank " + std::to_string(peer) +
                           " failed");
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != value.bytes())
      return wrongSize(value, peer, tag, std::to_string(count));
    return Status::success();
  }

  Status allReduceSum(Tensor &value) override {
    MPI_Datatype type;
    if (Status s = sumType(value, type); !s.ok())
      return s;
    if (MPI_Allreduce(MPI_IN_PLACE, value.data, static_cast<int>(value.numel()),
                      type, MPI_SUM, comm_) != MPI_SUCCESS)
      return Status::error("allReduceSum: MPI_Allreduce failed");
    return Status::success();
  }

  Status startAllReduceSum(Tensor &value, int &request) override {
    MPI_Datatype type;
    if (Status s = sumType(value, type); !s.ok())
      return s;
    MPI_Request handle;
    if (MPI_Iallreduce(MPI_IN_PLACE, value.data,
                       static_cast<int>(value.numel()), type, MPI_SUM, comm_,
                       &handle) != MPI_SUCCESS)
      return Status::error("allReduceSum: MPI_Iallreduce failed");
    request = nextRequest_++;
    reductions_[request] = handle;
    return Status::success();
  }

  Status testAllReduce(int request, bool &done) override {
    auto it = reductions_.find(request);
    if (it == reductions_.end())
      return unknownReduction("testAllReduce", request);
    int finished = 0;
    // A finished request becomes MPI_REQUEST_NULL, which tests finished.
    if (MPI_Test(&it->second, &finished, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return Status::error("allReduceSum: MPI_Iallreduce failed");
    completeSends(/*wait=*/false);
    done = finished != 0;
    return Status::success();
  }

  Status waitAllReduce(int request) override {
    auto it = reductions_.find(request);
    if (it == reductions_.end())
      return unknownReduction("waitAllReduce", request);
    // Polled, so a lost peer is reported after the timeout.
    auto deadline = this->deadline();
    PollBackoff backoff;
    while (true) {
      int finished = 0;
      if (MPI_Test(&it->second, &finished, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        reductions_.erase(it);
        return Status::error("allReduceSum: MPI_Iallreduce failed");
      }
      if (finished)
        break;
      completeSends(/*wait=*/false);
      if (std::chrono::steady_clock::now() > deadline)
        return Status::error("allReduceSum: rank " + std::to_string(rank_) +
                             " waited for the other ranks for " +
                             std::to_string(timeoutSeconds) + " s");
      backoff.pause();
    }
    reductions_.erase(it);
    return Status::success();
  }

  void abort(const std::string &reason) override {
    std::fprintf(stderr, "rank %d: %s\n", rank_, reason.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override {
    MPI_Comm created;
    if (MPI_Comm_split(comm_, color, key, &created) != MPI_SUCCESS) {
      error = "split: MPI_Comm_split failed";
      return nullptr;
    }
    auto sub = std::make_unique<MPICommunicator>(created);
    sub->timeoutSeconds = timeoutSeconds;
    return sub;
  }

private:
  /// A receive's timeout.
  Status lostPeer(int peer, int tag) const {
    return Status::error("recv: rank " + std::to_string(rank_) +
                         " got no message from rank " + std::to_string(peer) +
                         " (tag " + std::to_string(tag) + ") within " +
                         std::to_string(timeoutSeconds) + " s: is rank " +
                         std::to_string(peer) + " lost?");
  }

  /// A message of another size than `value` (`got`: its size, or "more").
  Status wrongSize(const Tensor &value, int peer, int tag,
                   const std::string &got) const {
    return Status::error("recv: rank " + std::to_string(rank_) + " expected " +
                         std::to_string(value.bytes()) + " bytes from rank " +
                         std::to_string(peer) + " (tag " + std::to_string(tag) +
                         "), got " + got);
  }

  /// The MPI type of a tensor the all-reduce sums (F32 or F64).
  static Status sumType(const Tensor &value, MPI_Datatype &type) {
    if (value.dtype == DType::F32)
      type = MPI_FLOAT;
    else if (value.dtype == DType::F64)
      type = MPI_DOUBLE;
    else
      return Status::error("allReduceSum: only f32 and f64");
    return Status::success();
  }

  struct Pending {
    std::vector<char> bytes;
    MPI_Request request;
  };

  /// Frees the buffers of finished sends (all of them, with `wait`).
  void completeSends(bool wait) {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      if (wait)
        MPI_Wait(&it->request, MPI_STATUS_IGNORE), done = 1;
      else
        MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? sends_.erase(it) : std::next(it);
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::list<Pending> sends_;
  std::map<int, MPI_Request> reductions_;
  /// Receives posted by startRecv.
  std::map<int, MPI_Request> receives_;
  int nextRequest_ = 0;
};

} // namespace

std::unique_ptr<Communicator> pp::rt::createMPICommunicator(int *argc,
                                                            char ***argv) {
  transport::initMPI(argc, argv);
  return std::make_unique<MPICommunicator>(MPI_COMM_WORLD);
}
