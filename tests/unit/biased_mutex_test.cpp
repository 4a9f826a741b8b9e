// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// base/biased_mutex.h and base/asymmetric_fence.h: the owner's plain-store
// fast path, its revocation by another thread, and mutual exclusion across
// the change; and the asymmetric fences in a bare Dekker handshake, where a
// compiler barrier without the membarrier lets both sides in within
// milliseconds on x86 (store-load reordering).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "base/asymmetric_fence.h"
#include "base/biased_mutex.h"

namespace gradwire {
namespace {

TEST(BiasedMutex, TheOwnerKeepsItsBiasUntilAnotherThreadLocks) {
  BiasedMutex mu;
  for (int i = 0; i < 1000; ++i) {
    std::lock_guard<BiasedMutex> lk(mu);
  }
  EXPECT_FALSE(mu.revoked());
  std::thread([&] { std::lock_guard<BiasedMutex> lk(mu); }).join();
  EXPECT_TRUE(mu.revoked());
  for (int i = 0; i < 1000; ++i) {
    std::lock_guard<BiasedMutex> lk(mu);  // the owner, through the shared lock now
  }
}

// The owner locks in a loop while other threads start locking part-way:
// a lost update of the unprotected counter shows a broken exclusion, in
// particular while the bias is being revoked.
TEST(BiasedMutex, ExcludesAcrossTheRevocation) {
  for (int round = 0; round < 20; ++round) {
    BiasedMutex mu;
    uint64_t counter = 0;
    constexpr int kOthers = 3, kRounds = 20000;
    std::atomic<bool> owner_started{false};
    std::thread owner([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard<BiasedMutex> lk(mu);
        owner_started.store(true, std::memory_order_relaxed);
        volatile uint64_t v = counter;
        for (int k = 0; k < 8; ++k) v = v + 0;
        counter = v + 1;
      }
    });
    while (!owner_started.load()) std::this_thread::yield();
    std::vector<std::thread> others;
    for (int t = 0; t < kOthers; ++t) {
      others.emplace_back([&] {
        for (int i = 0; i < kRounds / 4; ++i) {
          std::lock_guard<BiasedMutex> lk(mu);
          volatile uint64_t v = counter;
          for (int k = 0; k < 8; ++k) v = v + 0;
          counter = v + 1;
        }
      });
    }
    owner.join();
    for (auto& t : others) t.join();
    ASSERT_EQ(counter, uint64_t(kRounds) + uint64_t(kOthers) * (kRounds / 4)) << "round " << round;
    EXPECT_TRUE(mu.revoked());
  }
}

// Dekker with asymmetric fences (the store-buffer litmus test): the hot
// thread stores its flag, takes a light fence and reads the other's; the
// rare thread does the same with a heavy fence. Both must never read 0 in
// the same round. Each side waits a varying few cycles after the round
// starts so that their stores and loads overlap in many rounds: with two
// compiler barriers instead (checked by hand) both get in within a few
// thousand rounds here.
TEST(AsymmetricFence, DekkerNeverLetsBothIn) {
  struct alignas(64) Flag {
    std::atomic<uint32_t> v{0};
  };
  Flag hot_flag, rare_flag, start, hot_done;
  std::atomic<bool> hot_in{false};
  int both_in = 0;
  constexpr uint32_t kRounds = 200000;
  const auto spin = [](uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
  };
  // The waits between rounds yield after a short spin: the race under test
  // is the flag store, fence and load, which follow the wait; when ctest
  // runs another test beside this one, a pure spin waits out a whole time
  // slice per round (120 s for the test on a loaded 2-core VM).
  const auto wait_for = [](const Flag& f, uint32_t r) {
    for (uint32_t i = 0; f.v.load(std::memory_order_acquire) != r; ++i) {
      if (i >= 2000) std::this_thread::yield();
    }
  };
  std::thread hot([&] {
    for (uint32_t r = 1; r <= kRounds; ++r) {
      wait_for(start, r);
      spin((r * 7) % 23);
      hot_flag.v.store(r, std::memory_order_relaxed);
      light_fence();
      hot_in.store(rare_flag.v.load(std::memory_order_relaxed) != r, std::memory_order_relaxed);
      hot_done.v.store(r, std::memory_order_release);
    }
  });
  for (uint32_t r = 1; r <= kRounds; ++r) {
    start.v.store(r, std::memory_order_release);
    spin((r * 13) % 29);
    rare_flag.v.store(r, std::memory_order_relaxed);
    heavy_fence();
    const bool rare_in = hot_flag.v.load(std::memory_order_relaxed) != r;
    wait_for(hot_done, r);
    if (rare_in && hot_in.load(std::memory_order_relaxed)) ++both_in;
  }
  hot.join();
  EXPECT_EQ(both_in, 0);
}

}  // namespace
}  // namespace gradwire
