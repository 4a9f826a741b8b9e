// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CommunicatorImpl::submit_task, the one way a collective is queued (or run
// on its caller's thread), as a template over the task's own type (Note
// [the lean inline path] in communicator.cpp): included by the code that
// submits with a lambda of its own, the communicator and the router's
// strategies (Note [ordered strategies] in runtime/router.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "base/raise.h"
#include "diag/fingerprint.h"
#include "diag/trace.h"
#include "runtime/communicator_impl.h"
#include "runtime/job.h"
#include "runtime/watchdog.h"

namespace gradwire {

namespace detail_submit {
// Note [inline small collectives] in runtime/engine.h: a collective that
// runs on its caller's thread (the task's `on_caller`, an argument rather
// than a thread_local: a library's TLS read is a __tls_get_addr call, 2 %
// of an 8-byte broadcast) waits with a spin budget: it gives up after
// kInlineSpin and hands the rest to the engine thread, so a call never
// blocks its caller on a late peer for long. Longer than a thread wake-up
// (~10 us here): a peer whose last collective ended on its engine thread
// is that much late, and a shorter budget made both ranks hand off on
// every call in turn (7-11 us a collective instead of 1-2). An explicit
// Options spin budget replaces it (Note [the spin budget] in
// collectives/context.cpp).
inline constexpr std::chrono::microseconds kInlineSpin{200};

// A task of submit_task as the engine thread runs it: never on a caller's thread.
template <class F>
Engine::Task on_engine(F task) {
  return [task = std::move(task)](detail::WorkState& work) mutable { task(work, false); };
}
// The timeline's spans of one collective (communicator.cpp; out of line:
// only traced runs pay for it).
[[gnu::noinline]] void trace_collective(const std::string& comm, std::string_view op,
                                       uint32_t seq, const CollectiveCall& info,
                                       int64_t queued_us, int64_t started_us, bool ok);
}  // namespace detail_submit

template <class F>
Work CommunicatorImpl::submit_task(const CollectiveCall& info, F fn, const Label& label,
                                   bool inline_ok, Clock::time_point now) {
  if (aborted_) {
    std::lock_guard<std::mutex> lk(state_mu_);
    raise(ErrorCode::Aborted, "rank {}: cannot start {} on communicator {}: it was aborted: {}",
          rank, label.name.empty() ? info.name() : label.name, name, abort_reason_);
  }
  const job::Interrupt& stop = job::interrupt();
  if (stop.failed.load(std::memory_order_acquire)) {
    raise(ErrorCode::Aborted, "rank {}: cannot start {} on communicator {}: {}", rank,
          label.name.empty() ? info.name() : label.name, name, stop.reason);
  }
  std::unique_lock<BiasedMutex> lk(submit_mu_);
  const uint32_t seq = next_seq_++;
  std::shared_ptr<detail::WorkState> state = state_for(seq, info, label);
  // Note [recording is a few stores] in diag/flight_recorder.h.
  const uint64_t record = recorder_.queued(fr_ids_, fr_comm_, seq, info, now);
  const int64_t queued_us = trace::enabled() ? trace::now_us() : 0;
  // Mutable: a collective begun on the caller's thread and resumed on the
  // engine's (Note [inline small collectives]) keeps its deadline and is
  // recorded as started once. The call and its label are read from the
  // state (`work.text()`), not copied into the closure: its construction
  // was ~75 instructions of an 8-byte broadcast's ~1200 (issue 18).
  auto task = [this, &stop, seq, record, queued_us, fn = std::move(fn), begun = false,
               deadline = Deadline::never(),
               started_us = int64_t(0)](detail::WorkState& work, bool on_caller) mutable {
    const auto what = [&work]() -> const std::string& { return work.description(); };
    const CollectiveCall& info = work.text().call;
    const std::string& label_name = work.text().label;
    const std::string_view op = label_name.empty() ? info.name() : std::string_view(label_name);
    fr::Recorder& recorder = recorder_;
    const bool resumed = begun;
    if (!begun) {
      begun = true;
      recorder.started(record, on_caller);
      // Note [coarse clock]: from when the engine or the caller marked the
      // state started, on this thread, a moment ago (one clock read less).
      deadline = Deadline(work.started + options.timeout);
      // The timeline (diag/trace.h): queued and running phases of each collective.
      started_us = queued_us ? trace::now_us() : 0;
    }
    if (aborted_) {
      recorder.done(record, false);
      std::lock_guard<std::mutex> lk(state_mu_);
      raise(ErrorCode::Aborted, "{} did not run: the communicator was aborted: {}", what(),
            abort_reason_);
    }
    collectives::Context ctx(*transport, rank, size, seq, deadline, options, scratch_, work);
    ctx.set_interrupt(&stop.failed, &stop.reason, &stop.code);
    ctx.set_side_progress(&p2p_.side_progress());
    if (on_caller) ctx.set_spin_budget(detail_submit::kInlineSpin);
    try {
      if (!resumed && stop.failed.load(std::memory_order_acquire)) {
        raise(ErrorCode::Aborted, "{} did not run: {}", what(), stop.reason);
      }
      last_started.store(seq, std::memory_order_relaxed);  // Note [reach report] in diag/reach.h
      if (!resumed && options.diagnostics.debug_detail && info.op != CollectiveOp::Other) {
        check_fingerprint(ctx, make_fingerprint(seq, info));
      }
      fn(ctx);
    } catch (const Error& e) {
      // Note [a failed collective aborts its communicator]: peers may be
      // mid-way through this collective with transfers posted into our
      // buffers; the message schedule is no longer shared. Cancel everything
      // so no user buffer is written later, and refuse further collectives.
      recorder.done(record, false);
      if (queued_us) detail_submit::trace_collective(name, op, seq, info, queued_us, started_us, false);
      // Note [reach report] in diag/reach.h: which ranks had reached this
      // collective, before the failure is published (so the ranks it
      // interrupts repeat it), unless another rank's report caused it.
      std::string reach;
      if ((e.code() == ErrorCode::Timeout || e.code() == ErrorCode::PeerLost) &&
          !stop.failed.load(std::memory_order_acquire)) {
        reach = Watchdog::reach_report(*watchdog_state, fmt::format("{} #{}", op, seq), seq);
      }
      fail_communicator(e.what() + reach, seq, e.code());
      if (reach.empty()) throw;
      throw Error(e.code(), e.message() + reach);
    } catch (const std::exception& e) {
      recorder.done(record, false);
      if (queued_us) detail_submit::trace_collective(name, op, seq, info, queued_us, started_us, false);
      fail_communicator(e.what(), seq, ErrorCode::Internal);
      raise(ErrorCode::Internal, "{}: {}", what(), e.what());
    }
    recorder.done(record, true, on_caller);
    if (queued_us) detail_submit::trace_collective(name, op, seq, info, queued_us, started_us, true);
  };
  // Note [inline small collectives] in runtime/engine.h. Claimed under
  // submit_mu_, so a later submission queues behind this one. The state is
  // only ours (and spare_state_'s) until claimed, so it is marked started
  // without its lock (Note [the lean inline path]).
  if (inline_ok && !options.diagnostics.debug_detail) {
    state->phase = detail::WorkState::Phase::Running;
    state->started = now;  // Note [coarse clock]
    if (engine_->claim_inline()) {
      lk.unlock();
      std::exception_ptr err;
      try {
        task(*state, /*on_caller=*/true);
      } catch (const collectives::WouldBlock&) {
        // A peer is not there yet: the engine goes on with it, before
        // anything queued meanwhile, and the caller gets a pending Work.
        engine_->resume(state, detail_submit::on_engine(std::move(task)));
        return Work(std::move(state));
      } catch (...) {
        err = std::current_exception();
      }
      // Nothing but this thread holds the state (the claim did not publish
      // it, Note [a claim is two stores] in runtime/engine.cpp).
      state->finish_unshared(err);
      engine_->release_inline();
      return Work(std::move(state));
    }
    state->phase = detail::WorkState::Phase::Queued;
  }
  engine_->submit_locked(state, detail_submit::on_engine(std::move(task)));  // under submit_mu_
  return Work(std::move(state));
}

}  // namespace gradwire
