//===- MPIShared.h - What the MPI and NCCL transports share -----*- C++ -*-===//
//
// Both transports run one process per rank under mpirun (NCCL bootstraps
// through MPI) and keep the receives that startRecv posted in a table that
// waitRecv takes them from. Header-only: pp_runtime_mpi and pp_runtime_nccl
// are separate libraries and a program may link either alone.
//
//===----------------------------------------------------------------------===//

#ifndef PP_RUNTIME_COMM_MPISHARED_H
#define PP_RUNTIME_COMM_MPISHARED_H

#include <mpi.h>

#include <map>

namespace pp::rt::transport {

/// Initialises MPI (MPI_THREAD_SERIALIZED) unless it already is.
inline void initMPI(int *argc, char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  }
}

/// Moves the receive `request` that startRecv posted out of `posted` into
/// `handle`; false when it holds none (request -1, or one never posted:
/// Communicator::waitRecv then receives now, or reports it).
template <typename Handle>
bool takePosted(std::map<int, Handle> &posted, int request, Handle &handle) {
  auto it = posted.find(request);
  if (it == posted.end())
    return false;
  handle = it->second;
  posted.erase(it);
  return true;
}

} // namespace pp::rt::transport

#endif // PP_RUNTIME_COMM_MPISHARED_H
