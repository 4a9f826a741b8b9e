// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The 1-bit optimizers' CUDA kernels (kernels/cuda/onebit.h) over the shared
// element math (Note [1-bit element math] in kernels/compress_math.h).
#include <cuda_runtime.h>

#include <string>

#include "gradwire/error.h"
#include "kernels/compress_math.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/onebit.h"

namespace gradwire::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPartials = 512;  // blocks of sum_squares_fixed

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

#define GW_FOR_EACH(i, n)                                                                    \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                  \
       i += size_t(gridDim.x) * blockDim.x)

__global__ void moments_kernel(float* m, float* v, const float* g, size_t n, float b1, float one_b1,
                               float b2, float one_b2) {
  GW_FOR_EACH(i, n) {
    const float x = g[i];
    m[i] = kernels::adam_momentum(m[i], x, b1, one_b1);
    v[i] = kernels::adam_variance(v[i], x, b2, one_b2);
  }
}

__global__ void momentum_kernel(float* m, const float* g, size_t n, float b1, float one_b1) {
  GW_FOR_EACH(i, n) m[i] = kernels::adam_momentum(m[i], g[i], b1, one_b1);
}

__global__ void prepare_kernel(float* m, const float* v, float* d, size_t n, float inv_bc2,
                               float eps, float hi, bool precondition) {
  GW_FOR_EACH(i, n) {
    const float den = kernels::adam_denominator(v[i], inv_bc2, eps);
    d[i] = den;
    m[i] = kernels::onebit_send_value(m[i], den, hi, precondition);
  }
}

__global__ void scale_kernel(float* x, size_t n, float factor) {
  GW_FOR_EACH(i, n) x[i] = kernels::rn_mul(x[i], factor);
}

__global__ void multiply_kernel(float* x, const float* y, size_t n) {
  GW_FOR_EACH(i, n) x[i] = kernels::rn_mul(x[i], y[i]);
}

__global__ void direction_kernel(float* u, const float* m, const float* v, float* p, size_t n,
                                 float inv_bc1, float inv_bc2, float eps, float wd, float step) {
  GW_FOR_EACH(i, n) {
    const float den = kernels::adam_denominator(v[i], inv_bc2, eps);
    const float x = kernels::adam_direction(m[i], inv_bc1, den, p[i], wd);
    u[i] = x;
    if (step != 0.0f) p[i] = kernels::apply_step(p[i], step, x);
  }
}

__global__ void apply_kernel(float* p, const float* u, size_t n, float step) {
  GW_FOR_EACH(i, n) p[i] = kernels::apply_step(p[i], step, u[i]);
}

// Block b sums the elements b, b + kPartials * kThreads ... in thread
// order, then a fixed tree; the second kernel adds the partials in order.
__global__ void sum_squares_partial_kernel(const float* x, size_t n, double* partials) {
  __shared__ double s[kThreads];
  double acc = 0;
  for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += size_t(kPartials) * kThreads) {
    acc += double(x[i]) * double(x[i]);
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

__global__ void sum_partials_kernel(const double* partials, double* out) {
  double acc = 0;
  for (int b = 0; b < kPartials; ++b) acc += partials[b];
  *out = acc;
}

__global__ void write_scales_kernel(uint8_t* blocks, size_t block, const float* scales,
                                    size_t stride, size_t count) {
  GW_FOR_EACH(j, count) {
    const float s = scales[j * stride];
    memcpy(blocks + j * block, &s, sizeof s);
  }
}

__global__ void read_scales_kernel(float* scales, const uint8_t* blocks, size_t block,
                                   size_t count) {
  GW_FOR_EACH(j, count) {
    float s;
    memcpy(&s, blocks + j * block, sizeof s);
    scales[j] = s;
  }
}

unsigned grid(size_t n) { return grid_for(n, kThreads); }

}  // namespace

void adam_moments(float* m, float* v, const float* g, size_t n, float b1, float b2, void* stream) {
  if (n == 0) return;
  moments_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(m, v, g, n, b1, 1.0f - b1, b2, 1.0f - b2);
  check("adam_moments");
}

void adam_momentum(float* m, const float* g, size_t n, float b1, void* stream) {
  if (n == 0) return;
  momentum_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(m, g, n, b1, 1.0f - b1);
  check("adam_momentum");
}

void onebit_prepare(float* m, const float* v, float* d, size_t n, float inv_bc2, float eps,
                    float hi, bool precondition, void* stream) {
  if (n == 0) return;
  prepare_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(m, v, d, n, inv_bc2, eps, hi,
                                                                precondition);
  check("onebit_prepare");
}

void scale(float* x, size_t n, float factor, void* stream) {
  if (n == 0) return;
  scale_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(x, n, factor);
  check("scale");
}

void multiply(float* x, const float* y, size_t n, void* stream) {
  if (n == 0) return;
  multiply_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(x, y, n);
  check("multiply");
}

void adam_direction(float* u, const float* m, const float* v, float* p, size_t n, float inv_bc1,
                    float inv_bc2, float eps, float wd, float step, void* stream) {
  if (n == 0) return;
  direction_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(u, m, v, p, n, inv_bc1, inv_bc2,
                                                                  eps, wd, step);
  check("adam_direction");
}

void apply_step(float* p, const float* u, size_t n, float step, void* stream) {
  if (n == 0) return;
  apply_kernel<<<grid(n), kThreads, 0, as_stream(stream)>>>(p, u, n, step);
  check("apply_step");
}

size_t onebit_partials() { return kPartials; }

void sum_squares_fixed(const float* x, size_t n, double* partials, double* out, void* stream) {
  sum_squares_partial_kernel<<<kPartials, kThreads, 0, as_stream(stream)>>>(x, n, partials);
  sum_partials_kernel<<<1, 1, 0, as_stream(stream)>>>(partials, out);
  check("sum_squares_fixed");
}

void write_scales(uint8_t* blocks, size_t block, const float* scales, size_t stride, size_t count,
                  void* stream) {
  if (count == 0) return;
  write_scales_kernel<<<1, 64, 0, as_stream(stream)>>>(blocks, block, scales, stride, count);
  check("write_scales");
}

void read_scales(float* scales, const uint8_t* blocks, size_t block, size_t count, void* stream) {
  if (count == 0) return;
  read_scales_kernel<<<1, 64, 0, as_stream(stream)>>>(scales, blocks, block, count);
  check("read_scales");
}

}  // namespace gradwire::kernels::cuda
