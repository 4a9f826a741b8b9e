// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The NCCL entry points gradwire uses, resolved at run time.
//
// Note [loading NCCL]: libgradwire does not link libnccl. The first
// device-buffer collective dlopen()s "libnccl.so.2" (the loader's search
// path, or a copy the process already loaded, e.g. torch's), then the copy
// found at configure time. Linking it instead would make every consumer of
// libgradwire (CPU-only ones included) need libnccl at link and load time,
// and would clash with the NCCL that torch's CUDA wheels bring (the reason
// src/torch/torch.cmake keeps libtorch_cuda off the adapter's link line).
// Only compiled with CUDA and NCCL headers (GRADWIRE_HAVE_NCCL).
#pragma once

#include <nccl.h>

#include <string>

namespace gradwire::device::nccl {

struct Library {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduce) Reduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;

  int version = 0;   // ncclGetVersion: 22809 for 2.28.9
  std::string path;  // what was loaded

  // Loads NCCL once per process; throws InvalidArgument saying what was
  // tried when it cannot be loaded or is older than 2.14 (non-blocking
  // communicators, ncclCommFinalize).
  static const Library& get();

  // "unhandled system error (run with NCCL_DEBUG=WARN for details)" plus
  // NCCL's last message for `comm` where it has one.
  std::string describe(ncclResult_t rc, ncclComm_t comm) const;
};

}  // namespace gradwire::device::nccl
