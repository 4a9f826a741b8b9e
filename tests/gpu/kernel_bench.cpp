// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Times every CUDA kernel of kernels/cuda against the device's measured
// copy bandwidth (cudaMemcpyAsync device to device, counted as bytes read +
// bytes written): a memory-bound kernel should reach a large fraction of it.
// Run by scripts/gpu-check. Without a CUDA device it says so and exits 0.
//
//   gradwire_gpu_bench [--mib N] [--iters N]
//
// To time a new kernel, add an entry to kKernels: its name, the bytes one
// call moves, and the call.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gradwire/types.h"
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
};

struct Kernel {
  const char* name;
  DataType dtype;
  int streams_of_bytes;  // bytes moved per call = this x buffer bytes
  std::function<void(const Buffers&, size_t n, cudaStream_t)> run;
};

const Kernel kKernels[] = {
    {"reduce sum", DataType::Float32, 3,
     [](const Buffers& m, size_t n, cudaStream_t s) {
       gradwire::kernels::cuda::reduce(m.c, m.a, m.b, n, DataType::Float32, ReduceOp::Sum, s);
     }},
    {"reduce sum", DataType::BFloat16, 3,
     [](const Buffers& m, size_t n, cudaStream_t s) {
       gradwire::kernels::cuda::reduce(m.c, m.a, m.b, n, DataType::BFloat16, ReduceOp::Sum, s);
     }},
    {"reduce max", DataType::Float16, 3,
     [](const Buffers& m, size_t n, cudaStream_t s) {
       gradwire::kernels::cuda::reduce(m.c, m.a, m.b, n, DataType::Float16, ReduceOp::Max, s);
     }},
    {"divide", DataType::Float32, 2,
     [](const Buffers& m, size_t n, cudaStream_t s) {
       gradwire::kernels::cuda::divide(m.a, n, DataType::Float32, 3, s);
     }},
    {"copy_divided", DataType::Float32, 2,
     [](const Buffers& m, size_t n, cudaStream_t s) {
       gradwire::kernels::cuda::copy_divided(m.c, m.a, n, DataType::Float32, 3, s);
     }},
    {"copy_divided", DataType::BFloat16, 2,
     [](const Buffers& m, size_t n, cudaStream_t s) {
       gradwire::kernels::cuda::copy_divided(m.c, m.a, n, DataType::BFloat16, 3, s);
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
  Buffers m{nullptr, nullptr, nullptr, bytes};
  CHECK(cudaMalloc(&m.a, bytes));
  CHECK(cudaMalloc(&m.b, bytes));
  CHECK(cudaMalloc(&m.c, bytes));
  CHECK(cudaMemset(m.a, 0x3c, bytes));  // finite values in every dtype
  CHECK(cudaMemset(m.b, 0x3c, bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));

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
    const double bw = double(k.streams_of_bytes) * double(bytes) / t / 1e9;
    std::printf("%-16s %-9s %12zu %12.1f %10.1f %7.0f%%\n", k.name,
                std::string(gradwire::to_string(k.dtype)).c_str(), n, t * 1e6, bw,
                100.0 * bw / copy_bw);
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(m.a));
  CHECK(cudaFree(m.b));
  CHECK(cudaFree(m.c));
  return 0;
}
