// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CPU compression kernels (kernels/cpu/compress.h). The sign kernels have a
// scalar loop over compress_math.h and an AVX2 loop that gives the same bits
// (one movemask per 8 elements); the choice follows the reduce kernels'
// (cpu::active_isa(), Note [cpu kernel dispatch]).
#include "kernels/cpu/compress.h"

#include <cstring>

#include "kernels/compress_math.h"
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GW_HAVE_AVX2_PATH 1
#endif

namespace gradwire::kernels {
namespace {

// ---- scalar loops (the reference) ----

double sum_squares_scalar(const float* x, const float* error, size_t i, size_t n) {
  double s = 0;
  for (; i < n; ++i) {
    const double c = double(error ? x[i] + error[i] : x[i]);
    s += c * c;
  }
  return s;
}

// Elements [i, n) where i is a multiple of 8.
void compress_scalar(const float* x, float* error, float scale, uint8_t* bits, size_t i, size_t n) {
  for (; i < n; i += 8) {
    uint32_t byte = 0;
    const size_t end = i + 8 < n ? i + 8 : n;
    for (size_t j = i; j < end; ++j) byte |= compress_element(x[j], error[j], scale) << (j - i);
    bits[i / 8] = uint8_t(byte);
  }
}

void decompress_scalar(const uint8_t* bits, float scale, float* out, bool accumulate, size_t i,
                       size_t n) {
  for (; i < n; ++i) {
    const float v = sign_value(packed_bit(bits, i), scale);
    out[i] = accumulate ? out[i] + v : v;
  }
}

#ifdef GW_HAVE_AVX2_PATH

[[gnu::target("avx2")]] double sum_squares_avx2(const float* x, const float* error, size_t n,
                                                size_t* done) {
  // Four double accumulators of 4 lanes: converting to double before the
  // multiply keeps the result as exact as the scalar loop (not bit-equal:
  // the summation order differs; the scale is rank-local, Note [1-bit
  // determinism] in src/compress/onebit.cpp).
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (error) v = _mm256_add_ps(v, _mm256_loadu_ps(error + i));
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    a0 = _mm256_add_pd(a0, _mm256_mul_pd(lo, lo));
    a1 = _mm256_add_pd(a1, _mm256_mul_pd(hi, hi));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a0, a1));
  *done = i;
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

// Bit-identical to compress_scalar: the same add, compare and subtract per
// element (no FMA: the target enables avx2 only).
[[gnu::target("avx2")]] size_t compress_avx2(const float* x, float* error, float scale,
                                             uint8_t* bits, size_t n) {
  const __m256 pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(-scale);
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 c = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(error + i));
    // c < 0 -> bit 0; NaN compares false -> bit 1, as sign_bit().
    const __m256 negative = _mm256_cmp_ps(c, zero, _CMP_LT_OQ);
    bits[i / 8] = uint8_t(~_mm256_movemask_ps(negative));
    _mm256_storeu_ps(error + i, _mm256_sub_ps(c, _mm256_blendv_ps(pos, neg, negative)));
  }
  return i;
}

[[gnu::target("avx2")]] size_t decompress_avx2(const uint8_t* bits, float scale, float* out,
                                               bool accumulate, size_t n) {
  const __m256 pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(-scale);
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i b = _mm256_set1_epi32(bits[i / 8]);
    const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(b, lane_bit), lane_bit);
    __m256 v = _mm256_blendv_ps(neg, pos, _mm256_castsi256_ps(set));
    if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  return i;
}

#endif  // GW_HAVE_AVX2_PATH

}  // namespace

double sum_squares(const float* x, const float* error, size_t n) {
  size_t done = 0;
  double s = 0;
#ifdef GW_HAVE_AVX2_PATH
  if (cpu::vector_isa_active()) s = sum_squares_avx2(x, error, n, &done);
#endif
  return s + sum_squares_scalar(x, error, done, n);
}

void compress_signs(const float* x, float* error, float scale, uint8_t* bits, size_t n) {
  size_t done = 0;
#ifdef GW_HAVE_AVX2_PATH
  if (cpu::vector_isa_active()) done = compress_avx2(x, error, scale, bits, n);
#endif
  compress_scalar(x, error, scale, bits, done, n);
}

