// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// kernels::copy and copy_for_peers (Notes [copying without rep movsb] and
// [stores into lines a peer reads]) against the
// bytes memcpy gives: every length up to 17 (the inline small moves), every
// length around the loop's 64/128-byte steps and
// its 2 KiB start, every source and destination offset within a cache line
// and near a page, and nothing written outside the destination.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/copy.h"

namespace gradwire::kernels {
namespace {

// 0-17: the inline moves of up to 16 bytes (each of their branches and
// both edges); then the loop's steps.
const size_t kLengths[] = {0,  1,  2,   3,   4,   5,    6,    7,    8,        9,
                           10, 11, 12,  13,  14,  15,   16,   17,   63,       64,
                           65, 127, 128, 129, 2047, 2048, 2049, 4096 + 77, (size_t(1) << 20) + 3};
const size_t kOffsets[] = {0, 1, 16, 32, 63, 64, 100, 4080};

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = std::byte(x >> 24);
  }
  return v;
}

// Both copies against memcpy's bytes, over every length and every pair of
// offsets: the gaps between them cover rep movsb's (0, at least a line,
// the last bytes of a page) and the loop's (1-63 bytes after the source).
template <typename Copy>
void expect_memcpy_bytes(Copy copy_fn, const char* name) {
  const size_t pad = 8192;
  for (size_t len : kLengths) {
    for (size_t so : kOffsets) {
      for (size_t d_off : kOffsets) {
        const auto src = pattern(len + pad, uint32_t(len + so));
        auto dst = pattern(len + pad, 7);
        const auto before = dst;
        copy_fn(dst.data() + d_off, src.data() + so, len);
        for (size_t i = 0; i < dst.size(); ++i) {
          const std::byte want = i >= d_off && i < d_off + len ? src[so + i - d_off] : before[i];
          ASSERT_EQ(dst[i], want) << name << " len " << len << " src+" << so << " dst+" << d_off
                                  << " at " << i;
        }
      }
    }
  }
}

TEST(CopyKernel, SameBytesAsMemcpyAtEveryLengthAndOffset) {
  expect_memcpy_bytes([](void* d, const void* s, size_t n) { copy(d, s, n); }, "copy");
}

TEST(CopyKernel, CopyForPeersSameBytesAsMemcpyAtEveryLengthAndOffset) {
  expect_memcpy_bytes([](void* d, const void* s, size_t n) { copy_for_peers(d, s, n); },
                      "copy_for_peers");
}

}  // namespace
}  // namespace gradwire::kernels
