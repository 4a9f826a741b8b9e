// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [stall inspector]: Buckets launch strictly in order (Note [in-order
// launch]), so a rank that has not launched Bucket k makes every other rank
// wait in Bucket k's collective. The inspector names it. A thread per
// Reducer looks at the current step a few times per warning period; once the
// step has run for ReducerOptions::stall_warn with a Bucket not launched
// here, or launched and not complete, it
//  - logs (warn, repeated every stall_warn) which Bucket, and on this rank
//    which parameters it still waits for (the usual cause: parameters
//    unused on some ranks, or a data-dependent branch);
//  - publishes a status line through the job's store and reads the other
//    ranks' (Note [watchdog]), so the rank waiting in Bucket k's collective
//    names the ranks that have not launched it and what they wait for;
//  - after stall_shutdown, fails the job with that message (job::
//    fail_locally): collectives in flight end with Timeout, every rank hears.
// It learns the state from events (plan, step start, launch, step end), so
// the hot path pays one uncontended lock per Bucket launch and nothing per
// gradient.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/reducer.h"
#include "gradwire/work.h"

namespace gradwire {

// GRADWIRE_STALL_WARN_S / GRADWIRE_STALL_SHUTDOWN_S over `options`
// (InvalidArgument naming the variable if malformed).
void apply_stall_env(ReducerOptions& options);

class StallInspector {
 public:
  struct Bucket {
    std::string description;        // "bucket 1 (1000 x float32: w1, b1)"
    std::vector<size_t> gradients;  // indices
    std::vector<std::string> names;
  };
  // `marked(i)`: gradient i was marked (ready or unused) this step; called
  // from the inspector's thread.
  StallInspector(int rank, std::chrono::milliseconds warn, std::chrono::milliseconds shutdown,
                 std::function<bool(size_t)> marked);
  ~StallInspector();
  StallInspector(const StallInspector&) = delete;
  StallInspector& operator=(const StallInspector&) = delete;

  void set_plan(std::vector<Bucket> buckets);
  void step_started(uint64_t step);
  void launched(size_t bucket, Work work);
  void step_ended();

  // Pure: the stall message of a rank whose Bucket `bucket` of `step` is
  // launched but not complete, given the other ranks' status lines ("" =
  // no report). Names the ranks that have not launched it. Tested alone.
  static std::string who_is_missing(int me, uint64_t step, size_t bucket,
                                    const std::vector<std::string>& statuses);

 private:
  void loop();
  void inspect(std::unique_lock<std::mutex>& lk);

  const int rank_;
  const std::chrono::milliseconds warn_, shutdown_;
  std::function<bool(size_t)> marked_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<Bucket> buckets_;
  bool in_step_ = false;
  uint64_t step_ = 0;
  std::chrono::steady_clock::time_point step_start_{}, next_warn_{};
  std::vector<Work> works_;  // per Bucket; empty Work = not launched
  bool shut_ = false;
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace gradwire
