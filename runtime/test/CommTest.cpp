//===- CommTest.cpp - The in-process communicator ---------------*- C++ -*-===//

#include "pp/Runtime/Comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

using namespace pp::rt;

namespace {

Tensor view(std::vector<float> &data) {
  Tensor t;
  t.data = data.data();
  t.dtype = DType::F32;
  t.shape = {static_cast<int64_t>(data.size())};
  return t;
}

/// Runs `body(rank)` on one thread per rank.
template <typename Body> void onRanks(int size, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back(body, r);
  for (auto &t : threads)
    t.join();
}

TEST(InProcessComm, RingDeliversInOrderPerTag) {
  auto group = createInProcessGroup(3);
  std::vector<std::vector<float>> received(3);
  onRanks(3, [&](int r) {
    Communicator &comm = *group[r];
    EXPECT_EQ(comm.rank(), r);
    EXPECT_EQ(comm.size(), 3);
    // Two messages with one tag: they arrive in the order sent.
    for (int k = 0; k < 2; ++k) {
      std::vector<float> out = {float(r), float(k)};
      Tensor t = view(out);
      ASSERT_TRUE(comm.send(t, (r + 1) % 3, 5).ok());
    }
    for (int k = 0; k < 2; ++k) {
      std::vector<float> in(2);
      Tensor t = view(in);
      Status s = comm.recv(t, (r + 2) % 3, 5);
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_EQ(in[0], float((r + 2) % 3));
      EXPECT_EQ(in[1], float(k));
    }
  });
}

TEST(InProcessComm, AllReduceSumsInRankOrder) {
  auto group = createInProcessGroup(4);
  onRanks(4, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      std::vector<float> v = {float(r + 1), float(round)};
      Tensor t = view(v);
      Status s = group[r]->allReduceSum(t);
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_EQ(v[0], 10.0f);
      EXPECT_EQ(v[1], 4.0f * round);
    }
  });
}

TEST(InProcessComm, ReceiveTimesOutNamingThePeer) {
  auto group = createInProcessGroup(2);
  group[1]->timeoutSeconds = 0.05;
  std::vector<float> in(1);
  Tensor t = view(in);
  Status s = group[1]->recv(t, 0, 9);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("no message from rank 0 (tag 9)"), std::string::npos)
      << s.message;
}

// An infinite timeout waits (blocked, not spinning) until the peers come:
// the waiters of the all-reduce and of a receive use no CPU meanwhile, and
// both finish once rank 1 arrives 300 ms later.
TEST(InProcessComm, InfiniteTimeoutBlocksWithoutSpinning) {
  auto group = createInProcessGroup(2);
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 200 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) {
      std::fprintf(stderr, "FAIL: a wait with an infinite timeout hangs\n");
      std::_Exit(1);
    }
  });
  std::clock_t cpuStart = std::clock();
  onRanks(2, [&](int r) {
    group[r]->timeoutSeconds = INFINITY;
    std::vector<float> v{1.0f};
    Tensor t = view(v);
    if (r == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Status s = group[r]->allReduceSum(t);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(v[0], 2.0f);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ASSERT_TRUE(group[1]->send(t, 0, 3).ok());
    } else {
      Status received = group[0]->recv(t, 1, 3);
      ASSERT_TRUE(received.ok()) << received.message;
    }
  });
  double cpuSeconds = double(std::clock() - cpuStart) / CLOCKS_PER_SEC;
  done = true;
  watchdog.join();
  EXPECT_LT(cpuSeconds, 0.2) << "the waiting rank spun";
}

TEST(InProcessComm, SizeMismatchIsAnError) {
  auto group = createInProcessGroup(2);
  std::vector<float> out(4, 1.0f), in(3);
  Tensor o = view(out), i = view(in);
  ASSERT_TRUE(group[0]->send(o, 1, 1).ok());
  Status s = group[1]->recv(i, 0, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("expected 12 bytes"), std::string::npos)
      << s.message;
}

TEST(InProcessComm, AbortWakesEveryWaiter) {
  auto group = createInProcessGroup(3);
  std::vector<std::string> errors(3);
  onRanks(3, [&](int r) {
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      group[r]->abort("loss is NaN at micro-batch 3");
      return;
    }
    std::vector<float> in(1);
    Tensor t = view(in);
    errors[r] = group[r]->recv(t, 2, 0).message;
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[r].find("aborted: rank 2: loss is NaN at micro-batch 3"),
              std::string::npos)
        << errors[r];
}

TEST(InProcessComm, SendToItselfOrOutOfRangeIsAnError) {
  auto group = createInProcessGroup(2);
  std::vector<float> out(1);
  Tensor o = view(out);
  EXPECT_FALSE(group[0]->send(o, 0, 0).ok());
  EXPECT_FALSE(group[0]->send(o, 5, 0).ok());
}

} // namespace
