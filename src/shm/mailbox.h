// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [mailboxes]: the point-to-point messages of a communicator whose
// ranks share one host travel through one single-producer single-consumer
// ring per ordered pair of ranks, in the sender's control segment (Note
// [point-to-point on one host] in runtime/p2p.h says what goes in them).
//
// - A record is a 32-byte header (the stamp, the message's length, its tag
//   and flags) followed by up to kEagerBytes of data, padded to whole
//   64-byte lines; records lie back to back in a byte stream that wraps
//   around the ring (the header never wraps: positions and the capacity are
//   multiples of 64; data may, and is copied in two pieces).
// - The stamp, the record's stream position + 1, is stored last (release);
//   the reader polls the stamp where its next record must begin, so a
//   small message is one cache line for the reader to fetch.
// - A stale stamp cannot pass for a new one: the stamp of position p is
//   p + 1, which no earlier lap wrote there; and the writer zeroes the stamp
//   word where the next record will begin before publishing this one, so
//   left-over data bytes there (a user's counter that happens to equal p + 1)
//   are never read as a stamp. That word lies in free space because the
//   writer always leaves one line free (put()).
// - The reader publishes how far it has read (`tail`, on its own line at
//   the start of the ring); the writer rereads it only when the ring looks
//   full. Nothing else is shared, so no lock is needed between processes.
// - The ring holds at most kMailCapacity bytes: a writer whose record does
//   not fit is told so and tries again later (the sender's progress), so a
//   receiver that never reads holds its senders back but never loses data.
// - Longer messages stream through the pair's bulk channel (after the ring,
//   in the same segment): two kBulkChunk halves used in turn, a `filled`
//   count of chunks the sender has written and a `drained` count of chunks
//   the receiver has read, each on its own line pair. The sender writes
//   chunk k into half k % 2 once drained >= k - 1; the receiver reads it
//   once filled > k. Both sides know every message's length and the order
//   of the messages in the channel (Note [point-to-point on one host]), so
//   no chunk carries a header.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gradwire::shm {

struct MailRecord {
  std::atomic<uint64_t> stamp;  // stream position + 1; stored last
  uint64_t length;              // the message's bytes
  uint32_t tag;
  uint32_t flags;               // kMailPayloadApart, kMailClearToSend, kMailReadDone, or 0: data follows
  uint64_t aux;                 // a long message's id (kMailPayloadApart, kMailClearToSend)
};
static_assert(sizeof(MailRecord) == 32, "a mail header is half a line");
inline constexpr uint32_t kMailPayloadApart = 1;  // through the bulk channel
inline constexpr uint32_t kMailClearToSend = 2;   // control: aux is the message's id
inline constexpr uint32_t kMailReadDone = 4;      // control: the receiver read message aux itself

// Bytes of data a record carries; longer messages send their header alone
// (and are read from the sender's memory: Note [single-copy reads] in
// runtime/p2p.h). 8 KiB: above it a single-copy read beat copying in and
// out in every run on the 2-core VM (16 KiB: 4.2 us against 8.7 eager in
// the VM's slow phases, Open MPI 3.6-4.6).
inline constexpr size_t kEagerBytes = size_t(8) << 10;
// Data bytes of one ring, after its 128-byte control line pair.
inline constexpr size_t kMailCapacity = size_t(256) << 10;
inline constexpr size_t kMailControlBytes = 128;
inline constexpr size_t kBulkChunk = size_t(256) << 10;
inline constexpr size_t kBulkOffset = kMailControlBytes + kMailCapacity;
inline constexpr size_t kBulkControlBytes = 256;  // filled, drained: a line pair each
// One ordered pair's ring and bulk channel: 768 KiB and change.
inline constexpr size_t kMailboxBytes = kBulkOffset + kBulkControlBytes + 2 * kBulkChunk;

// The record size of a message carrying `data_bytes` of data.
inline constexpr size_t mail_record_bytes(size_t data_bytes) {
  return (sizeof(MailRecord) + data_bytes + 63) / 64 * 64;
}

// The sending side of one ring (one thread at a time: the holder of the
// sender's point-to-point lock).
class MailboxWriter {
 public:
  MailboxWriter() = default;
  explicit MailboxWriter(std::byte* ring) : ring_(ring) {}
  // Appends a record with `data_bytes` of `data` (<= kEagerBytes); false if
  // it does not fit yet (nothing written).
  bool put(uint32_t tag, uint32_t flags, uint64_t length, uint64_t aux, const void* data,
           size_t data_bytes);

 private:
  std::byte* ring_ = nullptr;
  uint64_t head_ = 0;       // stream position of the next record
  uint64_t tail_seen_ = 0;  // the reader's tail as last read
};

// The receiving side of one ring (one thread at a time).
class MailboxReader {
 public:
  MailboxReader() = default;
  explicit MailboxReader(std::byte* ring) : ring_(ring) {}
  // The next record, or null if none has been published yet.
  const MailRecord* peek() const;
  // Copies `bytes` of the peeked record's data to dst.
  void copy_data(const MailRecord* r, void* dst, size_t bytes) const;
  // Consumes the peeked record, whose data carried `data_bytes`.
  void pop(size_t data_bytes);

 private:
  std::byte* ring_ = nullptr;
  uint64_t tail_ = 0;
};

// The bulk channel's sending side (Note [mailboxes]).
class BulkWriter {
 public:
  BulkWriter() = default;
  explicit BulkWriter(std::byte* mailbox) : base_(mailbox + kBulkOffset) {}
  // Writes the next chunk (<= kBulkChunk bytes) if a half is free.
  bool write(const void* src, size_t bytes);

 private:
  std::byte* base_ = nullptr;
  uint64_t filled_ = 0;
  uint64_t drained_seen_ = 0;
};

// The bulk channel's receiving side.
class BulkReader {
 public:
  BulkReader() = default;
  explicit BulkReader(std::byte* mailbox) : base_(mailbox + kBulkOffset) {}
  // The next chunk, or null if the sender has not written it yet.
  const std::byte* peek() const;
  // Frees the chunk peek() returned.
  void release();

 private:
  std::byte* base_ = nullptr;
  uint64_t drained_ = 0;
};

}  // namespace gradwire::shm
