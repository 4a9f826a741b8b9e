// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [where PowerSGD's buffers live]: PowerSGD's orchestration (which
// buffers, which products, which collectives, in which order;
// compress/powersgd.cpp) is written once. What differs between a host
// Bucket and a CUDA one is only where the element work runs, so it goes
// through LowRankOps: the CPU kernels (kernels/cpu/compress.h) for host
// memory, or the CUDA twins (kernels/cuda/compress.h) enqueued on one stream
// for device memory. Both compute the same formulas (kernels/compress_math.h).
// The device side also owns the state's device memory (DeviceFloats) and
// moves it to and from the host for save_state()/load_state(), which stay
// in one device-independent format.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace gradwire::compress {

class LowRankOps {
 public:
  virtual ~LowRankOps() = default;
  virtual void add(float* x, const float* y, size_t n) = 0;         // x += y
  virtual void copy(float* dst, const float* src, size_t n) = 0;    // same memory kind
  virtual void upload(float* dst, const float* host, size_t n) = 0;  // from host memory
  virtual void orthonormalize(float* A, size_t r, size_t len, float epsilon) = 0;
  virtual void project(const float* M, size_t n, size_t m, const float* Qt, size_t r,
                       float* Pt) = 0;
  virtual void project_transposed(const float* M, size_t n, size_t m, const float* Pt, size_t r,
                                  float* Qt) = 0;
  virtual void expand(const float* Pt, const float* Qt, size_t n, size_t m, size_t r,
                      float* M) = 0;
  virtual void residual(const float* input, const float* approx, float share, size_t n,
                        float* error) = 0;
};

// The CPU kernels (stateless).
LowRankOps& host_ops();

// Float32 device memory on one CUDA device (cudaMalloc'd, freed on
// destruction); empty for n == 0.
class DeviceFloats {
 public:
  DeviceFloats() = default;
  DeviceFloats(int device, size_t n);  // Internal on failure; InvalidArgument without CUDA
  float* get() const { return static_cast<float*>(p_.get()); }
  size_t size() const { return n_; }
  // Synchronous with every stream of the device (for construction, save,
  // load and tests, never inside a step): Note [settled device copies].
  void upload(const std::vector<float>& host);
  std::vector<float> download() const;
  void zero();

 private:
  int device_ = -1;
  size_t n_ = 0;
  std::shared_ptr<void> p_;
};

// The CUDA kernels on `stream` of `device`; project_transposed uses
// `scratch` (kernels::cuda::lowrank_scratch_bytes()). InvalidArgument in a
// build without CUDA.
std::unique_ptr<LowRankOps> device_ops(int device, void* stream, void* scratch);
// Bytes of scratch device_ops() needs.
size_t device_scratch_bytes();

}  // namespace gradwire::compress
