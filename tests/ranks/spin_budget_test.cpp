// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [the spin budget] (src/collectives/context.cpp), at 2-4 ranks on one
// host (gwlaunch, provider shm), with GRADWIRE_SPIN_US set by the ctest
// entry. Links gradwire_internal for the doorbell's counters.
//
//   spin_budget_test collectives ROUNDS
//     Small and large collectives (allreduce from 4 bytes to 4 MiB,
//     broadcast, allgather, reduce_scatter, alltoall) and point-to-point
//     messages around a ring, ROUNDS times; in each round one rank
//     (rotating) enters 2 ms late, so that waits run past any spin and the
//     budget's hand-off and sleeps are taken. Every result is checked
//     exactly (small integers in float32).
//   spin_budget_test spin LATE_MS
//     Needs GRADWIRE_SPIN_US >= 20 x LATE_MS: the last rank enters a small
//     allreduce LATE_MS late and no other rank slept on a doorbell (they
//     spun throughout, as the budget says; auto sleeps after ~2 ms of
//     yields). The margin (20x) is what a loaded machine may add to the
//     late rank's sleep before it publishes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collectives/doorbell.h"
#include "gradwire/gradwire.h"

using namespace gradwire;

namespace {

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "[rank %d] spin budget: FAIL: %s\n", rank, what.c_str());
  return 1;
}

// Element i of rank r's input: small integers, so float32 sums are exact.
float value(int r, size_t i) { return float((r + 1) * int(i % 7 + 1)); }

int run_collectives(Communicator& comm, int rounds) {
  const int n = comm.size(), r = comm.rank();
  const size_t sizes[] = {1, 7, 1000, 16384, 70000, size_t(1) << 20};
  for (int round = 0; round < rounds; ++round) {
    const int late = round % n;
    for (size_t count : sizes) {
      if (r == late) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<float> x(count);
      for (size_t i = 0; i < count; ++i) x[i] = value(r, i);
      comm.allreduce(x.data(), x.data(), count, DataType::Float32, ReduceOp::Sum).wait();
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int p = 0; p < n; ++p) want += value(p, i);
        if (x[i] != want) {
          return fail(r, "allreduce of " + std::to_string(count) + " floats: element " +
                             std::to_string(i) + " is " + std::to_string(x[i]) + ", not " +
                             std::to_string(want));
        }
      }
      // Broadcast from the late rank.
      std::vector<float> b(count, -1.0f);
      if (r == late) for (size_t i = 0; i < count; ++i) b[i] = value(late, i);
      comm.broadcast(b.data(), b.data(), count, DataType::Float32, late).wait();
      for (size_t i = 0; i < count; ++i) {
        if (b[i] != value(late, i)) return fail(r, "broadcast of " + std::to_string(count));
      }
      // Allgather and reduce_scatter of n equal shards of `count`.
      const size_t shard = count;
      std::vector<float> all(shard * size_t(n), -1.0f), mine(shard);
      for (size_t i = 0; i < shard; ++i) mine[i] = value(r, i);
      comm.allgather(mine.data(), all.data(), shard * size_t(n), DataType::Float32).wait();
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < shard; ++i) {
          if (all[size_t(p) * shard + i] != value(p, i)) {
            return fail(r, "allgather of " + std::to_string(shard) + " per rank");
          }
        }
      }
      std::vector<float> rs_in(shard * size_t(n)), rs_out(shard, -1.0f);
      for (size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = value(r, i);
      comm.reduce_scatter(rs_in.data(), rs_out.data(), rs_in.size(), DataType::Float32,
                          ReduceOp::Sum).wait();
      for (size_t i = 0; i < shard; ++i) {
        float want = 0;
        for (int p = 0; p < n; ++p) want += value(p, size_t(r) * shard + i);
        if (rs_out[i] != want) return fail(r, "reduce_scatter of " + std::to_string(shard));
      }
      if (count <= 70000) {
        std::vector<float> a2a_in(shard * size_t(n)), a2a_out(shard * size_t(n), -1.0f);
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < shard; ++i) a2a_in[size_t(p) * shard + i] = value(r, i + size_t(p));
        }
        comm.alltoall(a2a_in.data(), a2a_out.data(), shard, DataType::Float32).wait();
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < shard; ++i) {
            if (a2a_out[size_t(p) * shard + i] != value(p, i + size_t(r))) {
              return fail(r, "alltoall of " + std::to_string(shard) + " per rank");
            }
          }
        }
      }
      // Point-to-point around the ring (Note [waiters drive progress]).
      std::vector<float> out(count), in(count, -1.0f);
      for (size_t i = 0; i < count; ++i) out[i] = value(r, i);
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      Work s = comm.send(out.data(), count, DataType::Float32, next, 5);
      comm.recv(in.data(), count, DataType::Float32, prev, 5).wait();
      s.wait();
      for (size_t i = 0; i < count; ++i) {
        if (in[i] != value(prev, i)) return fail(r, "recv of " + std::to_string(count));
      }
    }
  }
  comm.barrier().wait();
  if (r == 0) {
    std::fprintf(stderr, "[rank 0] spin budget %s: %d rounds of collectives at %d ranks: ok\n",
                 std::getenv("GRADWIRE_SPIN_US") ? std::getenv("GRADWIRE_SPIN_US") : "auto",
                 rounds, n);
  }
  return 0;
}

int spin(Communicator& comm, int late_ms) {
  const int n = comm.size(), r = comm.rank(), late = n - 1;
  const auto& budget = comm.options().collectives.spin_budget;
  if (!budget || *budget < std::chrono::milliseconds(20 * late_ms)) {
    return fail(r, "spin LATE_MS needs GRADWIRE_SPIN_US >= 20 x LATE_MS x 1000");
  }
  comm.barrier().wait();
  const uint64_t before = collectives::doorbell_stats().sleeps;
  float x = 1.0f;
  if (r == late) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
  comm.allreduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum).wait();
  const uint64_t slept = collectives::doorbell_stats().sleeps - before;
  if (x != float(n)) return fail(r, "allreduce gave " + std::to_string(x));
  std::vector<double> all(size_t(n), 0.0);
  all[size_t(r)] = double(slept);
  comm.allreduce(all.data(), all.data(), all.size(), DataType::Float64, ReduceOp::Sum).wait();
  bool ok = true;
  for (int p = 0; p < n; ++p) {
    if (r == 0) {
      std::fprintf(stderr, "[rank 0] rank %d slept %g times waiting for a rank %d ms late\n", p,
                   all[size_t(p)], late_ms);
    }
    ok &= all[size_t(p)] == 0;
  }
  if (r == 0) {
    std::fprintf(stderr, "[rank 0] spin budget %lld us at %d ranks: %s\n",
                 (long long)budget->count(), n, ok ? "ok (nobody slept)" : "FAIL: a rank slept");
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 3 ? argv[1] : "";
  if (mode != "collectives" && mode != "spin") {
    std::fprintf(stderr, "usage: spin_budget_test collectives ROUNDS | spin LATE_MS\n");
    return 2;
  }
  auto comm = Communicator::create();
  return mode == "collectives" ? run_collectives(*comm, std::atoi(argv[2]))
                               : spin(*comm, std::atoi(argv[2]));
}
