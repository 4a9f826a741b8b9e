// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [straggler detection]: which rank keeps the others waiting while
// training runs (README "Reading a straggler report"), measured from the
// flight recorder's times, named by a log line, the timeline and
// Communicator::on_straggler's callback.
//  * What is compared. The ranks' clocks are not synchronised (one host's
//    ranks share one, other hosts' may be off by milliseconds or more), so
//    no time of one rank is ever compared with a time of another. Each rank
//    measures, per collective, how long it waited in it: done - started on
//    its own monotonic clock (the recorder's coarse times, Note [coarse
//    clock]; "started" is when this rank was ready to run it: its call, or
//    the end of its previous collective if it queued behind it). A
//    collective that needs every rank's data ends on every rank at about
//    the same moment (within its last messages' latency), so a rank that
//    arrived D later than another waits D less: its lateness in that
//    collective is the median of the other ranks' waits minus its own.
//    Rooted collectives (broadcast, reduce, ...) do not end together on
//    every rank; they count the same way and blur the figure a little.
//  * Windows. The ranks add up their waits per window of consecutive
//    collectives [first, end) that rank 0 chooses: one per store round, the
//    collectives rank 0 completed since the previous one. A rank's lateness
//    in a window is the median of the others' sums minus its own (the sum
//    of per-collective medians would need every wait of every rank; the
//    median of sums is the same figure when lateness is steady, and
//    smoother when it is not). Waits the recorder overwrote before they
//    were read (more than its ring between two 100 ms harvests) are
//    missing: a rank's sum is scaled up to the window's count.
//  * Exchange, through the job's store, by the watchdog thread in its
//    once-a-second round (Note [watchdog]; nothing is added to a
//    collective's path): rank 0 publishes a board
//    ("gradwire/straggler/<communicator>/board") with the windows it asks
//    about (at most kMaxAsks) and the ranks it names; every other rank
//    reads it (one get a second) and answers the windows it has completed
//    ("gradwire/straggler/<communicator>/<rank>", one set a second when the
//    answer changed); rank 0 reads the answers (size - 1 gets a second).
//    A window is judged once every rank answered it, one to two rounds
//    after its end; one not answered by every rank while kMaxAsks newer
//    ones were asked is dropped (a rank that stopped making progress is
//    the hang detector's, not this one's).
//  * The verdict (Judge, pure). Over the newest windows that cover
//    Options::diagnostics.straggler_window, a rank's share is its summed
//    lateness over their summed duration: the fraction of that time the
//    others spent waiting for it. It is named when its share reaches
//    Options::diagnostics.straggler_threshold and it was late by that much
//    in at least kMinLateWindows windows: a rank that is slow once (rank 0
//    loading a data set for 30 s, writing a checkpoint) makes one long
//    window, not a straggler. Named and recovered ranks are delivered once
//    each (log, timeline, callback) on every rank.
//  * Where. Communicators with a store (the world of a torchrun, Slurm,
//    file-store or in-process launch; each torch.distributed group), with
//    the flight recorder on. Not under mpirun (no store).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gradwire/straggler.h"

namespace gradwire::straggler {

// Windows a rank must have been late in before it is named.
inline constexpr int kMinLateWindows = 3;
// Windows rank 0 asks about at once.
inline constexpr size_t kMaxAsks = 4;

// This rank's wait in each collective of one communicator, newest
// `capacity`, added in increasing sequence number.
class WaitLog {
 public:
  explicit WaitLog(size_t capacity = 4096) : ring_(capacity) {}
  void add(uint32_t seq, uint8_t op, int64_t wait_us);
  // The highest sequence number added; -1 before any.
  int64_t last() const { return last_; }
  struct Sum {
    int64_t wait_us = 0;
    uint32_t seen = 0;  // collectives of the window found in the log
    uint32_t ops = 0;   // bit (1 << CollectiveOp) of each seen
  };
  Sum sum(uint32_t first, uint32_t end) const;

 private:
  struct Entry {
    int64_t seq = -1;
    int64_t wait_us = 0;
    uint8_t op = 0;
  };
  std::vector<Entry> ring_;
  int64_t last_ = -1;
};

// A window rank 0 asks about: collectives [first, end).
struct Ask {
  uint64_t id = 0;
  uint32_t first = 0, end = 0;
};
// A rank's answer to ask `id`.
struct Answer {
  uint64_t id = 0;
  int64_t wait_us = 0;
  uint32_t seen = 0;
};

// One judged window: every rank's lateness in it (seconds; negative:
// early), its duration on rank 0 and its collectives.
struct Window {
  uint32_t first = 0, end = 0;
  double seconds = 0;
  uint32_t ops = 0;
  std::vector<double> late_s;
};

// Every rank's lateness in a window of `count` collectives from their
// answers (index = rank). nullopt if a rank saw none of them.
std::optional<std::vector<double>> lateness(const std::vector<Answer>& answers, uint32_t count);

// A rank over the threshold, as the board carries it.
struct Named {
  int rank = -1;
  double share = 0;
  double late_s = 0;
  double window_s = 0;
  uint64_t collectives = 0;
  uint32_t first = 0, last = 0;
  uint32_t ops = 0;
  int late_windows = 0;  // windows it was late by the threshold in (not on the board)
};

class Judge {
 public:
  Judge(double threshold, std::chrono::milliseconds window)
      : threshold_(threshold), window_s_(std::chrono::duration<double>(window).count()) {}
  // Adds the newest window; forgets those no longer needed to cover the
  // span.
  void add(Window w);
  // Every rank's figures over the span (index = rank; empty without
  // windows).
  std::vector<Named> standings() const;
  // The ranks named now (share and late windows over the threshold),
  // highest share first.
  std::vector<Named> verdict() const;
  double threshold() const { return threshold_; }

 private:
  double threshold_, window_s_;
  std::vector<Window> windows_;  // oldest first
};

// The board: rank 0's asks and the ranks it names.
struct Board {
  std::vector<Ask> asks;
  std::vector<Named> named;
};
std::string encode(const Board& b);
std::optional<Board> parse_board(std::string_view text);
std::string encode(const std::vector<Answer>& answers);
std::optional<std::vector<Answer>> parse_answers(std::string_view text);

// "allreduce, broadcast" from a mask of CollectiveOps.
std::string op_names(uint32_t ops);
// The public report of a named (or recovered) rank, with its sentence.
StragglerReport report(const Named& n, bool named, double threshold);
// The report as a JSON object (the timeline's event arguments, dumps).
std::string to_json(const StragglerReport& r);

}  // namespace gradwire::straggler
