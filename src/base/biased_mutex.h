// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [a biased lock]: the communicator's submission lock is taken by one
// thread in almost every program (the training loop's), on every
// collective. A SpinMutex takes it with an exchange, a locked instruction,
// which waits for the store buffer to drain: behind the previous call's
// descriptor store, a line a peer polls (Note [a locked instruction waits
// for the store] in benchmarks/lock_probe.cpp). So the first thread to
// lock becomes the owner and takes it with plain stores: it announces
// itself (owner_in_ = 1), light_fence(), and checks that nobody revoked
// the bias. Any other thread revokes it once, for good: revoked_ = 1,
// heavy_fence() (Note [asymmetric fences] in base/asymmetric_fence.h), then
// waits until the owner is out; from then on every thread, the owner
// included, uses the SpinMutex. The handshake is Dekker's with asymmetric
// fences: either the owner sees revoked_ and backs off, or the revoker sees
// owner_in_ and waits. A program that submits from two threads pays one
// membarrier and is where it was before. BasicLockable.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "base/asymmetric_fence.h"
#include "base/spin_mutex.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gradwire {

class BiasedMutex {
 public:
  [[gnu::always_inline]] void lock() {
    const uintptr_t me = self();
    if (owner_.load(std::memory_order_relaxed) == me && !revoked_.load(std::memory_order_relaxed)) {
      owner_in_.store(1, std::memory_order_relaxed);
      light_fence();
      if (!revoked_.load(std::memory_order_acquire)) return;
      owner_in_.store(0, std::memory_order_release);  // revoked meanwhile: back off
    }
    lock_slow(me);
  }
  [[gnu::always_inline]] void unlock() {
    // owner_in_ is 1 only while the owner holds the lock on its fast path
    // (or backs off, before it takes shared_).
    if (owner_in_.load(std::memory_order_relaxed) && owner_.load(std::memory_order_relaxed) == self()) {
      owner_in_.store(0, std::memory_order_release);
      return;
    }
    shared_.unlock();
  }
  // For tests: whether the bias was revoked.
  bool revoked() const { return revoked_.load(std::memory_order_acquire) != 0; }

 private:
  // This thread's identity: its thread pointer (%fs base on x86-64, one
  // load; what pthread_self() returns in glibc) without a call into libc.
  // The first locker becomes the owner; anyone else revokes the bias.
  [[gnu::noinline]] void lock_slow(uintptr_t me) {
    uintptr_t owner = 0;
    if (!revoked_.load(std::memory_order_relaxed) &&
        owner_.compare_exchange_strong(owner, me, std::memory_order_relaxed)) {
      lock();  // the owner now: one compare-exchange, once
      return;
    }
    shared_.lock();
    if (!revoked_.load(std::memory_order_relaxed)) {
      revoked_.store(1, std::memory_order_relaxed);
      heavy_fence();
    }
    // The owner may be inside, or backing off: wait until it is out (its
    // release store orders what it did inside before what we do).
    for (int spins = 0; owner_in_.load(std::memory_order_acquire); ++spins) {
      if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

  static uintptr_t self() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
    return uintptr_t(__builtin_thread_pointer());
#else
    return uintptr_t(pthread_self());
#endif
  }

  std::atomic<uintptr_t> owner_{0};
  std::atomic<uint32_t> owner_in_{0};
  std::atomic<uint32_t> revoked_{0};
  SpinMutex shared_;
};

}  // namespace gradwire
