// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [the doorbell]: a wait for a flag another process sets (the shm
// layer's handshake, Note [the direct handshake]) spins, then yields, then
// sleeps (Note [backoff when idle]). A plain nap wakes on a timer only, so a
// peer that arrives during a nap of up to 1 ms is noticed up to 1 ms late
// (Note [naps that grow]). Instead each rank's control segment holds a
// Doorbell, and a waiter sleeps on the doorbell of the rank whose flag it
// waits for, with FUTEX_WAIT on `rings` (a shared futex: the word lies in
// memory several processes map, so no FUTEX_PRIVATE_FLAG). The sleep keeps
// the nap's timeout, so the deadline, the interrupt (a peer's failure, an
// abort) and the side progress are checked exactly as often as before.
//
// The fast path costs no system call: a waiter announces itself in
// `sleepers` when it starts sleeping (after the spin and the yields, which
// stay: they are what keeps an idle machine's latency) and leaves when its
// wait ends; the rank that publishes a flag calls ring(), which issues
// FUTEX_WAKE only while someone sleeps. No wake-up is lost (Dekker's
// pattern):
//   publisher: store the flag; fence; if sleepers > 0: ++rings, FUTEX_WAKE
//   waiter:    ++sleepers; fence; b = rings; check the flag; FUTEX_WAIT(b)
// Either the publisher sees the waiter announced, or the waiter's check
// sees the flag. A FUTEX_WAIT always uses a `b` read before the latest
// check, so a ring after that check makes rings != b and the wait returns
// at once (EAGAIN); a ring before it made the check see the flag. The
// publisher's fence is on every small collective's path, after a store to a
// line its peers poll, where a full fence waits for that line (Note
// [asymmetric fences]); so it is a compiler barrier and the waiter, about
// to sleep anyway, pays a membarrier that fences the publisher's process
// (Note [asymmetric fences between processes] in base/asymmetric_fence.h).
// Whatever fails there, the sleep's timeout bounds a lost wake-up.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "base/asymmetric_fence.h"

namespace gradwire::collectives {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> rings{0};     // the futex word: bumped by each ring that wakes
  std::atomic<uint32_t> sleepers{0};  // waiters in their sleeping phase
};
static_assert(sizeof(std::atomic<uint32_t>) == 4, "a futex word is 32 bits");

// After publishing a flag (the store comes first): wakes whoever sleeps on
// `bell`; a fence and one load when nobody does.
void ring_slow(Doorbell& bell);
inline void ring(Doorbell& bell) {
  light_fence_shared();
  if (bell.sleepers.load(std::memory_order_relaxed) != 0) ring_slow(bell);
}

// How a sleep on a doorbell ended.
enum class Woken { Rung, Changed, TimedOut, Interrupted };
// FUTEX_WAIT on bell.rings while it still holds `seen`, at most `timeout`.
Woken sleep_on(Doorbell& bell, uint32_t seen, std::chrono::nanoseconds timeout);
// A wait that slept has ended; `how` its last sleep ended (for the stats).
void note_wait_end(Woken how);
// A wait announced itself to sleep after `polls` empty polls (for the stats).
void note_sleep_start(uint32_t polls);

// Counters of this process's doorbells, for tests and benchmarks (relaxed;
// times are steady_clock nanoseconds, the same clock in every process of a
// host: CLOCK_MONOTONIC).
struct DoorbellStats {
  uint64_t sleeps = 0;     // FUTEX_WAIT calls
  uint64_t rung = 0;       // ... that returned 0: woken by a FUTEX_WAKE
  uint64_t changed = 0;    // ... that returned at once: rung between the check and the call
  uint64_t timed_out = 0;  // ... that ran to their timeout
  uint64_t wakes = 0;      // FUTEX_WAKE calls (ring() that found a sleeper)
  uint64_t woke = 0;       // waiters those calls woke
  int64_t last_wake_ns = 0;    // when the last FUTEX_WAKE was issued
  int64_t first_wake_ns = 0;   // ... the first since mark_doorbell_stats() (0: none)
  int64_t last_rung_ns = 0;    // when the last FUTEX_WAIT returned 0
  // How the last wait that slept ended: Rung or Changed (the bell), or
  // TimedOut (its flag seen after a timeout); -1 before any.
  int last_wait_end = -1;
  // Empty polls (spins and yields) the last wait that slept made before it
  // announced itself: 1 with a spin budget of 0 (Note [the spin budget] in
  // collectives/context.cpp), thousands with auto's spin and yields.
  uint32_t last_polls_before_sleep = 0;
};
DoorbellStats doorbell_stats();
// Clears first_wake_ns: a publish rings once per flag it stores, and a
// wake-up's latency counts from the first ring.
void mark_doorbell_stats();

}  // namespace gradwire::collectives
