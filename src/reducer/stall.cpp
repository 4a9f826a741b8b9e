// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "reducer/stall.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/env_values.h"
#include "base/raise.h"
#include "base/logging.h"
#include "runtime/job.h"

namespace gradwire {

namespace {

using Clock = std::chrono::steady_clock;

// Note [strict environment values]: the same parser that checked the value
// when the communicator was created.
std::chrono::milliseconds env_seconds(const char* name, std::chrono::milliseconds dflt) {
  const char* v = env::required_value(name);
  return v ? env::parse_seconds(name, v, /*zero_allowed=*/true) : dflt;
}

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Status line: "<step> <launched> <buckets> <parameters this rank waits for>".
struct Status {
  bool valid = false;
  uint64_t step = 0;
  size_t launched = 0, buckets = 0;
  std::string waiting_for;
};
Status parse_status(const std::string& line) {
  Status s;
  std::istringstream in(line);
  if (!(in >> s.step >> s.launched >> s.buckets)) return s;
  s.valid = true;
  std::getline(in >> std::ws, s.waiting_for);
  return s;
}

std::string join(const std::vector<std::string>& v, size_t max) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += fmt::format(" and {} more", v.size() - max);
  return s;
}

constexpr const char* kCause =
    "likely cause: parameters unused on some ranks (ReducerOptions::find_unused_parameters) or "
    "a data-dependent branch that skips part of the model on some ranks";

}  // namespace

void apply_stall_env(ReducerOptions& options) {
  options.stall_warn = env_seconds("GRADWIRE_STALL_WARN_S", options.stall_warn);
  options.stall_shutdown = env_seconds("GRADWIRE_STALL_SHUTDOWN_S", options.stall_shutdown);
}

StallInspector::StallInspector(int rank, std::chrono::milliseconds warn,
                               std::chrono::milliseconds shutdown,
                               std::function<bool(size_t)> marked)
    : rank_(rank), warn_(warn), shutdown_(shutdown), marked_(std::move(marked)),
      thread_([this] { loop(); }) {}

StallInspector::~StallInspector() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  job::set_status("");
}

void StallInspector::set_plan(std::vector<Bucket> buckets) {
  std::lock_guard<std::mutex> lk(mu_);
  buckets_ = std::move(buckets);
  works_.assign(buckets_.size(), Work());
}

void StallInspector::step_started(uint64_t step) {
  std::lock_guard<std::mutex> lk(mu_);
  in_step_ = true;
  step_ = step;
  step_start_ = Clock::now();
  next_warn_ = step_start_ + warn_;
}

void StallInspector::launched(size_t bucket, Work work) {
  std::lock_guard<std::mutex> lk(mu_);
  if (bucket < works_.size()) works_[bucket] = std::move(work);
}

void StallInspector::step_ended() {
  bool was_stalled;
  {
    std::lock_guard<std::mutex> lk(mu_);
    was_stalled = in_step_ && Clock::now() >= step_start_ + warn_ && warn_.count() > 0;
    in_step_ = false;
    works_.assign(buckets_.size(), Work());
  }
  if (was_stalled) job::set_status("");
}

void StallInspector::loop() {
  if (warn_.count() <= 0 && shutdown_.count() <= 0) return;  // both off
  const auto period = std::clamp(std::min(warn_.count() > 0 ? warn_ : shutdown_,
                                          shutdown_.count() > 0 ? shutdown_ : warn_) / 4,
                                 std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, period, [&] { return stop_; });
    if (stop_) break;
    inspect(lk);
  }
}

