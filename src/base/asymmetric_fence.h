// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [asymmetric fences]: a Dekker handshake (each side stores its flag,
// then reads the other's) needs a full fence between the store and the load
// on both sides. On x86 a full fence (mfence, or any locked instruction)
// waits until every earlier store has left the store buffer, and a store to
// a line another core polls cannot leave it before that core's copy is
// invalidated: 50-140 ns within a core complex of this VM's host, 340-840 ns
// across two (Note [a locked instruction waits for the store] in
// benchmarks/lock_probe.cpp). A small collective on its caller's thread
// stores exactly such lines, so each fence on its path cost that wait.
//
// When one side of a handshake is hot (a caller claiming its own engine)
// and the other rare (another thread, or the engine going from idle to
// busy), the hot side's fence can be a compiler barrier if the rare side
// forces a full fence on every running thread of the process:
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (Linux 4.14; what folly's
// asymmetricHeavyBarrier and the JVM's biased locking use). Where the
// kernel refuses it (older kernels, a seccomp filter), or with
// GRADWIRE_ASYMMETRIC_FENCES=off, both fences are full fences: correct,
// and as slow as before.
#pragma once

#include <atomic>

namespace gradwire {

namespace detail {
// Registers membarrier(PRIVATE_EXPEDITED) for this process; false where the
// kernel refuses it (or GRADWIRE_ASYMMETRIC_FENCES=off).
bool register_membarrier();
// Decided once, on first use, before the first fence of either kind (so
// light_fence() is never a compiler barrier while heavy_fence() is not a
// membarrier).
inline bool asymmetric_fences() {
  static const bool registered = register_membarrier();
  return registered;
}
}  // namespace detail

// The hot side's fence: a compiler barrier when heavy_fence() is a
// membarrier, a full fence otherwise.
inline void light_fence() {
  if (detail::asymmetric_fences()) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// The rare side's fence: every thread of the process that is running
// passes a full fence before this returns (threads not running passed one
// when they were switched out). A system call of ~0.3 us plus an
// inter-processor interrupt per CPU that runs one of our threads.
void heavy_fence();

// Note [asymmetric fences between processes]: the same pair for a Dekker
// handshake whose two sides run in different processes (the doorbell of
// Note [the doorbell] in collectives/doorbell.h): the hot side's fence is a
// compiler barrier once this process is registered for
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) (Linux 4.16), and the rare
// side's is that membarrier, a full fence on every running thread of every
// registered process. A process registers on its first light fence or when
// it calls shared_fences_ready() (the shm layer does, when it maps its
// peers, so before any handshake). A process whose registration failed
// keeps full fences on its hot side. A side that is not covered (a peer
// not registered yet) loses at most a wake-up, which the doorbell's
// timeout bounds; nothing waits for it forever.
bool shared_fences_ready();
inline void light_fence_shared() {
  if (shared_fences_ready()) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}
void heavy_fence_shared();

}  // namespace gradwire
