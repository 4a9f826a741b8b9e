// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CPU kernels of blockwise int8 quantization (kernels/cpu/quantize.h).
#include "kernels/cpu/quantize.h"

#include <algorithm>

namespace gradwire::kernels {

void quantize_int8_blocks(const void* src, QuantType t, size_t n, size_t block, float* error,
                          float* scales, int8_t* q) {
  for (size_t b = 0, first = 0; first < n; ++b, first += block) {
    const size_t last = std::min(n, first + block);
    float amax = 0.0f;
    if (error) {
      // Two passes over one block (in cache): c = x + e is kept in the error
      // buffer until the scale is known.
      for (size_t i = first; i < last; ++i) {
        error[i] = rn_add(quant_load(src, t, i), error[i]);
        amax = amax_step(amax, error[i]);
      }
    } else {
      for (size_t i = first; i < last; ++i) amax = amax_step(amax, quant_load(src, t, i));
    }
    const float scale = int8_scale(amax);
    scales[b] = scale;
    if (error) {
      for (size_t i = first; i < last; ++i) {
        const float c = error[i];
        q[i] = quantize_int8(c, scale);
        error[i] = rn_sub(c, dequantize_int8(q[i], scale));
      }
    } else {
      for (size_t i = first; i < last; ++i) q[i] = quantize_int8(quant_load(src, t, i), scale);
    }
  }
}

void dequantize_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            QuantType t, void* dst) {
  for (size_t b = 0, first = 0; first < n; ++b, first += block) {
    const size_t last = std::min(n, first + block);
    const float scale = scales[b];
    for (size_t i = first; i < last; ++i) quant_store(dst, t, i, dequantize_int8(q[i], scale));
  }
}

void accumulate_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            float* acc) {
  for (size_t b = 0, first = 0; first < n; ++b, first += block) {
    const size_t last = std::min(n, first + block);
    const float scale = scales[b];
    for (size_t i = first; i < last; ++i) acc[i] = rn_add(acc[i], dequantize_int8(q[i], scale));
  }
}

void store_scaled(const float* acc, float factor, size_t n, QuantType t, void* dst) {
  if (factor == 1.0f) {
    for (size_t i = 0; i < n; ++i) quant_store(dst, t, i, acc[i]);
  } else {
    for (size_t i = 0; i < n; ++i) quant_store(dst, t, i, rn_mul(acc[i], factor));
  }
}

}  // namespace gradwire::kernels
