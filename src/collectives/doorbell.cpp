// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "collectives/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace gradwire::collectives {

namespace {

struct Counters {
  std::atomic<uint64_t> sleeps{0}, rung{0}, changed{0}, timed_out{0}, wakes{0}, woke{0};
  std::atomic<int64_t> last_wake_ns{0}, first_wake_ns{0}, last_rung_ns{0};
  std::atomic<int> last_wait_end{-1};
  std::atomic<uint32_t> last_polls_before_sleep{0};
};
Counters g_counters;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Note [the doorbell]: shared futexes (no FUTEX_PRIVATE_FLAG): the word
// lies in a segment other processes map, and the kernel keys it by the
// mapped file and offset.
long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, timeout, nullptr, 0);
}

}  // namespace

void ring_slow(Doorbell& bell) {
  const int64_t t = now_ns();  // before the call: a latency's start
  g_counters.last_wake_ns.store(t, std::memory_order_relaxed);
  int64_t none = 0;
  g_counters.first_wake_ns.compare_exchange_strong(none, t, std::memory_order_relaxed);
  bell.rings.fetch_add(1, std::memory_order_release);
  const long woke = futex(&bell.rings, FUTEX_WAKE, INT_MAX, nullptr);
  g_counters.wakes.fetch_add(1, std::memory_order_relaxed);
  if (woke > 0) g_counters.woke.fetch_add(uint64_t(woke), std::memory_order_relaxed);
}

Woken sleep_on(Doorbell& bell, uint32_t seen, std::chrono::nanoseconds timeout) {
  const auto ns = timeout.count();
  const timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};  // relative
  g_counters.sleeps.fetch_add(1, std::memory_order_relaxed);
  if (futex(&bell.rings, FUTEX_WAIT, seen, &ts) == 0) {
    g_counters.rung.fetch_add(1, std::memory_order_relaxed);
    g_counters.last_rung_ns.store(now_ns(), std::memory_order_relaxed);
    return Woken::Rung;
  }
  switch (errno) {
    case EAGAIN: g_counters.changed.fetch_add(1, std::memory_order_relaxed); return Woken::Changed;
    case ETIMEDOUT:
      g_counters.timed_out.fetch_add(1, std::memory_order_relaxed);
      return Woken::TimedOut;
    default: return Woken::Interrupted;  // EINTR: a signal; the caller checks and sleeps again
  }
}

void note_wait_end(Woken how) {
  g_counters.last_wait_end.store(int(how), std::memory_order_relaxed);
}

void note_sleep_start(uint32_t polls) {
  g_counters.last_polls_before_sleep.store(polls, std::memory_order_relaxed);
}

DoorbellStats doorbell_stats() {
  DoorbellStats s;
  s.sleeps = g_counters.sleeps.load(std::memory_order_relaxed);
  s.rung = g_counters.rung.load(std::memory_order_relaxed);
  s.changed = g_counters.changed.load(std::memory_order_relaxed);
  s.timed_out = g_counters.timed_out.load(std::memory_order_relaxed);
  s.wakes = g_counters.wakes.load(std::memory_order_relaxed);
  s.woke = g_counters.woke.load(std::memory_order_relaxed);
  s.last_wake_ns = g_counters.last_wake_ns.load(std::memory_order_relaxed);
  s.first_wake_ns = g_counters.first_wake_ns.load(std::memory_order_relaxed);
  s.last_rung_ns = g_counters.last_rung_ns.load(std::memory_order_relaxed);
  s.last_wait_end = g_counters.last_wait_end.load(std::memory_order_relaxed);
  s.last_polls_before_sleep = g_counters.last_polls_before_sleep.load(std::memory_order_relaxed);
  return s;
}

void mark_doorbell_stats() { g_counters.first_wake_ns.store(0, std::memory_order_relaxed); }

}  // namespace gradwire::collectives
