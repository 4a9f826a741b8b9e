// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Grid sizing and launch checks shared by the kernels of kernels/cuda (host
// code, included by .cu files only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "gradwire/error.h"

namespace gradwire::kernels::cuda {

// Enough blocks of `threads` to cover `work` items, at most 16 per SM: the
// loops stride over the rest. The SM count is cached per thread and device.
inline unsigned grid_for(size_t work, int threads) {
  static thread_local int cached_device = -1;
  static thread_local int cached_sms = 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = 0;
  if (device != cached_device) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      sms = 128;
    }
    cached_device = device;
    cached_sms = sms;
  }
  size_t blocks = (work + size_t(threads) - 1) / size_t(threads);
  const size_t cap = size_t(cached_sms) * 16;
  if (blocks > cap) blocks = cap;
  return unsigned(blocks ? blocks : 1);
}

// Throws Internal naming `what` if the last launch on this thread failed.
inline void check(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw Error(ErrorCode::Internal,
                std::string("CUDA ") + what + " failed: " + cudaGetErrorString(err));
  }
}

// Whether 16-byte vector loads and stores may be used at `p`.
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace gradwire::kernels::cuda
