// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CUDA blockwise int8 quantization (kernels/cuda/quantize.h) over the element
// math of kernels/quantize_math.h, which the CPU kernels share (Note [shared
// element math]).
#include <cuda_runtime.h>

#include <string>

#include "gradwire/error.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/quantize.h"
#include "kernels/quantize_math.h"

namespace gradwire::kernels::cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// One thread block per quantization block (grid-stride over the blocks):
// c = x (+ error) is kept in the error buffer between the two passes, as on
// the CPU; the amax is a shared-memory max reduction (exact in any order).
__global__ void quantize_kernel(const void* src, QuantType t, size_t n, size_t block,
                                float* error, float* scales, int8_t* q) {
  __shared__ float partial[kThreads];
  const size_t blocks = quant_blocks(n, block);
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t first = b * block;
    const size_t last = first + block < n ? first + block : n;
    float amax = 0.0f;
    for (size_t i = first + threadIdx.x; i < last; i += blockDim.x) {
      float c = quant_load(src, t, i);
      if (error) {
        c = rn_add(c, error[i]);
        error[i] = c;
      }
      amax = amax_step(amax, c);
    }
    partial[threadIdx.x] = amax;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (int(threadIdx.x) < w) partial[threadIdx.x] = amax_step(partial[threadIdx.x], partial[threadIdx.x + w]);
      __syncthreads();
    }
    const float scale = int8_scale(partial[0]);
    __syncthreads();  // partial[0] is read by every thread before the next block reuses it
    if (threadIdx.x == 0) scales[b] = scale;
    for (size_t i = first + threadIdx.x; i < last; i += blockDim.x) {
      const float c = error ? error[i] : quant_load(src, t, i);
      const int8_t v = quantize_int8(c, scale);
      q[i] = v;
      if (error) error[i] = rn_sub(c, dequantize_int8(v, scale));
    }
  }
}

__global__ void dequantize_kernel(const int8_t* q, const float* scales, size_t n, size_t block,
                                  QuantType t, void* dst, float* acc) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = dequantize_int8(q[i], scales[i / block]);
    if (acc) {
      acc[i] = rn_add(acc[i], v);
    } else {
      quant_store(dst, t, i, v);
    }
  }
}

__global__ void store_kernel(const float* acc, float factor, size_t n, QuantType t, void* dst) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    quant_store(dst, t, i, factor == 1.0f ? acc[i] : rn_mul(acc[i], factor));
  }
}

}  // namespace

void quantize_int8_blocks(const void* src, QuantType t, size_t n, size_t block, float* error,
                          float* scales, int8_t* q, void* stream) {
  if (n == 0) return;
  const size_t blocks = quant_blocks(n, block);
  const unsigned grid = unsigned(blocks < 65535 ? blocks : 65535);
  quantize_kernel<<<grid, kThreads, 0, as_stream(stream)>>>(src, t, n, block, error, scales, q);
  check("quantize_int8_blocks");
}

void dequantize_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            QuantType t, void* dst, void* stream) {
  if (n == 0) return;
  dequantize_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      q, scales, n, block, t, dst, nullptr);
  check("dequantize_int8_blocks");
}

void accumulate_int8_blocks(const int8_t* q, const float* scales, size_t n, size_t block,
                            float* acc, void* stream) {
  if (n == 0) return;
  dequantize_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      q, scales, n, block, QuantType::Float32, nullptr, acc);
  check("accumulate_int8_blocks");
}

void store_scaled(const float* acc, float factor, size_t n, QuantType t, void* dst,
                  void* stream) {
  if (n == 0) return;
  store_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(acc, factor, n, t, dst);
  check("store_scaled");
}

}  // namespace gradwire::kernels::cuda
