//===- Comm.h - Transfers between the ranks of a pipeline job ---*- C++ -*-===//
//
// One interface for the messages of a pipelined training job: point-to-point
// sends and receives of tensors (activations, gradients, tied weights), a
// sum all-reduce (data-parallel gradients) and `split` into sub-groups (the
// pipeline of each data-parallel replica, the replicas of each device).
// Backends:
//   - in-process: the ranks are threads of one process (a single machine, or
//     one GPU running every stage);
//   - MPI: one process per rank (`mpirun -np N`, multi-node through the host
//     list), in the pp_runtime_mpi library;
//   - NCCL (GPU buffers, bootstrapped through MPI), in pp_runtime_nccl.
//
// Failures never hang: a receive gives up after the communicator's timeout
// with an error naming the peer and tag, and `abort` stops every rank of the
// job (MPI_Abort, or failing every waiting thread in-process).
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_COMM_H
#define PP_RUNTIME_COMM_H

#include "pp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pp::rt {

class Communicator {
public:
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "in-process", "mpi" or "nccl".
  virtual const char *backend() const = 0;

  /// Sends `value` to rank `peer` under `tag`; returns once `value` may be
  /// reused (the message may still be in flight).
  virtual Status send(const Tensor &value, int peer, int tag) = 0;
  /// Receives into `value` (allocated, with the dtype and shape the sender
  /// used) the message of `peer` under `tag`.
  virtual Status recv(Tensor &value, int peer, int tag) = 0;
  /// Posts recv(value, peer, tag) and returns at once where the backend can
  /// (MPI_Irecv, ncclRecv on the link's stream), so the transfer overlaps
  /// the work that follows (receive prefetch); `value` must stay alive and
  /// unread until waitRecv has returned. Receives posted this way match
  /// messages in the order they are posted, as recv does. The default posts
  /// nothing (request -1) and waitRecv receives then.
  virtual Status startRecv(Tensor &value, int peer, int tag, int &request) {
    (void)value, (void)peer, (void)tag;
    request = -1;
    return Status::success();
  }
  /// Waits (within the timeout) for the receive `request` that startRecv
  /// posted with the same arguments; `request` -1 receives now.
  virtual Status waitRecv(int request, Tensor &value, int peer, int tag) {
    if (request >= 0)
      return Status::error("waitRecv: no receive " + std::to_string(request) +
                           " was started");
    return recv(value, peer, tag);
  }
  /// value := sum over all ranks of value (same dtype and shape everywhere;
  /// F32 or F64).
  virtual Status allReduceSum(Tensor &value) = 0;
  /// Starts allReduceSum(value) and returns at once where the backend can
  /// (MPI_Iallreduce, NCCL's stream), so the reduction overlaps the work
  /// that follows; `value` must stay alive and untouched until
  /// waitAllReduce(request) has returned. The default reduces at once.
  virtual Status startAllReduceSum(Tensor &value, int &request) {
    request = -1;
    return allReduceSum(value);
  }
  /// Waits (within the timeout) for the reduction `request` started.
  virtual Status waitAllReduce(int request) {
    (void)request;
    return Status::success();
  }
  /// Whether the reduction `request` has finished, without waiting (then
  /// waitAllReduce returns at once). A backend that cannot tell says no, so
  /// callers wait only where they must.
  virtual Status testAllReduce(int request, bool &done) {
    (void)request;
    done = false;
    return Status::success();
  }
  /// Collective over every rank of this communicator, each passing the same
  /// list: prepares point-to-point transfers from rank `first` to rank
  /// `second` of each pair (NCCL gives every such link its own
  /// communicator and stream, so a send waiting for its receiver never
  /// holds up a receive). Transports that need nothing do nothing.
  virtual Status connect(const std::vector<std::pair<int, int>> &links) {
    (void)links;
    return Status::success();
  }
  /// Stops every rank of the job with `reason` (does not return for MPI).
  virtual void abort(const std::string &reason) = 0;
  /// Collective over every rank of this communicator (MPI_Comm_split): the
  /// ranks passing the same `color` form a new communicator, ranked by
  /// `key` (ties by their rank here). Its abort stops the whole job, and it
  /// must be destroyed before this one. Null with `error` set on failure.
  virtual std::unique_ptr<Communicator> split(int color, int key,
                                              std::string &error) = 0;

  /// The error of waitAllReduce / testAllReduce (`what`) for a request
  /// that no startAllReduceSum returned.
  static Status unknownReduction(const char *what, int request) {
    return Status::error(std::string(what) + ": no reduction " +
                         std::to_string(request) + " was started");
  }

  /// Seconds a receive waits before it reports the peer as lost.
  double timeoutSeconds = 60;

  /// The steady-clock time a wait that starts now gives up at: an integer
  /// time point (a double one would make `wait_until` return at once, so a
  /// waiter would spin), `timeoutSeconds` capped at 10^9 s (31 years; also
  /// what an infinite, NaN or negative timeout waits).
  std::chrono::steady_clock::time_point deadline() const {
    double seconds = timeoutSeconds > 0 && std::isfinite(timeoutSeconds)
                         ? std::min(timeoutSeconds, 1e9)
                         : 1e9;
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(seconds));
  }
};

/// `size` communicators whose ranks are threads of this process; rank i is
/// element i. They share a mailbox and live as long as any of them does.
std::vector<std::unique_ptr<Communicator>> createInProcessGroup(int size);

/// The MPI communicator of this process (MPI_COMM_WORLD); initialises MPI
/// with thread support on first use and finalises it at exit. Defined in
/// pp_runtime_mpi.
std::unique_ptr<Communicator> createMPICommunicator(int *argc, char ***argv);

/// `inner` (which moves host memory, like MPI) for tensors in backend
/// memory: sends and receives copy through host buffers, tags kept.
std::unique_ptr<Communicator>
stageThroughHost(std::unique_ptr<Communicator> inner);

/// `inner` (which must outlive it) for a transport whose messages between
/// two ranks arrive in the order they are sent and carry no tags (NCCL):
/// with `headers`, each message follows a header with its tag and size, and
/// a receive keeps the messages that arrive before its own; without, the
/// k-th receive between two ranks takes the k-th message, whatever its tag
/// (for programs whose messages the compiler proved in order).
/// Collectives and splits go to `inner` as they are.
std::unique_ptr<Communicator> matchMessagesByOrder(Communicator &inner,
                                                   bool headers);

/// The NCCL communicator of this MPI process on its node-local GPU (tensors
/// in device memory); null, with a message on stderr, without a GPU.
/// Defined in pp_runtime_nccl.
std::unique_ptr<Communicator> createNCCLCommunicator(int *argc, char ***argv);

} // namespace pp::rt

#endif // PP_RUNTIME_COMM_H
