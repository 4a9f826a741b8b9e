// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <ctime>

namespace gradwire {

using Clock = std::chrono::steady_clock;

// Note [nothing blocks forever]: the usual failure of a distributed job is
// not an error but a silence. A rank that died, hangs or never started
// leaves its peers in a receive, a store read or an MPI call with nothing
// to report, and the job hangs until someone kills it, with no hint of who
// or where. So every loop that waits for another process takes a Deadline
// and, when it passes, throws a gradwire::Error (usually Timeout) that says
// what it was waiting for: the peer, the collective and its sequence
// number, or the store key.
//  - A collective's deadline is Options::timeout (GRADWIRE_TIMEOUT_S) from
//    the moment it starts; collectives::Context, the transport's waits and
//    the NCCL poller all check it.
//  - Bootstrap exchanges and store calls get the same timeout. The socket
//    helpers (bootstrap/socket.h) poll() with what is left of it; a TCP
//    store WAIT carries it to the server, which answers NOT_FOUND when it
//    passes (Note [tcp store protocol]); an MPI collective cannot be
//    interrupted, so the MPI bootstrap polls non-blocking ones (Note [mpi
//    bootstrap deadlines]).
//  - A deadline cannot interrupt a provider call that never returns, so
//    Work::wait() checks every 100 ms whether the running collective has
//    overrun its deadline by engine_slack() and then fails with Timeout
//    itself; the watchdog does the same check (Note [watchdog], Note [a
//    stuck engine is leaked]).
//  - Another rank's reported failure ends a wait early (Note [interrupting
//    a collective]), so peers need not each run into their own deadline.
// Deadline::never() is the explicit opt-out (the TCP store then waits
// without limit); gradwire's own call paths pass finite deadlines.
//
// A point in time after which a wait fails. Every blocking loop in gradwire
// takes one (Note [nothing blocks forever]).
// Note [coarse clock]: CLOCK_MONOTONIC_COARSE is steady_clock's own clock
// as of the last timer tick (up to 4 ms behind here), read in 11 ns where
// steady_clock::now() takes 32 ns in this VM. Every collective reads the
// clock for its deadline and its start: at a 0.5 us small collective
// those two reads were a tenth of the call (issue 18). Good for times
// compared against deadlines of a second and more, never for durations.
inline Clock::time_point coarse_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  std::chrono::milliseconds remaining() const {
    auto now = Clock::now();
    if (now >= at_) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(at_ - now);
  }

 private:
  Clock::time_point at_;
};

}  // namespace gradwire
