// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Shared by the GPU tests: why they cannot run here (if so), and device
// memory that frees itself.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "gradwire/communicator.h"
#include "gradwire/types.h"
#include "kernels/reduce_math.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace gwgpu {

// "" if a CUDA device can be used; else the reason, for GTEST_SKIP.
inline std::string no_device_reason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return "no CUDA device: cudaGetDeviceCount returned 0";
  return "";
}

inline int device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// True when device collectives take the staged path (GRADWIRE_DEVICE_PATH=
// staged): ranks may then share a GPU.
inline bool staged_path() {
  const char* v = std::getenv("GRADWIRE_DEVICE_PATH");
  return v != nullptr && std::string(v) == "staged";
}

// Values as the bytes of `dt` (float16/bfloat16 by the shared conversions
// of kernels/reduce_math.h), and back.
inline std::vector<uint8_t> encode(gradwire::DataType dt, const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * gradwire::element_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    switch (dt) {
      case gradwire::DataType::Float32: { float f = float(x); std::memcpy(&b[4 * i], &f, 4); break; }
      case gradwire::DataType::Float64: std::memcpy(&b[8 * i], &x, 8); break;
      case gradwire::DataType::Float16: { uint16_t h = gradwire::kernels::float_to_half(float(x)); std::memcpy(&b[2 * i], &h, 2); break; }
      case gradwire::DataType::BFloat16: { uint16_t h = gradwire::kernels::float_to_bf16(float(x)); std::memcpy(&b[2 * i], &h, 2); break; }
      case gradwire::DataType::Int32: { int32_t k = int32_t(x); std::memcpy(&b[4 * i], &k, 4); break; }
      case gradwire::DataType::Int64: { int64_t k = int64_t(x); std::memcpy(&b[8 * i], &k, 8); break; }
      case gradwire::DataType::UInt8: b[i] = uint8_t(x); break;
      case gradwire::DataType::Int8: { int8_t k = int8_t(x); std::memcpy(&b[i], &k, 1); break; }
      case gradwire::DataType::Int16: { int16_t k = int16_t(x); std::memcpy(&b[2 * i], &k, 2); break; }
      case gradwire::DataType::Bool: b[i] = x != 0 ? 1 : 0; break;
    }
  }
  return b;
}

inline std::vector<double> decode(gradwire::DataType dt, const std::vector<uint8_t>& b) {
  const size_t n = b.size() / gradwire::element_size(dt);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    switch (dt) {
      case gradwire::DataType::Float32: { float f; std::memcpy(&f, &b[4 * i], 4); v[i] = f; break; }
      case gradwire::DataType::Float64: std::memcpy(&v[i], &b[8 * i], 8); break;
      case gradwire::DataType::Float16: std::memcpy(&h, &b[2 * i], 2); v[i] = gradwire::kernels::half_to_float(h); break;
      case gradwire::DataType::BFloat16: std::memcpy(&h, &b[2 * i], 2); v[i] = gradwire::kernels::bf16_to_float(h); break;
      case gradwire::DataType::Int32: { int32_t k; std::memcpy(&k, &b[4 * i], 4); v[i] = k; break; }
      case gradwire::DataType::Int64: { int64_t k; std::memcpy(&k, &b[8 * i], 8); v[i] = double(k); break; }
      case gradwire::DataType::UInt8: v[i] = b[i]; break;
      case gradwire::DataType::Int8: { int8_t k; std::memcpy(&k, &b[i], 1); v[i] = k; break; }
      case gradwire::DataType::Int16: { int16_t k; std::memcpy(&k, &b[2 * i], 2); v[i] = k; break; }
      case gradwire::DataType::Bool: v[i] = b[i]; break;
    }
  }
  return v;
}

inline double decode_one(gradwire::DataType dt, const uint8_t* p) {
  std::vector<uint8_t> one(p, p + gradwire::element_size(dt));
  return decode(dt, one)[0];
}

// The test binary's world communicator, one rank per GPU (WORLD_SIZE ranks
// under gwlaunch, else 1), made on first use; `skip` says why GPU tests
// cannot run here. Defined in nccl_gpu_test.cpp, torn down before exit.
struct World {
  std::string skip;
  std::unique_ptr<gradwire::Communicator> comm;
  int device = -1;
};
World& world();

// cudaMalloc'd bytes (with `offset` bytes of slack in front for misaligned
// views), freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes, size_t offset = 0) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&base_, bytes + offset + 16), cudaSuccess);
    data_ = static_cast<std::byte*>(base_) + offset;
  }
  ~DeviceBuffer() {
    if (base_) cudaFree(base_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host) { EXPECT_EQ(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice), cudaSuccess); }
  template <typename T>
  void upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size() * sizeof(T), bytes_);
    upload(static_cast<const void*>(host.data()));
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* base_ = nullptr;
  std::byte* data_ = nullptr;
  size_t bytes_;
};

}  // namespace gwgpu
