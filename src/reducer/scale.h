// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The copy into a Bucket with the averaging folded in: one pass over the
// gradient instead of a copy now and a division after the collective.
#pragma once

#include <cstddef>

#include "gradwire/types.h"

namespace gradwire::reducer {

// dst[i] = src[i] / divisor, for floating dtypes (16-bit floats divide in
// float32 and round once, like kernels::divide). dst may equal src (then it
// scales in place); otherwise they must not overlap. divisor == 1 copies.
void copy_divided(void* dst, const void* src, size_t count, DataType dtype, int divisor);

}  // namespace gradwire::reducer
