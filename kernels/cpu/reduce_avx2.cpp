// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The AVX2 + F16C kernel table: 32-byte vectors (Note [cpu kernel dispatch]).
#include "kernels/cpu/elem.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace gradwire::kernels::cpu {
namespace {

#define GW_SIMD_BYTES 32

typedef float VF8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline VF8 load_half(const uint16_t* p) {
  return (VF8)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
[[gnu::always_inline]] inline void store_half(uint16_t* p, VF8 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
}

#include "kernels/cpu/simd_loops.h"

#undef GW_SIMD_BYTES

constexpr KernelTable kAvx2Table = GW_KERNEL_TABLE();

}  // namespace

const KernelTable* avx2_kernels() { return &kAvx2Table; }

}  // namespace gradwire::kernels::cpu

#pragma GCC pop_options

#else

namespace gradwire::kernels::cpu {
const KernelTable* avx2_kernels() { return nullptr; }
}  // namespace gradwire::kernels::cpu

#endif
