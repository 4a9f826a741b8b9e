// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The device twin of reducer::copy_divided (src/reducer/scale.h): the copy of
// a gradient into a device Bucket with the averaging folded in, one pass over
// the gradient on the gradient's stream. Host launcher only; no CUDA type
// appears here (a stream is a void*; nullptr is the legacy default stream).
#pragma once

#include <cstddef>

#include "gradwire/types.h"

namespace gradwire::kernels::cuda {

// dst[i] = src[i] / divisor for floating dtypes with Elem<dt>::divide
// (kernels/elem.h), the formula the CPU copy_divided uses, so both give the
// same bits. dst == src scales in place; otherwise they must not overlap.
// divisor == 1 copies. Integers, divisor < 1, null buffers: InvalidArgument;
// a failed launch: Internal. count == 0 enqueues nothing.
void copy_divided(void* dst, const void* src, size_t count, DataType dtype, int divisor,
                  void* stream);

}  // namespace gradwire::kernels::cuda
