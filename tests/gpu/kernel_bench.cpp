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

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "compress/lowrank_ops.h"
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
    // The schedule before Note [rows in flight] (kernels/cuda/lowrank.cu):
    // one row per iteration; and eight. The A/B for the row above.
    {"lowrank_expand_1row", DataType::Float32, [](size_t n) { return 4.0 * double(side(n)) * side(n); },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       const size_t k = side(n);
       cu::lowrank_expand_rows(static_cast<const float*>(m.b), static_cast<const float*>(m.c), k, k,
                               kRank, static_cast<float*>(m.a), 1, s);
     }},
    {"lowrank_expand_8rows", DataType::Float32, [](size_t n) { return 4.0 * double(side(n)) * side(n); },
     [](const Buffers& m, size_t n, cudaStream_t s) {
       const size_t k = side(n);
       cu::lowrank_expand_rows(static_cast<const float*>(m.b), static_cast<const float*>(m.c), k, k,
                               kRank, static_cast<float*>(m.a), 8, s);
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

// Issue 16 (b): the GPU time to compress and decompress one Bucket of about
// 25 MiB (the Reducer's default cap), everything but the collectives,
// enqueued as the hooks enqueue it.
//  * PowerSGD rank 4 (compress/powersgd.cpp's stages through the same
//    LowRankOps): a transformer layer of width 1024, the matrices Wqkv
//    (3072 x 1024), Wo (1024 x 1024) and W1 (2304 x 1024) and their biases
//    and norms uncompressed.
//  * 1-bit (compress/onebit_allreduce.cpp's steps at world size 2): the
//    worker's scale and packing into two chunks, the server's sum of two
//    received chunks, its scale and packing, the decoding of two chunks.
void bucket_timings(int iters, cudaStream_t s) {
  struct M {
    size_t rows, cols;
  };
  const M mats[] = {{3072, 1024}, {1024, 1024}, {2304, 1024}};
  const size_t vecs[] = {3072, 1024, 2304, 1024, 1024};
  const size_t r = 4;
  size_t n = 0, p_elems = 0, q_elems = 0, v_elems = 0;
  for (const M& m : mats) {
    n += m.rows * m.cols;
    p_elems += r * m.rows;
    q_elems += r * m.cols;
  }
  for (size_t v : vecs) v_elems += v;
  n += v_elems;
  float *buf, *err, *input, *comm1, *q;
  void* scratch;
  CHECK(cudaMalloc(&buf, n * 4));
  CHECK(cudaMalloc(&err, n * 4));
  CHECK(cudaMalloc(&input, n * 4));
  CHECK(cudaMalloc(&comm1, (v_elems + p_elems) * 4));
  CHECK(cudaMalloc(&q, q_elems * 4));
  CHECK(cudaMalloc(&scratch, gradwire::compress::device_scratch_bytes()));
  CHECK(cudaMemset(buf, 0x3c, n * 4));
  CHECK(cudaMemset(err, 0, n * 4));
  CHECK(cudaMemset(q, 0x3c, q_elems * 4));
  auto ops = gradwire::compress::device_ops(0, s, scratch);
  auto powersgd = [&] {
    ops->add(buf, err, n);
    ops->copy(input, buf, n);
    size_t off = 0, po = 0, qo = 0;
    float* p = comm1 + v_elems;
    for (const M& m : mats) {
      ops->orthonormalize(q + qo, r, m.cols, 0.0f);
      ops->project(buf + off, m.rows, m.cols, q + qo, r, p + po);
      off += m.rows * m.cols, po += r * m.rows, qo += r * m.cols;
    }
    size_t at = 0;
    for (size_t v : vecs) ops->copy(comm1 + at, buf + off + at, v), at += v;
    // (allreduce of comm1)
    at = 0;
    for (size_t v : vecs) ops->copy(buf + off + at, comm1 + at, v), at += v;
    off = po = qo = 0;
    for (const M& m : mats) {
      ops->orthonormalize(p + po, r, m.rows, 0.0f);
      ops->project_transposed(buf + off, m.rows, m.cols, p + po, r, q + qo);
      off += m.rows * m.cols, po += r * m.rows, qo += r * m.cols;
    }
    // (allreduce of Q)
    off = po = qo = 0;
    for (const M& m : mats) {
      ops->expand(p + po, q + qo, m.rows, m.cols, r, buf + off);
      off += m.rows * m.cols, po += r * m.rows, qo += r * m.cols;
    }
    ops->residual(input, buf, 0.5f, n, err);
  };
  const double t_psgd = time_per_call(powersgd, iters, s);

  // 1-bit at world size 2 on the same n elements.
  const size_t world = 2, chunk = ((n + world - 1) / world + 7) / 8 * 8;
  const size_t block = 4 + chunk / 8;
  uint8_t *send, *recv;
  float *acc, *server_err;
  double* sum;
  CHECK(cudaMalloc(&send, block * world));
  CHECK(cudaMalloc(&recv, block * world));
  CHECK(cudaMalloc(&acc, chunk * 4));
  CHECK(cudaMalloc(&server_err, chunk * 4));
  CHECK(cudaMalloc(&sum, sizeof(double)));
  CHECK(cudaMemset(recv, 0x3c, block * world));
  CHECK(cudaMemset(server_err, 0, chunk * 4));
  auto real = [&](size_t j) { return j * chunk >= n ? 0 : std::min(chunk, n - j * chunk); };
  auto onebit = [&] {
    auto* scale = reinterpret_cast<float*>(send);
    cu::rms_scale(buf, err, n, sum, scale, s);
    for (size_t j = 0; j < world; ++j) {
      if (j) CHECK(cudaMemcpyAsync(send + j * block, scale, 4, cudaMemcpyDeviceToDevice, s));
      CHECK(cudaMemsetAsync(send + j * block + 4, 0, chunk / 8, s));
      cu::compress_signs(buf + j * chunk, err + j * chunk, reinterpret_cast<float*>(send + j * block),
                         send + j * block + 4, real(j), s);
    }
    // (alltoall)
    for (size_t i = 0; i < world; ++i) {
      cu::decompress_signs(recv + i * block + 4, reinterpret_cast<const float*>(recv + i * block),
                           0.5f, acc, real(0), i > 0, s);
    }
    cu::rms_scale(acc, server_err, real(0), sum, reinterpret_cast<float*>(send), s);
    CHECK(cudaMemsetAsync(send + 4, 0, chunk / 8, s));
    cu::compress_signs(acc, server_err, reinterpret_cast<float*>(send), send + 4, real(0), s);
    // (allgather)
    for (size_t j = 0; j < world; ++j) {
      cu::decompress_signs(recv + j * block + 4, reinterpret_cast<const float*>(recv + j * block),
                           1.0f, buf + j * chunk, real(j), false, s);
    }
  };
  const double t_onebit = time_per_call(onebit, iters, s);
  std::printf("\none Bucket of %.1f MiB (%zu float32), GPU time to compress + decompress, "
              "collectives excluded:\n", double(n) * 4 / (1 << 20), n);
  std::printf("  PowerSGD rank 4 (3 matrices, 5 vectors): %8.1f us\n", t_psgd * 1e6);
  std::printf("  1-bit, world size 2:                     %8.1f us\n", t_onebit * 1e6);
  for (void* p : {(void*)buf, (void*)err, (void*)input, (void*)comm1, (void*)q, scratch,
                  (void*)send, (void*)recv, (void*)acc, (void*)server_err, (void*)sum}) {
    CHECK(cudaFree(p));
  }
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
  bucket_timings(iters, s);
  CHECK(cudaFree(m.lowrank));
  CHECK(cudaFree(m.scratch));
  CHECK(cudaFree(m.scale));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(m.a));
  CHECK(cudaFree(m.b));
  CHECK(cudaFree(m.c));
  return 0;
}
