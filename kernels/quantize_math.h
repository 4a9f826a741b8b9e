// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Element math of blockwise int8 quantization (the quantized collectives,
// include/gradwire/quantized.h), shared by the CPU kernels in
// kernels/cpu/quantize.cpp and the CUDA kernels in kernels/cuda/quantize.cu
// (Note [shared element math]: the CPU tests check these exact formulas).
//
// Note [blockwise int8]: n elements are cut into blocks of `block` elements
// (the last one may be short). Each block has one float32 scale,
//   scale = amax / 127, amax = the largest |c| over the block's elements,
// and each element c is sent as q = round_half_even(c / scale) clamped to
// [-127, 127] (symmetric: -128 is never used), read back as q * scale. So an
// element's error is at most scale / 2 (amax / 254). A block of zeros has
// scale 0 and sends zeros. NaN elements are skipped by amax and sent as 0;
// an infinite one makes its block's scale infinite and every element of the
// block 0 (with error feedback the error buffer then carries the inf, as the
// 1-bit compressor carries a NaN: the caller's data was already broken).
// The amax is a maximum, which is exact in any order, so a CPU and a CUDA
// quantization of the same input give the same scale and the same bytes.
//
// Note [quantization error feedback]: with an error buffer e, the value
// quantized is c = x + e (x: this step's input, as float32), and afterwards
// e = c - q * scale: what this step failed to send is added to the next.
// Summed over steps, what was sent tracks what was given to within the last
// step's error, at most half a quantization step per element.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/compress_math.h"  // rn_mul, rn_div, rn_add, rn_sub
#include "kernels/reduce_math.h"    // GW_HD, the 16-bit conversions

namespace gradwire::kernels {

// The element types the quantizer reads and writes (DataType::Float32,
// Float16, BFloat16; everything in between is float32).
enum class QuantType : uint8_t { Float32, Float16, BFloat16 };

// The largest block size the kernels take (one CUDA thread block reduces a
// block's amax; a larger block would only make the scales coarser).
inline constexpr size_t kMaxQuantBlock = size_t(1) << 16;

GW_HD float quant_load(const void* src, QuantType t, size_t i) {
  switch (t) {
    case QuantType::Float16: return half_to_float(static_cast<const uint16_t*>(src)[i]);
    case QuantType::BFloat16: return bf16_to_float(static_cast<const uint16_t*>(src)[i]);
    default: return static_cast<const float*>(src)[i];
  }
}

GW_HD void quant_store(void* dst, QuantType t, size_t i, float v) {
  switch (t) {
    case QuantType::Float16: static_cast<uint16_t*>(dst)[i] = float_to_half(v); break;
    case QuantType::BFloat16: static_cast<uint16_t*>(dst)[i] = float_to_bf16(v); break;
    default: static_cast<float*>(dst)[i] = v; break;
  }
}

// Blocks of `block` elements needed for n elements.
GW_HD size_t quant_blocks(size_t n, size_t block) { return (n + block - 1) / block; }

// One step of a block's amax: NaN is skipped (the comparison is false), inf
// is kept.
GW_HD float amax_step(float amax, float c) {
  const float a = c < 0.0f ? -c : c;
  return a > amax ? a : amax;
}

GW_HD float int8_scale(float amax) { return rn_div(amax, 127.0f); }

GW_HD float round_half_even(float x) {
#ifdef __CUDA_ARCH__
  return rintf(x);
#else
  return std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
#endif
}

// Note [blockwise int8]: c as an int8 of `scale`.
GW_HD int8_t quantize_int8(float c, float scale) {
  if (!(scale > 0.0f)) return 0;  // a zero (or NaN) block
  float r = rn_div(c, scale);
  if (r != r) return 0;  // NaN element, or inf / inf
  r = round_half_even(r);
  r = r < -127.0f ? -127.0f : (r > 127.0f ? 127.0f : r);
  return (int8_t)(int)r;
}

GW_HD float dequantize_int8(int8_t q, float scale) { return rn_mul((float)q, scale); }

}  // namespace gradwire::kernels