std::string StallInspector::who_is_missing(int me, uint64_t step, size_t bucket,
                                           const std::vector<std::string>& statuses) {
  if (statuses.empty()) {
    return "the other ranks' stall reports are not in yet (they come through the job's store "
           "once a second; none under mpirun)";
  }
  std::vector<std::string> missing, silent;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (int(r) == me) continue;
    if (statuses[r].empty()) {
      silent.push_back(std::to_string(r));
      continue;
    }
    const Status s = parse_status(statuses[r]);
    if (!s.valid) continue;
    if (s.step < step || (s.step == step && s.launched <= bucket)) {
      missing.push_back(fmt::format("rank {} (at step {}, {} of {} buckets launched{})", r,
                                    s.step, s.launched, s.buckets,
                                    s.waiting_for.empty()
                                        ? ""
                                        : "; it waits for gradients of: " + s.waiting_for));
    }
  }
  std::string out;
  if (!missing.empty()) {
    out = fmt::format("{} not launched it: {}",
                      missing.size() == 1 ? std::string("1 rank has")
                                          : fmt::format("{} ranks have", missing.size()),
                      join(missing, 16));
  }
  if (!silent.empty()) {
    out += fmt::format("{}no stall report from rank(s) {} (not inside a Reducer step, or not "
                       "reachable through the store)",
                       out.empty() ? "" : "; ", join(silent, 16));
  }
  return out.empty() ? "every other rank reported having launched it (so the collective itself "
                       "is slow or stuck: see the flight recorder)"
                     : out;
}

// Under mu_. Logs and publishes at most once per period; the store calls
// happen on the watchdog's thread.
void StallInspector::inspect(std::unique_lock<std::mutex>& lk) {
  if (!in_step_) return;
  const auto now = Clock::now();
  const auto elapsed = now - step_start_;
  const bool warn_due = warn_.count() > 0 && elapsed >= warn_;
  const bool shutdown_due = shutdown_.count() > 0 && elapsed >= shutdown_ && !shut_;
  if (!warn_due && !shutdown_due) return;
  size_t unlaunched = buckets_.size(), pending = buckets_.size(), launched = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!works_[b].valid()) {
      if (unlaunched == buckets_.size()) unlaunched = b;
      continue;
    }
    ++launched;
    if (pending == buckets_.size() && !works_[b].test()) pending = b;
  }
  if (unlaunched == buckets_.size() && pending == buckets_.size()) return;  // all done

  // The parameters this rank still waits for, in the first unlaunched Bucket.
  std::vector<std::string> waiting;
  if (unlaunched < buckets_.size()) {
    const Bucket& bk = buckets_[unlaunched];
    for (size_t k = 0; k < bk.gradients.size(); ++k)
      if (!marked_(bk.gradients[k])) waiting.push_back(bk.names[k]);
  }
  job::set_status(fmt::format("{} {} {} {}", step_, launched, buckets_.size(), join(waiting, 8)));

  std::string msg;
  if (pending < buckets_.size()) {
    const std::string who = who_is_missing(rank_, step_, pending, job::statuses());
    msg = fmt::format("rank {}: Reducer step {}: {} was launched here but has not completed "
                      "after {:.1f} s: {}", rank_, step_, buckets_[pending].description,
                      secs(elapsed), who);
  }
  if (unlaunched < buckets_.size()) {
    msg += fmt::format("{}rank {}: Reducer step {}: {} is not launched on this rank after "
                       "{:.1f} s: it waits for gradients of: {} ({} of {} buckets launched)",
                       msg.empty() ? "" : "; ", rank_, step_, buckets_[unlaunched].description,
                       secs(elapsed), waiting.empty() ? "none (launch in progress)" : join(waiting, 16),
                       launched, buckets_.size());
  }
  msg += fmt::format("; {}", kCause);
  if (warn_due && now >= next_warn_) {
    next_warn_ = now + warn_;
    log().warn("stall: {} (GRADWIRE_STALL_WARN_S={:.1f}; {})", msg, secs(warn_),
               shutdown_.count() > 0
                   ? fmt::format("the job is shut down after {:.1f} s", secs(shutdown_))
                   : std::string("GRADWIRE_STALL_SHUTDOWN_S is off"));
  }
  if (shutdown_due) {
    shut_ = true;
    const std::string reason = fmt::format("stall: {}; shut down after {:.1f} s "
                                           "(GRADWIRE_STALL_SHUTDOWN_S)", msg, secs(shutdown_));
    lk.unlock();  // fail_locally dumps the flight recorder
    log().error("{}", reason);
    job::fail_locally(rank_, reason, ErrorCode::Timeout);
    lk.lock();
  }
}

}  // namespace gradwire
