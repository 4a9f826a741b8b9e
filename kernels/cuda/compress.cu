// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// CUDA compression kernels (kernels/cuda/compress.h) over the element math of
// kernels/compress_math.h, which the CPU kernels share (Note [shared element
// math]): the same sign rule, error update, scale and Gram-Schmidt norm.
#include <cuda_runtime.h>

#include <string>

#include "gradwire/error.h"
#include "kernels/compress_math.h"
#include "kernels/cuda/compress.h"
#include "kernels/cuda/launch.h"
#include "kernels/reduce_math.h"

namespace gradwire::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 4096 ? (b ? b : 1) : 4096);  // grid-stride beyond
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// ---- 1-bit

__global__ void sum_squares_kernel(const float* x, const float* error, size_t n, double* out) {
  __shared__ double partial[kThreads];
  double s = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double c = double(error ? x[i] + error[i] : x[i]);
    s += c * c;
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

__global__ void finish_scale_kernel(const double* sum, size_t n, float* scale) {
  *scale = kernels::rms_scale(*sum, n);
}

// One warp per 32 elements: lane l's sign is bit l of the ballot word, which
// is Note [sign bit layout] once the word is stored little-endian.
__global__ void compress_kernel(const float* x, float* error, const float* scale_p, uint8_t* bits,
                                size_t n) {
  const float scale = *scale_p;
  const size_t lane = threadIdx.x & 31u;
  const size_t warps = (size_t(gridDim.x) * blockDim.x) >> 5;
  for (size_t w = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; w * 32 < n; w += warps) {
    const size_t i = w * 32 + lane;
    uint32_t bit = 0;
    if (i < n) {
      float e = error[i];
      bit = compress_element(x[i], e, scale);
      error[i] = e;
    }
    const uint32_t word = __ballot_sync(0xffffffffu, bit);
    // Lanes 0..3 store one byte each; bytes past packed_bytes(n) are not ours.
    if (lane < 4) {
      const size_t byte = w * 4 + lane;
      if (byte < packed_bytes(n)) bits[byte] = uint8_t(word >> (8 * lane));
    }
  }
}

// Four elements per thread step: one nibble of the packed signs in, one
// float4 out (read too when accumulating), when `out` is 16-byte aligned;
// the tail (and unaligned outputs) one element at a time.
__global__ void decompress_kernel(const uint8_t* bits, const float* scale_p, float multiplier,
                                  float* out, size_t packs, size_t n, bool accumulate) {
  const float scale = *scale_p * multiplier;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    const size_t i = 4 * p;
    float4 v{sign_value(packed_bit(bits, i), scale), sign_value(packed_bit(bits, i + 1), scale),
             sign_value(packed_bit(bits, i + 2), scale), sign_value(packed_bit(bits, i + 3), scale)};
    float4* o = reinterpret_cast<float4*>(out) + p;
    if (accumulate) {
      const float4 a = *o;
      v = float4{a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w};
    }
    *o = v;
  }
  for (size_t i = 4 * packs + tid; i < n; i += stride) {
    const float v = sign_value(packed_bit(bits, i), scale);
    out[i] = accumulate ? out[i] + v : v;
  }
}

// ---- PowerSGD orthonormalisation: one block, rows in order, like the CPU.

__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) shared[threadIdx.x] += shared[threadIdx.x + w];
    __syncthreads();
  }
  const double out = shared[0];
  __syncthreads();
  return out;
}

__global__ void orthonormalize_kernel(float* A, size_t r, size_t len, float epsilon) {
  __shared__ double shared[kThreads];
  for (size_t k = 0; k < r; ++k) {
    float* a = A + k * len;
    double ss = 0;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) ss += double(a[j]) * a[j];
    const float inv = gram_schmidt_inverse_norm(block_sum(ss, shared), epsilon);
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) a[j] = __fmul_rn(a[j], inv);
    __syncthreads();
    for (size_t l = k + 1; l < r; ++l) {
      float* b = A + l * len;
      double dot = 0;
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) dot += double(a[j]) * b[j];
      const float d = float(block_sum(dot, shared));
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) b[j] = __fsub_rn(b[j], __fmul_rn(d, a[j]));
      __syncthreads();
    }
  }
}

}  // namespace

void rms_scale(const float* x, const float* error, size_t n, double* scratch, float* scale,
               void* stream) {
  cudaMemsetAsync(scratch, 0, sizeof(double), as_stream(stream));
  if (n) sum_squares_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, error, n, scratch);
  finish_scale_kernel<<<1, 1, 0, as_stream(stream)>>>(scratch, n, scale);
  check("rms_scale");
}

void compress_signs(const float* x, float* error, const float* scale, uint8_t* bits, size_t n,
                    void* stream) {
  if (n == 0) return;
  compress_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, error, scale, bits, n);
  check("compress_signs");
}

void decompress_signs(const uint8_t* bits, const float* scale, float multiplier, float* out,
                      size_t n, bool accumulate, void* stream) {
  if (n == 0) return;
  const size_t packs = (reinterpret_cast<uintptr_t>(out) & 15u) == 0 ? n / 4 : 0;
  decompress_kernel<<<blocks_for(packs ? packs : n), kThreads, 0, as_stream(stream)>>>(
      bits, scale, multiplier, out, packs, n, accumulate);
  check("decompress_signs");
}

// The 16-bit casts are in cast.cu (built into libgradwire).

void orthonormalize_rows(float* A, size_t r, size_t len, float epsilon, void* stream) {
  if (r == 0 || len == 0) return;
  orthonormalize_kernel<<<1, kThreads, 0, as_stream(stream)>>>(A, r, len, epsilon);
  check("orthonormalize_rows");
}

}  // namespace gradwire::kernels::cuda
