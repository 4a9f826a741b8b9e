// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire-perf --buffers cuda: device buffers for the NCCL and staged
// paths (GRADWIRE_DEVICE_PATH). Only the buffers are CUDA's; the collectives
// are gradwire's public API, as for host buffers.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "perf_common.h"

#if GWPERF_CUDA
#include <cuda_runtime.h>
#endif

namespace gwperf {

#if GWPERF_CUDA
namespace {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "gradwire-perf: %s failed: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}

std::shared_ptr<void> device_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

void to_device(Buffers& b, int rank) {
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  const int local = env_int("LOCAL_RANK", env_int("OMPI_COMM_WORLD_LOCAL_RANK", rank));
  check(cudaSetDevice(local % devices), "cudaSetDevice");
  b.send_dev = device_alloc(b.send.size());
  b.recv_dev = device_alloc(b.recv.size());
  check(cudaMemcpy(b.send_dev.get(), b.send.data(), b.send.size(), cudaMemcpyHostToDevice),
        "cudaMemcpy (upload)");
}

void clear_device_recv(Buffers& b) {
  check(cudaMemset(b.recv_dev.get(), 0, b.recv.size()), "cudaMemset");
}

void download_recv(Buffers& b) {
  check(cudaMemcpy(b.recv.data(), b.recv_dev.get(), b.recv.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy (download)");
}

#else

namespace {
[[noreturn]] void no_cuda() {
  std::fprintf(stderr, "gradwire-perf: --buffers cuda needs a build with CUDA\n");
  std::exit(2);
}
}  // namespace

void to_device(Buffers&, int) { no_cuda(); }
void clear_device_recv(Buffers&) { no_cuda(); }
void download_recv(Buffers&) { no_cuda(); }

#endif

}  // namespace gwperf
