//===- Staged.cpp - Host staging for a communicator of host memory --------===//
//
// MPI moves host memory; tensors of the CUDA backend live on the device.
// This wrapper copies through host buffers around the inner communicator,
// keeping its tags, so any send / receive order of the schedule works.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Memory.h"

#include <map>
#include <vector>

namespace pp::rt {
namespace {

class HostStagedCommunicator : public Communicator {
public:
  explicit HostStagedCommunicator(std::unique_ptr<Communicator> inner)
      : inner_(std::move(inner)) {
    timeoutSeconds = inner_->timeoutSeconds;
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char *backend() const override { return inner_->backend(); }

  Status send(const Tensor &value, int peer, int tag) override {
    inner_->timeoutSeconds = timeoutSeconds;
    // The inner send returns once its argument may be reused (MPI.cpp
    // sends from a private copy), so the host copy can go right after.
    std::vector<char> bytes(value.bytes());
    copyFromBuffer(bytes.data(), value.data, value.bytes());
    return inner_->send(Tensor{bytes.data(), value.dtype, value.shape}, peer,
                        tag);
  }

  Status recv(Tensor &value, int peer, int tag) override {
    inner_->timeoutSeconds = timeoutSeconds;
    std::vector<char> bytes(value.bytes());
    Tensor host{bytes.data(), value.dtype, value.shape};
    Status status = inner_->recv(host, peer, tag);
    if (status.ok())
      copyToBuffer(value.data, bytes.data(), value.bytes());
    return status;
  }

  Status allReduceSum(Tensor &value) override {
    std::vector<char> bytes(value.bytes());
    copyFromBuffer(bytes.data(), value.data, value.bytes());
    Tensor host{bytes.data(), value.dtype, value.shape};
    Status status = inner_->allReduceSum(host);
    if (status.ok())
      copyToBuffer(value.data, bytes.data(), value.bytes());
    return status;
  }

  Status startAllReduceSum(Tensor &value, int &request) override {
    inner_->timeoutSeconds = timeoutSeconds;
    Pending pending{std::vector<char>(value.bytes()), value, -1};
    copyFromBuffer(pending.bytes.data(), value.data, value.bytes());
    request = nextRequest_++;
    // The host buffer's address survives the move into the map.
    auto [it, inserted] = pending_.emplace(request, std::move(pending));
    Tensor staged{it->second.bytes.data(), value.dtype, value.shape};
    Status status = inner_->startAllReduceSum(staged, it->second.inner);
    if (!status.ok())
      pending_.erase(it);
    return status;
  }

  Status testAllReduce(int request, bool &done) override {
    auto it = pending_.find(request);
    if (it == pending_.end())
      return unknownReduction("testAllReduce", request);
    return inner_->testAllReduce(it->second.inner, done);
  }

  Status waitAllReduce(int request) override {
    inner_->timeoutSeconds = timeoutSeconds;
    auto it = pending_.find(request);
    if (it == pending_.end())
      return unknownReduction("waitAllReduce", request);
    Status status = inner_->waitAllReduce(it->second.inner);
    if (status.ok())
      copyToBuffer(it->second.device.data, it->second.bytes.data(),
                   it->second.device.bytes());
    pending_.erase(it);
    return status;
  }

  void abort(const std::string &reason) override { inner_->abort(reason); }

  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override {
    inner_->timeoutSeconds = timeoutSeconds;
    std::unique_ptr<Communicator> inner = inner_->split(color, key, error);
    if (!inner)
      return nullptr;
    auto staged = std::make_unique<HostStagedCommunicator>(std::move(inner));
    staged->timeoutSeconds = timeoutSeconds;
    return staged;
  }

private:
  /// A reduction in flight: its host copy, the device tensor it returns
  /// to, and the inner communicator's request.
  struct Pending {
    std::vector<char> bytes;
    Tensor device;
    int inner;
  };
  std::unique_ptr<Communicator> inner_;
  std::map<int, Pending> pending_;
  int nextRequest_ = 0;
};

} // namespace

std::unique_ptr<Communicator>
stageThroughHost(std::unique_ptr<Communicator> inner) {
  return std::make_unique<HostStagedCommunicator>(std::move(inner));
}

} // namespace pp::rt
