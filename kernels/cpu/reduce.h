// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CPU reduction kernels used by the collectives. Element math comes from
// kernels/reduce_math.h (shared with CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gradwire/types.h"

namespace gradwire::kernels {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b exactly (a partial
// overlap throws InvalidArgument). Avg is not an element op: reduce() treats it
// as Sum and the caller divides afterwards with divide().
// Float16/BFloat16 compute each element in float32 and round once. Min/Max
// return NaN if either input is NaN. Integers wrap around.
// Runs the widest SIMD variant this CPU has (Note [cpu kernel dispatch] in
// kernels/cpu/dispatch.h); every variant gives the same bits.
void reduce(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op);

// dst[i] = dst[i] / divisor (floats: true division; integers: truncating
// toward zero). divisor must be >= 1, else InvalidArgument.
void divide(void* dst, size_t count, DataType dtype, int divisor);

// Widen/narrow 16-bit floats to/from float32 (round to nearest even; NaN stays
// NaN and comes out quiet). dst and src must not overlap.
void half_to_float(float* dst, const uint16_t* src, size_t count);
void float_to_half(uint16_t* dst, const float* src, size_t count);
void bf16_to_float(float* dst, const uint16_t* src, size_t count);
void float_to_bf16(uint16_t* dst, const float* src, size_t count);

}  // namespace gradwire::kernels
