//===- Ordered.cpp - Tagged messages over a transport without tags --------===//
//
// NCCL's point-to-point transfers have no tags: between two ranks, the k-th
// receive takes the k-th message sent. Where the compiler proved that every
// device pair's messages are received in the order they are sent
// (ProgramInfo::messagesInSendOrder), messages go as they are. Elsewhere
// (the cuts of virtual workers with their own partitions, tied weights in
// interleaved schedules) each message follows a header with its tag and
// size; a receive reads headers until its own, keeping the messages that
// came first until their receives ask for them, as MPI does with tags.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/Comm.h"
#include "pp/Runtime/Memory.h"

#include <deque>
#include <map>

namespace pp::rt {
namespace {

/// The transport tag every message of the wrapped communicator uses.
constexpr int kUntagged = 0;

class OrderedCommunicator : public Communicator {
public:
  OrderedCommunicator(Communicator &inner, bool headers)
      : inner_(inner), headers_(headers) {
    timeoutSeconds = inner.timeoutSeconds;
  }
  ~OrderedCommunicator() override {
    if (header_.data)
      freeBuffer(header_.data);
    for (auto &[key, queue] : early_)
      for (Tensor &t : queue)
        freeBuffer(t.data);
  }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char *backend() const override { return inner_.backend(); }

  Status send(const Tensor &value, int peer, int tag) override {
    inner_.timeoutSeconds = timeoutSeconds;
    if (headers_) {
      if (Status s = headerBuffer(); !s.ok())
        return s;
      int64_t header[2] = {tag, value.bytes()};
      copyToBuffer(header_.data, header, sizeof(header));
      if (Status s = inner_.send(header_, peer, kUntagged); !s.ok())
        return s;
    }
    return inner_.send(bytesOf(value), peer, kUntagged);
  }

  Status recv(Tensor &value, int peer, int tag) override {
    inner_.timeoutSeconds = timeoutSeconds;
    Tensor flat = bytesOf(value);
    if (!headers_)
      return inner_.recv(flat, peer, kUntagged);
    auto found = early_.find({peer, tag});
    if (found != early_.end() && !found->second.empty()) {
      Tensor held = found->second.front();
      found->second.pop_front();
      Status s = sizeMatches(held.bytes(), value, peer, tag);
      if (s.ok())
        copyBuffer(value.data, held.data, held.bytes());
      freeBuffer(held.data);
      return s;
    }
    if (Status s = headerBuffer(); !s.ok())
      return s;
    while (true) {
      if (Status s = inner_.recv(header_, peer, kUntagged); !s.ok())
        return s;
      int64_t header[2];
      copyFromBuffer(header, header_.data, sizeof(header));
      if (header[0] == tag) {
        if (Status s = sizeMatches(header[1], value, peer, tag); !s.ok())
          return s;
        return inner_.recv(flat, peer, kUntagged);
      }
      if (header[1] < 0)
        return Status::error("recv: a corrupt header from rank " +
                             std::to_string(peer));
      // Another receive's message, sent first: kept until it is asked for.
      Tensor held{allocateBuffer(header[1]), DType::U8, {header[1]}};
      if (!held.data && header[1] > 0)
        return Status::error("recv: out of memory keeping a message of " +
                             std::to_string(header[1]) + " bytes from rank " +
                             std::to_string(peer) + " (tag " +
                             std::to_string(header[0]) + ")");
      if (Status s = inner_.recv(held, peer, kUntagged); !s.ok()) {
        freeBuffer(held.data);
        return s;
      }
      early_[{peer, static_cast<int>(header[0])}].push_back(held);
    }
  }

  /// Without headers a posted receive takes the link's next message, as
  /// recv does; with them, a receive must read headers first (waitRecv
  /// receives then).
  Status startRecv(Tensor &value, int peer, int tag, int &request) override {
    request = -1;
    if (headers_)
      return Status::success();
    inner_.timeoutSeconds = timeoutSeconds;
    Tensor flat = bytesOf(value);
    return inner_.startRecv(flat, peer, kUntagged, request);
  }
  Status waitRecv(int request, Tensor &value, int peer, int tag) override {
    if (request < 0)
      return recv(value, peer, tag);
    inner_.timeoutSeconds = timeoutSeconds;
    Tensor flat = bytesOf(value);
    return inner_.waitRecv(request, flat, peer, kUntagged);
  }

  Status allReduceSum(Tensor &value) override {
    return inner_.allReduceSum(value);
  }
  Status startAllReduceSum(Tensor &value, int &request) override {
    return inner_.startAllReduceSum(value, request);
  }
  Status waitAllReduce(int request) override {
    return inner_.waitAllReduce(request);
  }
  Status testAllReduce(int request, bool &done) override {
    return inner_.testAllReduce(request, done);
  }
  Status connect(const std::vector<std::pair<int, int>> &links) override {
    return inner_.connect(links);
  }
  void abort(const std::string &reason) override { inner_.abort(reason); }
  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override {
    return inner_.split(color, key, error);
  }

private:
  /// `value`'s memory as bytes: what the message is, whatever the tensor.
  static Tensor bytesOf(const Tensor &value) {
    return Tensor{value.data, DType::U8, {value.bytes()}};
  }

  Status headerBuffer() {
    if (header_.data)
      return Status::success();
    header_ = Tensor{allocateBuffer(2 * sizeof(int64_t)), DType::I64, {2}};
    return header_.data ? Status::success()
                        : Status::error("out of memory for a message header");
  }

  Status sizeMatches(int64_t bytes, const Tensor &value, int peer, int tag) {
    if (bytes == value.bytes())
      return Status::success();
    return Status::error("recv: rank " + std::to_string(rank()) + " expected " +
                         std::to_string(value.bytes()) + " bytes from rank " +
                         std::to_string(peer) + " (tag " + std::to_string(tag) +
                         "), got " + std::to_string(bytes));
  }

  Communicator &inner_;
  bool headers_;
  Tensor header_{nullptr, DType::I64, {2}};
  /// (peer, tag) -> messages that arrived before their receive, in order.
  std::map<std::pair<int, int>, std::deque<Tensor>> early_;
};

} // namespace

std::unique_ptr<Communicator> matchMessagesByOrder(Communicator &inner,
                                                   bool headers) {
  return std::make_unique<OrderedCommunicator>(inner, headers);
}

} // namespace pp::rt
