// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// libfabric with GPU memory (FI_HMEM).
//
// Note [GPU memory over libfabric]: a collective on CUDA buffers goes to
// NCCL when NCCL can be used (device/nccl/). Where it cannot, libfabric
// moves the bytes, in one of two ways:
//  * direct: the provider reports FI_HMEM (EFA with GPUDirect RDMA, or shm
//    with CUDA IPC), so device buffers are registered with fi_mr_regattr,
//    iface FI_HMEM_CUDA and the buffer's device, and sent and received like
//    host buffers. Registrations are exact ranges (never page-expanded:
//    the neighbouring host pages of a device address mean nothing) and are
//    cached like host ones (Note [registration cache invalidation] applies).
//  * staged: otherwise the bytes travel through pinned host memory in
//    chunks, with the device-to-host copy of chunk k+1 and the host-to-device
//    copy of chunk k-1 overlapping the transfer of chunk k (staging.h).
// probe_hmem() finds out which without changing how the transport opens its
// endpoint (asking for FI_HMEM by default would make providers that lack it
// unusable, and would change the registration rules, FI_MR_HMEM, for every
// host buffer); choose_gpu_path() is the rule, a pure function.
//
// State: detection, the rule and the FI_HMEM_CUDA registrar are implemented
// but unused by the collectives; device buffers take NCCL or the staged
// backend (Note [staged device collectives]), whose pipeline is staging.h.
#pragma once

#include <string>

#include "transport/ofi/registration_cache.h"

namespace gradwire::transport::ofi {

struct HmemSupport {
  bool fi_hmem = false;  // the provider offers FI_HMEM (with FI_MR_HMEM)
  std::string detail;    // what fi_getinfo said, for logs and errors
};

// Asks fi_getinfo whether `provider` (on `iface`, "" = any) offers RDM
// tagged messaging with FI_HMEM. Never throws for "no": that is the answer.
HmemSupport probe_hmem(const std::string& provider, const std::string& iface);

enum class GpuPath {
  Nccl,         // whole collectives in NCCL
  Direct,       // libfabric with FI_HMEM_CUDA registrations
  Staged,       // libfabric through pinned host chunks
  Unsupported,  // built without CUDA: device memory cannot even be recognised
};
std::string_view to_string(GpuPath path);

// The rule of Note [GPU memory over libfabric].
GpuPath choose_gpu_path(bool built_with_cuda, bool nccl_usable, const HmemSupport& hmem);

// A registrar for CUDA device memory on `device` (fi_mr_regattr with iface
// FI_HMEM_CUDA), honouring mr_mode like fabric_registrar(). For a
// RegistrationCache constructed with page size 1 (exact ranges). Throws
// Transport naming the provider, range and device on failure.
MrCache::Registrar fabric_hmem_registrar(fid_domain* domain, fid_ep* ep, uint64_t mr_mode,
                                         std::string provider, int device);

}  // namespace gradwire::transport::ofi
