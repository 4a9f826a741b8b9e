// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// RAII for the NCCL backend's C handles (docs/architecture.md,
// "Conventions": RAII over every C handle), the counterpart of transport/ofi/resources.h: a unique_ptr with
// a closing deleter per handle type, and a guard for the current device.
//
// Destructors cannot report errors, so a failing release is logged. A
// communicator that must be torn down without waiting for peers is given to
// ncclCommAbort through release() (Backend::abort), never destroyed.
// Only compiled with CUDA (GRADWIRE_HAVE_CUDA).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <type_traits>

#include "base/logging.h"

#if GRADWIRE_HAVE_NCCL
#include <nccl.h>

#include "device/nccl/library.h"
#endif

namespace gradwire::device {

#if GRADWIRE_HAVE_NCCL
struct CommDestroyer {
  void operator()(ncclComm_t comm) const noexcept {
    if (comm == nullptr) return;
    ncclResult_t rc = nccl::Library::get().CommDestroy(comm);
    if (rc != ncclSuccess) log().warn("ncclCommDestroy failed: {}", nccl::Library::get().GetErrorString(rc));
  }
};
using CommPtr = std::unique_ptr<std::remove_pointer_t<ncclComm_t>, CommDestroyer>;
#endif  // GRADWIRE_HAVE_NCCL

// The CUDA handles below are also used by the libfabric staging path
// (device/staged/staging.cpp), which needs CUDA but not NCCL.

struct StreamDestroyer {
  void operator()(cudaStream_t s) const noexcept {
    if (s != nullptr && cudaStreamDestroy(s) != cudaSuccess) {
      log().warn("cudaStreamDestroy failed: {}", cudaGetErrorString(cudaGetLastError()));
    }
  }
};
using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroyer>;

struct EventDestroyer {
  void operator()(cudaEvent_t e) const noexcept {
    if (e != nullptr && cudaEventDestroy(e) != cudaSuccess) {
      log().warn("cudaEventDestroy failed: {}", cudaGetErrorString(cudaGetLastError()));
    }
  }
};
using EventPtr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroyer>;

// Device memory from cudaMalloc.
struct DeviceFreer {
  void operator()(void* p) const noexcept {
    if (p != nullptr && cudaFree(p) != cudaSuccess) {
      log().warn("cudaFree failed: {}", cudaGetErrorString(cudaGetLastError()));
    }
  }
};
using DeviceMemoryPtr = std::unique_ptr<void, DeviceFreer>;

// Pinned host memory from cudaHostAlloc (staging buffers).
struct HostFreer {
  void operator()(void* p) const noexcept {
    if (p != nullptr && cudaFreeHost(p) != cudaSuccess) {
      log().warn("cudaFreeHost failed: {}", cudaGetErrorString(cudaGetLastError()));
    }
  }
};
using PinnedMemoryPtr = std::unique_ptr<void, HostFreer>;

// Makes `device` current for this scope and restores the caller's device:
// the legacy default stream, cudaEventRecord and NCCL all act on the current
// device, and a library must not change the caller's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) {
      ok_ = cudaSetDevice(device) == cudaSuccess;
      changed_ = ok_;
    }
  }
  ~DeviceGuard() {
    if (changed_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = true;
  bool changed_ = false;
};

}  // namespace gradwire::device
