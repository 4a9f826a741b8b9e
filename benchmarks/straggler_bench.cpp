// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What straggler detection (Note [straggler detection] in
// src/diag/straggler.h) costs the watchdog thread: a harvest of the flight
// recorder's new records (every 100 ms when collectives ran), and rank 0's
// judging of a window. A collective's own path is unchanged by it (it reads
// the times the recorder keeps anyway), so this is all it costs.
//   gradwire-straggler-bench [NEW_RECORDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/collective_call.h"
#include "diag/flight_recorder.h"
#include "diag/straggler.h"

using namespace gradwire;

int main(int argc, char** argv) {
  const int fresh = argc > 1 ? std::atoi(argv[1]) : 100;
  auto& rec = fr::Recorder::instance();
  rec.configure(2048, "/tmp", 0, 4);
  const uint16_t comm = rec.register_comm("world", 0, 4);
  float buf[2];
  const auto call = CollectiveCall::allreduce(buf, buf, 2, DataType::Float32, ReduceOp::Sum);
  straggler::WaitLog log;
  std::vector<fr::Recorder::Done> scratch;
  uint32_t seq = 0;
  const int reps = 2000;
  double harvest_ns = 0;
  for (int r = 0; r < reps; ++r) {
    for (int i = 0; i < fresh; ++i) {
      const uint64_t id = rec.queued(comm, seq++, call);
      rec.started(id);
      rec.done(id, true);
    }
    const auto t0 = std::chrono::steady_clock::now();
    scratch.clear();
    rec.completed(comm, log.last(), scratch);
    std::sort(scratch.begin(), scratch.end(),
              [](const auto& a, const auto& b) { return a.seq < b.seq; });
    for (const auto& d : scratch) log.add(d.seq, d.op, d.done_us - d.started_us);
    harvest_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  // Rank 0's judging of one window of 4 ranks' answers, and a board's round trip.
  straggler::Judge judge(0.25, std::chrono::seconds(10));
  const auto t1 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    const auto s = log.sum(seq - uint32_t(fresh), seq);
    std::vector<straggler::Answer> answers(4, straggler::Answer{1, s.wait_us, s.seen});
    straggler::Window w;
    w.first = seq - uint32_t(fresh);
    w.end = seq;
    w.seconds = 1;
    w.late_s = *straggler::lateness(answers, uint32_t(fresh));
    judge.add(std::move(w));
    straggler::Board b;
    b.asks.push_back({uint64_t(r), w.first, w.end});
    b.named = judge.verdict();
    if (!straggler::parse_board(straggler::encode(b))) return 1;
  }
  const double judge_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t1).count();
  std::printf("harvest of %d new records (ring of 2048): %.1f us; judging a window of 4 ranks "
              "and a board round trip: %.1f us\n",
              fresh, harvest_ns / reps / 1e3, judge_ns / reps / 1e3);
  return 0;
}
