// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [copying without rep movsb]: glibc's memcpy copies anything from a
// few KiB to most of the last-level cache with `rep movsb`, which on the
// AMD EPYC of our 2-core VM runs at 1.8 GB/s instead of 30+ when the
// destination lies 16-32 bytes after the source modulo 4096 (4K aliasing:
// every load waits on an earlier store it falsely matches). That is not an
// exotic case: a std::vector's data sits 16 bytes into its first page, our
// staging areas start on a page, so a copy from a staging area into a
// caller's vector hit it every time (issue 18: a 320 KiB allgather took
// 230 us, 60-150 us of it in two such copies). An AVX2 loop of unaligned
// 32-byte loads and stores has no such case (30-37 GB/s at every offset we
// measured, 160 KiB in L2; equal or faster than memcpy at 8 MiB), so the
// collectives copy with it; small copies and CPUs without AVX2 keep memcpy.
#include "kernels/cpu/copy.h"

#include <cstdint>
#include <cstring>

#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GW_HAVE_AVX2_COPY 1
#endif

namespace gradwire::kernels {
namespace {

// Below this glibc does not use rep movsb (its threshold is 2 KiB and up).
constexpr size_t kLoopFrom = 2048;

#ifdef GW_HAVE_AVX2_COPY
[[gnu::target("avx2")]] size_t copy_avx2(std::byte* dst, const std::byte* src, size_t bytes) {
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  return i;
}

[[gnu::target("avx2")]] size_t copy2_avx2(std::byte* a, std::byte* b, const std::byte* src,
                                          size_t bytes) {
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i), x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i + 32), y);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i + 32), y);
  }
  return i;
}
#endif

}  // namespace

void copy_bulk(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  size_t done = 0;
#ifdef GW_HAVE_AVX2_COPY
  if (bytes >= kLoopFrom && cpu::vector_isa_active()) done = copy_avx2(d, s, bytes);
#endif
  if (done < bytes) std::memcpy(d + done, s + done, bytes - done);
}

void copy2(void* a, void* b, const void* src, size_t bytes) {
  auto* da = static_cast<std::byte*>(a);
  auto* db = static_cast<std::byte*>(b);
  const auto* s = static_cast<const std::byte*>(src);
  size_t done = 0;
#ifdef GW_HAVE_AVX2_COPY
  if (bytes >= kLoopFrom && cpu::vector_isa_active()) done = copy2_avx2(da, db, s, bytes);
#endif
  if (done < bytes) {
    std::memcpy(da + done, s + done, bytes - done);
    std::memcpy(db + done, s + done, bytes - done);
  }
}

}  // namespace gradwire::kernels
