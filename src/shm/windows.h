// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Memory the ranks of one host map from each other (POSIX shared memory),
// behind Communicator::allocate_shared() and the direct collectives
// (src/shm/direct.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "collectives/doorbell.h"
#include "shm/mailbox.h"

namespace gradwire {

namespace shm {

// One mmap'ed region; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(std::byte* data, size_t length) : data_(data), length_(length) {}
  ~Mapping();
  Mapping(Mapping&& o) noexcept { *this = std::move(o); }
  Mapping& operator=(Mapping&& o) noexcept;
  std::byte* data() const { return data_; }
  size_t length() const { return length_; }

 private:
  std::byte* data_ = nullptr;
  size_t length_ = 0;
};

// What a rank publishes for each direct-path collective (Note [the direct
// handshake] in direct.cpp). Plain data in shared memory.
// Note [one line per message]: a descriptor fills one cache line, and its
// seq1 is stored last (a release store), so a peer that waits for it reads
// one line, not a flag's and then the descriptor's (two or three cross-core
// misses, the cost of a small collective on this VM).
struct alignas(64) Descriptor {
  static constexpr uint32_t kNoWindow = UINT32_MAX;
  uint64_t seq1 = 0;  // sequence number + 1 (0: never written)
  uint8_t kind = 0;   // CollectiveOp
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t staged = 0;  // 1: the input is in this rank's slot (Note [small collectives])
  int32_t root = -1;   // broadcast
  uint32_t send_window = kNoWindow, recv_window = kNoWindow;
  uint64_t count = 0;
  uint64_t send_offset = 0, recv_offset = 0;
  // Note [one line per message]: a small collective's input of up to 16
  // bytes travels here, in the descriptor's line, instead of in the slot.
  static constexpr size_t kInlineBytes = 16;
  std::byte data[kInlineBytes] = {};
};
static_assert(sizeof(Descriptor) == 64, "a descriptor is one cache line");
// In the control segment each descriptor has a pair of lines of its own:
// CPUs may fetch lines in aligned pairs (the adjacent-line prefetcher);
// then a broadcast root writing descriptor i + 1 while a reader reads
// descriptor i would contend for one pair. (Not measurable on this VM
// either way; 2 KiB per rank.) The padding is the slot's, not the type's:
// a 128-byte-aligned Descriptor on the stack (a copy, a default one) is
// zeroed with `rep stosq`, and perf put 12 % of a broadcast root's samples
// on the store after it on this AMD VM (issue 18); 64 bytes are four
// vector stores.
struct alignas(128) DescriptorSlot {
  Descriptor d;
};

// One per rank, in that rank's control segment. Flags sit on their own pair
// of cache lines (see Descriptor): every peer polls them.
// Note [slot reuse] in shm/small.cpp: how many handshakes a rank
// may be ahead of the slowest reader before it waits; descriptors and slots
// are indexed by seq % kDepth. A depth lets a broadcast root run ahead (as
// an eager protocol lets Open MPI's) instead of meeting every reader; 16
// rather than 4 lets the readers catch up in batches when ranks share cores
// (an 8-byte broadcast at 3 ranks on 2 cores: 2.8-3.7 us with 4, 1.2-2.0
// with 16, 0.9-1.8 with 64, against Open MPI's 0.5-0.8 in the same runs).
// It costs 16 slots of kSlotBytes per rank: 1 MiB.
constexpr uint64_t kDepth = 16;

struct Control {
  alignas(128) std::atomic<uint64_t> arrived{0};   // seq + 1 of the last handshake entered
  alignas(128) std::atomic<uint64_t> departed{0};  // seq + 1 of the last direct collective left
  // seq + 1 of the last handshake whose peers' descriptors (and, for a
  // small collective, slots) this rank has finished reading (Note [slot
  // reuse] in shm/small.cpp).
  alignas(128) std::atomic<uint64_t> consumed{0};
  // Note [the copy path] in shm/copy_path.cpp: 2g + 1 once this
  // rank's inputs of copy round g are in its staging area, 2g + 2 once its
  // results of round g are (reduce_scatter and allgather, which stage no
  // results, raise it to 2g + 2 at once).
  alignas(128) std::atomic<uint64_t> progress{0};
  // Note [the doorbell] in collectives/doorbell.h: rung after each store to
  // the flags above (and a descriptor's seq1); peers waiting for them sleep
  // on it.
  alignas(128) collectives::Doorbell bell;
  DescriptorSlot desc[kDepth];            // indexed by seq % kDepth
};

// Note [small collectives] in shm/small.cpp: each rank's control
// segment also holds kDepth slots (indexed by seq % kDepth) for the inputs of small
// collectives, after its Control.
constexpr size_t kSlotBytes = size_t(64) << 10;
constexpr size_t kSlotOffset = (sizeof(Control) + 63) / 64 * 64;
// Note [the copy path] in shm/copy_path.cpp: then two staging
// halves (copy rounds alternate between them), page-aligned: 2 MiB more
// per rank of every one-host communicator, reserved when the segment is
// made (Note [segments are backed when made] in shared_windows.cpp).
constexpr size_t kStageOffset = (kSlotOffset + kDepth * kSlotBytes + 4095) / 4096 * 4096;
constexpr size_t kStageBytes = size_t(1) << 20;
// Note [mailboxes] in shm/mailbox.h: then one ring per destination rank
// (this rank's own included, unused, so the layout is one multiplication):
// 256 KiB per rank of the communicator.
constexpr size_t kMailOffset = kStageOffset + 2 * kStageBytes;
inline size_t control_bytes(int size) { return kMailOffset + size_t(size) * kMailboxBytes; }

// Where a buffer lies in this rank's windows.
struct Location {
  uint32_t window = Descriptor::kNoWindow;
  uint64_t offset = 0;
};

// The windows of one communicator. Created by the first allocate_shared()
// (collective), shared by the communicator, its queued collectives and every
// SharedBuffer, so any of them may go first.
class Windows {
 public:
  Windows(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  // True when every rank maps every other rank's control segment: then the
  // reduce_scatter, allgather and allreduce of the communicator handshake
  // through them and take the direct path when their buffers allow it.
  bool active() const { return active_; }
  Control& control(int r) const { return *reinterpret_cast<Control*>(controls_[r].data()); }
  // Rank r's slot for the collective with sequence number + 1 `seq1`.
  std::byte* slot(int r, uint64_t seq1) const {
    return controls_[r].data() + kSlotOffset + (seq1 % kDepth) * kSlotBytes;
  }
  // The ring of messages from rank `from` to rank `to`, in `from`'s
  // control segment (Note [mailboxes]).
  std::byte* mailbox(int from, int to) const {
    return controls_[from].data() + kMailOffset + size_t(to) * kMailboxBytes;
  }
  // Rank r's staging half for copy round `round` (Note [the copy path]).
  std::byte* stage(int r, uint64_t round) const {
    return controls_[r].data() + kStageOffset + (round % 2) * kStageBytes;
  }
  // Note [the copy path]: copy rounds run so far on this communicator;
  // every rank runs the same ones. Same thread as last_handshake.
  mutable uint64_t copy_rounds = 0;
  // The 64-bit count + 1 of collective `seq` for the flags (`arrived`,
  // `consumed` and a descriptor's seq1 only grow): the communicator's 32-bit
  // sequence number wraps after 2^32 collectives, about two hours of small
  // ones. Every rank handshakes the same collectives, so every rank counts
  // the same wraps. Same thread as last_handshake; idempotent per seq.
  uint64_t seq1(uint32_t seq) const {
    if (!seq_seen_ || seq != seq32_) {
      if (seq_seen_ && seq < seq32_) ++wraps_;
      seq32_ = seq;
      seq_seen_ = true;
    }
    return (wraps_ << 32) + uint64_t(seq) + 1;
  }
  // Note [slot reuse]: seq + 1 of the last handshake of each index. Only
  // the thread running this communicator's collective touches it (the
  // engine's, or a caller's that claimed the engine).
  mutable uint64_t last_handshake[kDepth] = {};
  // The descriptors of the current handshake, by rank (same thread).
  mutable std::vector<Descriptor> seen;
  // Note [one line per message]: each peer's `consumed` as last read, so
  // that wait_until_free reads the peer's line only when that is too old
  // (same thread; by rank).
  mutable std::vector<uint64_t> consumed_seen;

 private:
  mutable uint32_t seq32_ = 0;
  mutable uint64_t wraps_ = 0;
  mutable bool seq_seen_ = false;

 public:

  // The window holding [p, p + bytes) among this rank's own, if any.
  std::optional<Location> find(const void* p, size_t bytes) const;
  // Rank r's memory at `offset` of window `id`, or nullptr if this rank does
  // not map such a window or [offset, offset + bytes) lies outside it.
  std::byte* address(int r, uint32_t id, uint64_t offset, size_t bytes) const;

  // Called by allocate().
  void set_controls(std::vector<Mapping> controls);
  void add(uint32_t id, std::vector<Mapping> maps, std::vector<size_t> bytes);
  void release(uint32_t id);
  uint32_t next_id() { return next_id_++; }

 private:
  struct Window {
    std::vector<Mapping> maps;  // by rank; own included
    std::vector<size_t> bytes;  // usable bytes per rank
  };
  const int rank_, size_;
  bool active_ = false;
  std::vector<Mapping> controls_;
  mutable std::mutex mu_;
  std::map<uint32_t, Window> windows_;
  uint32_t next_id_ = 0;
};

}  // namespace shm

namespace detail {
// What a SharedBuffer holds; releases its window when the last one goes.
struct SharedAllocation {
  std::shared_ptr<shm::Windows> owner;  // null for a private fallback
  uint32_t id = shm::Descriptor::kNoWindow;
  shm::Mapping own;                     // only for a private fallback
  std::byte* data = nullptr;
  size_t bytes = 0;
  bool direct = false;
  ~SharedAllocation();
};
}  // namespace detail

namespace shm {
// A POSIX shared-memory segment of at least `bytes` (whole pages), created
// and mapped by this rank under a fresh name; when /dev/shm refuses, private
// memory with `name` empty and `error` saying why.
struct Created {
  std::string name;  // "" if shm_open failed
  std::string error;
  Mapping map;
  UniqueFd lock;  // held until the name is unlinked (Note [reclaiming dead regions])
};
Created create_segment(size_t bytes, uint32_t id);
// Maps a peer's segment; empty Mapping with `error` set on failure.
Mapping open_segment(const std::string& name, size_t length, std::string& error);
size_t page_round(size_t bytes);

}  // namespace shm

}  // namespace gradwire
