// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// base/spin_mutex.h: mutual exclusion under contention, with more threads
// than this machine has cores (the waiters must yield to a preempted
// holder, or this test takes minutes instead of milliseconds).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "base/spin_mutex.h"

namespace gradwire {
namespace {

TEST(SpinMutex, ExcludesAndEveryLockerGetsIn) {
  SpinMutex mu;
  // Not atomic: a lost update shows a broken exclusion; the read-modify-
  // write is spread over a loop so that overlapping holders would collide.
  uint64_t counter = 0;
  constexpr int kThreads = 6, kRounds = 20000;
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      // All start together, so they contend.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard<SpinMutex> lk(mu);
        volatile uint64_t v = counter;
        for (int k = 0; k < 8; ++k) v = v + 0;
        counter = v + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t(kThreads) * kRounds);
}

TEST(SpinMutex, TryLockFailsWhileHeld) {
  SpinMutex mu;
  ASSERT_TRUE(mu.try_lock());
  std::thread([&] { EXPECT_FALSE(mu.try_lock()); }).join();
  mu.unlock();
  EXPECT_TRUE(mu.try_lock());
  mu.unlock();
}

}  // namespace
}  // namespace gradwire
