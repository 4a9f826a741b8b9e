// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// copy_divided on the GPU (kernels/cuda/scale.h): a grid-stride loop over
// Elem<dt>::divide (Note [shared element math]); 16-byte loads and stores
// when both buffers are 16-byte aligned, one element at a time otherwise.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gradwire/error.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/scale.h"
#include "kernels/elem.h"

namespace gradwire::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <DataType dt>
__global__ void copy_divided_kernel(typename Elem<dt>::S* __restrict__ dst,
                                    const typename Elem<dt>::S* __restrict__ src, size_t packs,
                                    size_t n, int divisor) {
  using S = typename Elem<dt>::S;
  constexpr int kPer = 16 / sizeof(S);
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    uint4 raw = reinterpret_cast<const uint4*>(src)[p];
    S v[kPer];
    memcpy(v, &raw, 16);
#pragma unroll
    for (int k = 0; k < kPer; ++k) v[k] = Elem<dt>::divide(v[k], divisor);
    memcpy(&raw, v, 16);
    reinterpret_cast<uint4*>(dst)[p] = raw;
  }
  for (size_t i = packs * kPer + tid; i < n; i += stride) dst[i] = Elem<dt>::divide(src[i], divisor);
}

// In place: dst == src, so no __restrict__.
template <DataType dt>
__global__ void divide_in_place_kernel(typename Elem<dt>::S* v, size_t n, int divisor) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    v[i] = Elem<dt>::divide(v[i], divisor);
}

[[noreturn]] void fail(ErrorCode code, const std::string& what) { throw Error(code, what); }

template <DataType dt>
void launch(void* dst, const void* src, size_t n, int divisor, cudaStream_t s) {
  using S = typename Elem<dt>::S;
  if (dst == src) {
    divide_in_place_kernel<dt><<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<S*>(dst), n, divisor);
    return;
  }
  const size_t packs = aligned16(dst) && aligned16(src) ? n / (16 / sizeof(S)) : 0;
  copy_divided_kernel<dt><<<grid_for(packs ? packs : n, kThreads), kThreads, 0, s>>>(
      static_cast<S*>(dst), static_cast<const S*>(src), packs, n, divisor);
}

}  // namespace

void copy_divided(void* dst, const void* src, size_t count, DataType dtype, int divisor,
                  void* stream) {
  if (divisor < 1)
    fail(ErrorCode::InvalidArgument, "CUDA copy_divided: divisor " + std::to_string(divisor) + " must be >= 1");
  if (!is_floating(dtype)) {
    fail(ErrorCode::InvalidArgument, std::string("CUDA copy_divided averages floating gradients only, not ") +
                                         std::string(to_string(dtype)));
  }
  if (count == 0) return;
  if (!dst || !src)
    fail(ErrorCode::InvalidArgument, "CUDA copy_divided: null buffer for " + std::to_string(count) + " elements");
  auto s = static_cast<cudaStream_t>(stream);
  if (divisor == 1) {
    if (dst != src &&
        cudaMemcpyAsync(dst, src, count * element_size(dtype), cudaMemcpyDeviceToDevice, s) != cudaSuccess) {
      fail(ErrorCode::Internal, std::string("CUDA copy_divided: cudaMemcpyAsync failed: ") +
                                    cudaGetErrorString(cudaGetLastError()));
    }
    return;
  }
  switch (dtype) {
    case DataType::Float32: launch<DataType::Float32>(dst, src, count, divisor, s); break;
    case DataType::Float64: launch<DataType::Float64>(dst, src, count, divisor, s); break;
    case DataType::Float16: launch<DataType::Float16>(dst, src, count, divisor, s); break;
    case DataType::BFloat16: launch<DataType::BFloat16>(dst, src, count, divisor, s); break;
    default: break;  // excluded above
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    fail(ErrorCode::Internal, "CUDA copy_divided of " + std::to_string(count) + " " +
                                  std::string(to_string(dtype)) + " elements failed to launch: " +
                                  cudaGetErrorString(err));
  }
}

}  // namespace gradwire::kernels::cuda
