//===- InProcess.cpp - Ranks as threads of one process ----------*- C++ -*-===//
//
// Tensor bytes move through Memory.h (copyFromBuffer / copyToBuffer), so the
// same code serves host buffers (CPU backend) and device buffers (CUDA).
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Memory.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>

using namespace pp::rt;

Communicator::~Communicator() = default;

namespace {

/// A communicator's ranks (world ranks, in its rank order) and the rounds
/// of its collectives.
struct Group {
  std::vector<int> members;
  // All-reduce: contributions of the current round.
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<std::vector<double>> pending;
  std::vector<double> result;
  // Split: (color, key) of each rank, then (new group, rank in it).
  int splitArrived = 0;
  uint64_t splitGeneration = 0;
  std::vector<std::pair<int, int>> splitRequests;
  std::vector<std::pair<int, int>> splitResult;
};

/// Messages by (group, sender, receiver, tag), each a FIFO of byte copies;
/// collectives meet at generation-counted barriers of their group. One
/// lock and one abort flag for every group, so an abort wakes them all.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::tuple<int, int, int, int>, std::vector<std::vector<char>>>
      queues;
  std::map<std::tuple<int, int, int, int>, std::vector<std::vector<int64_t>>>
      shapes;
  bool aborted = false;
  std::string abortReason;
  /// Group 0 is the world; split adds the others (never removed, so a
  /// Group reference stays valid).
  std::vector<std::unique_ptr<Group>> groups;
};

class InProcessCommunicator : public Communicator {
public:
  InProcessCommunicator(std::shared_ptr<Mailbox> box, int group, int rank)
      : box_(std::move(box)), group_(group), rank_(rank) {
    std::lock_guard<std::mutex> lock(box_->mutex);
    size_ = static_cast<int>(box_->groups[group_]->members.size());
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *backend() const override { return "in-process"; }

  Status send(const Tensor &value, int peer, int tag) override {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return Status::error("send: rank " + std::to_string(rank_) +
                           " cannot send to rank " + std::to_string(peer));
    std::vector<char> bytes(static_cast<size_t>(value.bytes()));
    copyFromBuffer(bytes.data(), value.data, value.bytes());
    std::lock_guard<std::mutex> lock(box_->mutex);
    if (box_->aborted)
      return Status::error("send: the job was aborted: " + box_->abortReason);
    auto key = std::make_tuple(group_, rank_, peer, tag);
    box_->queues[key].push_back(std::move(bytes));
    box_->shapes[key].push_back(value.shape);
    box_->changed.notify_all();
    return Status::success();
  }

  Status recv(Tensor &value, int peer, int tag) override {
    auto key = std::make_tuple(group_, peer, rank_, tag);
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

  /// startAllReduceSum reduces at once here.
  Status testAllReduce(int request, bool &done) override {
    (void)request;
    done = true;
    return Status::success();
  }

  Status allReduceSum(Tensor &value) override {
    if (value.dtype != DType::F32 && value.dtype != DType::F64)
      return Status::error("allReduceSum: only f32 and f64");
    int64_t n = value.numel();
    std::vector<double> mine = toHost(value);
    std::unique_lock<std::mutex> lock(box_->mutex);
    Group &group = *box_->groups[group_];
    if (group.arrived == 0)
      group.pending.assign(static_cast<size_t>(size_), {});
    group.pending[rank_] = std::move(mine);
    ++group.arrived;
    uint64_t generation = group.generation;
    if (group.arrived == size_) {
      // Summed in rank order so every run rounds alike (for two ranks the
      // double sum rounds to the float sum exactly).
      std::vector<double> sum(static_cast<size_t>(n), 0.0);
      std::string mismatch;
      for (int r = 0; r < size_ && mismatch.empty(); ++r) {
        if (static_cast<int64_t>(group.pending[r].size()) != n) {
          mismatch = "allReduceSum: rank " + std::to_string(r) + " gave " +
                     std::to_string(group.pending[r].size()) +
                     " values, rank " + std::to_string(rank_) + " " +
                     std::to_string(n);
          break;
        }
        for (int64_t i = 0; i < n; ++i)
          sum[i] += group.pending[r][i];
      }
      group.result = std::move(sum);
      group.arrived = 0;
      ++group.generation;
      box_->changed.notify_all();
      if (!mismatch.empty())
        return Status::error(mismatch);
    } else {
      auto deadline = this->deadline();
      while (group.generation == generation && !box_->aborted)
        if (box_->changed.wait_until(lock, deadline) == std::cv_status::timeout)
          return Status::error("allReduceSum: rank " + std::to_string(rank_) +
                               " waited for the other ranks for " +
                               std::to_string(timeoutSeconds) + " s");
      if (box_->aborted)
        return Status::error("allReduceSum: the job was aborted: " +
                             box_->abortReason);
    }
    if (static_cast<int64_t>(group.result.size()) != n)
      return Status::error("allReduceSum: the ranks disagree on the size");
    std::vector<double> result = group.result;
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

  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override {
    std::unique_lock<std::mutex> lock(box_->mutex);
    Group &group = *box_->groups[group_];
    if (group.splitArrived == 0)
      group.splitRequests.assign(static_cast<size_t>(size_), {0, 0});
    group.splitRequests[rank_] = {color, key};
    uint64_t generation = group.splitGeneration;
    if (++group.splitArrived == size_) {
      // Each color's ranks in (key, rank) order.
      std::map<int, std::vector<std::pair<int, int>>> byColor;
      for (int r = 0; r < size_; ++r)
        byColor[group.splitRequests[r].first].push_back(
            {group.splitRequests[r].second, r});
      group.splitResult.assign(static_cast<size_t>(size_), {-1, -1});
      for (auto &[c, ranks] : byColor) {
        std::sort(ranks.begin(), ranks.end());
        auto created = std::make_unique<Group>();
        int id = static_cast<int>(box_->groups.size());
        for (size_t i = 0; i < ranks.size(); ++i) {
          created->members.push_back(group.members[ranks[i].second]);
          group.splitResult[ranks[i].second] = {id, static_cast<int>(i)};
        }
        box_->groups.push_back(std::move(created));
      }
      group.splitArrived = 0;
      ++group.splitGeneration;
      box_->changed.notify_all();
    } else {
      auto deadline = this->deadline();
      while (group.splitGeneration == generation && !box_->aborted)
        if (box_->changed.wait_until(lock, deadline) ==
            std::cv_status::timeout) {
          error = "split: rank " + std::to_string(rank_) +
                  " waited for the other ranks for " +
                  std::to_string(timeoutSeconds) + " s";
          return nullptr;
        }
      if (box_->aborted) {
        error = "split: the job was aborted: " + box_->abortReason;
        return nullptr;
      }
    }
    auto [id, rank] = group.splitResult[rank_];
    lock.unlock();
    auto created = std::make_unique<InProcessCommunicator>(box_, id, rank);
    created->timeoutSeconds = timeoutSeconds;
    return created;
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
  int group_;
  int rank_;
  int size_ = 0;
};

} // namespace

std::vector<std::unique_ptr<Communicator>>
pp::rt::createInProcessGroup(int size) {
  auto box = std::make_shared<Mailbox>();
  auto world = std::make_unique<Group>();
  for (int r = 0; r < size; ++r)
    world->members.push_back(r);
  box->groups.push_back(std::move(world));
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r)
    group.push_back(std::make_unique<InProcessCommunicator>(box, 0, r));
  return group;
}
