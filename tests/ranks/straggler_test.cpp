// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Stragglers named while training runs (Note [straggler detection] in
// src/diag/straggler.h), across real ranks, with the default options.
//
//   straggler_test slow RANK SLEEP_MS MAX_STEPS
//       every step is a small allreduce; RANK sleeps SLEEP_MS before each
//       (a slow host). Rank 0 must see RANK named by step 50, every rank
//       by MAX_STEPS, and no other rank named.
//   straggler_test balanced STEPS COMPUTE_MS
//       every rank "computes" COMPUTE_MS then allreduces; no rank may be
//       named in STEPS steps.
// Each step's allreduce also carries how many ranks have seen the verdict,
// so that all ranks stop at the same step.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/gradwire.h"

using namespace gradwire;

namespace {

struct Seen {
  std::mutex mu;
  std::vector<StragglerReport> events;
  std::atomic<bool> slow_named{false};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::string(argv[1]) == "slow" && argc < 5)) {
    std::fprintf(stderr,
                 "usage: straggler_test slow RANK SLEEP_MS MAX_STEPS | balanced STEPS COMPUTE_MS\n");
    return 2;
  }
  const std::string mode = argv[1];
  const bool slow = mode == "slow";
  const int slow_rank = slow ? std::atoi(argv[2]) : -1;
  const auto pause = std::chrono::milliseconds(std::atoi(argv[3]));
  const int steps = slow ? std::atoi(argv[4]) : std::atoi(argv[2]);
  auto comm = Communicator::create();
  const int rank = comm->rank(), size = comm->size();
  Seen seen;
  comm->on_straggler([&](const StragglerReport& r) {
    std::lock_guard<std::mutex> lk(seen.mu);
    seen.events.push_back(r);
    if (r.named && r.rank == slow_rank) seen.slow_named = true;
  });
  std::vector<float> buf(8);
  int named_at = -1;  // the step at which this rank first saw the verdict
  int step = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (; step < steps; ++step) {
    if (slow ? rank == slow_rank : true) std::this_thread::sleep_for(pause);
    if (named_at < 0 && seen.slow_named) named_at = step;
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(rank + i);
    buf[0] = named_at >= 0 ? 1.0f : 0.0f;
    comm->allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum).wait();
    if (buf[1] != float(size) * float(size + 1) / 2) {
      std::fprintf(stderr, "[rank %d] straggler_test: FAIL: wrong sum %g at step %d\n", rank,
                   double(buf[1]), step);
      return 1;
    }
    if (slow && buf[0] == float(size)) break;  // every rank has seen it
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool ok = true;
  const auto now_named = comm->stragglers();
  {
    std::lock_guard<std::mutex> lk(seen.mu);
    for (const StragglerReport& r : seen.events) {
      std::fprintf(stderr, "[rank %d] straggler event: %s\n", rank, r.message.c_str());
      if (r.rank != slow_rank) ok = false;  // a false alarm
    }
  }
  if (slow) {
    const bool listed = now_named.size() == 1 && now_named[0].rank == slow_rank &&
                        now_named[0].share > 0.25 && now_named[0].collectives > 0;
    // Rank 0 judges; its verdict must come within 50 steps.
    ok = ok && named_at >= 0 && listed && (rank != 0 || named_at <= 50);
    std::fprintf(stderr, "[rank %d] straggler slow: %s: rank %d named here at step %d (%.2f s)\n",
                 rank, ok ? "ok" : "FAIL", slow_rank, named_at, s);
  } else {
    ok = ok && now_named.empty();
    std::fprintf(stderr, "[rank %d] straggler balanced: %s: %d steps in %.2f s, no rank named\n",
                 rank, ok ? "ok" : "FAIL", step, s);
  }
  return ok ? 0 : 1;
}
