// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The device layer's interface: for CUDA buffers a Communicator hands whole
// collectives to a device Backend (NCCL, device/nccl/, or the staged path,
// device/staged/) instead of running them on its engine thread over the
// Transport. No CUDA or NCCL type appears here (streams are void*, the
// cudaStream_t they are), so the runtime includes this header in every build.
//
// Note [device host]: the device layer sits below the runtime, so a backend
// never sees the CommunicatorImpl it serves. What it needs from it (rank,
// size, name, options, the CPU path's blob exchange, and the engine queue
// for the staged path) comes as a Host value the runtime fills in, so an
// upward include cannot creep back (tools/check_layers.py, the layer
// include views of CMakeLists.txt).
//
// Note [device-buffer dispatch]: each public collective classifies its
// buffers (device/memory.h) after validating them. All host:
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
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/collective_call.h"
#include "base/deadline.h"
#include "gradwire/options.h"
#include "gradwire/types.h"
#include "gradwire/work.h"

namespace gradwire::collectives {
class Context;
}

namespace gradwire::device {

// Note [device steps]: GPU work that belongs between a backend's
// collectives, for composite operations on device data (PowerSGD: the
// orthonormalisation and the second product sit between its two
// allreduces; Note [composite operations] in compress/powersgd.cpp). The
// caller cannot enqueue it itself: a collective reaches the GPU later, on
// the backend's own stream, and its completion event does not exist yet
// when the caller returns. So the backend calls `before(stream)` on its own
// thread just before it enqueues the collective and `after(stream)` just
// after, with the stream the collective runs on; what they enqueue there is
// ordered after every earlier collective of the backend and before the
// Work completes. They run on the backend's thread (the NCCL poller, the
// engine for the staged path) with the device current, must only enqueue
// (never wait), and report failure by throwing: the collective then fails
// like one whose launch failed.
struct Steps {
  std::function<void(void* stream)> before, after;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int device() const = 0;

  // Enqueues `c` after everything submitted before; it starts on the GPU
  // once the work on `producer` (a cudaStream_t; nullptr: the legacy default
  // stream) that was enqueued before this call has finished. Buffers must
  // stay valid until the Work completes. Aborted if the backend was aborted.
  // `steps`: Note [device steps].
  virtual Work submit(const CollectiveCall& c, void* producer = nullptr, Steps steps = {}) = 0;
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

// Note [device host]: what a backend may ask of its communicator.
struct Host {
  int rank = 0, size = 1;
  std::string name;  // "world" or "group [0, 2]"
  Options options;
  // Every rank's blob, on the CPU path (synchronous, collective).
  std::function<std::vector<std::string>(const std::string&)> allgather_blobs;
  // Enqueues `fn` on the communicator's engine thread as `call`, in the one
  // order of its collectives (the staged path).
  std::function<Work(const CollectiveCall&, std::function<void(collectives::Context&)>,
                     const CallLabel&)> submit;
};

// The device strategy of the router (Note [one collective call]): one per
// communicator, holding its backend once the first device collective made it.
class Router {
 public:
  explicit Router(Host host) : host_(std::move(host)) {}

  // Note [device-buffer dispatch]: nullptr if every non-null buffer is host
  // memory; else the communicator's backend (created on first use). Throws
  // InvalidArgument for mixed host/device buffers, buffers on two devices, a
  // device other than the backend's, or a build without NCCL.
  // `now`: the caller's coarse_now() (Note [one clock read per call]).
  Backend* route(const CollectiveCall& call, Clock::time_point now = coarse_now());
  // The backend on `device`, created now if needed (Note [lazy NCCL
  // communicator]; collective: every rank calls it at the same point).
  Backend& backend(int device);
  // Aborts the backend if there is one (Communicator::abort).
  void abort(const std::string& reason);
  // True if device collectives go through the staged backend
  // (Options::device.path Staged, or Auto without NCCL headers).
  bool staged() const;

 private:
  const Host host_;
  std::mutex mu_;
  BackendPtr backend_;
};

namespace nccl {
// Creates the NCCL backend (device/nccl/backend.cpp; only with NCCL).
BackendPtr create(const Host& host, int device);
}  // namespace nccl

namespace staged {
// The staged backend (Note [staged device collectives] in
// device/staged/backend.cpp); needs CUDA, not NCCL.
BackendPtr create(const Host& host, int device);
}  // namespace staged

}  // namespace gradwire::device
