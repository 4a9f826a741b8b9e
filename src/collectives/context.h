// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What one running collective needs: the transport, who we are, the
// sequence number that keeps its messages apart from every other
// collective's, its deadline, scratch memory, and the words to use in an
// error message.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/work_state.h"
#include "collectives/doorbell.h"
#include "gradwire/options.h"
#include "gradwire/types.h"
#include "transport/transport.h"

namespace gradwire::collectives {

using transport::Request;
using transport::RequestStatus;

// Note [tags]: a tag uses the low 63 bits of the 64 (the native `net`
// provider reserves the top one: its mem_tag_format is 0x5555...). A
// collective's tag is 0:1 | seq:22 | source rank:20 | slot:20. The
// sequence number separates collectives (messages of collective k can never
// match receives of collective k+1, even if a rank runs ahead; 2^22
// collectives wrap, far beyond how far ranks can drift apart); the source
// rank makes matching correct on providers without FI_DIRECTED_RECV; the
// slot separates the messages one collective exchanges with one peer
// (algorithm step x pipeline segment). Every rank computes the same slots.
// Bit 62 marks point-to-point messages (Note [point-to-point] in
// runtime/p2p.h), whose tags are 1:1 | payload:1 | clear:1 | 0:8 | user
// tag:32 | source rank:20 in bits 62..0.
inline constexpr int kSeqBits = 22;
inline constexpr int kRankBits = 20;
inline constexpr int kSlotBits = 20;
inline constexpr uint32_t kMaxSlots = 1u << kSlotBits;
inline constexpr int kMaxWorldSize = 1 << kRankBits;

inline uint64_t make_tag(uint32_t seq, int src_rank, uint32_t slot) {
  return (uint64_t(seq & ((1u << kSeqBits) - 1)) << (kRankBits + kSlotBits)) |
         (uint64_t(uint32_t(src_rank)) << kSlotBits) | uint64_t(slot & (kMaxSlots - 1));
}

// The side lane of Note [connections that stall] in transport/transport.h.
inline constexpr uint64_t kP2pBit = transport::kSideLaneBit;
inline constexpr uint64_t kPayloadBit = uint64_t{1} << 61;
// Point-to-point clear-to-send: the receiver of a long message is ready.
inline constexpr uint64_t kClearBit = uint64_t{1} << 60;
static_assert(kSeqBits + kRankBits + kSlotBits == 62, "collective tags stay below kP2pBit");
static_assert(32 + kRankBits < 60, "point-to-point tags stay below kClearBit");
inline uint64_t make_p2p_tag(uint32_t tag, int src_rank) {
  return kP2pBit | (uint64_t(tag) << kRankBits) | uint64_t(uint32_t(src_rank));
}

// Note [inline small collectives] in runtime/engine.h: thrown by wait_for
// on a caller's thread that spun its budget; the engine thread then
// continues the collective. Not an Error: nothing failed.
struct WouldBlock {};

// Note [backoff when idle] in context.cpp: how many ranks of the job run on
// this host (set by the world communicator's creation; the last one wins).
void set_host_ranks(int ranks);
// Polls of a shared-memory flag before a caller's thread yields (the same
// note): long when every rank of this host has a core and this process is
// not being preempted (Note [spins that adapt]), short otherwise.
uint32_t flag_spin();
// Note [spins that adapt] in context.cpp: `preemptions`, this process's
// involuntary context switches so far (getrusage's ru_nivcsw), sampled
// every ~100 ms by the watchdog; a rate above kContendedPerSecond over the
// last window makes auto's spin short until a window below it.
void note_preemptions(uint64_t preemptions, std::chrono::steady_clock::time_point now);
inline constexpr uint64_t kContendedPerSecond = 50;
// The rule itself (pure): `preemptions` in `window` mean a shared core.
inline bool core_contended(uint64_t preemptions, std::chrono::nanoseconds window) {
  return window.count() > 0 &&
         double(preemptions) * 1e9 >= double(kContendedPerSecond) * double(window.count());
}

class Context {
 public:
  // `work` names the collective in errors (Note [descriptions on demand]).
  Context(transport::Transport& transport, int rank, int size, uint32_t seq, Deadline deadline,
          const Options& options, std::array<std::vector<std::byte>, 2>& scratch,
          const detail::WorkState& work)
      : transport_(transport), rank_(rank), size_(size), seq_(seq), deadline_(deadline),
        options_(options), scratch_(scratch), work_(work) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  uint32_t seq() const { return seq_; }
  const Options& options() const { return options_; }
  Deadline deadline() const { return deadline_; }
  // "rank 2: allreduce #17 (1048576 x float32 sum)"
  const std::string& what() const { return work_.description(); }
  void set_algorithm(std::string_view name) { algorithm_ = name; }
  // Added to every slot of send/recv: lets one collective run several
  // algorithm instances back to back (the staged pieces of a device buffer,
  // Note [staged device collectives]) without their messages matching each
  // other's receives. Every rank must set the same base.
  void set_slot_base(uint32_t base) { slot_base_ = base; }
  // Note [interrupting a collective]: another thread (the watchdog, on a
  // peer's report of a failure) sets `*flag` after writing `*reason` and
  // `*code`; waits then fail with that code naming the reason instead of
  // running to their deadline. Checked as rarely as the deadline.
  void set_interrupt(const std::atomic<bool>* flag, const std::string* reason,
                     const std::atomic<int>* code) {
    interrupt_ = flag;
    interrupt_reason_ = reason;
    interrupt_code_ = code;
  }

  // `n` fresh requests that live as long as this Context.
  //
  // Note [requests outlive the collective]: when a collective fails, the
  // communicator cancels every posted transfer *after* the exception left
  // the collective's frame; the transport still points at these requests
  // then, so they must not live on that frame.
  std::span<Request> requests(size_t n);

