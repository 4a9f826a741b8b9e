// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/asymmetric_fence.h"
#include "base/work_state.h"

namespace gradwire {

// One thread that runs a communicator's operations strictly in submission
// order: every rank runs collective k before k+1, so ranks never need to
// negotiate (the Reducer relies on it: Note [in-order launch] in
// src/reducer/reducer_impl.h).
//
// Note [no inline execution]: running a collective on the thread that
// waits for it (to save the hand-off) was tried and removed. A provider call
// can hang (libfabric 1.17 shm spins forever in fi_cq_read after a
// truncated large receive whose sender left); on the engine thread that
// only stalls the engine, and Work::wait() still reports it after the
// deadline. Run inline, it would hang the caller with no error at all. The
// hand-off also measured no faster: 2-rank shm latency stayed ~6.5 us, which
// is the provider's message latency, not thread wake-ups.
//
// Note [inline small collectives]: the exception is a collective that makes
// no provider call: the small collectives of Note [small collectives]
// (shm/small.cpp) only poll flags in shared memory, checking the
// deadline and the interrupt as they go, so they cannot hang the caller.
// Without the provider, the hand-off is most of their cost (two futex
// wake-ups, ~5 us here), so they run on the caller's thread whenever the
// engine is idle; with work queued they queue behind it, as before.
class Engine {
 public:
  using Task = std::function<void(detail::WorkState&)>;

  explicit Engine(std::string name);
  // Stops the thread (see shutdown); must only run once shutdown() returned
  // true, or when the thread is known to be idle.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // From any thread. Note [a claim is two stores] in engine.cpp: when the
  // engine goes from idle to busy this pays heavy_fence().
  void submit(std::shared_ptr<detail::WorkState> state, Task task);
  // The same, from a caller that holds the lock under which every
  // claim_inline() of this engine is made (the communicator's submission
  // lock): that lock orders it against claims, so no fence is needed.
  void submit_locked(std::shared_ptr<detail::WorkState> state, Task task);

  // Note [inline small collectives]: if nothing is queued, running or
  // claimed, claims the engine and returns true; the caller then runs its
  // operation on its own thread and must call release_inline() (or
  // resume()) when it ends. Operations submitted meanwhile queue behind it,
  // so order is kept. Claims must be made under one lock (the one
  // submit_locked() callers hold). Note [a claim is two stores] in
  // engine.cpp: no locked instruction, and the claimed operation is not
  // running() for the watchdog.
  [[gnu::always_inline]] bool claim_inline() {
    if (busy_.load(std::memory_order_acquire) || claimed_.load(std::memory_order_relaxed)) {
      return false;
    }
    claimed_.store(1, std::memory_order_relaxed);
    light_fence();
    if (!busy_.load(std::memory_order_acquire)) return true;
    release_inline();  // a submit() from another thread got there first
    return false;
  }
  [[gnu::always_inline]] void release_inline() {
    claimed_.store(0, std::memory_order_release);
    light_fence();
    // Wakes the loop only for work queued meanwhile (or a shutdown): waking
    // it for nothing is a futex round trip, as much as the collective.
    if (busy_.load(std::memory_order_relaxed)) wake_after_claim();
  }
  // True when nothing is queued, running or claimed: two atomic loads, no
  // lock. Note [messages need no claim] in runtime/p2p.h: for operations
  // that keep their own order under their own lock (posted messages) this
  // is enough to keep their place behind what this thread queued before.
  bool idle_hint() const {
    return !busy_.load(std::memory_order_acquire) && !claimed_.load(std::memory_order_acquire);
  }
  // The claimed operation could not finish on the caller's thread: the
  // engine thread runs `task` again next, before anything queued.
  void resume(std::shared_ptr<detail::WorkState> state, Task task);

  // Lets the queued operations finish (each is bounded by its deadline),
  // then joins the thread and returns true. Returns false, leaving the
  // thread running, if an operation overran its deadline by more than
  // engine_slack(): the thread is stuck (e.g. inside a provider call that
  // never returns). Note [a stuck engine is leaked]: the caller must then
  // leak the Engine and everything the thread uses, so the process can
  // still exit instead of hanging in a join.
  bool shutdown();

  // For the watchdog (Note [watchdog]): the description of the operation
  // running past its deadline by more than engine_slack(), or "".
  std::string overdue();
  // The operation running now, or null.
  std::shared_ptr<detail::WorkState> running();
  // Fails every operation still queued (not started) with `err`, so that
  // nobody waits behind a stuck engine; returns how many.
  size_t fail_queued(std::exception_ptr err);

  // Note [point-to-point] in runtime/p2p.h: operations that outlive their
  // task (posted messages) are completed by `poll`, which the engine thread
  // calls after every task and, while it reports something outstanding, in
  // its idle loop instead of sleeping until the next submission: back to
  // back while it says Busy (a transfer the provider must progress), every
  // millisecond while it says Waiting (only what waiters drive themselves,
  // Note [waiters drive progress] in base/work_state.h, and deadlines).
  // `drop` runs on the engine thread as it exits, for what is still
  // outstanding then. Set once, before the first submission.
  enum class Poll { Idle, Waiting, Busy };
  void set_poller(std::function<Poll()> poll, std::function<void()> drop);
  // Something outstanding was added outside an engine task (on a caller's
  // thread): makes the idle loop poll. Cheap when it already polls, so
  // callers may say it after every such addition; `now`: the provider has
  // work to do at once (wakes a loop that sleeps between polls).
  void want_poll(bool now = false);

 private:
  void loop();
  void wake_after_claim();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<detail::WorkState>, Task>> queue_;
  std::condition_variable exited_cv_;
  bool stopping_ = false;
  bool exited_ = false;
  std::shared_ptr<detail::WorkState> current_;
  // busy_: written under mu_ only, after every change of the four above:
  // 1 while any of them is set. claimed_: 1 while a caller's thread runs an
  // operation (claim_inline()); written by claimers and resume(). Separate
  // words, so that neither side needs a read-modify-write (Note [a claim
  // is two stores] in engine.cpp).
  std::atomic<uint32_t> busy_{0};
  std::atomic<uint32_t> claimed_{0};
  // `fenced`: an idle-to-busy change pays heavy_fence(), the rare side of
  // the handshake with claimers (Note [a claim is two stores]).
  void note_occupied(bool fenced = true) {
    const bool busy = current_ || !queue_.empty() || stopping_ || exited_;
    if (busy == bool(busy_.load(std::memory_order_relaxed))) return;
    busy_.store(busy ? 1 : 0, std::memory_order_release);
    if (busy && fenced) heavy_fence();
  }
  bool claimed() const { return claimed_.load(std::memory_order_acquire) != 0; }
  std::function<Poll()> poll_;
  bool poll_wanted_ = false;           // under mu_: want_poll()
  std::atomic<bool> polling_{false};   // the idle loop polls (Note [lingering poller] in engine.cpp)
  std::function<void()> drop_;
  std::thread thread_;
};

}  // namespace gradwire
