// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "gradwire/work.h"

#include "base/raise.h"
#include "base/logging.h"
#include "base/work_state.h"

#include <sched.h>

#include <thread>

namespace gradwire {

namespace detail {

std::string CallText::format() const {
  if (kind != Kind::Collective) {
    const bool send = kind == Kind::Send;
    return fmt::format("rank {}{}: {} {} {} (tag {}, {} x {})", rank,
                       comm.empty() ? "" : fmt::format(" of {}", comm), send ? "send" : "recv",
                       send ? "to" : "from",
                       call.root < 0 ? std::string("any rank") : fmt::format("rank {}", call.root),
                       seq, call.count, to_string(call.dtype));
  }
  const std::string_view op = label.empty() ? call.name() : std::string_view(label);
  const std::string d = label.empty() ? call.describe() : detail;
  return fmt::format("rank {}{}: {} #{}{}", rank,
                     comm.empty() ? "" : fmt::format(" of {}", comm), op, seq,
                     d.empty() ? "" : fmt::format(" ({})", d));
}

const std::string& WorkState::description() const {
  if (described_.load(std::memory_order_acquire)) return description_;
  std::lock_guard<std::mutex> lk(describe_mu_);
  if (!described_.load(std::memory_order_relaxed)) {
    description_ = text_.format();
    described_.store(true, std::memory_order_release);
  }
  return description_;
}

void WorkState::reuse(int rank, std::string_view comm, std::string_view label,
                      std::string_view detail, uint32_t seq, const CollectiveCall& call,
                      CallText::Kind kind) {
  phase = Phase::Queued;
  started = {};
  error = nullptr;
  finishing = false;
  finishes_later = false;
  done.store(false, std::memory_order_relaxed);
  abandoned.store(false, std::memory_order_relaxed);
  callbacks.clear();
  described_.store(false, std::memory_order_relaxed);
  if (!description_.empty()) description_.clear();
  // Field by field, and a string only where either side has text: most
  // collectives have none (no label, the world communicator), and three
  // string assignments were a fifth of the reuse.
  const auto assign = [](std::string& to, std::string_view from) {
    if (!to.empty() || !from.empty()) to.assign(from);
  };
  text_.rank = rank;
  assign(text_.comm, comm);
  assign(text_.label, label);
  assign(text_.detail, detail);
  text_.seq = seq;
  text_.call = call;
  text_.kind = kind;
}

void WorkState::mark_started() {
  std::lock_guard<std::mutex> lk(mu);
  if (phase == Phase::Running) return;  // resumed by the engine (Note [inline small collectives])
  phase = Phase::Running;
  started = coarse_now();  // Note [coarse clock]: compared against deadlines only
}

void WorkState::finish(std::exception_ptr err) {
  // Callbacks run before the Work reads as done, so a caller whose wait()
  // returns may rely on what its callbacks did. A callback may register
  // another one: keep draining until none is left.
  std::unique_lock<std::mutex> lk(mu);
  if (finishing) return;
  finishing = true;
  error = err;
  while (!callbacks.empty()) {
    std::vector<std::function<void(std::exception_ptr)>> fns;
    fns.swap(callbacks);
    lk.unlock();
    for (auto& fn : fns) {
      try {
        fn(err);
      } catch (const std::exception& e) {
        log().error("a completion callback of {} threw (callbacks must not throw): {}",
                    description(), e.what());
      }
    }
    lk.lock();
  }
  phase = Phase::Done;
  done.store(true, std::memory_order_release);
  lk.unlock();
  cv.notify_all();
}

}  // namespace detail

namespace {

detail::WorkState& checked(const std::shared_ptr<detail::WorkState>& s) {
  if (!s) raise(ErrorCode::InvalidArgument, "this Work is empty (default-constructed)");
  return *s;
}

// Note [waiters drive progress] in base/work_state.h: polls s.progress
// until s is done or `until` passes; false if it passed.
// `patience` counts from the call; the clock is read only once the wait
// outlasts the spin (a clock read was a tenth of a ping-pong message).
bool wait_driving(detail::WorkState& s, Clock::duration patience) {
  detail::Progress& p = *s.progress;
  const uint32_t spin = p.spin, yield_until = spin + 2000, nap_until = yield_until + 200;
  uint32_t idle = 0;
  Clock::time_point until = Clock::time_point::max();
  // Counted in p.drivers while polling, not while asleep on the cv.
  struct Driving {
    detail::Progress& p;
    bool on = false;
    void set(bool v) {
      if (v != on) {
        on = v;
        if (v) {
          p.drivers.fetch_add(1, std::memory_order_relaxed);
        } else {
          p.drivers.fetch_sub(1, std::memory_order_relaxed);
        }
      }
    }
    ~Driving() { set(false); }
  } driving{p};
  for (;;) {
    if (s.done.load(std::memory_order_acquire)) return true;
    if (p.poll()) {
      idle = 0;
      continue;
    }
    ++idle;
    // Not at once: a message that arrives within a few polls (a ping-pong)
    // should not pay two atomic read-modify-writes.
    if (idle == 32) driving.set(true);
    if (idle <= spin) continue;
    if (until == Clock::time_point::max()) {
      const Clock::time_point now = Clock::now();
      until = now + patience;  // ~spin polls late
      // A wait resumed in slices (Python's interruptible waits, 50 ms each)
      // on an operation that has waited for a while already goes straight
      // to the 1 ms slices: running the yields and naps again every slice
      // cost a blocked receive 13 % of a core. `started` is coarse, or zero
      // for an operation still queued (which the engine finishes, waking us).
      Clock::time_point started;
      {
        std::lock_guard<std::mutex> lk(s.mu);  // the engine's mark_started() writes it
        started = s.started;
      }
      if (now - started > std::chrono::milliseconds(20)) idle = nap_until;
    }
    if ((idle & 63u) == 0 && Clock::now() > until) return false;
    if (idle <= yield_until) {
      sched_yield();
    } else if (idle <= nap_until) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      // Long waits: slices that the finishing thread cuts short; 1 ms, then
      // 10 ms after 20 of them (the engine polls every millisecond meanwhile,
      // Note [lingering poller], and its finish() wakes us).
      driving.set(false);  // the engine's polls move the data meanwhile
      std::unique_lock<std::mutex> lk(s.mu);
      if (s.phase == detail::WorkState::Phase::Done) return true;
      const auto slice = std::chrono::milliseconds(idle - nap_until > 20 ? 10 : 1);
      s.cv.wait_for(lk, std::min<Clock::duration>(slice,
                                                  std::max<Clock::duration>(until - Clock::now(),
                                                                            Clock::duration(0))));
      if (Clock::now() > until) return s.phase == detail::WorkState::Phase::Done;
    }
  }
}

}  // namespace

