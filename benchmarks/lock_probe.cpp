// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What a locked instruction costs a sender whose stores go to lines a peer
// polls (issue 18's 8-byte broadcast between core complexes).
//
// Note [a locked instruction waits for the store]: on x86 a locked
// read-modify-write (lock xadd, lock cmpxchg, xchg) drains the store buffer
// first. A store to a line that another core is polling cannot leave the
// store buffer until that core's copy is invalidated: a round trip to the
// other core (50-140 ns on one core complex of this VM's host, 340-840 ns
// between two). Without a locked instruction the sender goes on and the
// stores drain in the background, pipelined; with one per call, every call
// waits for its own publication. gradwire's call path runs several (gdb
// lists them: benchmarks/locked-instructions),
// Open MPI's single-threaded path none.
//
// The model: two processes, pinned to CPUs 0 and 1. The sender publishes
// sequence numbers into a ring of 16 cache lines (the small-collective
// slots); the receiver spins on the next line and publishes how far it has
// read (the sender waits when 16 ahead). Per call the sender does `locks`
// locked increments of a private counter and ~20 loop iterations of
// bookkeeping. Rounds of 0, 1 and 6 locks alternate; the table has each
// one's median ns per call, and the cache-line round trip (which state the
// VM is in, Note [which state the VM is in] in benchmarks/perf_mpi.cpp).
//
//   gradwire-lock-probe [rounds=5] [calls per round=1000000]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
};
struct Shared {
  Line ring[16];
  Line consumed;
  Line ping, pong;
  Line go;  // round number the receiver should serve (0: exit)
};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: one CPU still runs
}

using Clock = std::chrono::steady_clock;
double ns_since(Clock::time_point t0, long n) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(n);
}

constexpr long kPings = 20000;

void receiver(Shared* sh, long calls) {
  pin(1);
  for (uint64_t round = 1;; ++round) {
    while (sh->go.v.load(std::memory_order_acquire) != round) {
      if (sh->go.v.load(std::memory_order_acquire) == ~uint64_t(0)) _exit(0);
    }
    for (long i = 1; i <= kPings; ++i) {
      while (sh->ping.v.load(std::memory_order_acquire) != uint64_t(i)) {
      }
      sh->pong.v.store(uint64_t(i), std::memory_order_release);
    }
    for (long i = 1; i <= calls; ++i) {
      const auto& line = sh->ring[i & 15].v;
      while (line.load(std::memory_order_acquire) != uint64_t(round * calls + i)) {
      }
      sh->consumed.v.store(uint64_t(i), std::memory_order_release);
    }
  }
}

// One round: the round trip, then `calls` publications with `locks` locked
// increments each. Returns {round trip ns, ns per call}.
std::pair<double, double> sender_round(Shared* sh, uint64_t round, long calls, int locks) {
  sh->ping.v.store(0);
  sh->pong.v.store(0);
  sh->consumed.v.store(0);
  sh->go.v.store(round, std::memory_order_release);
  auto t0 = Clock::now();
  for (long i = 1; i <= kPings; ++i) {
    sh->ping.v.store(uint64_t(i), std::memory_order_release);
    while (sh->pong.v.load(std::memory_order_acquire) != uint64_t(i)) {
    }
  }
  const double trip = ns_since(t0, kPings);
  std::atomic<uint64_t> counter{0};
  t0 = Clock::now();
  for (long i = 1; i <= calls; ++i) {
    while (i - long(sh->consumed.v.load(std::memory_order_acquire)) > 15) {
    }
    sh->ring[i & 15].v.store(round * uint64_t(calls) + uint64_t(i), std::memory_order_release);
    for (int k = 0; k < locks; ++k) counter.fetch_add(1, std::memory_order_acq_rel);
    for (int w = 0; w < 20; ++w) asm volatile("");  // bookkeeping the compiler keeps
  }
  const double per_call = ns_since(t0, calls);
  while (sh->consumed.v.load(std::memory_order_acquire) != uint64_t(calls)) {
  }
  return {trip, per_call};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const long calls = argc > 2 ? std::max(1L, std::atol(argv[2])) : 1000000;
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* sh = new (mem) Shared;
  const pid_t child = fork();
  if (child == 0) receiver(sh, calls);
  pin(0);
  const int variants[] = {0, 1, 6};
  std::vector<double> trips, per[3];
  uint64_t round = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int v = 0; v < 3; ++v) {
      const auto [trip, ns] = sender_round(sh, ++round, calls, variants[v]);
      trips.push_back(trip);
      per[v].push_back(ns);
    }
  }
  sh->go.v.store(~uint64_t(0), std::memory_order_release);
  waitpid(child, nullptr, 0);
  std::printf("| locked RMWs per call | ns per call (median of %d rounds) |\n|---:|---:|\n", rounds);
  for (int v = 0; v < 3; ++v) std::printf("| %d | %.1f |\n", variants[v], median(per[v]));
  std::printf("\n# cache-line round trip between CPUs 0 and 1: median %.0f ns (min %.0f, max %.0f)\n",
              median(trips), *std::min_element(trips.begin(), trips.end()),
              *std::max_element(trips.begin(), trips.end()));
  return 0;
}
