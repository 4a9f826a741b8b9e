// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Internal: the SIMD kernel bodies, written once with GCC vector extensions
// and compiled once per instruction set (Note [cpu kernel dispatch]).
//
// Not a normal header. A variant TU (reduce_avx2.cpp, reduce_avx512.cpp)
// includes elem.h and <immintrin.h> first, then opens `#pragma GCC target`
// and an anonymous namespace, defines
//   GW_SIMD_BYTES                       vector width in bytes
//   VF load_half(const uint16_t*)       kLanes<float> halves -> floats (F16C)
//   void store_half(uint16_t*, VF)      floats -> halves, round to nearest even
// and includes this file. Everything here thus gets internal linkage and the
// variant's target, and no baseline code ever contains these instructions.
//
// Each vector operation is the lane-wise twin of the reduce_math.h function
// used in the tail loop, so both give the same bits.

template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(GW_SIMD_BYTES)));
};
template <typename T>
using vec = typename VecOf<T>::type;
template <typename T>
inline constexpr size_t kLanes = GW_SIMD_BYTES / sizeof(T);

using VF = vec<float>;
using VU32 = vec<uint32_t>;
typedef uint16_t VU16 __attribute__((vector_size(GW_SIMD_BYTES / 2)));  // kLanes<float> halves

template <typename V>
[[gnu::always_inline]] inline V load(const void* p) {
  V v;
  memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
[[gnu::always_inline]] inline void store(void* p, V v) {
  memcpy(p, &v, sizeof(V));
}

// apply<op, T> on every lane (reduce_math.h): wrapping integer Sum/Prod,
// Min/Max with `b < a ? b : a` / `a < b ? b : a` and NaN from a, then b.
template <Op op, typename T>
[[gnu::always_inline]] inline vec<T> vapply(vec<T> a, vec<T> b) {
  using V = vec<T>;
  if constexpr (op == Op::Sum || op == Op::Prod) {
    if constexpr (std::is_integral_v<T>) {
      using U = vec<std::make_unsigned_t<T>>;
      return op == Op::Sum ? (V)((U)a + (U)b) : (V)((U)a * (U)b);
    } else {
      return op == Op::Sum ? a + b : a * b;
    }
  } else {
    V r = op == Op::Min ? (b < a ? b : a) : (a < b ? b : a);
    if constexpr (std::is_floating_point_v<T>) {
      r = b != b ? b : r;
      r = a != a ? a : r;
    }
    return r;
  }
}

// bfloat16 <-> float: the integer formulas of bf16_to_float / float_to_bf16.
[[gnu::always_inline]] inline VF load_bf16(const uint16_t* p) {
  VU32 w = __builtin_convertvector(load<VU16>(p), VU32);
  return (VF)(w << 16);
}
[[gnu::always_inline]] inline void store_bf16(uint16_t* p, VF f) {
  VU32 x = (VU32)f;
  VU32 rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  VU32 quiet_nan = (x >> 16) | 0x40u;
  VU32 r = (x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  store(p, __builtin_convertvector(r, VU16));
}

template <typename T, Op op>
[[gnu::always_inline]] inline void reduce_native(T* d, const T* a, const T* b, size_t n, size_t& i) {
  using V = vec<T>;
  constexpr size_t L = kLanes<T>;
  // Four vectors per step: loads of a step come before its stores, and
  // lanes never move, so dst == a or dst == b is safe.
  for (; i + 4 * L <= n; i += 4 * L) {
    V r0 = vapply<op, T>(load<V>(a + i), load<V>(b + i));
    V r1 = vapply<op, T>(load<V>(a + i + L), load<V>(b + i + L));
    V r2 = vapply<op, T>(load<V>(a + i + 2 * L), load<V>(b + i + 2 * L));
    V r3 = vapply<op, T>(load<V>(a + i + 3 * L), load<V>(b + i + 3 * L));
    store(d + i, r0);
    store(d + i + L, r1);
    store(d + i + 2 * L, r2);
    store(d + i + 3 * L, r3);
  }
  for (; i + L <= n; i += L) store(d + i, vapply<op, T>(load<V>(a + i), load<V>(b + i)));
}

template <DataType dt, Op op>
void reduce_kernel(void* dst, const void* a, const void* b, size_t n) {
  using S = typename Elem<dt>::S;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  size_t i = 0;
  constexpr size_t L = kLanes<float>;
  if constexpr (dt == DataType::Float16) {
    for (; i + 2 * L <= n; i += 2 * L) {
      VF r0 = vapply<op, float>(load_half(x + i), load_half(y + i));
      VF r1 = vapply<op, float>(load_half(x + i + L), load_half(y + i + L));
      store_half(d + i, r0);
      store_half(d + i + L, r1);
    }
    for (; i + L <= n; i += L) store_half(d + i, vapply<op, float>(load_half(x + i), load_half(y + i)));
  } else if constexpr (dt == DataType::BFloat16) {
    for (; i + L <= n; i += L) store_bf16(d + i, vapply<op, float>(load_bf16(x + i), load_bf16(y + i)));
  } else if constexpr (dt == DataType::Bool) {
    reduce_native<uint8_t, bool_op(op)>(d, x, y, n, i);
  } else {
    reduce_native<S, op>(d, x, y, n, i);
  }
  reduce_elems<dt, op>(dst, a, b, i, n);
}

template <DataType dt>
void divide_kernel(void* dst, size_t n, int divisor) {
  using S = typename Elem<dt>::S;
  auto* d = static_cast<S*>(dst);
  size_t i = 0;
  if constexpr (dt == DataType::Float32 || dt == DataType::Float64) {
    using V = vec<S>;
    const S by = (S)divisor;
    for (; i + kLanes<S> <= n; i += kLanes<S>) store(d + i, load<V>(d + i) / by);
  } else if constexpr (dt == DataType::Float16) {
    const float by = (float)divisor;
    for (; i + kLanes<float> <= n; i += kLanes<float>) store_half(d + i, load_half(d + i) / by);
  } else if constexpr (dt == DataType::BFloat16) {
    const float by = (float)divisor;
    for (; i + kLanes<float> <= n; i += kLanes<float>) store_bf16(d + i, load_bf16(d + i) / by);
  }
  // Integers: no SIMD integer division; the scalar loop (which the compiler
  // turns into multiply-shift when it can) does all of it.
  divide_elems<dt>(dst, divisor, i, n);
}

void half_to_float_kernel(float* dst, const uint16_t* src, size_t n) {
  constexpr size_t L = kLanes<float>;
  size_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    VF v0 = load_half(src + i), v1 = load_half(src + i + L);
    store(dst + i, v0);
    store(dst + i + L, v1);
  }
  for (; i + L <= n; i += L) store(dst + i, load_half(src + i));
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void float_to_half_kernel(uint16_t* dst, const float* src, size_t n) {
  constexpr size_t L = kLanes<float>;
  size_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    VF v0 = load<VF>(src + i), v1 = load<VF>(src + i + L);
    store_half(dst + i, v0);
    store_half(dst + i + L, v1);
  }
  for (; i + L <= n; i += L) store_half(dst + i, load<VF>(src + i));
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}

void bf16_to_float_kernel(float* dst, const uint16_t* src, size_t n) {
  constexpr size_t L = kLanes<float>;
  size_t i = 0;
  for (; i + L <= n; i += L) store(dst + i, load_bf16(src + i));
  for (; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

void float_to_bf16_kernel(uint16_t* dst, const float* src, size_t n) {
  constexpr size_t L = kLanes<float>;
  size_t i = 0;
  for (; i + L <= n; i += L) store_bf16(dst + i, load<VF>(src + i));
  for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}
