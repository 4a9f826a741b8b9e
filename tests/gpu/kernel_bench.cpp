// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Times every CUDA kernel of kernels/cuda against the device's measured
// copy bandwidth (cudaMemcpyAsync device to device, counted as bytes read +
// bytes written): a memory-bound kernel should reach a large fraction of it.
// Run by scripts/gpu-check. Without a CUDA device it says so and exits 0.
//
//   gradwire_gpu_bench [--mib N] [--iters N]
//
// To time a new kernel, add an entry to kKernels: its name, the bytes one
// call over n elements moves (0: not memory-bound, time only), and the call.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gradwire/types.h"
#include "kernels/cuda/compress.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/scale.h"

namespace {

using gradwire::DataType;
using gradwire::ReduceOp;

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err_));      \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

struct Buffers {
  void* a;
  void* b;
  void* c;
  size_t bytes;
  double* scratch;  // one double (rms_scale)
  float* scale;     // one float (the sign kernels' scale)
  void* lowrank;    // lowrank_scratch_bytes() of device memory
};

struct Kernel {
  const char* name;
  DataType dtype;
  std::function<double(size_t n)> moved;  // bytes read + written per call
  std::function<void(const Buffers&, size_t n, cudaStream_t)> run;
};

namespace cu = gradwire::kernels::cuda;
constexpr size_t kRank = 4;  // PowerSGD rank for the low-rank products

// The square matrix side whose float32 matrix fills n elements.
size_t side(size_t n) {
  size_t k = 1;
  while ((k + 1) * (k + 1) <= n) ++k;
  return k;
}

const Kernel kKernels[] = {
    {"reduce sum", DataType::Float32, [](size_t n) { return 12.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::reduce(m.c, m.a, m.b, n, DataType::Float32, ReduceOp::Sum, s);
     }},
    {"reduce sum", DataType::BFloat16, [](size_t n) { return 6.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::reduce(m.c, m.a, m.b, n, DataType::BFloat16, ReduceOp::Sum, s);
     }},
    {"reduce max", DataType::Float16, [](size_t n) { return 6.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::reduce(m.c, m.a, m.b, n, DataType::Float16, ReduceOp::Max, s);
     }},
    {"divide", DataType::Float32, [](size_t n) { return 8.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::divide(m.a, n, DataType::Float32, 3, s);
     }},
    {"copy_divided", DataType::Float32, [](size_t n) { return 8.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::copy_divided(m.c, m.a, n, DataType::Float32, 3, s);
     }},
    {"copy_divided", DataType::BFloat16, [](size_t n) { return 4.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::copy_divided(m.c, m.a, n, DataType::BFloat16, 3, s);
     }},
    // 1-bit compression (float32 gradients, float32 error feedback).
    {"rms_scale", DataType::Float32, [](size_t n) { return 8.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::rms_scale(static_cast<const float*>(m.a), static_cast<const float*>(m.b), n, m.scratch,
                     m.scale, s);
     }},
    {"compress_signs", DataType::Float32, [](size_t n) { return 12.0 * n + n / 8.0; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::compress_signs(static_cast<const float*>(m.a), static_cast<float*>(m.b), m.scale,
                          static_cast<uint8_t*>(m.c), n, s);
     }},
    {"decompress_signs", DataType::Float32, [](size_t n) { return 4.0 * n + n / 8.0; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::decompress_signs(static_cast<const uint8_t*>(m.c), m.scale, 0.5f,
                            static_cast<float*>(m.b), n, false, s);
     }},
    {"decompress+acc", DataType::Float32, [](size_t n) { return 8.0 * n + n / 8.0; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::decompress_signs(static_cast<const uint8_t*>(m.c), m.scale, 0.5f,
                            static_cast<float*>(m.b), n, true, s);
     }},
    // 16-bit casts (n float32 elements).
    {"float_to_half", DataType::Float32, [](size_t n) { return 6.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::float_to_half(static_cast<uint16_t*>(m.c), static_cast<const float*>(m.a), n, s);
     }},
    {"half_to_float", DataType::Float32, [](size_t n) { return 6.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::half_to_float(static_cast<float*>(m.b), static_cast<const uint16_t*>(m.c), n, s);
     }},
    {"float_to_bf16", DataType::Float32, [](size_t n) { return 6.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::float_to_bf16(static_cast<uint16_t*>(m.c), static_cast<const float*>(m.a), n, s);
     }},
    {"bf16_to_float", DataType::Float32, [](size_t n) { return 6.0 * n; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::bf16_to_float(static_cast<float*>(m.b), static_cast<const uint16_t*>(m.c), n, s);
     }},
    // PowerSGD on a square float32 matrix M filling the buffer, rank 4: the
    // products read (or write) M once; orthonormalisation is one block over
    // r rows of the side's length (latency, not bandwidth: time only).
    {"lowrank_project", DataType::Float32, [](size_t n) { return 4.0 * double(side(n)) * side(n); },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       const size_t k = side(n);
       cu::lowrank_project(static_cast<const float*>(m.a), k, k, static_cast<const float*>(m.b),
                           kRank, static_cast<float*>(m.c), s);
     }},
    {"lowrank_project_t", DataType::Float32, [](size_t n) { return 4.0 * double(side(n)) * side(n); },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       const size_t k = side(n);
       cu::lowrank_project_transposed(static_cast<const float*>(m.a), k, k,
                                      static_cast<const float*>(m.b), kRank,
                                      static_cast<float*>(m.c), m.lowrank, s);
     }},
    {"lowrank_expand", DataType::Float32, [](size_t n) { return 4.0 * double(side(n)) * side(n); },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       const size_t k = side(n);
       cu::lowrank_expand(static_cast<const float*>(m.b), static_cast<const float*>(m.c), k, k,
                          kRank, static_cast<float*>(m.a), s);
     }},
    {"orthonormalize", DataType::Float32, [](size_t) { return 0.0; },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       cu::orthonormalize_rows(static_cast<float*>(m.c), kRank, side(n), 1e-8f, s);
     }},
};

