// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [device-buffer dispatch] (transport/nccl/transport.h). Compiled in
// every build: without CUDA every buffer is host memory, so route() always
// answers nullptr and the CPU path runs.
#include <mutex>

#include "core/communicator_impl.h"
#include "core/errors.h"
#include "transport/device_memory.h"
#include "transport/nccl/transport.h"

namespace gradwire::transport::nccl {

Backend* route(CommunicatorImpl& comm, const CollectiveCall& call) {
  if (!cuda_driver_loaded()) return nullptr;  // the host-only fast path
  const std::string_view op = call.name();
  // A broadcast's send buffer means nothing off the root.
  const bool uses_send = call.op != CollectiveOp::Broadcast || comm.rank == call.root;
  const void* buffers[] = {uses_send ? call.send : nullptr, call.recv};
  const void* host = nullptr;
  const void* device = nullptr;
  MemoryLocation where;
  for (const void* p : buffers) {
    if (p == nullptr) continue;
    const MemoryLocation loc = locate(p);
    if (!loc.is_device()) {
      host = p;
      continue;
    }
    if (device != nullptr && loc.device != where.device) {
      raise(ErrorCode::InvalidArgument,
            "rank {}: {} got buffers on CUDA devices {} and {}; a collective's buffers must be on "
            "one device", comm.rank, op, where.device, loc.device);
    }
    device = p;
    where = loc;
  }
  if (device == nullptr) return nullptr;
  if (host != nullptr) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: {} got one buffer in host memory ({}) and one in {} ({}); a collective's "
          "buffers must all be host memory or all device memory", comm.rank, op, host,
          describe(where), device);
  }
  return &backend(comm, where.device);
}

bool uses_staged_path(const CommunicatorImpl& comm) {
  const std::string& path = comm.options.device_path;
  return path == "staged" || (path == "auto" && !built_with_nccl());
}

Backend& backend(CommunicatorImpl& comm, int device) {
  const bool staged = uses_staged_path(comm);
  if (!staged && !built_with_nccl()) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: a collective got CUDA device memory (device {}), but this gradwire was built "
          "without NCCL headers (GRADWIRE_HAVE_NCCL); set GRADWIRE_DEVICE_PATH=staged, copy the "
          "data to host memory or rebuild with NCCL", comm.rank, device);
  }
  std::lock_guard<std::mutex> lk(comm.nccl_mu);
  if (!comm.nccl) {
    if (staged) {
      comm.nccl = ofi::create_staged_backend(comm, device);
    } else {
#if GRADWIRE_HAVE_NCCL
      comm.nccl = create(comm, device);
#endif
    }
  } else if (comm.nccl->device() != device) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: this communicator runs its device collectives on CUDA device {}, but the "
          "buffers are on device {}; use one device per communicator", comm.rank,
          comm.nccl->device(), device);
  }
  return *comm.nccl;
}

void abort(CommunicatorImpl& comm, const std::string& reason) {
  std::lock_guard<std::mutex> lk(comm.nccl_mu);
  if (comm.nccl) comm.nccl->abort(reason);
}

}  // namespace gradwire::transport::nccl
