// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CUDA twins of kernels/cpu/compress.h over the same element math
// (kernels/compress_math.h). Host launchers only, no CUDA types: a stream is
// the cudaStream_t as void* (nullptr: the legacy default stream). Nothing here synchronises with the
// host: scales stay in device memory, so a whole compressed step can be
// enqueued without a round trip. Failures throw gradwire::Error (Internal).
// Built into libgradwire (the compression layer uses them on device data).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradwire::kernels::cuda {

// *scale = rms_scale(sum of (x + error)^2, n), computed on the device
// (error may be nullptr). `scratch` is one device double.
void rms_scale(const float* x, const float* error, size_t n, double* scratch, float* scale,
               void* stream);

// The fused compress pass (Note [sign bit layout]): warp ballots, one 32-bit
// word per 32 elements; writes exactly packed_bytes(n) bytes (the last
// partial byte's unused bits are 0). Reads the scale from device memory.
void compress_signs(const float* x, float* error, const float* scale, uint8_t* bits, size_t n,
                    void* stream);

// out[i] = +-(*scale * multiplier), or acc[i] += that when accumulate.
void decompress_signs(const uint8_t* bits, const float* scale, float multiplier, float* out,
                      size_t n, bool accumulate, void* stream);

// float32 <-> float16 / bfloat16, the reduce_math.h conversions.
void float_to_half(uint16_t* dst, const float* src, size_t n, void* stream);
void half_to_float(float* dst, const uint16_t* src, size_t n, void* stream);
void float_to_bf16(uint16_t* dst, const float* src, size_t n, void* stream);
void bf16_to_float(float* dst, const uint16_t* src, size_t n, void* stream);

// PowerSGD, with the CPU functions' layouts (row-major M, P and Q kept
// transposed as r rows), on `stream` (Note [low-rank kernels] in lowrank.cu:
// our own kernels, no cuBLAS). lowrank_project_transposed needs `scratch`,
// lowrank_scratch_bytes() of device memory, for its partial sums (enqueued
// work on one stream may share it).
void lowrank_project(const float* M, size_t n, size_t m, const float* Qt, size_t r, float* Pt,
                     void* stream);
void lowrank_project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                                float* Qt, void* scratch, void* stream);
size_t lowrank_scratch_bytes();
// M = P Q^T, rounded as the CPU's lowrank_expand (the same bits).
void lowrank_expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M,
                    void* stream);
// The same with the 16-byte path's rows per iteration chosen: 1 (the
// schedule before Note [rows in flight]), 8, or anything else (the default,
// 4); for the A/B in gradwire_gpu_bench, so that one GPU run picks.
void lowrank_expand_rows(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M,
                         int rows_per_iteration, void* stream);
// Gram-Schmidt on the r rows of A (one thread block, in the CPU order).
void orthonormalize_rows(float* A, size_t r, size_t len, float epsilon, void* stream);
// error[i] = powersgd_residual(input[i], approx[i], share) (compress_math.h).
void powersgd_residual(const float* input, const float* approx, float share, size_t n,
                       float* error, void* stream);
// x[i] += y[i].
void add(float* x, const float* y, size_t n, void* stream);

}  // namespace gradwire::kernels::cuda
