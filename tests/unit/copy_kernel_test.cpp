// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// kernels::copy and copy2 (Note [copying without rep movsb]) against the
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
const size_t kOffsets[] = {0, 1, 16, 32, 63, 4080};

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = std::byte(x >> 24);
  }
  return v;
}

TEST(CopyKernel, SameBytesAsMemcpyAtEveryLengthAndOffset) {
  const size_t pad = 8192;
  for (size_t len : kLengths) {
    for (size_t so : kOffsets) {
      for (size_t d_off : kOffsets) {
        const auto src = pattern(len + pad, uint32_t(len + so));
        auto dst = pattern(len + pad, 7);
        const auto before = dst;
        copy(dst.data() + d_off, src.data() + so, len);
        for (size_t i = 0; i < dst.size(); ++i) {
          const std::byte want = i >= d_off && i < d_off + len ? src[so + i - d_off] : before[i];
          ASSERT_EQ(dst[i], want) << "len " << len << " src+" << so << " dst+" << d_off << " at " << i;
        }
      }
    }
  }
}

TEST(CopyKernel, Copy2WritesBothDestinations) {
  const size_t pad = 8192;
  for (size_t len : kLengths) {
    for (size_t off : kOffsets) {
      const auto src = pattern(len + pad, uint32_t(len));
      auto a = pattern(len + pad, 1), b = pattern(len + pad, 2);
      const auto a0 = a, b0 = b;
      copy2(a.data() + off, b.data() + 16, src.data() + 32, len);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i], i >= off && i < off + len ? src[32 + i - off] : a0[i]) << len << " a " << i;
        ASSERT_EQ(b[i], i >= 16 && i < 16 + len ? src[32 + i - 16] : b0[i]) << len << " b " << i;
      }
    }
  }
}

}  // namespace
}  // namespace gradwire::kernels
