// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [mailboxes] (shm/mailbox.h): records in order, wrap-around, a full
// ring, stale bytes that look like a stamp, and a writer and a reader on two
// threads.
#include "shm/mailbox.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace gradwire::shm {
namespace {

struct Ring {
  std::vector<std::byte> mem = std::vector<std::byte>(kMailboxBytes + 64);
  std::byte* base() {
    auto p = reinterpret_cast<uintptr_t>(mem.data());
    return reinterpret_cast<std::byte*>((p + 63) / 64 * 64);  // as a segment's rings are
  }
};

std::vector<std::byte> pattern(size_t bytes, uint32_t seed) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = std::byte((i * 131 + seed * 7) & 0xff);
  return v;
}

// Reads one record and checks it.
void expect_record(MailboxReader& r, uint32_t tag, uint32_t flags, uint64_t length,
                   const std::vector<std::byte>& data) {
  const MailRecord* rec = r.peek();
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->tag, tag);
  EXPECT_EQ(rec->flags, flags);
  EXPECT_EQ(rec->length, length);
  std::vector<std::byte> got(data.size());
  r.copy_data(rec, got.data(), got.size());
  EXPECT_EQ(got, data);
  r.pop(data.size());
}

TEST(Mailbox, RecordsArriveInOrderAndEmptyIsNull) {
  Ring ring;
  MailboxWriter w(ring.base());
  MailboxReader r(ring.base());
  EXPECT_EQ(r.peek(), nullptr);
  const auto a = pattern(0, 1), b = pattern(5, 2), c = pattern(32, 3), d = pattern(4097, 4);
  ASSERT_TRUE(w.put(1, 0, a.size(), 0, a.data(), a.size()));
  ASSERT_TRUE(w.put(2, 0, b.size(), 0, b.data(), b.size()));
  ASSERT_TRUE(w.put(0xffffffffu, kMailPayloadApart, 1u << 30, 0, nullptr, 0));
  ASSERT_TRUE(w.put(3, 0, c.size(), 0, c.data(), c.size()));
  ASSERT_TRUE(w.put(4, 0, d.size(), 0, d.data(), d.size()));
  expect_record(r, 1, 0, 0, a);
  expect_record(r, 2, 0, 5, b);
  expect_record(r, 0xffffffffu, kMailPayloadApart, 1u << 30, {});
  expect_record(r, 3, 0, 32, c);
  expect_record(r, 4, 0, 4097, d);
  EXPECT_EQ(r.peek(), nullptr);
}

TEST(Mailbox, AFullRingRefusesUntilTheReaderConsumes) {
  Ring ring;
  MailboxWriter w(ring.base());
  MailboxReader r(ring.base());
  const auto big = pattern(kEagerBytes, 9);
  uint32_t put = 0;
  while (w.put(put, 0, big.size(), 0, big.data(), big.size())) ++put;
  // The ring holds as many full records as fit with one line left free.
  const uint32_t full = uint32_t((kMailCapacity - 64) / mail_record_bytes(kEagerBytes));
  ASSERT_GE(full, 2u);
  EXPECT_EQ(put, full);
  // The rest (less a header and the free line) still takes a smaller
  // record, and then nothing more.
  const size_t rest = kMailCapacity - full * mail_record_bytes(kEagerBytes) - 64 - 32;
  ASSERT_LE(rest, kEagerBytes);
  ASSERT_TRUE(w.put(full, 0, rest, 0, big.data(), rest));
  EXPECT_FALSE(w.put(99, 0, 1, 0, big.data(), 1)) << "no room, not even for a small one";
  expect_record(r, 0, 0, big.size(), big);
  EXPECT_TRUE(w.put(full + 1, 0, big.size(), 0, big.data(), big.size()));
  for (uint32_t i = 1; i < full; ++i) expect_record(r, i, 0, big.size(), big);
  expect_record(r, full, 0, rest, std::vector<std::byte>(big.begin(), big.begin() + rest));
  expect_record(r, full + 1, 0, big.size(), big);
  EXPECT_EQ(r.peek(), nullptr);
}

// Records of every size wrap around the ring many times; data is split
// at the end of the ring and put together again.
TEST(Mailbox, WrapsAroundWithEverySize) {
  Ring ring;
  MailboxWriter w(ring.base());
  MailboxReader r(ring.base());
  uint32_t tag = 0;
  for (size_t bytes = 0; bytes < 3 * kMailCapacity; bytes += 4093) {
    const size_t n = bytes % (kEagerBytes + 1);
    const auto data = pattern(n, tag);
    ASSERT_TRUE(w.put(tag, 0, n, 0, data.data(), n)) << n;
    expect_record(r, tag, 0, n, data);
    ++tag;
  }
}

// Data bytes left where the next record will begin, equal to the stamp that
// record will carry, are never read as a record (the writer zeroes that
// word first).
TEST(Mailbox, StaleDataIsNeverAStamp) {
  Ring ring;
  MailboxWriter w(ring.base());
  MailboxReader r(ring.base());
  // Lap 1: a record whose data covers every line with the value that the
  // stamp at that position will have one lap later.
  std::vector<uint64_t> fake(kEagerBytes / 8);
  for (int lap = 0; lap < 6; ++lap) {
    const uint64_t start = uint64_t(lap) * mail_record_bytes(kEagerBytes);
    for (size_t i = 0; i < fake.size(); ++i) {
      fake[i] = start + kMailCapacity + 32 + i * 8 + 1;  // a later lap's stamp here
    }
    ASSERT_TRUE(w.put(7, 0, kEagerBytes, 0, fake.data(), kEagerBytes));
    ASSERT_NE(r.peek(), nullptr);
    r.pop(kEagerBytes);
    EXPECT_EQ(r.peek(), nullptr) << "lap " << lap;
  }
  // Small records over that memory: each is seen once, then nothing.
  for (uint32_t i = 0; i < 5000; ++i) {
    const uint64_t v = i;
    ASSERT_TRUE(w.put(i, 0, 8, 0, &v, 8));
    const MailRecord* rec = r.peek();
    ASSERT_NE(rec, nullptr);
    EXPECT_EQ(rec->tag, i);
    r.pop(8);
    ASSERT_EQ(r.peek(), nullptr) << "record " << i;
  }
}

// A writer thread and a reader thread: every byte of every message, in order.
TEST(Mailbox, TwoThreadsKeepEveryMessageInOrder) {
  Ring ring;
  constexpr uint32_t kMessages = 20000;
  std::thread writer([&] {
    MailboxWriter w(ring.base());
    for (uint32_t i = 0; i < kMessages; ++i) {
      const size_t n = (size_t(i) * 7919) % 9000;
      const auto data = pattern(n, i);
      while (!w.put(i, 0, n, 0, data.data(), n)) std::this_thread::yield();
    }
  });
  MailboxReader r(ring.base());
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < kMessages; ++i) {
    const MailRecord* rec;
    while ((rec = r.peek()) == nullptr) std::this_thread::yield();
    const size_t n = (size_t(i) * 7919) % 9000;
    std::vector<std::byte> got(n);
    r.copy_data(rec, got.data(), n);
    if (rec->tag != i || rec->length != n || got != pattern(n, i)) ++wrong;
    r.pop(n);
  }
  writer.join();
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace gradwire::shm
