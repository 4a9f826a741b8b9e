// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// LowRankOps on the host and on a CUDA device (Note [where PowerSGD's
// buffers live] in compress/lowrank_ops.h).
#include "compress/lowrank_ops.h"

#include <cstring>

#include "base/raise.h"
#include "kernels/compress_math.h"
#include "kernels/cpu/compress.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime.h>

#include "device/cuda.h"
#include "kernels/cuda/compress.h"
#endif

namespace gradwire::compress {
namespace {

class HostOps final : public LowRankOps {
 public:
  void add(float* x, const float* y, size_t n) override {
    for (size_t i = 0; i < n; ++i) x[i] += y[i];
  }
  void copy(float* dst, const float* src, size_t n) override {
    if (n) std::memcpy(dst, src, n * sizeof(float));
  }
  void upload(float* dst, const float* host, size_t n) override { copy(dst, host, n); }
  void orthonormalize(float* A, size_t r, size_t len, float epsilon) override {
    kernels::orthonormalize_rows(A, r, len, epsilon);
  }
  void project(const float* M, size_t n, size_t m, const float* Qt, size_t r, float* Pt) override {
    kernels::lowrank_project(M, n, m, Qt, r, Pt);
  }
  void project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                          float* Qt) override {
    kernels::lowrank_project_transposed(M, n, m, Pt, r, Qt);
  }
  void expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M) override {
    kernels::lowrank_expand(Pt, Qt, n, m, r, M);
  }
  void residual(const float* input, const float* approx, float share, size_t n,
                float* error) override {
    for (size_t i = 0; i < n; ++i) error[i] = kernels::powersgd_residual(input[i], approx[i], share);
  }
};

}  // namespace

LowRankOps& host_ops() {
  static HostOps ops;
  return ops;
}

#if GRADWIRE_HAVE_CUDA

namespace {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  raise(ErrorCode::Internal, "PowerSGD on a CUDA device: {} failed: {}", what,
        cudaGetErrorString(err));
}

namespace cu = kernels::cuda;

class DeviceOps final : public LowRankOps {
 public:
  DeviceOps(int device, void* stream, void* scratch)
      : device_(device), stream_(stream), scratch_(scratch) {}
  void add(float* x, const float* y, size_t n) override {
    device::DeviceGuard g(device_);
    cu::add(x, y, n, stream_);
  }
  void copy(float* dst, const float* src, size_t n) override {
    device::DeviceGuard g(device_);
    if (n) check(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s()), "cudaMemcpyAsync");
  }
  void upload(float* dst, const float* host, size_t n) override {
    device::DeviceGuard g(device_);
    // From pageable memory: returns once the source was read, so the host
    // buffer may change afterwards.
    if (n) check(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, s()), "cudaMemcpyAsync");
  }
  void orthonormalize(float* A, size_t r, size_t len, float epsilon) override {
    device::DeviceGuard g(device_);
    cu::orthonormalize_rows(A, r, len, epsilon, stream_);
  }
  void project(const float* M, size_t n, size_t m, const float* Qt, size_t r, float* Pt) override {
    device::DeviceGuard g(device_);
    cu::lowrank_project(M, n, m, Qt, r, Pt, stream_);
  }
  void project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                          float* Qt) override {
    device::DeviceGuard g(device_);
    cu::lowrank_project_transposed(M, n, m, Pt, r, Qt, scratch_, stream_);
  }
  void expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r, float* M) override {
    device::DeviceGuard g(device_);
    cu::lowrank_expand(Pt, Qt, n, m, r, M, stream_);
  }
  void residual(const float* input, const float* approx, float share, size_t n,
                float* error) override {
    device::DeviceGuard g(device_);
    cu::powersgd_residual(input, approx, share, n, error, stream_);
  }

 private:
  cudaStream_t s() const { return static_cast<cudaStream_t>(stream_); }
  int device_;
  void* stream_;
  void* scratch_;
};

}  // namespace

// Note [settled device copies]: the state's buffers are used by kernels on
// whatever stream the caller passes (PyTorch's current stream, a Reducer's
// non-blocking stream). cudaMemset and cudaMemcpy run on the legacy default
// stream, which does not order with non-blocking streams, and both may
// return before the device has finished (a memset always may; a pageable
// upload returns once the bytes are staged). So every DeviceFloats copy
// waits for the whole device before it starts (no kernel still reads or
// writes the buffer) and after it ends (the next kernel, on any stream, sees
// the new bytes). They run at construction, save, load and reset, never in a
// step. Without the waits a fresh error buffer's zeroing raced the first
// step on a non-blocking stream, which read stale device memory.
namespace {
void settle(const char* what) { check(cudaDeviceSynchronize(), what); }
}  // namespace

DeviceFloats::DeviceFloats(int device, size_t n) : device_(device), n_(n) {
  if (n == 0) return;
  device::DeviceGuard guard(device);
  void* p = nullptr;
  check(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc");
  p_ = std::shared_ptr<void>(p, device::DeviceFreer{});
}

void DeviceFloats::upload(const std::vector<float>& host) {
  if (host.size() != n_) {
    raise(ErrorCode::Internal, "DeviceFloats::upload: {} values for {} elements", host.size(), n_);
  }
  if (n_ == 0) return;
  device::DeviceGuard guard(device_);
  settle("cudaDeviceSynchronize before an upload");
  check(cudaMemcpy(get(), host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  settle("cudaDeviceSynchronize after an upload");
}

std::vector<float> DeviceFloats::download() const {
  std::vector<float> host(n_);
  if (n_ == 0) return host;
  device::DeviceGuard guard(device_);
  settle("cudaDeviceSynchronize before a download");  // the last step's kernels wrote
  check(cudaMemcpy(host.data(), get(), n_ * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

void DeviceFloats::zero() {
  if (n_ == 0) return;
  device::DeviceGuard guard(device_);
  settle("cudaDeviceSynchronize before cudaMemset");
  check(cudaMemset(get(), 0, n_ * sizeof(float)), "cudaMemset");
  settle("cudaDeviceSynchronize after cudaMemset");
}

std::unique_ptr<LowRankOps> device_ops(int device, void* stream, void* scratch) {
  return std::make_unique<DeviceOps>(device, stream, scratch);
}

size_t device_scratch_bytes() { return cu::lowrank_scratch_bytes(); }

#else  // no CUDA in this build

namespace {
[[noreturn]] void no_cuda(int device) {
  raise(ErrorCode::InvalidArgument, "PowerSGD got a Bucket on CUDA device {}, but this gradwire "
        "was built without CUDA", device);
}
}  // namespace

DeviceFloats::DeviceFloats(int device, size_t n) : device_(device), n_(n) {
  if (n) no_cuda(device);
}
void DeviceFloats::upload(const std::vector<float>&) {}
std::vector<float> DeviceFloats::download() const { return {}; }
void DeviceFloats::zero() {}
std::unique_ptr<LowRankOps> device_ops(int device, void*, void*) { no_cuda(device); }
size_t device_scratch_bytes() { return 0; }

#endif

}  // namespace gradwire::compress
