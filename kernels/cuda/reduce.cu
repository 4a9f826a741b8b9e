// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Grid-stride reduce/divide kernels over reduce_math.h (Note [shared element
// math]: the CPU tests check these exact formulas). When dst, a and b are all
// 16-byte aligned each thread moves 16 bytes per load (float4 for float32,
// 8 halves, ...); otherwise one element per load.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gradwire/error.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"
#include "kernels/elem.h"
#include "kernels/reduce_math.h"

namespace gradwire::kernels::cuda {
namespace {

using kernels::Op;

// Elem<dt>: kernels/elem.h, shared with the CPU kernels.
using kernels::Elem;

constexpr int kThreads = 256;

// 16 bytes of S, moved as one uint4.
template <typename S>
struct Pack {
  static constexpr int kCount = 16 / sizeof(S);
  S v[kCount];
};
template <typename S>
__device__ __forceinline__ Pack<S> load_pack(const S* p) {
  uint4 raw = *reinterpret_cast<const uint4*>(p);
  Pack<S> out;
  memcpy(&out, &raw, 16);
  return out;
}
template <typename S>
__device__ __forceinline__ void store_pack(S* p, const Pack<S>& in) {
  uint4 raw;
  memcpy(&raw, &in, 16);
  *reinterpret_cast<uint4*>(p) = raw;
}

// Scalar grid-stride loop; also used for the tail after the packed part.
template <DataType dt, Op op>
__global__ void reduce_kernel(typename Elem<dt>::S* dst, const typename Elem<dt>::S* a,
                              const typename Elem<dt>::S* b, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = Elem<dt>::template reduce<op>(a[i], b[i]);
  }
}

// 16-byte packs for the first `packs` packs, then the remaining elements.
template <DataType dt, Op op>
__global__ void reduce_packed_kernel(typename Elem<dt>::S* dst, const typename Elem<dt>::S* a,
                                     const typename Elem<dt>::S* b, size_t packs, size_t n) {
  using S = typename Elem<dt>::S;
  constexpr int kPer = Pack<S>::kCount;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    Pack<S> x = load_pack(a + p * kPer);
    Pack<S> y = load_pack(b + p * kPer);
#pragma unroll
    for (int k = 0; k < kPer; ++k) x.v[k] = Elem<dt>::template reduce<op>(x.v[k], y.v[k]);
    store_pack(dst + p * kPer, x);
  }
  for (size_t i = packs * kPer + tid; i < n; i += stride) {
    dst[i] = Elem<dt>::template reduce<op>(a[i], b[i]);
  }
}

template <DataType dt>
__global__ void divide_kernel(typename Elem<dt>::S* dst, size_t packs, size_t n, int divisor) {
  using S = typename Elem<dt>::S;
  constexpr int kPer = Pack<S>::kCount;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    Pack<S> x = load_pack(dst + p * kPer);
#pragma unroll
    for (int k = 0; k < kPer; ++k) x.v[k] = Elem<dt>::divide(x.v[k], divisor);
    store_pack(dst + p * kPer, x);
  }
  for (size_t i = packs * kPer + tid; i < n; i += stride) dst[i] = Elem<dt>::divide(dst[i], divisor);
}

[[noreturn]] void fail(ErrorCode code, const std::string& what) { throw Error(code, what); }

void check_launch(const char* what, DataType dtype, size_t count) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    fail(ErrorCode::Internal, std::string("CUDA ") + what + " of " + std::to_string(count) + " " +
                                  std::string(to_string(dtype)) +
                                  " elements failed to launch: " + cudaGetErrorString(err));
  }
}

template <DataType dt, Op op>
void launch_reduce(void* dst, const void* a, const void* b, size_t n, cudaStream_t stream) {
  using S = typename Elem<dt>::S;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  if (aligned16(dst) && aligned16(a) && aligned16(b)) {
    size_t packs = n / Pack<S>::kCount;
    reduce_packed_kernel<dt, op><<<grid_for(packs ? packs : n, kThreads), kThreads, 0, stream>>>(d, x, y, packs, n);
  } else {
    reduce_kernel<dt, op><<<grid_for(n, kThreads), kThreads, 0, stream>>>(d, x, y, n);
  }
}

