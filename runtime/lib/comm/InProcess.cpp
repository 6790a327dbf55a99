//===- InProcess.cpp - Ranks as threads of one process ----------*- C++ -*-===//
//
// Tensor bytes move through Memory.h (copyFromBuffer / copyToBuffer), so the
// same code serves host buffers (CPU backend) and device buffers (CUDA).
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Memory.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>

using namespace pp::rt;

Communicator::~Communicator() = default;

namespace {

/// Messages by (sender, receiver, tag), each a FIFO of byte copies; the
/// all-reduce meets at a generation-counted barrier.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::tuple<int, int, int>, std::vector<std::vector<char>>> queues;
  std::map<std::tuple<int, int, int>, std::vector<std::vector<int64_t>>> shapes;
  bool aborted = false;
  std::string abortReason;
  // All-reduce: contributions of the current round.
  int size = 0;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<std::vector<double>> pending;
  std::vector<double> sum;
  std::vector<double> result;
};

class InProcessCommunicator : public Communicator {
public:
  InProcessCommunicator(std::shared_ptr<Mailbox> box, int rank)
      : box_(std::move(box)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return box_->size; }
  const char *backend() const override { return "in-process"; }

  Status send(const Tensor &value, int peer, int tag) override {
    if (peer < 0 || peer >= box_->size || peer == rank_)
      return Status::error("send: rank " + std::to_string(rank_) +
                           " cannot send to rank " + std::to_string(peer));
    std::vector<char> bytes(static_cast<size_t>(value.bytes()));
    copyFromBuffer(bytes.data(), value.data, value.bytes());
    std::lock_guard<std::mutex> lock(box_->mutex);
    if (box_->aborted)
      return Status::error("send: the job was aborted: " + box_->abortReason);
    auto key = std::make_tuple(rank_, peer, tag);
    box_->queues[key].push_back(std::move(bytes));
    box_->shapes[key].push_back(value.shape);
    box_->changed.notify_all();
    return Status::success();
  }

  Status recv(Tensor &value, int peer, int tag) override {
    auto key = std::make_tuple(peer, rank_, tag);
    std::unique_lock<std::mutex> lock(box_->mutex);
    auto deadline = this->deadline();
    while (true) {
      if (box_->aborted)
        return Status::error("recv: the job was aborted: " + box_->abortReason);
      auto it = box_->queues.find(key);
      if (it != box_->queues.end() && !it->second.empty()) {
        std::vector<char> bytes = std::move(it->second.front());
        std::vector<int64_t> shape = std::move(box_->shapes[key].front());
        it->second.erase(it->second.begin());
        box_->shapes[key].erase(box_->shapes[key].begin());
        if (static_cast<int64_t>(bytes.size()) != value.bytes() ||
            shape != value.shape)
          return Status::error("recv: rank " + std::to_string(rank_) +
                               " expected " + std::to_string(value.bytes()) +
                               " bytes from rank " + std::to_string(peer) +
                               " (tag " + std::to_string(tag) + "), got " +
                               std::to_string(bytes.size()));
        // Copied outside the lock: the queue entry is ours now.
        lock.unlock();
        copyToBuffer(value.data, bytes.data(),
                     static_cast<int64_t>(bytes.size()));
        return Status::success();
      }
      if (box_->changed.wait_until(lock, deadline) == std::cv_status::timeout)
        return Status::error("recv: rank " + std::to_string(rank_) +
                             " got no message from rank " +
                             std::to_string(peer) + " (tag " +
                             std::to_string(tag) + ") within " +
                             std::to_string(timeoutSeconds) + " s");
    }
  }

  Status allReduceSum(Tensor &value) override {
    if (value.dtype != DType::F32 && value.dtype != DType::F64)
      return Status::error("allReduceSum: only f32 and f64");
    int64_t n = value.numel();
    std::vector<double> mine = toHost(value);
    std::unique_lock<std::mutex> lock(box_->mutex);
    if (box_->arrived == 0)
      box_->sum.assign(static_cast<size_t>(n), 0.0);
    if (static_cast<int64_t>(box_->sum.size()) != n)
      return Status::error("allReduceSum: ranks disagree on the size");
    // Summed in rank order so every backend rounds alike.
    box_->pending[rank_] = std::move(mine);
    ++box_->arrived;
    uint64_t generation = box_->generation;
    if (box_->arrived == box_->size) {
      for (int r = 0; r < box_->size; ++r)
        for (int64_t i = 0; i < n; ++i)
          box_->sum[i] += box_->pending[r][i];
      box_->result = box_->sum;
      box_->arrived = 0;
      ++box_->generation;
      box_->changed.notify_all();
    } else {
      auto deadline = this->deadline();
      while (box_->generation == generation && !box_->aborted)
        if (box_->changed.wait_until(lock, deadline) == std::cv_status::timeout)
          return Status::error("allReduceSum: rank " + std::to_string(rank_) +
                               " waited for the other ranks for " +
                               std::to_string(timeoutSeconds) + " s");
      if (box_->aborted)
        return Status::error("allReduceSum: the job was aborted: " +
                             box_->abortReason);
    }
    std::vector<double> result = box_->result;
    lock.unlock();
    if (value.dtype == DType::F64) {
      copyToBuffer(value.data, result.data(), value.bytes());
    } else {
      std::vector<float> narrow(result.begin(), result.end());
      copyToBuffer(value.data, narrow.data(), value.bytes());
    }
    return Status::success();
  }

  void abort(const std::string &reason) override {
    std::lock_guard<std::mutex> lock(box_->mutex);
    if (!box_->aborted) {
      box_->aborted = true;
      box_->abortReason = "rank " + std::to_string(rank_) + ": " + reason;
    }
    box_->changed.notify_all();
  }

private:
  static std::vector<double> toHost(const Tensor &value) {
    std::vector<double> out(static_cast<size_t>(value.numel()));
    if (value.dtype == DType::F64) {
      copyFromBuffer(out.data(), value.data, value.bytes());
    } else {
      std::vector<float> narrow(out.size());
      copyFromBuffer(narrow.data(), value.data, value.bytes());
      out.assign(narrow.begin(), narrow.end());
    }
    return out;
  }

  std::shared_ptr<Mailbox> box_;
  int rank_;
};

} // namespace

std::vector<std::unique_ptr<Communicator>>
pp::rt::createInProcessGroup(int size) {
  auto box = std::make_shared<Mailbox>();
  box->size = size;
  box->pending.resize(static_cast<size_t>(size));
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r)
    group.push_back(std::make_unique<InProcessCommunicator>(box, r));
  return group;
}
