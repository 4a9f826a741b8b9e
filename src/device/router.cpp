// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [device-buffer dispatch] (device/backend.h): the device strategy of the
// router. Compiled in every build: without CUDA every buffer is host memory,
// so route() always answers nullptr and the CPU path runs.
#include <mutex>

#include "base/raise.h"
#include "device/location.h"
#include "device/backend.h"

namespace gradwire::device {

Backend* Router::route(const CollectiveCall& call, Clock::time_point now) {
  if (!cuda_driver_loaded(now)) return nullptr;  // the host-only fast path
  const std::string_view op = call.name();
  // A rooted collective's buffer that moves no bytes on this rank (a
  // broadcast's send off the root, a reduce's or gather's recv) means nothing.
  const bool rooted = call.has_root();
  const bool uses_send = !rooted || call.send_bytes(host_.rank, host_.size) > 0;
  const bool uses_recv = !rooted || call.recv_bytes(host_.rank, host_.size) > 0;
  const void* buffers[] = {uses_send ? call.send : nullptr, uses_recv ? call.recv : nullptr};
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
            "one device", host_.rank, op, where.device, loc.device);
    }
    device = p;
    where = loc;
  }
  if (device == nullptr) return nullptr;
  if (host != nullptr) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: {} got one buffer in host memory ({}) and one in {} ({}); a collective's "
          "buffers must all be host memory or all device memory", host_.rank, op, host,
          describe(where), device);
  }
  return &backend(where.device);
}

bool Router::staged() const {
  using Path = Options::Device::Path;
  const Path path = host_.options.device.path;
  return path == Path::Staged || (path == Path::Auto && !built_with_nccl());
}

Backend& Router::backend(int device) {
  const bool staged = this->staged();
  if (!staged && !built_with_nccl()) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: a collective got CUDA device memory (device {}), but this gradwire was built "
          "without NCCL headers (GRADWIRE_HAVE_NCCL); set GRADWIRE_DEVICE_PATH=staged, copy the "
          "data to host memory or rebuild with NCCL", host_.rank, device);
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!backend_) {
    if (staged) {
      backend_ = staged::create(host_, device);
    } else {
#if GRADWIRE_HAVE_NCCL
      backend_ = nccl::create(host_, device);
#endif
    }
  } else if (backend_->device() != device) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: this communicator runs its device collectives on CUDA device {}, but the "
          "buffers are on device {}; use one device per communicator", host_.rank,
          backend_->device(), device);
  }
  return *backend_;
}

void Router::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  if (backend_) backend_->abort(reason);
}

}  // namespace gradwire::device