// Seconds per call of `fn`, after one warm-up call.
double time_per_call(const std::function<void()>& fn, int iters, cudaStream_t s) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  fn();
  CHECK(cudaEventRecord(start, s));
  for (int i = 0; i < iters; ++i) fn();
  CHECK(cudaEventRecord(stop, s));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return ms / 1e3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mib")) mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  }
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("gradwire_gpu_bench: no CUDA device: %s; nothing timed\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t bytes = mib << 20;
  Buffers m{nullptr, nullptr, nullptr, bytes, nullptr, nullptr, nullptr};
  CHECK(cudaMalloc(&m.a, bytes));
  CHECK(cudaMalloc(&m.b, bytes));
  CHECK(cudaMalloc(&m.c, bytes));
  CHECK(cudaMalloc(&m.scratch, sizeof(double)));
  CHECK(cudaMalloc(&m.scale, sizeof(float)));
  CHECK(cudaMemset(m.a, 0x3c, bytes));  // finite values in every dtype
  CHECK(cudaMemset(m.b, 0x3c, bytes));
  CHECK(cudaMemset(m.c, 0x3c, bytes));
  CHECK(cudaMemset(m.scale, 0, sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMalloc(&m.lowrank, cu::lowrank_scratch_bytes()));

  const double copy_s = time_per_call(
      [&] { CHECK(cudaMemcpyAsync(m.c, m.a, bytes, cudaMemcpyDeviceToDevice, s)); }, iters, s);
  const double copy_bw = 2.0 * double(bytes) / copy_s / 1e9;
  std::printf("device 0: %s, %d SMs; buffers of %zu MiB, %d calls each\n", prop.name,
              prop.multiProcessorCount, mib, iters);
  std::printf("copy bandwidth (cudaMemcpyAsync D2D, read + write): %.1f GB/s\n\n", copy_bw);
  std::printf("%-16s %-9s %12s %12s %10s %8s\n", "kernel", "dtype", "elements", "time (us)",
              "GB/s", "of copy");
  for (const Kernel& k : kKernels) {
    const size_t n = bytes / gradwire::element_size(k.dtype);
    const double t = time_per_call([&] { k.run(m, n, s); }, iters, s);
    const double moved = k.moved(n);
    const std::string dtype(gradwire::to_string(k.dtype));
    if (moved > 0) {
      const double bw = moved / t / 1e9;
      std::printf("%-16s %-9s %12zu %12.1f %10.1f %7.0f%%\n", k.name, dtype.c_str(), n, t * 1e6,
                  bw, 100.0 * bw / copy_bw);
    } else {
      std::printf("%-16s %-9s %12zu %12.1f %10s %8s\n", k.name, dtype.c_str(), n, t * 1e6, "-",
                  "-");
    }
  }
  CHECK(cudaFree(m.lowrank));
  CHECK(cudaFree(m.scratch));
  CHECK(cudaFree(m.scale));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(m.a));
  CHECK(cudaFree(m.b));
  CHECK(cudaFree(m.c));
  return 0;
}