  // Scratch memory owned by the communicator, reused between collectives
  // (so steady-state training allocates nothing). Two independent areas;
  // a pointer is valid until the next call for the same area.
  enum class Area { Window = 0, Work = 1 };
  std::byte* scratch(size_t bytes, Area area = Area::Window);

  // Post a send to / receive from `peer` in message slot `slot`.
  void send(Request& req, int peer, const void* buf, size_t bytes, uint32_t slot);
  void recv(Request& req, int peer, void* buf, size_t bytes, uint32_t slot);

  // Drive progress until `req` is done; throws a gradwire::Error that names
  // the peer, this collective and the likely cause on failure or deadline.
  void wait(Request& req);
  void wait_all(std::span<Request> reqs);
  // Drive progress once; if nothing completed for a while, back off so
  // oversubscribed ranks (more ranks than cores) let their peers run.
  void poll();
  // poll(), and every so often check the deadline; on expiry fail naming
  // `blocking`, the request we are waiting for.
  void progress_or_fail(const Request& blocking);
  // For pipelined loops that could do nothing this round: progress_or_fail
  // on the oldest receive still expected (if any), else on a pending send.
  void stalled(const Request* oldest_recv, std::span<const Request> sends);
  // Waits until `done()` holds, for memory another process writes (the
  // direct path's flags): spins, then yields, then sleeps briefly (Note
  // [backoff when idle]); deadline and interrupt are checked as in
  // progress_or_fail. On expiry: Timeout naming `peer` and `waiting_for`.
  // A template, so that `done` is called directly: a std::function of a
  // lambda with more than two captures is a heap allocation per wait.
  // `bell`: the doorbell of the rank that sets the flag `done` reads (Note
  // [the doorbell]); the wait sleeps on it instead of napping.
  template <class Done>
  void wait_for(const Done& done, int peer, std::string_view waiting_for,
                Doorbell* bell = nullptr) {
    if (done()) return;  // most waits of a small collective
    Backoff ws(bell);
    do {
      idle_tick(ws, peer, waiting_for);
    } while (!done());
  }
  // On a caller's thread: wait_for throws WouldBlock once one wait has
  // found nothing for `budget` (with an explicit Options spin budget: once
  // its spin ends, Note [the spin budget] in context.cpp). Zero: never (the
  // engine thread).
  void set_spin_budget(std::chrono::microseconds budget) { spin_budget_ = budget; }
  // Note [point-to-point on one host] in runtime/p2p.h: what idle waits
  // also advance (every 16th idle poll), so a rank inside a collective
  // still serves the peers' point-to-point messages.
  void set_side_progress(detail::Progress* p) { side_ = p; }
  // Throws if `req` failed or a receive got fewer bytes than posted.
  void check(const Request& req) const;

 private:
  void check_wait(std::string_view doing, int peer, std::string_view detail) const;
  // Note [backoff when idle] and Note [naps that grow] in context.cpp: the
  // state of one idle run of polls.
  struct Backoff {
    uint32_t idle = 0;  // empty polls in a row
    bool napped = false;  // the last tick napped
    std::chrono::steady_clock::time_point yielding_since{}, napping_since{}, give_up{};
    // Note [the doorbell]: naps become sleeps on `bell`, if any.
    Doorbell* bell = nullptr;
    bool announced = false;  // counted in bell->sleepers
    uint32_t seen = 0;       // bell->rings as read before the latest check
    int last = -1;           // how the last sleep ended (a Woken), -1: none yet
    Backoff() = default;
    explicit Backoff(Doorbell* b) : bell(b) {}
    Backoff(const Backoff&) = delete;
    Backoff& operator=(const Backoff&) = delete;
    ~Backoff() {
      if (!announced) return;
      bell->sleepers.fetch_sub(1, std::memory_order_release);
      if (last >= 0) note_wait_end(Woken(last));
    }
    // Counts an empty poll and spins, yields or naps; true if it napped.
    bool tick(uint32_t spin);
    // The sleeping phase alone (a nap, or a sleep on `bell`); true.
    bool rest();
    // Note [the spin budget] in context.cpp: counts an empty poll of an
    // explicit budget's spin; true while it lasts (the clock is read when
    // `idle & mask` is 0). When it ends, `spin_polls` is how many it took.
    bool spinning(std::chrono::microseconds budget, uint32_t mask);
    bool resting = false;  // rest() has begun
    bool spun = false;     // an explicit budget's spin is over
    uint32_t spin_polls = 0;
    std::chrono::steady_clock::time_point spin_end{};
    void reset() { idle = 0, napped = resting = spun = false, spin_end = {}; }
  };
  // One empty poll of wait_for: back off, check the spin budget, the
  // deadline and the interrupt.
  void idle_tick(Backoff& ws, int peer, std::string_view waiting_for);

  transport::Transport& transport_;
  int rank_, size_;
  uint32_t seq_;
  Deadline deadline_;
  uint32_t slot_base_ = 0;
  const Options& options_;
  std::array<std::vector<std::byte>, 2>& scratch_;
  const detail::WorkState& work_;
  std::string_view algorithm_;
  const std::atomic<bool>* interrupt_ = nullptr;
  const std::string* interrupt_reason_ = nullptr;
  const std::atomic<int>* interrupt_code_ = nullptr;  // an ErrorCode
  Backoff backoff_;  // of poll()
  std::vector<std::unique_ptr<Request[]>> request_blocks_;
  uint32_t polls_ = 0;
  std::chrono::microseconds spin_budget_{0};
  detail::Progress* side_ = nullptr;
};

}  // namespace gradwire::collectives
