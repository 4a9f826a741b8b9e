// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A rank that keeps the others waiting while training runs (README
// "Reading a straggler report"): what Communicator::on_straggler reports.
// How lateness is measured without synchronised clocks is Note [straggler
// detection] in src/diag/straggler.h.
#pragma once

#include "gradwire/export.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace gradwire {

struct GRADWIRE_API StragglerReport {
  // The late rank (a rank of the communicator the callback was given to).
  int rank = -1;
  // true: the rank is named now; false: it was named and no longer is late
  // by the threshold (it caught up, or the window moved past it).
  bool named = true;
  // Of the judged time, the fraction the other ranks spent waiting for
  // this rank (Options::diagnostics.straggler_threshold is compared to it).
  double share = 0;
  // How late, in total over the judged time, and per collective on average.
  std::chrono::milliseconds late{0};
  std::chrono::microseconds per_collective{0};
  // The judged time (up to Options::diagnostics.straggler_window) and the
  // collectives in it: sequence numbers [first_seq, last_seq] of the
  // communicator, `collectives` of them, of the kinds in `ops`
  // ("allreduce, broadcast").
  std::chrono::milliseconds window{0};
  uint64_t collectives = 0;
  uint32_t first_seq = 0, last_seq = 0;
  std::string ops;
  // The sentence gradwire logs for it.
  std::string message;
};

// Called on the communicator's watchdog thread, once when a rank becomes
// named and once when it stops being named. It must return quickly and must
// not wait for a collective of that communicator (a rank the callback
// decides to drop is dropped by the caller's own thread, e.g. by
// Communicator::abort and an elastic recovery).
using StragglerCallback = std::function<void(const StragglerReport&)>;

}  // namespace gradwire
