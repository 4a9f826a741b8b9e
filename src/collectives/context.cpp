// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "collectives/context.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>

#include "base/raise.h"

namespace gradwire::collectives {

std::byte* Context::scratch(size_t bytes, Area area) {
  auto& buf = scratch_[size_t(area)];
  if (buf.size() < bytes) {
    buf.clear();
    buf.shrink_to_fit();
    buf.resize(bytes);
  }
  return buf.data();
}

std::span<Request> Context::requests(size_t n) {
  request_blocks_.push_back(std::make_unique<Request[]>(n));
  return {request_blocks_.back().get(), n};
}

void Context::send(Request& req, int peer, const void* buf, size_t bytes, uint32_t slot) {
  GW_CHECK(slot < kMaxSlots, "{}: message slot {} out of range", what(), slot);
  try {
    transport_.isend(req, peer, buf, bytes, make_tag(seq_, rank_, slot_base_ + slot), deadline_);
  } catch (const Error& e) {
    // The transport knows the peer, not the collective: say both.
    raise(e.code(), "{}: {}", what(), e.message());
  }
}

void Context::recv(Request& req, int peer, void* buf, size_t bytes, uint32_t slot) {
  GW_CHECK(slot < kMaxSlots, "{}: message slot {} out of range", what(), slot);
  try {
    transport_.irecv(req, peer, buf, bytes, make_tag(seq_, peer, slot_base_ + slot), deadline_);
  } catch (const Error& e) {
    raise(e.code(), "{}: {}", what(), e.message());
  }
}

namespace {
// Note [backoff when idle]: spinning keeps latency low when every rank
// has a core; when ranks outnumber cores a spinning rank steals the time
// its peer needs to make the progress we wait for. Spin `spin` polls, then
// yield, then sleep briefly. `idle`: polls in a row that found nothing.
// A transport poll drives the provider, so it spins kTransportSpin; a poll
// of a flag in shared memory (wait_for) is one load, 2000 of which pass in
// a few microseconds while the peer that would set the flag, if it shares
// our core, still waits for it: when this host runs more ranks than it has
// cores, it yields after kFlagSpinShared (3 ranks on 2 cores: 4.4 us a
// small allreduce, 10 us with 2000). When every rank has a core and the
// wait is on the caller's thread (an inline collective: the process has
// nothing else to run meanwhile), a yield is only a system call (about
// 1 us in this VM) that makes the peer wait for us in turn: there it spins
// kFlagSpinAlone polls, tens of microseconds, first (perf of an 8-byte
// broadcast at 2 ranks: __schedule and sched_yield 7 % of the time with
// 200, 2 % with 20000). The engine thread keeps the short spin: it shares
// its rank's core with the training thread that overlaps with it.
constexpr uint32_t kTransportSpin = 2000, kFlagSpinShared = 200, kFlagSpinAlone = 20000;
std::atomic<uint32_t> g_flag_spin{kFlagSpinShared};
// Note [spins that adapt]: the two inputs of g_flag_spin.
std::atomic<bool> g_ranks_fit{false}, g_contended{false};
void choose_flag_spin() {
  const bool alone = g_ranks_fit.load(std::memory_order_relaxed) &&
                     !g_contended.load(std::memory_order_relaxed);
  g_flag_spin.store(alone ? kFlagSpinAlone : kFlagSpinShared, std::memory_order_relaxed);
}
}  // namespace

// Note [naps that grow]: a nap is a timer wake-up and two context switches,
// 30-35 us of CPU in this VM; at a fixed 50 us (about 145 us with the
// timer's slack) a rank blocked for seconds on a late peer used 20-30 % of
// a core (faults.idle_cpu.shm.np2 failed at 25 % under the sanitizers).
// So a nap lasts 1/16 of the time napped so far, from 50 us up to 1 ms: a
// peer that arrives after T of napping is noticed at most T/16 (and 1 ms)
// late, and a wait of seconds costs a wake-up a millisecond (about 3 % of
// a core). Callers check the deadline and the interrupt at every nap,
// since a nap is no longer short. A wait for a flag in shared memory that
// names its publisher's doorbell sleeps on it instead (Note [the doorbell]
// in collectives/doorbell.h): woken when the flag is published, so there
// the sleep is 1 ms to 10 ms (the checks a little later, no lateness).
// Note [yields that end]: the yields between the spin and the naps end
// after kFlagSpinAlone polls or kLongestYield, whichever comes first. On an
// idle machine a yield returns at once (1-2 us here) and the polls end it
// (20-40 ms); when others want the core, each yield may wait a time slice,
// and 20000 of them kept a rank blocked behind a late peer (4 ranks on the
// 2-core VM, other jobs compiling) yielding for seconds: never asleep on
// the doorbell (Note [the doorbell]), and a runnable task for the scheduler
// all along. 2 ms: past it a wait is long, and the doorbell's wake-up
// (tens of microseconds) is a few percent of it. Only waits with a
// doorbell: a transport's wait (poll()) naps without one, late by up to
// 1 ms, and its yields still end by count alone.
bool Context::Backoff::tick(uint32_t spin) {
  if (idle < UINT32_MAX) ++idle;
  const uint32_t nap_after = std::max<uint32_t>(20000, 2 * spin);
  napped = idle > nap_after;
  if (idle <= spin) return false;
  if (!napped) {
    constexpr auto kLongestYield = std::chrono::milliseconds(2);
    const auto now = bell ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (idle == spin + 1) yielding_since = now;
    if (bell == nullptr || now - yielding_since < kLongestYield) {
      sched_yield();
      return false;
    }
    idle = nap_after + 1;  // Note [yields that end]: nap from here
    napped = true;
  }
  return rest();
}

bool Context::Backoff::rest() {
  napped = true;
  constexpr auto kFirstNap = std::chrono::microseconds(50), kLongestNap = std::chrono::microseconds(1000);
  const auto now = std::chrono::steady_clock::now();
  if (!resting) resting = true, napping_since = now;
  if (bell) {
    // Note [the doorbell]: the peer wakes us when it publishes, so the
    // timeout bounds only how late the deadline, the interrupt and the side
    // progress are seen: 1/16 of the time slept so far, 1 ms to 10 ms (the
    // interrupt comes from the watchdog, which looks every 100 ms). At 1 ms
    // throughout, a rank blocked 5 s used 2.2 % of a core under load.
    if (!announced) {
      bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
      heavy_fence_shared();  // Note [the doorbell]: the publisher's is a compiler barrier
      announced = true;
      note_sleep_start(idle);
      seen = bell->rings.load(std::memory_order_acquire);
      return true;  // the caller checks its flag once more before the first sleep
    }
    constexpr auto kLongestBellSleep = std::chrono::milliseconds(10);
    last = int(sleep_on(*bell, seen, std::clamp<std::chrono::steady_clock::duration>(
                                         (now - napping_since) / 16, kLongestNap,
                                         kLongestBellSleep)));
    seen = bell->rings.load(std::memory_order_acquire);
    return true;
  }
  std::this_thread::sleep_for(std::clamp<std::chrono::steady_clock::duration>(
      (now - napping_since) / 16, kFirstNap, kLongestNap));
  return true;
}

// Note [the spin budget]: Options::collectives.spin_budget
// (GRADWIRE_SPIN_US) replaces the spins of Note [backoff when idle] with a
// time users can reason about: how long a waiting thread keeps its core
// busy-polling before it gives it away. Unset (auto, the default) keeps
// them exactly as they are: kFlagSpinAlone or kFlagSpinShared polls by
// set_host_ranks, the inline budget kInlineSpin (runtime/submit.h), the
// transport's kTransportSpin, and the yields between spin and sleep. An
// explicit budget B governs each wait of a collective:
//  - a wait for a flag in shared memory (wait_for, on either thread)
//    polls for B, then sleeps on the publisher's doorbell at once, without
//    the yields of Note [yields that end]: on an idle machine a yield
//    returns at once and is only a slower spin, which B says to stop; on a
//    busy one the doorbell already wakes us within tens of microseconds;
//  - on a caller's thread (Note [inline small collectives]) the end of
//    B's spin is also where the collective goes to the engine thread
//    (WouldBlock) instead of kInlineSpin: with B = 0 the first wait that
//    finds a peer absent hands off, so the caller never spins, and with a
//    large B a caller may be held that long by a late peer. The engine
//    thread's wait then spins B again, at most 2B per wait in all;
//  - a transport wait (poll()) polls the provider for B instead of
//    kTransportSpin polls, then yields and naps as before (the yields end
//    at the 20000th poll of the wait, spin included): it has no
//    doorbell (a provider's completion cannot ring our futex), so sleeping
//    at once would leave a message up to a nap (1 ms) unnoticed; the yields
//    give the core to whoever wants it and cost nothing when nobody does.
// Not covered: point-to-point waits (Note [waiters drive progress] in
// base/work_state.h) spin flag_spin() polls, except that B = 0 makes them
// yield at once (runtime/p2p.cpp); the base layer sees no Options.
// The clock is read every 64th poll of a flag (a poll is a load, a clock
// read ~20 ns) and at every transport poll (a provider call, far more than
// a clock read), so B is kept to within ~64 polls.
// Per communicator, not per process: a Context reads its own
// communicator's options, so two communicators with different budgets each
// wait with theirs (only auto's host-rank count is per process, the last
// world's). Ranks may differ (a rank that shares its host with a data
// loader can give its core away while the others spin): the budget
// changes when a wait gives up its core, never which messages flow, so it
// is not among the options setup.cpp requires to agree.
bool Context::Backoff::spinning(std::chrono::microseconds budget, uint32_t mask) {
  if (spun) return false;
  if (idle < UINT32_MAX) ++idle;
  if (budget.count() > 0 && (idle & mask) != 0) return true;
  if (budget.count() > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (spin_end == std::chrono::steady_clock::time_point{}) {
      spin_end = now + budget;  // from the first clock read: ~64 polls late at most
      return true;
    }
    if (now < spin_end) return true;
  }
  spun = true;
  spin_polls = idle;
  return false;
}

void set_host_ranks(int ranks) {
  // Online CPUs, not this process's affinity: mpirun binds each rank to one
  // core, which says nothing about sharing. A cgroup cpuset smaller than
  // the machine is not seen; there an inline wait spins up to its budget
  // (kInlineSpin, 200 us) before handing off, which bounds the cost.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  g_ranks_fit.store(unsigned(ranks) <= cores, std::memory_order_relaxed);
  choose_flag_spin();
}

// Note [spins that adapt]: set_host_ranks sees only the job's own ranks; a
// host whose cores are busy with other work (a data loader's workers,
// another job, a build) looks idle to it, and the caller's long spin
// (kFlagSpinAlone) then burns a slice that the process we wait for, or
// the one that shares our core, needed. What shows it cheaply is being
// preempted: an involuntary context switch happens only when another task
// wanted this core. The watchdog samples the process's count (getrusage,
// ~1 us) every ~100 ms; over kContendedPerSecond (50/s: a core shared
// with one busy loop preempts a thread every few milliseconds, hundreds
// a second; an idle host's own wake-ups, the watchdog and engine threads,
// a few a second) auto uses kFlagSpinShared until a window below the rate.
// On an idle machine nothing preempts, so its latency is kept. Explicit
// budgets (Note [the spin budget]) are left alone: they say what to do.
// How long peers take is not followed: the doorbell (Note [the doorbell])
// already makes sleeping on a late peer cheap to wake from, and a per-peer
// history would cost every wait a store.
void note_preemptions(uint64_t preemptions, std::chrono::steady_clock::time_point now) {
  static std::mutex mu;  // one watchdog per communicator: several may sample
  static uint64_t last = 0;
  static std::chrono::steady_clock::time_point since{};
  std::lock_guard<std::mutex> lk(mu);
  if (since == std::chrono::steady_clock::time_point{} || preemptions < last) {
    last = preemptions, since = now;
    return;
  }
  if (now - since < std::chrono::milliseconds(90)) return;  // a window of ~100 ms at least
  g_contended.store(core_contended(preemptions - last, now - since), std::memory_order_relaxed);
  last = preemptions, since = now;
  choose_flag_spin();
}

uint32_t flag_spin() { return g_flag_spin.load(std::memory_order_relaxed); }

void Context::poll() {
  if (transport_.progress() > 0) {
    backoff_.reset();
    return;
  }
  if (side_ && ((backoff_.idle & 15u) == 15u || backoff_.napped)) side_->poll();
  if (const auto& budget = options_.collectives.spin_budget) {
    // Note [the spin budget]: poll for the budget, then yield and nap.
    if (!backoff_.spinning(*budget, 0)) backoff_.tick(std::min(backoff_.spin_polls, kTransportSpin));
    return;
  }
  backoff_.tick(kTransportSpin);
}

void Context::check(const Request& req) const {
  if (req.state == Request::State::Failed) {
    const char* dir = req.is_send ? "sending to" : "receiving from";
    switch (req.status) {
      case RequestStatus::Truncated:
        raise(ErrorCode::Mismatch,
              "{} failed {} rank {}: rank {} sent more than the {} bytes posted here ({}); likely "
              "cause: ranks called this collective with different counts or dtypes",
              what(), dir, req.peer, req.peer, req.length, req.error);
      case RequestStatus::Cancelled:
        raise(ErrorCode::Aborted, "{}: transfer {} rank {} was cancelled", what(), dir, req.peer);
      case RequestStatus::PeerLost:
        raise(ErrorCode::PeerLost, "{} failed {} rank {}: {}; likely cause: rank {} died or its "
              "host is unreachable", what(), dir, req.peer, req.error, req.peer);
      case RequestStatus::Ok:
      case RequestStatus::Failed: break;
    }
    // Some providers (shm's large-message protocols) report a receive that
    // was sent more data than posted as a plain I/O error.
    raise(ErrorCode::Transport, "{} failed {} rank {}: {} (error {}){}", what(), dir, req.peer,
          req.error, req.error_code,
          req.is_send ? "; likely cause: the peer failed or left"
                      : "; likely cause: the peer sent a different amount of data (ranks called "
                        "this collective with different counts or dtypes) or the peer failed");
  }
  if (!req.is_send && req.state == Request::State::Done && req.received != req.length) {
    raise(ErrorCode::Mismatch,
          "{}: received {} bytes from rank {} where {} were expected; likely cause: ranks called "
          "this collective with different counts or dtypes",
          what(), req.received, req.peer, req.length);
  }
}

// A peer's reported failure (Note [interrupting a collective]) or the
// deadline ends a wait on `peer`; `doing` and `detail` say how we waited
// ("waiting for data from" rank 3, "waiting for" rank 3 " to enter this
// collective"), words tools/gradwire-fr reads back. " Timed out " is how
// Gloo words it and what torch's own tests match (issue 21).
void Context::check_wait(std::string_view doing, int peer, std::string_view detail) const {
  if (interrupt_ && interrupt_->load(std::memory_order_acquire)) {
    raise(ErrorCode(interrupt_code_->load()), "{} was interrupted while {} rank {}{}: {}", what(),
          doing, peer, detail, *interrupt_reason_);
  }
  if (deadline_.expired()) {
    raise(ErrorCode::Timeout,
          "{}: Timed out after {:.1f} s {} rank {}{}{}{}; likely cause: rank {} died, is stuck, or "
          "called a different collective or count (GRADWIRE_TIMEOUT_S sets the deadline)",
          what(), std::chrono::duration<double>(options_.timeout).count(), doing, peer, detail,
          algorithm_.empty() ? "" : " in ", algorithm_, peer);
  }
}

void Context::progress_or_fail(const Request& blocking) {
  poll();
  if (((++polls_ & 255u) == 0 || backoff_.napped) && !blocking.done()) {
    check_wait(blocking.is_send ? "sending to" : "waiting for data from", blocking.peer, "");
  }
}

void Context::idle_tick(Backoff& ws, int peer, std::string_view waiting_for) {
  const uint32_t idle = ws.idle + 1;
  bool napped = false;
  if (const auto& budget = options_.collectives.spin_budget) {
    // Note [the spin budget]: poll for the budget; then a caller's thread
    // hands off, the engine's sleeps on the doorbell.
    if (!ws.spinning(*budget, 63u)) {
      if (spin_budget_.count()) throw WouldBlock{};
      napped = ws.bell ? ws.rest() : ws.tick(std::min(ws.spin_polls, kTransportSpin));
    }
  } else {
    // The clock is read from the 64th empty poll on: most waits end sooner.
    if (spin_budget_.count() && (idle & 63u) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (idle == 64) ws.give_up = now + spin_budget_;
      else if (now > ws.give_up) throw WouldBlock{};
    }
    napped =
        ws.tick(spin_budget_.count() ? g_flag_spin.load(std::memory_order_relaxed) : kFlagSpinShared);
  }
  if (side_ && ((idle & 15u) == 0 || napped)) side_->poll();
  if ((idle & 255u) == 0 || napped) check_wait("waiting for", peer, waiting_for);
}

void Context::stalled(const Request* oldest_recv, std::span<const Request> sends) {
  const Request* blocking = oldest_recv;
  for (size_t i = 0; blocking == nullptr && i < sends.size(); ++i) {
    if (sends[i].state == Request::State::Pending) blocking = &sends[i];
  }
  GW_CHECK(blocking != nullptr, "{}: a pipeline made no progress and waits for nothing", what());
  progress_or_fail(*blocking);
}

void Context::wait(Request& req) {
  while (!req.done()) progress_or_fail(req);
  check(req);
}

void Context::wait_all(std::span<Request> reqs) {
  for (auto& r : reqs) {
    if (r.state == Request::State::Idle) continue;
    wait(r);
  }
}

}  // namespace gradwire::collectives
