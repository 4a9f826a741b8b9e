// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The float32 <-> float16 / bfloat16 casts of kernels/cuda/compress.h, over
// the reduce_math.h conversions (Note [shared element math]), so a device
// cast gives the CPU cast's bits. Built into libgradwire (the device
// Buckets' 16-bit comm hooks use them) rather than gradwire_cuda_kernels.
// Vectorised: narrowing converts 8 elements per step (two float4 loads, one
// uint4 store), widening 4 (one 8-byte load, one float4 store), when the
// buffers are aligned for them; one element at a time otherwise and for the
// tail.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gradwire/error.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/compress.h"
#include "kernels/reduce_math.h"

namespace gradwire::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ uint16_t d_float_to_half(float f) { return kernels::float_to_half(f); }
__device__ float d_half_to_float(uint16_t h) { return kernels::half_to_float(h); }
__device__ uint16_t d_float_to_bf16(float f) { return kernels::float_to_bf16(f); }
__device__ float d_bf16_to_float(uint16_t h) { return kernels::bf16_to_float(h); }

// 32 bytes of float32 in, 16 bytes of 16-bit values out, per pack of 8.
template <uint16_t (*F)(float)>
__global__ void narrow_kernel(uint16_t* __restrict__ dst, const float* __restrict__ src,
                              size_t packs, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    const float4 a = reinterpret_cast<const float4*>(src)[2 * p];
    const float4 b = reinterpret_cast<const float4*>(src)[2 * p + 1];
    uint4 out;
    out.x = uint32_t(F(a.x)) | (uint32_t(F(a.y)) << 16);
    out.y = uint32_t(F(a.z)) | (uint32_t(F(a.w)) << 16);
    out.z = uint32_t(F(b.x)) | (uint32_t(F(b.y)) << 16);
    out.w = uint32_t(F(b.z)) | (uint32_t(F(b.w)) << 16);
    reinterpret_cast<uint4*>(dst)[p] = out;
  }
  for (size_t i = packs * 8 + tid; i < n; i += stride) dst[i] = F(src[i]);
}

// 8 bytes of 16-bit values in, 16 bytes of float32 out, per pack of 4 (so
// neighbouring threads store neighbouring float4: coalesced).
template <float (*F)(uint16_t)>
__global__ void widen_kernel(float* __restrict__ dst, const uint16_t* __restrict__ src,
                             size_t packs, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    const uint2 in = reinterpret_cast<const uint2*>(src)[p];
    reinterpret_cast<float4*>(dst)[p] = float4{F(uint16_t(in.x)), F(uint16_t(in.x >> 16)),
                                               F(uint16_t(in.y)), F(uint16_t(in.y >> 16))};
  }
  for (size_t i = packs * 4 + tid; i < n; i += stride) dst[i] = F(src[i]);
}

template <uint16_t (*F)(float)>
void narrow(uint16_t* dst, const float* src, size_t n, void* stream, const char* what) {
  if (n == 0) return;
  const size_t packs = aligned16(dst) && aligned16(src) ? n / 8 : 0;
  narrow_kernel<F><<<grid_for(packs ? packs : n, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      dst, src, packs, n);
  check(what);
}

template <float (*F)(uint16_t)>
void widen(float* dst, const uint16_t* src, size_t n, void* stream, const char* what) {
  if (n == 0) return;
  const size_t packs = aligned16(dst) && (reinterpret_cast<uintptr_t>(src) & 7u) == 0 ? n / 4 : 0;
  widen_kernel<F><<<grid_for(packs ? packs : n, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      dst, src, packs, n);
  check(what);
}

}  // namespace

void float_to_half(uint16_t* dst, const float* src, size_t n, void* stream) {
  narrow<d_float_to_half>(dst, src, n, stream, "float_to_half");
}
void half_to_float(float* dst, const uint16_t* src, size_t n, void* stream) {
  widen<d_half_to_float>(dst, src, n, stream, "half_to_float");
}
void float_to_bf16(uint16_t* dst, const float* src, size_t n, void* stream) {
  narrow<d_float_to_bf16>(dst, src, n, stream, "float_to_bf16");
}
void bf16_to_float(float* dst, const uint16_t* src, size_t n, void* stream) {
  widen<d_bf16_to_float>(dst, src, n, stream, "bf16_to_float");
}

}  // namespace gradwire::kernels::cuda
