// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Element math of the compression kernels (1-bit sign compression with error
// feedback, PowerSGD's low-rank products), shared by the CPU kernels in
// kernels/cpu/compress.cpp and the CUDA kernels in kernels/cuda/compress.cu
// (Note [shared element math]: the CPU tests check these exact formulas).
//
// Note [sign bit layout]: element i of a packed sign vector is bit (i % 8) of
// byte i / 8, least significant bit first. That is also what a warp ballot
// produces (lane l -> bit l of a 32-bit word, words stored little-endian), so
// the CUDA packer writes one ballot word per 32 elements and both sides
// produce the same bytes. Bit 1 means "+scale", bit 0 "-scale".
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/reduce_math.h"  // GW_HD

namespace gradwire::kernels {

// 1 for x >= 0 (both zeros, and NaN: a NaN must not poison the error
// buffer's sign decisions forever; it is carried in the error instead).
// DeepSpeed maps 0 to +1 too (sign().add_(1).bool()).
GW_HD uint32_t sign_bit(float x) { return (x < 0.0f) ? 0u : 1u; }

// The value a sign bit stands for.
GW_HD float sign_value(uint32_t bit, float scale) { return bit ? scale : -scale; }

// One element of the fused compress pass: c = x + error (error feedback),
// returns c's sign bit and leaves in `error` what the 1-bit value misses.
GW_HD uint32_t compress_element(float x, float& error, float scale) {
  const float c = x + error;
  const uint32_t bit = sign_bit(c);
  error = c - sign_value(bit, scale);
  return bit;
}

// Bytes needed for n packed signs.
GW_HD size_t packed_bytes(size_t n) { return (n + 7) / 8; }

// Bit i of a packed sign vector.
GW_HD uint32_t packed_bit(const uint8_t* bits, size_t i) { return (bits[i >> 3] >> (i & 7)) & 1u; }

// The scale of a 1-bit vector: its root mean square over the n real
// elements, so scale * sign(c) has the same l2 norm as c (DeepSpeed's
// norm / sqrt(numel)). n == 0 gives 0.
GW_HD float rms_scale(double sum_squares, size_t n) {
  return n == 0 ? 0.0f : (float)::sqrt(sum_squares / (double)n);
}

// Gram-Schmidt step of PowerSGD's orthonormalisation, on rows of a row-major
// (r x len) matrix (a column of P or Q is a row here): the inverse norm a
// row is multiplied by. torch's _orthogonalize_gram_schmidt: x / ||x|| when
// epsilon == 0 (a zero row stays zero instead of becoming NaN, which torch
// also ends up with after its error path), else x / (||x|| + epsilon).
GW_HD float gram_schmidt_inverse_norm(double sum_squares, float epsilon) {
  const float norm = (float)::sqrt(sum_squares);
  if (epsilon == 0.0f) return norm > 0.0f ? 1.0f / norm : 0.0f;
  return 1.0f / (norm + epsilon);
}

// Note [rounded as written]: PowerSGD's expansion M = P Q^T and its error
// feedback round every product and every sum on their own, on both sides:
// the host build targets baseline x86-64 (no FMA, nothing to contract) and
// the device spells the roundings out (nvcc would fuse a * b + c), so the
// CPU and CUDA expansions of the same P and Q, and the residuals after them,
// are the same bits.
GW_HD float mul_add_rounded(float acc, float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(acc, __fmul_rn(a, b));
#else
  return acc + a * b;
#endif
}

// PowerSGD's error feedback: what this rank put in (its divided gradient
// plus its error) minus its share of the decompressed average.
GW_HD float powersgd_residual(float input, float approx, float share) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(input, __fmul_rn(approx, share));
#else
  return input - approx * share;
#endif
}


// Note [1-bit element math]: the optimizers' per-element formulas (1-bit Adam
// and LAMB, compress/onebit_optimizers.cpp), shared by the CPU loops and the
// CUDA kernels (kernels/cuda/onebit.cu), every operation rounded on its own
// as the C++ expression it replaces did on the host (Note [rounded as
// written]), so a CPU and a CUDA step from the same state give the same bits
// wherever no sum over elements is involved.
GW_HD float rn_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
GW_HD float rn_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
GW_HD float rn_sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
GW_HD float rn_div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
GW_HD float rn_sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// m = beta1 m + (1 - beta1) g; one_b1 is (1 - beta1), computed once.
GW_HD float adam_momentum(float m, float g, float b1, float one_b1) {
  return rn_add(rn_mul(b1, m), rn_mul(one_b1, g));
}
// v = beta2 v + (1 - beta2) g g.
GW_HD float adam_variance(float v, float g, float b2, float one_b2) {
  return rn_add(rn_mul(b2, v), rn_mul(rn_mul(one_b2, g), g));
}
// Adam's denominator sqrt(v / bc2) + eps (inv_bc2 = 1 / bc2).
GW_HD float adam_denominator(float v, float inv_bc2, float eps) {
  return rn_add(rn_sqrt(rn_mul(v, inv_bc2)), eps);
}
// Note [preconditioned 1-bit compression] and [the momentum clip]: what is
// compressed for momentum m with denominator d (hi: the clip, or infinity).
GW_HD float onebit_send_value(float m, float d, float hi, bool precondition) {
  float u = rn_div(m, d);
  u = u < -hi ? -hi : (hi < u ? hi : u);  // std::clamp's order
  return precondition ? u : rn_mul(u, d);
}
// The update direction (m / bc1) / d, plus decoupled weight decay.
GW_HD float adam_direction(float m, float inv_bc1, float d, float p, float wd) {
  float x = rn_div(rn_mul(m, inv_bc1), d);
  if (wd != 0.0f) x = rn_add(x, rn_mul(wd, p));
  return x;
}
// p - step * u.
GW_HD float apply_step(float p, float step, float u) { return rn_sub(p, rn_mul(step, u)); }

}  // namespace gradwire::kernels
