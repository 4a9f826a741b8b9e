// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The AVX-512 kernel table (avx512f/bw/vl + f16c): 64-byte vectors (Note [cpu kernel dispatch]).
#include "kernels/cpu/elem.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,f16c")

namespace gradwire::kernels::cpu {
namespace {

#define GW_SIMD_BYTES 64

typedef float VF16 __attribute__((vector_size(64)));

// maskz with a full mask compiles to the plain instructions, without GCC 12's
// bogus -Wmaybe-uninitialized on the unmasked intrinsics' undefined operand.
[[gnu::always_inline]] inline VF16 load_half(const uint16_t* p) {
  return (VF16)_mm512_maskz_cvtph_ps((__mmask16)0xffff,
                                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
[[gnu::always_inline]] inline void store_half(uint16_t* p, VF16 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_maskz_cvtps_ph((__mmask16)0xffff, (__m512)v, _MM_FROUND_TO_NEAREST_INT));
}

#include "kernels/cpu/simd_loops.h"

#undef GW_SIMD_BYTES

constexpr KernelTable kAvx512Table = GW_KERNEL_TABLE();

}  // namespace

const KernelTable* avx512_kernels() { return &kAvx512Table; }

}  // namespace gradwire::kernels::cpu

#pragma GCC pop_options

#else

namespace gradwire::kernels::cpu {
const KernelTable* avx512_kernels() { return nullptr; }
}  // namespace gradwire::kernels::cpu

#endif
