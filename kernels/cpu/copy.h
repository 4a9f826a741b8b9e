// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A memcpy for the collectives' bulk copies (Note [copying without rep movsb]
// in kernels/cpu/copy.cpp).
#pragma once

#include <cstddef>

namespace gradwire::kernels {

// memcpy(dst, src, bytes): same contract (no overlap), the same bytes.
void copy(void* dst, const void* src, size_t bytes);
// copy(a, src, bytes) and copy(b, src, bytes) in one pass over src.
void copy2(void* a, void* b, const void* src, size_t bytes);

}  // namespace gradwire::kernels
