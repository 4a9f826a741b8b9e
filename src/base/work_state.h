// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/collective_call.h"
#include "base/deadline.h"

namespace gradwire::detail {

// Note [descriptions on demand]: "rank 0: allreduce #12 (1024 x float32
// sum)" names a collective in errors, the watchdog's reports and
// Work::describe(). Formatting it for every collective cost a third of a
// small collective's 1 us (issue 18), and it is read only when something
// goes wrong; so a collective's WorkState keeps the parts, and the words
// are built on first use. The words are the same as before.
// WorkState::reuse copies it field by field: a new field goes there too.
struct CallText {
  int rank = 0;
  std::string comm;       // the communicator's name; "world" is left out
  std::string label;      // an internal exchange's name; "" = the call's own
  std::string detail;     // with a label: its detail
  uint32_t seq = 0;
  CollectiveCall call;
  // A point-to-point message (Note [point-to-point] in runtime/p2p.h):
  // "rank 0: send to rank 1 (tag 7, 4 x float32)"; the peer is call.root
  // (-1: any rank), the tag is seq.
  enum class Kind : uint8_t { Collective, Send, Recv } kind = Kind::Collective;
  std::string format() const;
};

// How long past an operation's own deadline the engine may take before it
// counts as stuck: the time it needs to notice the deadline and cancel
// transfers. Past it, waiting longer would only hide a stuck engine (a
// hung provider call, a bug), so waiters and shutdown stop waiting.
inline std::chrono::milliseconds engine_slack(std::chrono::milliseconds timeout) {
  return std::max(std::chrono::milliseconds(5000), timeout / 10);
}

// Note [waiters drive progress]: an operation that needs no provider call
// to advance (a point-to-point message between ranks of one host, Note
// [point-to-point on one host] in runtime/p2p.h) is advanced by the thread
// that waits for it: Work::wait() and test() call poll(), which advances
// whatever the caller may (never a provider call: Note [no inline
// execution] in runtime/engine.h) and says whether anything moved. A wait
// that would otherwise sleep until the engine thread's next poll and a
// futex wake-up (tens of microseconds) ends within a poll of the message's
// arrival. Waiting spins `spin` polls, then yields, then sleeps, first
// briefly and then on the state's condition variable in 1 ms slices
// (finish() wakes it), so a rank blocked for seconds costs little CPU.
// While a waiter polls (before it sleeps on the condition variable) it
// counts itself in `drivers`, and the engine's own poll leaves the moving
// of data to it: on a host with no spare core the engine thread would
// otherwise take the lock to copy a 256 KiB chunk, be preempted holding
// it, and leave the waiter spinning on the lock for a scheduler slice (a
// 32 MiB ping-pong ran at 2x Open MPI's time in some runs and 1x in others).
struct Progress {
  virtual ~Progress() = default;
  virtual bool poll() = 0;
  uint32_t spin = 200;  // polls before yielding (Note [backoff when idle] in collectives/context.cpp)
  std::atomic<uint32_t> drivers{0};  // waiters polling now
};

// Shared between a Work (any number of copies, any thread) and the engine
// thread that runs the operation.
struct WorkState {
  enum class Phase { Queued, Running, Done };

  WorkState(std::string description, std::chrono::milliseconds timeout)
      : timeout(timeout), description_(std::move(description)) {
    described_.store(true, std::memory_order_relaxed);
  }
  WorkState(CallText text, std::chrono::milliseconds timeout)
      : timeout(timeout), text_(std::move(text)) {}

  // Note [descriptions on demand]; any thread.
  const std::string& description() const;

  // Makes a finished state that nothing else holds new again, for the
  // next collective (Note [the lean inline path] in runtime/communicator.cpp).
  // Copies field by field into the strings' existing storage: moving a
  // CallText moves three strings, which cost more than the rest of the
  // reuse together (Note [the lean inline path]).
  void reuse(const CallText& text) {
    reuse(text.rank, text.comm, text.label, text.detail, text.seq, text.call, text.kind);
  }
  // The same from its parts, without a CallText in between (its three
  // strings were ~60 instructions of an 8-byte broadcast, issue 18).
  void reuse(int rank, std::string_view comm, std::string_view label, std::string_view detail,
             uint32_t seq, const CollectiveCall& call,
             CallText::Kind kind = CallText::Kind::Collective);
  // What the operation is: its call, label and seq, as submitted; fixed
  // while the operation runs (reuse() only touches a finished state).
  const CallText& text() const { return text_; }

  void mark_started();
  // Records the outcome, wakes waiters, then runs the callbacks (outside the
  // lock, on the calling thread). Only the first call counts: a Work the
  // watchdog abandoned (Note [a published failure ends a stuck wait]) is
  // finished again by its engine thread if the provider ever returns.
  void finish(std::exception_ptr err);
  // Note [idle before done] in runtime/engine.cpp: the engine finishes a
  // Work without callbacks after it went idle.
  bool has_callbacks() {
    std::lock_guard<std::mutex> lk(mu);
    return !callbacks.empty();
  }
  // finish() for a state no other thread can see yet (an operation that
  // ran on its caller's thread before its Work exists, Note [the lean
  // inline path] in runtime/communicator.cpp): no lock, no wake-up.
  void finish_unshared(std::exception_ptr err) {
    if (!callbacks.empty()) return finish(std::move(err));
    finishing = true;
    error = std::move(err);
    phase = Phase::Done;
    done.store(true, std::memory_order_release);
  }

  const std::chrono::milliseconds timeout;

  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::Queued;
  Clock::time_point started{};
  std::exception_ptr error;
  bool finishing = false;  // finish() was called
  // phase == Done, readable without `mu`: set by finish() after `error`,
  // so a waiter that sees it true reads the error without the lock.
  std::atomic<bool> done{false};
  // Set before another thread finishes a Work whose engine thread is stuck
  // in it; its engine is then leaked (Note [a stuck engine is leaked]).
  std::atomic<bool> abandoned{false};
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  // Set by an engine task that returns before its operation finished (a
  // posted point-to-point message, Note [point-to-point] in
  // runtime/p2p.h): the engine then leaves finish() to whoever completes
  // it. Engine thread only.
  bool finishes_later = false;
  // Note [waiters drive progress]; null for operations only the engine
  // advances. Set before the Work is handed out.
  std::shared_ptr<Progress> progress;

 private:
  mutable std::mutex describe_mu_;
  mutable std::atomic<bool> described_{false};
  mutable std::string description_;
  CallText text_;
};

}  // namespace gradwire::detail
