// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Element math shared by the CPU kernels and the CUDA kernels. Everything
// here is __host__ __device__ so the CPU unit tests check the exact formulas
// the GPU runs (Note [shared element math]).
//
// Note [shared element math]: what happens to one element (the 16-bit
// conversions and their rounding, the reduction operators with their NaN
// and overflow rules, Avg's division, the compression steps of
// compress_math.h) is written once, in headers whose functions are
// __host__ __device__ (GW_HD): this file, elem.h and compress_math.h. The
// CPU kernels (kernels/cpu/, including every SIMD table, which must match
// these formulas bit for bit: Note [cpu kernel dispatch]) and the CUDA
// kernels (kernels/cuda/) both call them. Two reasons:
//  - results must not depend on where they were computed: gradwire
//    promises bitwise-identical results on every rank, and a device Bucket
//    must hold the bits a host Bucket would (tests/unit/elem_divide_test.cpp
//    checks Elem<dt>::divide, which scale.cu runs, against the CPU
//    copy_divided);
//  - most machines that build and test gradwire have no GPU: running these
//    functions in CPU unit tests checks the exact code the GPU runs.
// So CUDA is optional at build time (the root CMakeLists.txt detects it):
// without nvcc, GW_HD is plain `inline`. A new dtype, operator or rounding
// rule is added here, once, for both sides.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define GW_HD __host__ __device__ __forceinline__
#else
#define GW_HD inline
#endif

namespace gradwire::kernels {

// Bit casts that work in device code (memcpy is fine on both sides).
GW_HD float bits_to_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
GW_HD uint32_t float_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// IEEE binary16 -> float32, exact (subnormals and inf included). A NaN keeps
// its sign and payload and comes out quiet: that is what F16C's vcvtph2ps (and
// GCC's _Float16) do, and the CPU SIMD kernels must match this bit for bit.
GW_HD float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN (payload kept)
    if (mant != 0) bits |= 0x00400000u;        // NaN: quiet
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal half: value = mant * 2^-24, exact in float (so a compiler
    // that fuses this multiply into a following add changes nothing).
    float f = (float)mant * 5.9604644775390625e-08f;
    return sign ? -f : f;
  }
  return bits_to_float(bits);
}

// float32 -> IEEE binary16 with round-to-nearest-even, overflow to inf; a NaN
// keeps its sign and the top 10 payload bits and comes out quiet (as
// vcvtps2ph does).
GW_HD uint16_t float_to_half(float f) {
  uint32_t x = float_to_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or NaN
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
  }
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (absx < 0x33000000u) return sign;  // < 2^-25: rounds to zero
    uint32_t exp = absx >> 23;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // 14..24 + bias shuffle: value = mant * 2^(exp-150)
    // half subnormal unit is 2^-24: result = mant * 2^(exp-150+24) = mant >> (126-exp)
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half_way = 1u << (shift - 1u);
    if (rem > half_way || (rem == half_way && (q & 1u))) q += 1u;
    return (uint16_t)(sign | q);
  }
  // Normal: rebias exponent and round the 13 dropped mantissa bits.
  uint32_t r = absx - 0x38000000u;  // exponent 127 -> 15 bias
  uint32_t q = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q += 1u;  // may carry into exp: fine
  return (uint16_t)(sign | q);
}

GW_HD float bf16_to_float(uint16_t b) { return bits_to_float((uint32_t)b << 16); }

// float32 -> bfloat16, round-to-nearest-even, NaN kept quiet.
GW_HD uint16_t float_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

// The binary operators, for any arithmetic T. Min/Max propagate NaN from
// either side (like torch.minimum), so the result does not depend on the
// operand order for NaN inputs either. Integers wrap around on overflow:
// signed Sum/Prod are computed in the unsigned type of the same width, where
// overflow is defined (types.h promises wraparound).
enum class Op : int { Sum = 0, Min = 1, Max = 2, Prod = 3 };

template <typename T>
GW_HD bool is_nan_value(T v) { return v != v; }

// The unsigned type Sum/Prod compute in: T itself for floats; for integers
// at least `unsigned` so narrow types do not promote to (signed) int.
template <typename T, bool = std::is_integral_v<T>>
struct wrap_type { using type = T; };
template <typename T>
struct wrap_type<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};

template <Op op, typename T>
GW_HD T apply(T a, T b) {
  using W = typename wrap_type<T>::type;
  if constexpr (op == Op::Sum) {
    return (T)((W)a + (W)b);
  } else if constexpr (op == Op::Prod) {
    return (T)((W)a * (W)b);
  } else if constexpr (op == Op::Min) {
    if (is_nan_value(a)) return a;
    if (is_nan_value(b)) return b;
    return b < a ? b : a;
  } else {
    if (is_nan_value(a)) return a;
    if (is_nan_value(b)) return b;
    return a < b ? b : a;
  }
}

// uint8 wraps around like the other integers: compute in unsigned int.
template <Op op>
GW_HD uint8_t apply_u8(uint8_t a, uint8_t b) {
  return (uint8_t)apply<op, unsigned>(a, b);
}

// 16-bit floats: compute in float32, round once. Min and max pick an
// operand, whose float16 value survives the round trip exactly, so they
// return its bits and skip the narrowing (the costly part: float16 is
// widened and narrowed in software, the same code on both sides); a NaN
// still goes through float_to_half, which quiets it, so the bits are the
// round trip's in every case.
template <Op op>
GW_HD uint16_t apply_half(uint16_t a, uint16_t b) {
  const float fa = half_to_float(a), fb = half_to_float(b);
  const float r = apply<op, float>(fa, fb);
  if constexpr (op == Op::Min || op == Op::Max) {
    if (!is_nan_value(r)) return float_to_bits(r) == float_to_bits(fa) ? a : b;
  }
  return float_to_half(r);
}
template <Op op>
GW_HD uint16_t apply_bf16(uint16_t a, uint16_t b) {
  return float_to_bf16(apply<op, float>(bf16_to_float(a), bf16_to_float(b)));
}

// Avg's final step, dst / divisor with divisor >= 1: true division for
// floats (IEEE-rounded on both CPU and GPU), truncation toward zero for
// integers (computed in at least int, so a uint8 never divides by a
// truncated divisor).
template <typename T>
GW_HD T divide_value(T v, int divisor) {
  if constexpr (std::is_floating_point_v<T>) {
    return v / (T)divisor;
  } else {
    return (T)(v / divisor);
  }
}
GW_HD uint16_t divide_half(uint16_t v, int divisor) {
  return float_to_half(half_to_float(v) / (float)divisor);
}
GW_HD uint16_t divide_bf16(uint16_t v, int divisor) {
  return float_to_bf16(bf16_to_float(v) / (float)divisor);
}

}  // namespace gradwire::kernels