void Work::wait() const {
  auto& s = checked(state_);
  if (s.done.load(std::memory_order_acquire)) {  // most small collectives
    if (s.error) std::rethrow_exception(s.error);
    return;
  }
  if (s.progress) {
    // The engine fails the operation at its deadline; engine_slack() past
    // it, waiting longer would only hide a stuck engine (as below).
    if (!wait_driving(s, s.timeout + detail::engine_slack(s.timeout))) {
      raise(ErrorCode::Timeout,
            "{} is still pending past its deadline of {:.1f} s: the engine thread is not making "
            "progress (likely a bug in gradwire or a hung provider)", s.description(),
            std::chrono::duration<double>(s.timeout).count());
    }
    if (!s.done.load(std::memory_order_acquire)) {  // seen Done under mu
      std::lock_guard<std::mutex> lk(s.mu);
      if (s.error) std::rethrow_exception(s.error);
      return;
    }
    if (s.error) std::rethrow_exception(s.error);  // `done` is set after `error`
    return;
  }
  std::unique_lock<std::mutex> lk(s.mu);
  while (s.phase != detail::WorkState::Phase::Done) {
    s.cv.wait_for(lk, std::chrono::milliseconds(100));
    if (s.phase == detail::WorkState::Phase::Running &&
        Clock::now() > s.started + s.timeout + detail::engine_slack(s.timeout)) {
      double secs = std::chrono::duration<double>(Clock::now() - s.started).count();
      raise(ErrorCode::Timeout,
            "{} has been running for {:.1f} s, past its deadline of {:.1f} s: the engine thread "
            "is not making progress (likely a bug in gradwire or a hung provider)",
            s.description(), secs, std::chrono::duration<double>(s.timeout).count());
    }
  }
  if (s.error) std::rethrow_exception(s.error);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  auto& s = checked(state_);
  std::unique_lock<std::mutex> lk(s.mu, std::defer_lock);
  bool finished;
  if (s.progress) {
    finished = wait_driving(s, timeout);
    lk.lock();
  } else {
    lk.lock();
    finished = s.cv.wait_for(lk, timeout, [&] { return s.phase == detail::WorkState::Phase::Done; });
  }
  if (!finished) {
    raise(ErrorCode::Timeout, "waited {:.3f} s for {}, which is still {}",
          std::chrono::duration<double>(timeout).count(), s.description(),
          s.phase == detail::WorkState::Phase::Queued ? "queued behind earlier collectives"
                                                      : "running");
  }
  if (s.error) std::rethrow_exception(s.error);
}

bool Work::test() const {
  if (!state_) return false;
  if (state_->done.load(std::memory_order_acquire)) return true;
  if (state_->progress) {
    state_->progress->poll();
    if (state_->done.load(std::memory_order_acquire)) return true;
  }
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->phase == detail::WorkState::Phase::Done;
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->error;
}

void Work::then(std::function<void(std::exception_ptr)> fn) const {
  auto& s = checked(state_);
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.phase != detail::WorkState::Phase::Done) {
      s.callbacks.push_back(std::move(fn));
      return;
    }
    err = s.error;
  }
  fn(err);
}

std::string Work::describe() const { return state_ ? state_->description() : "(empty Work)"; }

}  // namespace gradwire
