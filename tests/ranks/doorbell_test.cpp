// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [the doorbell] (src/collectives/doorbell.h), tested at 2-4 ranks on
// one host (gwlaunch, provider shm). Links gradwire_internal for the
// doorbell's counters.
//
//   doorbell_test wake LATE_MS
//     The last rank enters a small allreduce LATE_MS late; the others wait
//     for it in the shared-memory handshake, long enough to be asleep on its
//     doorbell. Asserted, without wall-clock luck:
//       - every waiter slept (else the round says nothing, and runs again
//         with twice the lateness, at most 4 rounds);
//       - the late rank then issued a FUTEX_WAKE (deterministic: a sleeping
//         waiter stays counted in the doorbell's `sleepers` until its wait
//         ends, and the fences of Note [the doorbell] make the publisher see
//         it);
//       - every waiter's wait ended through the doorbell (its last FUTEX_WAIT
//         returned 0 or found the word changed), in at least one round: a
//         waiter whose 1 ms timeout fell just before the ring sees the flag
//         on its own, so one round may miss it; 4 rounds all missing it
//         needs the ring to land in a few-microsecond window four times;
//       - the wake-up latency (the waiter's FUTEX_WAIT returning 0 after the
//         late rank's first FUTEX_WAKE, both CLOCK_MONOTONIC) is below 50 ms: a generous bound
//         (a loaded 2-core VM's run queue can hold a woken thread for a
//         scheduler slice or a few; the nap it replaces was up to 1 ms late
//         on top of the same delays). GW_TEST_STRICT_WAKE_US=100 asserts the
//         issue's 100 us instead, for a quiet machine.
//     The measured latencies are printed.
//     With GRADWIRE_SPIN_US=0 (Note [the spin budget] in
//     src/collectives/context.cpp) also: every waiter that slept announced
//     itself after at most 64 empty polls (1 expected: no spin, no yields;
//     auto makes hundreds to tens of thousands first), a count, not a time.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collectives/doorbell.h"
#include "gradwire/gradwire.h"

using namespace gradwire;
using collectives::doorbell_stats;
using collectives::DoorbellStats;
using collectives::Woken;

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What each rank reports of one round.
enum Field { kSlept, kEnd, kRungNs, kBackNs, kWakes, kWakeNs, kPolls, kFields };

int wake(Communicator& comm, int late_ms) {
  const int n = comm.size(), r = comm.rank(), late = n - 1;
  const double strict_us =
      std::getenv("GW_TEST_STRICT_WAKE_US") ? std::atof(std::getenv("GW_TEST_STRICT_WAKE_US")) : 0;
  const double bound_us = strict_us > 0 ? strict_us : 50000.0;
  const char* spin_us = std::getenv("GRADWIRE_SPIN_US");
  const bool no_spin = spin_us && std::string(spin_us) == "0";
  std::vector<bool> by_bell(size_t(n), false);
  bool conclusive = false;
  for (int round = 0; round < 4; ++round, late_ms *= 2) {
    comm.barrier().wait();
    collectives::mark_doorbell_stats();
    const DoorbellStats before = doorbell_stats();
    float x = 1.0f;
    if (r == late) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    comm.allreduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum).wait();
    const int64_t back = now_ns();
    const DoorbellStats after = doorbell_stats();
    if (x != float(n)) {
      std::fprintf(stderr, "[rank %d] doorbell wake: FAIL: allreduce gave %g, not %d\n", r, x, n);
      return 1;
    }
    std::vector<int64_t> all(size_t(n) * kFields, 0);
    int64_t* mine = all.data() + size_t(r) * kFields;
    mine[kSlept] = int64_t(after.sleeps - before.sleeps);
    mine[kEnd] = after.last_wait_end;
    mine[kRungNs] = after.last_rung_ns;
    mine[kBackNs] = back;
    mine[kWakes] = int64_t(after.wakes - before.wakes);
    mine[kWakeNs] = after.first_wake_ns;
    mine[kPolls] = after.last_polls_before_sleep;
    comm.allreduce(all.data(), all.data(), all.size(), DataType::Int64, ReduceOp::Sum).wait();
    // Every rank judges the same gathered figures alike (so all run the
    // same rounds); rank 0 prints.
    const bool say = r == 0;

    const int64_t* L = all.data() + size_t(late) * kFields;
    bool all_slept = true;
    for (int p = 0; p < late; ++p) all_slept &= all[size_t(p) * kFields + kSlept] > 0;
    if (!all_slept) {
      if (say) {
        std::fprintf(stderr, "[rank 0] round %d (%d ms late): a waiter did not sleep yet; again "
                     "(sleeps:", round, late_ms);
        for (int p = 0; p < late; ++p) {
          std::fprintf(stderr, " rank %d %lld", p, (long long)all[size_t(p) * kFields + kSlept]);
        }
        std::fprintf(stderr, ")\n");
      }
      continue;
    }
    conclusive = true;
    if (L[kWakes] < 1) {
      if (say) {
        std::fprintf(stderr, "[rank 0] doorbell wake: FAIL: round %d: waiters slept but rank %d "
                     "issued no FUTEX_WAKE (", round, late);
        for (int p = 0; p < late; ++p) {
          const int64_t* P = all.data() + size_t(p) * kFields;
          std::fprintf(stderr, "rank %d: %lld sleeps, last ended %lld, %lld wakes; ", p,
                       (long long)P[kSlept], (long long)P[kEnd], (long long)P[kWakes]);
        }
        std::fprintf(stderr, ")\n");
      }
      return 1;
    }
    for (int p = 0; p < late; ++p) {
      const int64_t* P = all.data() + size_t(p) * kFields;
      const bool bell = P[kEnd] == int(Woken::Rung) || P[kEnd] == int(Woken::Changed);
      const double wake_us = P[kEnd] == int(Woken::Rung) ? (P[kRungNs] - L[kWakeNs]) / 1e3 : -1;
      const double back_us = (P[kBackNs] - L[kWakeNs]) / 1e3;
      if (say) std::fprintf(stderr, "[rank 0] round %d: rank %d slept %lld times (after %lld polls), "
                   "woken by %s; futex wake-up %.1f us, back from the allreduce %.1f us after the "
                   "FUTEX_WAKE\n", round, p, (long long)P[kSlept], (long long)P[kPolls],
                   bell ? "the doorbell" : "its timeout", wake_us, back_us);
      if (no_spin && P[kPolls] > 64) {
        if (say) std::fprintf(stderr, "[rank 0] doorbell wake: FAIL: GRADWIRE_SPIN_US=0 but rank %d "
                     "polled %lld times before it slept\n", p, (long long)P[kPolls]);
        return 1;
      }
      if (bell && wake_us > bound_us) {
        if (say) std::fprintf(stderr, "[rank 0] doorbell wake: FAIL: rank %d woke %.1f us after the ring "
                     "(bound %.0f us)\n", p, wake_us, bound_us);
        return 1;
      }
      if (bell) by_bell[size_t(p)] = true;
    }
    bool done = true;
    for (int p = 0; p < late; ++p) done &= by_bell[size_t(p)];
    if (done) break;
  }
  bool ok = conclusive;
  for (int p = 0; p < late; ++p) ok &= bool(by_bell[size_t(p)]);
  if (r == 0) std::fprintf(stderr, "[rank 0] doorbell wake at %d ranks: %s\n", n, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || std::string(argv[1]) != "wake") {
    std::fprintf(stderr, "usage: doorbell_test wake LATE_MS\n");
    return 2;
  }
  auto comm = Communicator::create();
  return wake(*comm, std::atoi(argv[2]));
}
