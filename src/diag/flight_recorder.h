// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The flight recorder: the last N collectives of this process (every
// communicator), kept so that a timeout or error can say what each rank was
// doing. Dumped as JSON (Note [flight recorder dump format]) and read back
// by tools/gradwire-fr (diag/fr_report.h).
//
// Note [recording is a few stores]: the hot path (queued, started, done)
// claims a slot (by an id from its communicator's block, Note [ids in
// blocks]) and writes relaxed atomics into a ring
// allocated once; no lock, no allocation. A reader (the dump) may see a slot
// being rewritten; each slot carries the id of its record, and the dump
// skips slots whose id changed while it read them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/collective_call.h"
#include "base/deadline.h"
#include "gradwire/types.h"

namespace gradwire::fr {

enum class State : uint8_t { Queued, Started, Completed, Failed };
std::string_view to_string(State s);
State parse_state(std::string_view s);

// `s` as the inside of a JSON string.
std::string json_escape(std::string_view s);

// Microseconds since the Unix epoch (comparable between ranks of one host),
// to a scheduler tick (Note [coarse clock]).
int64_t now_us();

// Note [recorded on the monotonic clock]: the ring keeps coarse monotonic
// microseconds, so a collective on its caller's thread records the time it
// read anyway (Note [one clock read per call] in runtime/communicator.cpp)
// instead of reading the wall clock too; to_json() shifts them to the Unix
// epoch by the two clocks' difference at the dump (a wall-clock step
// between a record and the dump shifts the record by as much; entries stay
// ordered among themselves).
inline int64_t monotonic_us(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

class Recorder {
 public:
  // The process's recorder; configure() sets its size once (the first
  // communicator's Options::flight_recorder_size), later calls are ignored.
  static Recorder& instance();
  void configure(size_t entries, std::string dir, int world_rank, int world_size);
  bool enabled() const { return capacity_ > 0; }

  // A communicator's index in dumps; its name, rank and size in it.
  uint16_t register_comm(const std::string& name, int rank, int size);
  // Returns the record id for started()/done(); 0 when disabled. `now`:
  // the caller's coarse_now().
  uint64_t queued(uint16_t comm, uint32_t seq, const CollectiveCall& call,
                  Clock::time_point now = coarse_now());
  // Note [ids in blocks]: the id from a block of ids reserved for one
  // communicator (its submissions are serialised by its submission lock),
  // so that a record costs no locked instruction: one fetch_add reserves
  // kIdBlock ids (fewer for a small ring). A block whose ids have fallen
  // half a ring behind the newest is dropped for a fresh one, so its
  // records are never older than the ring keeps. Records of different
  // communicators then interleave in id order by block, not by time; the
  // dump orders entries by their queued time.
  struct IdBlock {
    uint64_t next = 0, end = 0;
  };
  uint64_t queued(IdBlock& ids, uint16_t comm, uint32_t seq, const CollectiveCall& call,
                  Clock::time_point now);
  // `at_queue_time`: started when queued (a collective on its caller's
  // thread): the queued time is kept, saving a clock read per call.
  // Inline, as done(): a few stores, called on every collective.
  void started(uint64_t id, bool at_queue_time = false) {
    if (id == 0) return;
    Slot& s = slot(id);
    if (s.id.load(std::memory_order_acquire) != id) return;  // overwritten: N newer records
    s.started_us.store(at_queue_time ? s.queued_us.load(std::memory_order_relaxed)
                                     : monotonic_us(coarse_now()),
                       std::memory_order_relaxed);
    s.state.store(uint8_t(State::Started), std::memory_order_relaxed);
  }
  // `at_queue_time`: a collective that ran on its caller's thread, which
  // ends within its spin budgets (200 us a wait) and at most a staging
  // half of copying, almost always inside one tick of the coarse clock
  // (1-4 ms, its resolution): the queued time is kept (at worst about a
  // tick early) instead of reading the clock again.
  void done(uint64_t id, bool ok, bool at_queue_time = false) {
    if (id == 0) return;
    Slot& s = slot(id);
    if (s.id.load(std::memory_order_acquire) != id) return;
    s.done_us.store(at_queue_time ? s.queued_us.load(std::memory_order_relaxed)
                                  : monotonic_us(coarse_now()),
                    std::memory_order_relaxed);
    s.state.store(uint8_t(ok ? State::Completed : State::Failed), std::memory_order_relaxed);
  }
  // Note [straggler detection] in diag/straggler.h: the completed records
  // of communicator `comm` with a sequence number above `after`, as far as
  // the ring still holds them, in no particular order. Reads the ring as
  // the dump does (a slot rewritten while read is skipped); for the
  // watchdog thread, a few microseconds for the default 2048 slots.
  struct Done {
    uint32_t seq;
    uint8_t op;
    int64_t started_us, done_us;  // monotonic (Note [recorded on the monotonic clock])
  };
  void completed(uint16_t comm, int64_t after, std::vector<Done>& out) const;
  // The error that ended a communicator's collective `seq` (first one kept).
  void set_error(uint16_t comm, uint32_t seq, const std::string& message);

  // Writes <dir>/gradwire-fr-rank<R>.json (atomically, via rename) once per
  // process: the first reason wins, later calls return the same path.
  // Returns the path, or "" if disabled or the write failed (logged).
  std::string dump(const std::string& reason);
  // The JSON document dump() writes.
  std::string to_json(const std::string& reason) const;
  std::string dump_path() const;

 private:
  struct Slot {
    std::atomic<uint64_t> id{0};  // 0: empty or being written
    std::atomic<uint32_t> seq{0};
    std::atomic<uint16_t> comm{0};
    std::atomic<uint8_t> op{0}, dtype{0}, redop{0}, state{0}, has_redop{0};
    std::atomic<int32_t> root{-1};
    std::atomic<uint64_t> count{0};
    std::atomic<int64_t> queued_us{0}, started_us{0}, done_us{0};
  };
  struct Comm {
    std::string name;
    int rank = 0, size = 0;
    uint32_t error_seq = 0;
    std::string error;
  };

  size_t capacity_ = 0;
  // capacity_ - 1 when it is a power of two (the default 2048), else 0:
  // a slot's index is then a mask, not a 64-bit division (~40 cycles,
  // three per collective).
  size_t mask_ = 0;
  Slot& slot(uint64_t id) const { return slots_[mask_ ? id & mask_ : id % capacity_]; }
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_id_{0};
  static constexpr uint64_t kIdBlock = 64;
  uint64_t record(uint64_t id, uint16_t comm, uint32_t seq, const CollectiveCall& info,
                  Clock::time_point now);
  mutable std::mutex mu_;  // comms_, dir_, dump state; never on the hot path
  std::vector<Comm> comms_;
  std::string dir_;
  int world_rank_ = 0, world_size_ = 1;
  bool configured_ = false;
  std::string dumped_path_;
  bool dumped_ = false;
};

}  // namespace gradwire::fr
