// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Where a buffer lives: host memory (pageable or pinned) or CUDA device
// memory. Decides which path a collective takes (Note [device-buffer
// dispatch] in device/backend.h) and how libfabric must register a
// buffer (transport/ofi/hmem.h). No CUDA type appears here.
#pragma once

#include <string>

#include "base/deadline.h"

namespace gradwire::device {

struct MemoryLocation {
  enum class Kind : unsigned char { Host, Cuda };
  Kind kind = Kind::Host;
  int device = -1;  // CUDA device ordinal for Kind::Cuda
  bool is_device() const { return kind == Kind::Cuda; }
};

// Classifies `p` with the driver's cuPointerGetAttributes. Device and managed memory
// are Cuda; pinned and pageable host memory are Host. nullptr is Host.
//
// Note [no CUDA initialisation for host-only processes]: a device pointer
// can only exist once the process loaded the CUDA driver (libcuda.so.1), so
// while it is not loaded every pointer is host memory and we return at once
// without touching CUDA: a CPU-only job never initialises the driver (which
// costs time, and would break fork()ed children that want CUDA later).
// Built without CUDA: always Host.
MemoryLocation locate(const void* p);
// False while no device pointer can exist in this process (the driver is
// not loaded): the one check a host-only collective pays. `now`: the
// caller's coarse_now() when it has one (Note [one clock read per call] in
// runtime/communicator.cpp).
bool cuda_driver_loaded(Clock::time_point now);
bool cuda_driver_loaded();

// True if this build can run device-buffer collectives at all.
bool built_with_cuda();
bool built_with_nccl();

// "device memory on device 1" / "host memory": for error messages.
std::string describe(const MemoryLocation& where);

}  // namespace gradwire::device
