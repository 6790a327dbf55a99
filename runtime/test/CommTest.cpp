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

// A transport without posted receives (the default startRecv) receives at
// waitRecv, so the driver's prefetch works on every backend.
TEST(InProcessComm, PostedReceiveIsReceivedAtWait) {
  auto group = createInProcessGroup(2);
  std::vector<float> out = {1, 2, 3}, in(3);
  Tensor o = view(out), i = view(in);
  int request = 7;
  ASSERT_TRUE(group[1]->startRecv(i, 0, 4, request).ok());
  EXPECT_EQ(request, -1);
  ASSERT_TRUE(group[0]->send(o, 1, 4).ok());
  Status s = group[1]->waitRecv(request, i, 0, 4);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(in, out);
  s = group[1]->waitRecv(3, i, 0, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("no receive 3 was started"), std::string::npos)
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

// Split as data parallelism uses it: 6 ranks = 2 replicas x 3 devices; the
// pipelines (color = replica) and the replica groups (color = device) each
// reduce and message on their own, and a message in one group never meets
// one with the same ranks and tag in another.
TEST(InProcessComm, SplitMakesIndependentGroups) {
  auto world = createInProcessGroup(6);
  onRanks(6, [&](int r) {
    int replica = r / 3, device = r % 3;
    std::string error;
    auto pipeline = world[r]->split(replica, device, error);
    ASSERT_TRUE(pipeline) << error;
    // Key orders the ranks: the replica groups rank by descending replica.
    auto replicas = world[r]->split(device, -replica, error);
    ASSERT_TRUE(replicas) << error;
    EXPECT_EQ(pipeline->size(), 3);
    EXPECT_EQ(pipeline->rank(), device);
    EXPECT_EQ(replicas->size(), 2);
    EXPECT_EQ(replicas->rank(), 1 - replica);

    std::vector<float> v = {float(r), 1.0f};
    Tensor t = view(v);
    Status s = replicas->allReduceSum(t);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(v[0], float(2 * device + 3)); // device + (device + 3)
    EXPECT_EQ(v[1], 2.0f);
    std::vector<float> w = {float(r)};
    Tensor u = view(w);
    s = pipeline->allReduceSum(u);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(w[0], float(9 * replica + 3)); // 3 replica + 0 + 1 + 2, x3

    // Group rank 0 -> 1 under tag 4 in the pipeline and in the world.
    std::vector<float> msg = {float(100 + r)};
    Tensor m = view(msg);
    if (device == 0)
      ASSERT_TRUE(pipeline->send(m, 1, 4).ok());
    if (r == 0)
      ASSERT_TRUE(world[0]->send(m, 1, 4).ok());
    if (device == 1) {
      std::vector<float> in(1);
      Tensor i = view(in);
      s = pipeline->recv(i, 0, 4);
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_EQ(in[0], float(100 + 3 * replica));
      if (r == 1) {
        s = world[1]->recv(i, 0, 4);
        ASSERT_TRUE(s.ok()) << s.message;
        EXPECT_EQ(in[0], 100.0f);
      }
    }
  });
}

// An abort through the world wakes a waiter in a split group.
TEST(InProcessComm, AbortWakesSplitGroups) {
  auto world = createInProcessGroup(2);
  std::string error;
  onRanks(2, [&](int r) {
    std::string splitError;
    auto group = world[r]->split(0, r, splitError);
    ASSERT_TRUE(group) << splitError;
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      world[1]->abort("stage 1 failed");
      return;
    }
    std::vector<float> in(1);
    Tensor t = view(in);
    error = group->allReduceSum(t).message;
  });
  EXPECT_NE(error.find("aborted: rank 1: stage 1 failed"), std::string::npos)
      << error;
}

TEST(InProcessComm, SendToItselfOrOutOfRangeIsAnError) {
  auto group = createInProcessGroup(2);
  std::vector<float> out(1);
  Tensor o = view(out);
  EXPECT_FALSE(group[0]->send(o, 0, 0).ok());
  EXPECT_FALSE(group[0]->send(o, 5, 0).ok());
}

} // namespace
