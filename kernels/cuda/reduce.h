// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CUDA twins of kernels/cpu/reduce.h: the same element math (reduce_math.h),
// so a GPU reduce gives the same bits as the CPU one (NaN payloads aside).
// Host launchers only; no CUDA type appears here (a stream is a void*, the
// cudaStream_t it is; nullptr means the legacy default stream).
#pragma once

#include <cstddef>

#include "gradwire/types.h"

namespace gradwire::kernels::cuda {

// dst[i] = a[i] op b[i] on device buffers, enqueued on `stream`. dst may alias
// a or b exactly. Avg is treated as Sum (the caller divides afterwards).
// Throws gradwire::Error (InvalidArgument for bad arguments, Internal if the
// launch fails). count == 0 enqueues nothing.
void reduce(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op, void* stream);

// dst[i] = dst[i] / divisor (floats: true division; integers: truncation
// toward zero); divisor >= 1.
void divide(void* dst, size_t count, DataType dtype, int divisor, void* stream);

}  // namespace gradwire::kernels::cuda
