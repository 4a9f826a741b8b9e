// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "runtime/engine.h"

#include "base/logging.h"

#include <cstdlib>

namespace gradwire {

Engine::Engine(std::string name) : name_(std::move(name)), thread_([this] { loop(); }) {}

Engine::~Engine() {
  if (thread_.joinable()) {
    if (!shutdown()) {
      // Only reachable if the owner ignored shutdown()'s answer.
      log().critical("engine '{}' destroyed while stuck; aborting the process", name_);
      std::abort();
    }
  }
}

bool Engine::shutdown() {
  if (!thread_.joinable()) return true;
  std::unique_lock<std::mutex> lk(mu_);
  stopping_ = true;
  note_occupied();
  cv_.notify_all();
  for (;;) {
    if (exited_) break;
    exited_cv_.wait_for(lk, std::chrono::milliseconds(100));
    if (exited_) break;
    if (current_) {
      // Note [a published failure ends a stuck wait]: given up on already.
      if (current_->abandoned.load()) {
        log().error("engine '{}' is stuck in {}, which was abandoned after another rank's "
                    "failure; leaving its thread and resources behind so this process can exit",
                    name_, current_->description());
        return false;
      }
      std::lock_guard<std::mutex> state_lk(current_->mu);
      if (current_->phase == detail::WorkState::Phase::Running &&
          Clock::now() > current_->started + current_->timeout +
                             detail::engine_slack(current_->timeout)) {
        log().error("engine '{}' is stuck in {} past its deadline; leaving its thread and "
                    "resources behind so this process can exit",
                    name_, current_->description());
        return false;
      }
    }
  }
  lk.unlock();
  thread_.join();
  return true;
}

std::string Engine::overdue() {
  std::shared_ptr<detail::WorkState> cur;
  {
    std::lock_guard<std::mutex> lk(mu_);
    cur = current_;
  }
  if (!cur) return "";
  std::lock_guard<std::mutex> state_lk(cur->mu);
  if (cur->phase == detail::WorkState::Phase::Running &&
      Clock::now() > cur->started + cur->timeout + detail::engine_slack(cur->timeout)) {
    return cur->description();
  }
  return "";
}

std::shared_ptr<detail::WorkState> Engine::running() {
  std::lock_guard<std::mutex> lk(mu_);
  return current_;
}

size_t Engine::fail_queued(std::exception_ptr err) {
  std::deque<std::pair<std::shared_ptr<detail::WorkState>, Task>> failed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    failed.swap(queue_);
    note_occupied();
  }
  for (auto& item : failed) item.first->finish(err);
  return failed.size();
}

void Engine::submit(std::shared_ptr<detail::WorkState> state, Task task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(std::move(state), std::move(task));
    note_occupied();
  }
  cv_.notify_one();
}

void Engine::submit_locked(std::shared_ptr<detail::WorkState> state, Task task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(std::move(state), std::move(task));
    // Note [a claim is two stores]: no claim can be half made (claims are
    // made under the caller's lock); one may be held, and its release must
    // see that something is queued, or the loop must see it released.
    note_occupied(/*fenced=*/claimed());
  }
  cv_.notify_one();
}

// Note [a claim is two stores]: claiming the engine for a collective on the
// caller's thread and releasing it were a compare-exchange and a lock xadd
// of one word (kBusy | kClaimed). A locked instruction waits until the
// store buffer drains, and the collective's last store, its descriptor, is
// to a line a peer polls: each call waited for that line's invalidation
// on the peer (Note [a locked instruction waits for the store] in
// benchmarks/lock_probe.cpp; issue 18's 8-byte broadcast between core
// complexes). Now busy_ and claimed_ are separate words and both sides
// are plain stores and loads, in a Dekker handshake with asymmetric
// fences (Note [asymmetric fences] in base/asymmetric_fence.h):
//  - a claimer stores claimed_ = 1, light_fence(), then reads busy_: set,
//    it takes its claim back; clear, it runs;
//  - the engine becomes busy only under mu_ (note_occupied), and on the
//    change from idle to busy pays heavy_fence() before the loop reads
//    claimed_: so either the claimer saw busy_, or the loop sees claimed_;
//  - submit_locked() comes from a caller holding the lock that claims are
//    made under, so no claim is half made and the fence is needed only
//    when a claim is held (for the release below);
//  - a release stores claimed_ = 0, light_fence(), then reads busy_: set,
//    it takes mu_ before it notifies, so a loop that saw the claim under
//    mu_ is already waiting and gets the wake-up; the fence on the change
//    to busy means that either the release sees busy_, or the loop sees
//    claimed_ == 0.
// As a last resort the loop does not wait for a release for more than
// kClaimRecheck at a time: if this reasoning has a hole, a missed wake-up
// costs a millisecond, not a hang. The claimed operation is not current_:
// the watchdog's running() does not see it, which is safe because it
// cannot run long on the caller's thread (it makes no provider call and
// hands over to this thread after its spin budget, Note [inline small
// collectives]); resume() makes it current_.
void Engine::wake_after_claim() {
  { std::lock_guard<std::mutex> lk(mu_); }
  cv_.notify_one();
}

void Engine::resume(std::shared_ptr<detail::WorkState> state, Task task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_front(std::move(state), std::move(task));
    note_occupied();  // busy before the claim ends: no other claim slips in
    claimed_.store(0, std::memory_order_release);
  }
  cv_.notify_one();
}

