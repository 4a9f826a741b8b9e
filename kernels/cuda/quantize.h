// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CUDA twins of kernels/cpu/quantize.h over the same element math
// (kernels/quantize_math.h, Note [blockwise int8]): the same scales and the
// same bytes for the same input (a block's amax is a maximum, exact in any
// order). Host launchers; a stream is the cudaStream_t as void* (nullptr:
// the legacy default stream). Nothing synchronises with the host. Failures
// throw gradwire::Error (Internal). n == 0 enqueues nothing. Built into
// libgradwire with the compression layer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quantize_math.h"

namespace gradwire::kernels::cuda {

// kernels::quantize_int8_blocks on device memory: one thread block per
// quantization block reduces its amax, then quantizes it.
void quantize_int8_blocks(const void* src, QuantType t, size_t n, size_t block, float* error,
                          float* scales, int8_t* q, void* stream);
void dequantize_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            QuantType t, void* dst, void* stream);
void accumulate_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            float* acc, void* stream);
void store_scaled(const float* acc, float factor, size_t n, QuantType t, void* dst, void* stream);

}  // namespace gradwire::kernels::cuda
