// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [mailboxes] in mailbox.h.
#include "shm/mailbox.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/copy.h"

namespace gradwire::shm {

namespace {

std::atomic<uint64_t>& tail_of(std::byte* ring) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(ring);
}

std::byte* data_of(std::byte* ring) { return ring + kMailControlBytes; }

// Copies between the ring (at stream position `pos`) and flat memory,
// in two pieces where the range wraps.
void copy_in(std::byte* ring, uint64_t pos, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const size_t at = pos % kMailCapacity, first = std::min(bytes, kMailCapacity - at);
  // The reader's cache holds the ring (Note [stores into lines a peer reads]).
  kernels::copy_for_peers(data_of(ring) + at, src, first);
  if (first < bytes) kernels::copy_for_peers(data_of(ring), static_cast<const std::byte*>(src) + first,
                                             bytes - first);
}

void copy_out(const std::byte* ring, uint64_t pos, void* dst, size_t bytes) {
  if (bytes == 0) return;
  const std::byte* data = ring + kMailControlBytes;
  const size_t at = pos % kMailCapacity, first = std::min(bytes, kMailCapacity - at);
  kernels::copy(dst, data + at, first);
  if (first < bytes) kernels::copy(static_cast<std::byte*>(dst) + first, data, bytes - first);
}

}  // namespace

bool MailboxWriter::put(uint32_t tag, uint32_t flags, uint64_t length, uint64_t aux,
                        const void* data, size_t data_bytes) {
  const size_t rec = mail_record_bytes(data_bytes);
  // One line stays free: the stamp word of the next record (zeroed below)
  // must never be the reader's unread record.
  if (head_ + rec + 64 - tail_seen_ > kMailCapacity) {
    tail_seen_ = tail_of(ring_).load(std::memory_order_acquire);
    if (head_ + rec + 64 - tail_seen_ > kMailCapacity) return false;
  }
  auto* header = reinterpret_cast<MailRecord*>(data_of(ring_) + head_ % kMailCapacity);
  auto* next = reinterpret_cast<std::atomic<uint64_t>*>(data_of(ring_) +
                                                        (head_ + rec) % kMailCapacity);
  next->store(0, std::memory_order_relaxed);
  copy_in(ring_, head_ + sizeof(MailRecord), data, data_bytes);
  header->length = length;
  header->tag = tag;
  header->flags = flags;
  header->aux = aux;
  header->stamp.store(head_ + 1, std::memory_order_release);
  head_ += rec;
  return true;
}

const MailRecord* MailboxReader::peek() const {
  const auto* header =
      reinterpret_cast<const MailRecord*>(ring_ + kMailControlBytes + tail_ % kMailCapacity);
  if (header->stamp.load(std::memory_order_acquire) != tail_ + 1) return nullptr;
  return header;
}

void MailboxReader::copy_data(const MailRecord* r, void* dst, size_t bytes) const {
  (void)r;  // the peeked record is the one at tail_
  copy_out(ring_, tail_ + sizeof(MailRecord), dst, bytes);
}

void MailboxReader::pop(size_t data_bytes) {
  tail_ += mail_record_bytes(data_bytes);
  tail_of(ring_).store(tail_, std::memory_order_release);
}

namespace {
std::atomic<uint64_t>& filled_of(std::byte* bulk) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(bulk);
}
std::atomic<uint64_t>& drained_of(std::byte* bulk) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(bulk + 128);
}
std::byte* half_of(std::byte* bulk, uint64_t chunk) {
  return bulk + kBulkControlBytes + (chunk % 2) * kBulkChunk;
}
}  // namespace

bool BulkWriter::write(const void* src, size_t bytes) {
  if (filled_ - drained_seen_ >= 2) {
    drained_seen_ = drained_of(base_).load(std::memory_order_acquire);
    if (filled_ - drained_seen_ >= 2) return false;
  }
  kernels::copy_for_peers(half_of(base_, filled_), src, bytes);
  ++filled_;
  filled_of(base_).store(filled_, std::memory_order_release);
  return true;
}

const std::byte* BulkReader::peek() const {
  if (filled_of(base_).load(std::memory_order_acquire) <= drained_) return nullptr;
  return half_of(base_, drained_);
}

void BulkReader::release() {
  ++drained_;
  drained_of(base_).store(drained_, std::memory_order_release);
}

}  // namespace gradwire::shm
