// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A mutex for critical sections of a few hundred instructions that are
// almost never contended: one exchange to take it, one store to give it
// back, where std::mutex's lock and unlock (two calls into libpthread) were
// ~60 instructions of an 8-byte broadcast's ~1100 (issue 18, the
// communicator's submission lock). A waiter spins briefly and then yields
// its core, so a holder that was preempted (2 ranks and their engine
// threads on 2 cores) gets it back: never a pure busy wait. BasicLockable,
// so std::unique_lock and std::lock_guard work with it.
#pragma once

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gradwire {

class SpinMutex {
 public:
  void lock() {
    while (held_.exchange(true, std::memory_order_acquire)) {
      // Test before test-and-set: waiters read their cached copy instead
      // of bouncing the line with exchanges.
      for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
          _mm_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() { return !held_.exchange(true, std::memory_order_acquire); }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace gradwire
