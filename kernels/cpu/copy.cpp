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
//
// Note [stores into lines a peer reads]: the staging areas and shared
// buffers are written by one rank and read by another a moment later, so a
// line being written is usually in the reader's cache. Ordinary stores
// (the AVX2 loop) must first fetch each such line for ownership (a read
// for ownership that crosses to the reader's core); `rep movsb` writes
// whole lines without reading them. Measured on the 2-core VM (family 26
// EPYC), 2 processes each writing 256 KiB into its staging half and
// reading the peer's: when the two vCPUs sat on different core complexes
// (a cache-line round trip of 340-440 ns instead of 80-130, which comes
// and goes with the host's placement of the VM) the AVX2 loop took 41 us
// a round and rep movsb 13.6; on the same complex, 9.7-10.2 against
// 8.5-10.0. Non-temporal stores took 16 and 23.5: they push the line to
// memory, where the reader, sharing a cache with us, would have found it
// in the cache. So copies into what a peer reads use rep movsb, except
// where the 4K aliasing above could strike (the destination less than a
// line after the source modulo 4096), which keeps the loop.
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

void copy_for_peers_bulk(void* dst, const void* src, size_t bytes) {
  // The sanitizers see no access in inline assembly: there, the loop.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  const auto gap = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (gap == 0 || gap >= 64) {
    asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(bytes) : : "memory");
    return;
  }
#endif
  copy(dst, src, bytes);
}

}  // namespace gradwire::kernels
