// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The NCCL backend: for CUDA buffers a Communicator hands whole collectives
// to NCCL instead of running its own algorithms over a point-to-point
// Transport. No CUDA or NCCL type appears here (streams are void*, the
// cudaStream_t they are), so the core includes this header in every build.
//
// Note [device-buffer dispatch]: each public collective classifies its
// buffers (transport/device_memory.h) after validating them. All host:
// the CPU path (engine thread, libfabric). All CUDA memory on one device:
// this backend. Mixed, or two devices: InvalidArgument. barrier() has no
// buffer and stays on the CPU path; the NCCL barrier (CollectiveOp::Barrier)
// is for library code that must order device work. The two paths are two
// ordered channels of one communicator: collectives on device buffers run
// in submission order among themselves, as CPU ones do, and every rank
// must submit the same sequence on each.
//
// Note [lazy NCCL communicator]: the ncclComm_t is created by the first
// collective on device buffers (or by backend(), e.g. to pay the set-up
// cost before training), on the caller's thread: rank 0 makes the
// ncclUniqueId and it travels to every rank with allgather_blobs on the
// CPU path, together with every rank's readiness, so a rank that cannot
// load NCCL or use its device fails every rank at once instead of leaving
// them in ncclCommInitRank. Lazy, because a CPU-only job must never load
// CUDA (Note [no CUDA initialisation for host-only processes]); and because
// the device is known only from the first buffer. The communicator is
// non-blocking (ncclConfig_t::blocking = 0), so every wait is a poll of
// ncclCommGetAsyncError bounded by the deadline.
//
// Note [NCCL completion]: one thread per backend ("nccl poller") owns the
// ncclComm_t; every NCCL call happens there, so no NCCL call ever runs
// concurrently with another on one communicator. A submission records a
// "ready" event on the producer stream on the caller's thread (the legacy
// default stream unless one is given, which also orders every blocking
// stream before it), the poller makes its non-blocking NCCL stream wait
// for that event, launches the collective in one ncclGroupStart/End and
// records a "done" event. The Work completes when the done event has
// completed, i.e. when the GPU finished the collective and the result is
// readable by any stream or by the host. The oldest collective in flight
// gets its deadline (Options::timeout) when it becomes the oldest, the
// way a CPU collective gets it when the engine starts it. At the deadline,
// on an asynchronous NCCL error (a peer died: ncclRemoteError) or on
// abort(), the poller calls ncclCommAbort, waits (bounded) for the stream
// to drain so no user buffer is written afterwards, fails the oldest Work
// with the cause and the others with Aborted; later device collectives
// fail with Aborted naming it. Every rank whose peer aborted sees the
// remote error or its own deadline, so every rank aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/collective_call.h"
#include "gradwire/types.h"
#include "gradwire/work.h"

namespace gradwire {
class CommunicatorImpl;
}

namespace gradwire::transport::nccl {

// Device collectives take the one CollectiveCall (core/collective_call.h,
// Note [one collective call]).
using gradwire::CollectiveCall;
using gradwire::CollectiveOp;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int device() const = 0;

  // Enqueues `c` after everything submitted before; it starts on the GPU
  // once the work on `producer` (a cudaStream_t; nullptr: the legacy default
  // stream) that was enqueued before this call has finished. Buffers must
  // stay valid until the Work completes. Aborted if the backend was aborted.
  virtual Work submit(const CollectiveCall& c, void* producer = nullptr) = 0;
  // Batched launch: every collective of `group` in one ncclGroupStart/End
  // (e.g. a bucketing engine's ready buckets), one Work for all. They run
  // concurrently, so none may read what another writes.
  virtual Work submit_group(const std::vector<CollectiveCall>& group, void* producer = nullptr) = 0;

  // Fails every pending device collective with Aborted and aborts the NCCL
  // communicator (ncclCommAbort); returns once no buffer will be written.
  virtual void abort(const std::string& reason) = 0;
  virtual bool aborted() const = 0;
};

using BackendPtr = std::unique_ptr<Backend>;

// Note [device-buffer dispatch]: nullptr if every non-null buffer is host
// memory; else the communicator's backend (created on first use). Throws
// InvalidArgument for mixed host/device buffers, buffers on two devices, a
// device other than the backend's, or a build without NCCL.
Backend* route(CommunicatorImpl& comm, const CollectiveCall& call);

// The communicator's backend on `device`, created now if needed (Note [lazy
// NCCL communicator]; collective: every rank calls it at the same point).
Backend& backend(CommunicatorImpl& comm, int device);

// Aborts the backend if there is one (Communicator::abort).
void abort(CommunicatorImpl& comm, const std::string& reason);

// Creates the backend (transport.cpp; only with NCCL).
BackendPtr create(CommunicatorImpl& comm, int device);

// True if device collectives of this communicator go through the staged
// backend (Options::device_path "staged", or "auto" without NCCL headers).
bool uses_staged_path(const CommunicatorImpl& comm);

}  // namespace gradwire::transport::nccl

namespace gradwire::transport::ofi {
// The staged backend (Note [staged device collectives] in
// transport/ofi/staged_backend.cpp); needs CUDA, not NCCL.
nccl::BackendPtr create_staged_backend(CommunicatorImpl& comm, int device);
}  // namespace gradwire::transport::ofi

namespace gradwire::transport::nccl {

}  // namespace gradwire::transport::nccl