void Engine::set_poller(std::function<Poll()> poll, std::function<void()> drop) {
  std::lock_guard<std::mutex> lk(mu_);
  poll_ = std::move(poll);
  drop_ = std::move(drop);
}

void Engine::want_poll(bool now) {
  // Note [lingering poller]: seq_cst against the loop's store of false and
  // its last poll after it, so either the loop polls once more and sees
  // what the caller added, or the caller sees false and wakes it.
  if (!now && polling_.load()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    poll_wanted_ = true;
  }
  cv_.notify_one();
}

void Engine::loop() {
  // Note [point-to-point] in runtime/p2p.h: while posted messages are
  // outstanding the idle loop polls them: while the poller says Busy, first
  // back to back, then every kPollSleep / 20, then every kPollSleep (a
  // receive that waits minutes for its sender costs a wake-up a
  // millisecond, not a core); while it says Waiting, every kPollSleep.
  // Note [lingering poller]: when nothing is outstanding any more the loop
  // goes on polling every kPollSleep for kLinger before it sleeps until
  // the next submission. Operations posted on a caller's thread (Note
  // [point-to-point on one host]) then find it polling, and their
  // want_poll() costs one atomic load instead of a futex wake-up per
  // message of a ping-pong. Leaving, it clears polling_ and polls once
  // more (want_poll()'s other half).
  constexpr uint32_t kPollSpin = 2000;
  constexpr auto kPollSleep = std::chrono::microseconds(1000);
  constexpr auto kClaimRecheck = std::chrono::microseconds(1000);
  constexpr uint32_t kLinger = 10;  // polls of kPollSleep with nothing outstanding
  bool polling = false;
  Poll last = Poll::Idle;
  uint32_t idle_polls = 0, empty_polls = 0;
  const auto set_polling = [&](bool on) {
    polling = on;
    polling_.store(on);
    idle_polls = empty_polls = 0;
  };
  for (;;) {
    std::pair<std::shared_ptr<detail::WorkState>, Task> item;
    {
      std::unique_lock<std::mutex> lk(mu_);
      const auto ready = [&] { return !claimed() && (stopping_ || !queue_.empty()); };
      const auto woken = [&] { return ready() || poll_wanted_; };
      // Note [a claim is two stores]: work queued behind a claim is
      // looked at again every kClaimRecheck even without a wake-up.
      const auto behind_claim = [&] { return !queue_.empty() || stopping_; };
      if (!polling) {
        while (!woken()) {
          if (behind_claim()) {
            cv_.wait_for(lk, kClaimRecheck);
          } else {
            cv_.wait(lk);
          }
        }
      } else if (!ready()) {
        if (last != Poll::Busy) {
          cv_.wait_for(lk, behind_claim() ? kClaimRecheck : kPollSleep, woken);
        } else if (++idle_polls > kPollSpin) {
          cv_.wait_for(lk, idle_polls > 2 * kPollSpin ? kPollSleep : kPollSleep / 20, woken);
        }
      }
      if (poll_wanted_) {
        poll_wanted_ = false;
        if (!polling) set_polling(true);
        idle_polls = 0;
      }
      if (!ready()) {
        lk.unlock();
        if (!poll_) {
          set_polling(false);
          continue;
        }
        last = poll_();
        if (last != Poll::Idle) {
          empty_polls = 0;
        } else if (++empty_polls > kLinger) {
          polling_.store(false);
          last = poll_();
          if (last == Poll::Idle) {
            polling = false;
          } else {
            set_polling(true);
          }
        }
        continue;
      }
      if (queue_.empty()) {  // stopping and drained
        if (drop_) {
          lk.unlock();
          drop_();
          lk.lock();
        }
        exited_ = true;
        current_.reset();
        note_occupied();
        exited_cv_.notify_all();
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
      current_ = item.first;
      note_occupied();
    }
    item.first->mark_started();
    std::exception_ptr err;
    try {
      item.second(*item.first);
    } catch (...) {
      err = std::current_exception();
    }
    // Note [idle before done]: a waiter woken by finish() often submits its
    // next collective at once, and on a host with fewer cores than threads
    // the wake-up preempts this thread before it marks itself idle. That
    // next collective then finds the engine busy, queues instead of running
    // on its caller's thread, and the one after it does the same: one late
    // peer (past the 200 us inline budget) kept a whole run on the
    // hand-off path (a 128 KiB allgather at 2 ranks: 14 us a call over 30
    // calls against 3.5 us over 3000, issue 18). So the engine goes idle
    // first, unless the operation has completion callbacks: those keep
    // running before anything after it starts, as they always did (one
    // registered by then() between this check and finish() may run
    // alongside the next collective; then() makes no promise about later
    // collectives, only that callbacks run before the Work reads as done).
    const auto go_idle = [this] {
      std::lock_guard<std::mutex> lk(mu_);
      current_.reset();  // idle: a caller may claim it (Note [inline small collectives])
      note_occupied();
    };
    const bool finishes = err || !item.first->finishes_later;
    if (finishes && !item.first->has_callbacks()) {
      go_idle();
      item.first->finish(err);
    } else {
      if (finishes) item.first->finish(err);
      go_idle();
    }
    if (poll_) {
      last = poll_();
      if (last != Poll::Idle) {
        set_polling(true);
      } else if (polling) {
        empty_polls = 0;  // linger from here
      }
    }
  }
}

}  // namespace gradwire
