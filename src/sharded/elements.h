// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The engine's element work on host memory: gradients into Buckets (with
// the averaging), shards widened to float32 for the optimizer, master
// weights narrowed to the parameters, and the squared norm.
#pragma once

#include <cstddef>

#include "gradwire/types.h"

namespace gradwire::sharded {

// True if gradients of `param` can be reduced in `reduce` (the same dtype,
// or a 16-bit float reduced in float32).
bool can_reduce_in(DataType param, DataType reduce);

// dst (reduce dtype) = src (param dtype) / world. 16-bit values are widened
// exactly, then divided in float32; the same dtype divides as the Reducer
// does (reducer/scale.h), in place when dst == src.
void copy_divided_into(void* dst, DataType reduce, const void* src, DataType param, size_t count,
                       int world);

// dst = float(src) * factor (factor 1: an exact widening).
void widen_scaled(float* dst, const void* src, DataType dtype, size_t count, float factor);

// dst (dtype) = src, rounded to nearest even for 16-bit floats.
void narrow(void* dst, DataType dtype, const float* src, size_t count);

// Sum of squares in double (inf or NaN if an element is).
double sum_squares(const void* src, DataType dtype, size_t count);

}  // namespace gradwire::sharded
