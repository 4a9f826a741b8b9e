// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// One communicator's straggler detection (Note [straggler detection] in
// diag/straggler.h): its waits harvested from the flight recorder, the
// store round that answers rank 0's asks (and, on rank 0, judges), and the
// delivery of named and recovered ranks. Driven by the communicator's
// watchdog thread; the callback and the current reports are set and read
// from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store.h"
#include "diag/flight_recorder.h"
#include "diag/straggler.h"
#include "gradwire/straggler.h"

namespace gradwire::straggler {

class Detector {
 public:
  struct Config {
    std::string comm;  // the communicator's name, in keys
    int rank = 0, size = 1;
    uint16_t fr_comm = 0;  // its index in the flight recorder
    double threshold = 0.25;
    std::chrono::milliseconds window{0};  // 0: off
  };
  explicit Detector(Config config);

  // Off: no window, a world of one, or no flight recorder.
  bool enabled() const;
  void set_callback(StragglerCallback callback);
  // The ranks named now, as the last board read said.
  std::vector<StragglerReport> named() const;

  // Reads this communicator's new completed collectives from the flight
  // recorder (the watchdog, at every wake-up, so that the ring rarely
  // wraps between two harvests); `last_started`: the communicator's last
  // started collective, nothing to read unless one started after the last
  // harvested one.
  void harvest(int64_t last_started);
  // The store round (the watchdog's once-a-second exchange): answers the
  // board's asks, on rank 0 judges and publishes the board, and notes
  // which ranks became named or recovered. Throws what the store throws.
  void round(bootstrap::Store& store);
  // Delivers what round() found: log lines, the timeline's events, the
  // callback. Outside the watchdog's locks and store calls.
  void deliver();

  // Rank 0's highest share of any rank (figures for the report; 0 elsewhere).
  double max_share() const;

 private:
  std::string board_key() const;
  std::string answer_key(int rank) const;
  void answer(bootstrap::Store& store, const Board& board);
  void judge(bootstrap::Store& store);
  // Notes the ranks named now against those named before; `standings`:
  // every rank's current figures where known (rank 0), for the recovered.
  void adopt(const std::vector<Named>& named, const std::vector<Named>& standings);

  const Config config_;
  fr::Recorder& recorder_;
  WaitLog log_;
  std::vector<fr::Recorder::Done> scratch_;
  std::string published_;  // this rank's answers, or rank 0's board, as last written

  // Rank 0.
  Judge judge_;
  struct Pending {
    Ask ask;
    double seconds = 0;  // rank 0's time from the previous ask to this one
  };
  std::deque<Pending> asks_;
  uint64_t next_ask_ = 1;
  uint64_t judged_ = 0;  // windows judged, for the debug log
  int64_t next_first_ = -1;  // first collective of the next ask; -1 before the first round
  std::chrono::steady_clock::time_point last_ask_{};

  mutable std::mutex mu_;  // the members below
  StragglerCallback callback_;
  std::vector<Named> named_;                    // as last adopted
  std::vector<StragglerReport> to_deliver_;     // found by round(), not delivered yet
  double max_share_ = 0;
};

}  // namespace gradwire::straggler
