// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CPU kernels of blockwise int8 quantization (Note [blockwise int8] in
// kernels/quantize_math.h, whose element math they share with the CUDA
// twins in kernels/cuda/quantize.cu). Plain loops for now (no AVX table).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quantize_math.h"

namespace gradwire::kernels {

// Quantizes n elements of `src` (type t) in blocks of `block` (1 ..
// kMaxQuantBlock): scales[quant_blocks(n, block)], q[n]. error: nullptr, or
// n float32 of error feedback (Note [quantization error feedback]): the
// value quantized is src + error, and error is left with what q misses.
void quantize_int8_blocks(const void* src, QuantType t, size_t n, size_t block, float* error,
                          float* scales, int8_t* q);

// dst (type t)[i] = q[i] * its block's scale.
void dequantize_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            QuantType t, void* dst);

// acc[i] += q[i] * its block's scale (float32).
void accumulate_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            float* acc);

// dst (type t)[i] = acc[i] * factor (factor 1: acc[i] as is).
void store_scaled(const float* acc, float factor, size_t n, QuantType t, void* dst);

}  // namespace gradwire::kernels
