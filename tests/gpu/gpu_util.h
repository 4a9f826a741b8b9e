// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Shared by the GPU tests: why they cannot run here (if so), and device
// memory that frees itself.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "gradwire/communicator.h"

#include <cstddef>
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