void decompress_signs(const uint8_t* bits, float scale, float* out, size_t n) {
  size_t done = 0;
#ifdef GW_HAVE_AVX2_PATH
  if (cpu::vector_isa_active()) done = decompress_avx2(bits, scale, out, false, n);
#endif
  decompress_scalar(bits, scale, out, false, done, n);
}

void accumulate_signs(const uint8_t* bits, float scale, float* acc, size_t n) {
  size_t done = 0;
#ifdef GW_HAVE_AVX2_PATH
  if (cpu::vector_isa_active()) done = decompress_avx2(bits, scale, acc, true, n);
#endif
  decompress_scalar(bits, scale, acc, true, done, n);
}

// ---- PowerSGD. Memory-bound for the small ranks PowerSGD uses (every
// product streams M once); `omp simd` (compiled with -fopenmp-simd, no
// OpenMP runtime) lets the compiler vectorise the reductions.

namespace {
// y[j] += a * x[j]: the inner loop of both Q = M^T P and M = P Q^T.
inline void axpy(float* y, float a, const float* x, size_t m) {
#pragma omp simd
  for (size_t j = 0; j < m; ++j) y[j] += a * x[j];
}
}  // namespace

void lowrank_project(const float* M, size_t n, size_t m, const float* Qt, size_t r, float* Pt) {
  for (size_t i = 0; i < n; ++i) {
    const float* row = M + i * m;
    size_t k = 0;
    // Four columns of Q per pass over the row: the row is read from memory
    // once per four dot products instead of once per product.
    for (; k + 4 <= r; k += 4) {
      const float *q0 = Qt + k * m, *q1 = q0 + m, *q2 = q1 + m, *q3 = q2 + m;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (size_t j = 0; j < m; ++j) {
        s0 += row[j] * q0[j];
        s1 += row[j] * q1[j];
        s2 += row[j] * q2[j];
        s3 += row[j] * q3[j];
      }
      Pt[k * n + i] = s0;
      Pt[(k + 1) * n + i] = s1;
      Pt[(k + 2) * n + i] = s2;
      Pt[(k + 3) * n + i] = s3;
    }
    for (; k < r; ++k) {
      const float* q = Qt + k * m;
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (size_t j = 0; j < m; ++j) s += row[j] * q[j];
      Pt[k * n + i] = s;
    }
  }
}

void lowrank_project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                                float* Qt) {
  std::memset(Qt, 0, r * m * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float* row = M + i * m;
    for (size_t k = 0; k < r; ++k) {
      axpy(Qt + k * m, Pt[k * n + i], row, m);
    }
  }
}

void lowrank_expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M) {
  // Every rank computes this from the same (allreduced) P and Q, so the
  // replicas stay identical: the sum over k runs in one fixed order.
  for (size_t i = 0; i < n; ++i) {
    float* row = M + i * m;
    std::memset(row, 0, m * sizeof(float));
    for (size_t k = 0; k < r; ++k) {
      axpy(row, Pt[k * n + i], Qt + k * m, m);
    }
  }
}

void orthonormalize_rows(float* A, size_t r, size_t len, float epsilon) {
  // Scalar, in one fixed order, in double: every rank orthonormalises the
  // same allreduced P and must get the same bits (cost r^2 * len, small
  // next to the products).
  for (size_t k = 0; k < r; ++k) {
    float* a = A + k * len;
    double ss = 0;
    for (size_t j = 0; j < len; ++j) ss += double(a[j]) * a[j];
    const float inv = gram_schmidt_inverse_norm(ss, epsilon);
    for (size_t j = 0; j < len; ++j) a[j] *= inv;
    for (size_t l = k + 1; l < r; ++l) {
      float* b = A + l * len;
      double dot = 0;
      for (size_t j = 0; j < len; ++j) dot += double(a[j]) * b[j];
      const float d = float(dot);
      for (size_t j = 0; j < len; ++j) b[j] -= d * a[j];
    }
  }
}

}  // namespace gradwire::kernels
