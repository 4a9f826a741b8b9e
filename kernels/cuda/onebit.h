// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CUDA kernels of the 1-bit optimizers (compress/onebit_optimizers.cpp) and
// the device 1-bit allreduce (compress/onebit_allreduce.cpp), over the
// element math of kernels/compress_math.h (Note [1-bit element math]). Host
// launchers; a stream is the cudaStream_t as void*. Built into libgradwire.
// Failures throw gradwire::Error (Internal). n == 0 enqueues nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradwire::kernels::cuda {

// Warm-up: m = adam_momentum(m, g), v = adam_variance(v, g).
void adam_moments(float* m, float* v, const float* g, size_t n, float b1, float b2, void* stream);
// Compression stage: m = adam_momentum(m, g).
void adam_momentum(float* m, const float* g, size_t n, float b1, void* stream);
// d = adam_denominator(v), m = onebit_send_value(m, d).
void onebit_prepare(float* m, const float* v, float* d, size_t n, float inv_bc2, float eps,
                    float hi, bool precondition, void* stream);
// x[i] *= factor; x[i] *= y[i].
void scale(float* x, size_t n, float factor, void* stream);
void multiply(float* x, const float* y, size_t n, void* stream);
// u = adam_direction(m, d = adam_denominator(v), p) and, with step != 0,
// p = apply_step(p, step, u) in the same pass (Adam); LAMB passes step 0
// and applies per layer once it knows the coefficients.
void adam_direction(float* u, const float* m, const float* v, float* p, size_t n, float inv_bc1,
                    float inv_bc2, float eps, float wd, float step, void* stream);
void apply_step(float* p, const float* u, size_t n, float step, void* stream);
// *out = sum of x[i]^2 in double, in an order fixed by n alone (the same
// bits on every rank and every run): LAMB's norms must agree across ranks.
// `partials`: onebit_partials() doubles of device memory.
void sum_squares_fixed(const float* x, size_t n, double* partials, double* out, void* stream);
size_t onebit_partials();
// The scale in front of each of `count` wire blocks of `block` bytes
// (Note [1-bit layout]; the floats there are not 4-byte aligned):
// blocks[j * block .. +4) <- scales[j * stride]; and back.
void write_scales(uint8_t* blocks, size_t block, const float* scales, size_t stride, size_t count,
                  void* stream);
void read_scales(float* scales, const uint8_t* blocks, size_t block, size_t count, void* stream);

}  // namespace gradwire::kernels::cuda
