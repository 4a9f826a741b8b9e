// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CPU compression kernels: 1-bit sign compression with error feedback and
// PowerSGD's low-rank products. The element math lives in
// kernels/compress_math.h, shared with kernels/cuda/compress.cu. Each
// function runs an AVX2 loop where the CPU has AVX2 (Note [cpu kernel
// dispatch]: GRADWIRE_CPU_KERNELS=scalar forces the plain loops) and gives
// the same bits as the scalar loop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradwire::kernels {

// sum over i < n of (x[i] + error[i])^2, accumulated in double; error may be
// nullptr (then sum of x[i]^2).
double sum_squares(const float* x, const float* error, size_t n);

// The fused compress pass (Note [sign bit layout]): for i < n, c = x[i] +
// error[i]; bit i of `bits` = sign_bit(c); error[i] = c - (+-scale). Writes
// packed_bytes(n) bytes; the unused high bits of a last partial byte are 0.
// x may alias error.
void compress_signs(const float* x, float* error, float scale, uint8_t* bits, size_t n);

// out[i] = +-scale by bit i.
void decompress_signs(const uint8_t* bits, float scale, float* out, size_t n);

// acc[i] += +-scale by bit i.
void accumulate_signs(const uint8_t* bits, float scale, float* acc, size_t n);

// ---- PowerSGD (row-major matrices; P and Q are kept transposed, as r rows
// of length n and m, so that every inner loop runs over contiguous memory)

// Pt[k][i] = dot(M[i][:], Qt[k][:])   (P = M Q), M is n x m.
void lowrank_project(const float* M, size_t n, size_t m, const float* Qt, size_t r, float* Pt);
// Qt[k][:] = sum_i Pt[k][i] * M[i][:]   (Q = M^T P).
void lowrank_project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                                float* Qt);
// M[i][:] = sum_k Pt[k][i] * Qt[k][:]   (M = P Q^T).
void lowrank_expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M);
// Gram-Schmidt on the r rows (length len) of A, in order, as torch's
// _orthogonalize_gram_schmidt does on the columns of P or Q.
void orthonormalize_rows(float* A, size_t r, size_t len, float epsilon);

}  // namespace gradwire::kernels