template <DataType dt>
void launch_reduce_op(void* dst, const void* a, const void* b, size_t n, ReduceOp op, cudaStream_t s) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return launch_reduce<dt, Op::Sum>(dst, a, b, n, s);
    case ReduceOp::Min:
      return launch_reduce<dt, Op::Min>(dst, a, b, n, s);
    case ReduceOp::Max:
      return launch_reduce<dt, Op::Max>(dst, a, b, n, s);
    case ReduceOp::Prod:
      return launch_reduce<dt, Op::Prod>(dst, a, b, n, s);
  }
  fail(ErrorCode::InvalidArgument, "CUDA reduce: unknown ReduceOp value " + std::to_string((int)op));
}

template <DataType dt>
void launch_divide(void* dst, size_t n, int divisor, cudaStream_t stream) {
  using S = typename Elem<dt>::S;
  size_t packs = aligned16(dst) ? n / Pack<S>::kCount : 0;
  divide_kernel<dt>
      <<<grid_for(packs ? packs : n, kThreads), kThreads, 0, stream>>>(static_cast<S*>(dst), packs, n, divisor);
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op,
            void* stream) {
  if (count == 0) return;
  if (!dst || !a || !b)
    fail(ErrorCode::InvalidArgument, "CUDA reduce: null buffer for " + std::to_string(count) + " elements");
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DataType::Float32:
      launch_reduce_op<DataType::Float32>(dst, a, b, count, op, s);
      break;
    case DataType::Float64:
      launch_reduce_op<DataType::Float64>(dst, a, b, count, op, s);
      break;
    case DataType::Float16:
      launch_reduce_op<DataType::Float16>(dst, a, b, count, op, s);
      break;
    case DataType::BFloat16:
      launch_reduce_op<DataType::BFloat16>(dst, a, b, count, op, s);
      break;
    case DataType::Int32:
      launch_reduce_op<DataType::Int32>(dst, a, b, count, op, s);
      break;
    case DataType::Int64:
      launch_reduce_op<DataType::Int64>(dst, a, b, count, op, s);
      break;
    case DataType::UInt8:
      launch_reduce_op<DataType::UInt8>(dst, a, b, count, op, s);
      break;
    case DataType::Int8:
      launch_reduce_op<DataType::Int8>(dst, a, b, count, op, s);
      break;
    case DataType::Int16:
      launch_reduce_op<DataType::Int16>(dst, a, b, count, op, s);
      break;
    case DataType::Bool:
      launch_reduce_op<DataType::Bool>(dst, a, b, count, op, s);
      break;
    default:
      fail(ErrorCode::InvalidArgument, "CUDA reduce: unknown DataType value " + std::to_string((int)dtype));
  }
  check_launch("reduce", dtype, count);
}

void divide(void* dst, size_t count, DataType dtype, int divisor, void* stream) {
  if (divisor < 1)
    fail(ErrorCode::InvalidArgument, "CUDA divide: divisor " + std::to_string(divisor) + " must be >= 1");
  if (count == 0 || divisor == 1) return;
  if (!dst)
    fail(ErrorCode::InvalidArgument, "CUDA divide: null buffer for " + std::to_string(count) + " elements");
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DataType::Float32:
      launch_divide<DataType::Float32>(dst, count, divisor, s);
      break;
    case DataType::Float64:
      launch_divide<DataType::Float64>(dst, count, divisor, s);
      break;
    case DataType::Float16:
      launch_divide<DataType::Float16>(dst, count, divisor, s);
      break;
    case DataType::BFloat16:
      launch_divide<DataType::BFloat16>(dst, count, divisor, s);
      break;
    case DataType::Int32:
      launch_divide<DataType::Int32>(dst, count, divisor, s);
      break;
    case DataType::Int64:
      launch_divide<DataType::Int64>(dst, count, divisor, s);
      break;
    case DataType::UInt8:
      launch_divide<DataType::UInt8>(dst, count, divisor, s);
      break;
    case DataType::Int8:
      launch_divide<DataType::Int8>(dst, count, divisor, s);
      break;
    case DataType::Int16:
      launch_divide<DataType::Int16>(dst, count, divisor, s);
      break;
    case DataType::Bool:
      launch_divide<DataType::Bool>(dst, count, divisor, s);
      break;
    default:
      fail(ErrorCode::InvalidArgument, "CUDA divide: unknown DataType value " + std::to_string((int)dtype));
  }
  check_launch("divide", dtype, count);
}

}  // namespace gradwire::kernels::cuda
