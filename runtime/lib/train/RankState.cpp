//===- RankState.cpp - What the parts of a rank share ---------------------===//

#include "RankState.h"

#include "pp/Runtime/Memory.h"

using namespace pp::rt;
using namespace pp::rt::train;

RankState::~RankState() {
  // What a failed step left behind goes back to the pool, which frees it.
  for (auto &[s, state] : stages) {
    for (auto &[key, t] : state->stashed)
      pool.release(t);
    for (auto &[slot, t] : state->sums)
      pool.release(t);
  }
  stages.clear();
  for (auto &[key, t] : local)
    pool.release(t);
  if (arena)
    freeBuffer(arena);
  if (hasKernelContext)
    destroyKernelContext(kernels);
}

Status RankState::allReduce(std::vector<double> &values, Communicator *comm) {
  Tensor t{allocateBuffer(static_cast<int64_t>(values.size() * 8)),
           DType::F64,
           {static_cast<int64_t>(values.size())}};
  if (!t.data)
    return Status::error("out of memory for an all-reduce");
  Status s;
  try {
    copyToBuffer(t.data, values.data(), t.bytes());
    s = (comm ? *comm : world).allReduceSum(t);
    if (s.ok())
      copyFromBuffer(values.data(), t.data, t.bytes());
  } catch (const std::exception &e) {
    s = Status::error(e.what());
  }
  freeBuffer(t.data);
  return s;
}

std::vector<int> RankState::peersOf(int device) const {
  std::vector<int> peers;
  int senders = job.deviceTensorParallel[rank];
  for (int t = tpRank; t < job.deviceTensorParallel[device]; t += senders)
    peers.push_back(t);
  return peers;
}
