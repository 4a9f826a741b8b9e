// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The router's strategies, in the order of Note [ordered strategies]
// (runtime/router.h).
#include <algorithm>

#include "base/raise.h"
#include "collectives/algorithm.h"
#include "collectives/collectives.h"
#include "gradwire/device_stream.h"
#include "kernels/cpu/reduce.h"
#include "runtime/communicator_impl.h"
#include "runtime/router.h"
#include "runtime/submit.h"
#include "shm/shm.h"

namespace gradwire::route {

namespace {

// 1. CUDA buffers (Note [device-buffer dispatch] in device/backend.h).
class DevicePath final : public Strategy {
 public:
  explicit DevicePath(CommunicatorImpl& comm) : comm_(comm) {}
  std::string_view name() const override { return "device"; }
  bool start(const CollectiveCall& call, Clock::time_point now, Work& work) override {
    device::Backend* gpu = comm_.devices->route(call, now);
    if (gpu == nullptr) return false;
    work = gpu->submit(call, DeviceStreamScope::current().native());
    return true;
  }
  bool takes(const CollectiveCall&) override { return false; }  // never behind another
  void run(collectives::Context& ctx, const CollectiveCall&) override {
    raise(ErrorCode::Internal, "{}: the device path runs no engine task", ctx.what());
  }

 private:
  CommunicatorImpl& comm_;
};

// Note [inline copy collectives]: a direct or copy-path collective of up to
// one staging half per rank (about 50-100 us of copying here) runs on the
// caller's thread when the engine is idle, as small ones do (the hand-off
// to the engine thread and back cost 10-25 us, a third of a 128 KiB
// allreduce); larger ones stay on the engine thread, so that they overlap
// with what the caller does next (a backward pass launching buckets).
constexpr size_t kInlineCopyBytes = shm::kStageBytes;

// 2. Ranks that share one host (Note [the one-host path] in shm/shm.h).
class OneHost final : public Strategy {
 public:
  OneHost(CommunicatorImpl& comm, Router& router) : comm_(comm), router_(router) {}
  std::string_view name() const override { return "one host"; }

  bool start(const CollectiveCall& call, Clock::time_point now, Work& work) override {
    const bool copy_path = comm_.options.collectives.shm_collectives;
    // Note [small collectives]: decided from the call alone, so alike on
    // every rank (buffers from allocate_shared too: at these sizes the copy
    // costs less than the direct path's second flag round).
    if (copy_path && shm::small_path_takes(call, comm_.size)) {
      if (shm::Windows* w = comm_.active_windows()) {
        work = comm_.submit_task(call, [w, call, state = shm::SmallState{}](
                                           collectives::Context& ctx) mutable {
          shm::run_small(ctx, *w, call, state);
        }, {}, /*inline_ok=*/true, now);
        return true;
      }
    }
    if (!shm::direct_path_takes(call.op)) return false;
    shm::Windows* w = comm_.active_windows();
    if (w == nullptr) return false;
    // Note [the direct path]: once the windows are mapped, every allreduce,
    // reduce_scatter and allgather handshakes through them, whatever its
    // buffers, so all ranks decide together whether it runs directly. With
    // the copy path on it never declines (buffers outside the windows go
    // through the staging areas), so a small one may run on the caller's
    // thread: no provider call can follow.
    const bool inline_ok =
        copy_path && std::max(call.send_bytes(comm_.rank, comm_.size),
                              call.recv_bytes(comm_.rank, comm_.size)) <= kInlineCopyBytes;
    work = comm_.submit_task(
        call, [this, w, located = shm::locate(*w, call, comm_.rank, comm_.size),
               state = shm::DirectState{}](collectives::Context& ctx) mutable {
          if (!shm::run_direct(ctx, *w, located, state)) router_.after(*this, ctx, located.call);
        }, {}, inline_ok, now);
    return true;
  }
  bool takes(const CollectiveCall&) override { return false; }  // first of the engine paths
  void run(collectives::Context& ctx, const CollectiveCall&) override {
    raise(ErrorCode::Internal, "{}: the one-host path runs only its own tasks", ctx.what());
  }

 private:
  CommunicatorImpl& comm_;
  Router& router_;
};

// 3. Note [hierarchical allreduce]: large allreduces across hosts; small
// ones stay latency-optimal.
class Hierarchical final : public Strategy {
 public:
  explicit Hierarchical(CommunicatorImpl& comm) : comm_(comm) {}
  std::string_view name() const override { return "hierarchical"; }
  bool takes(const CollectiveCall& call) override {
    return call.op == CollectiveOp::Allreduce && comm_.host_local && call.count > 0 &&
           collectives::choose_allreduce(call.recv_bytes(comm_.rank, comm_.size), comm_.size,
                                         comm_.options) == collectives::Algorithm::Ring;
  }
  bool start(const CollectiveCall& call, Clock::time_point now, Work& work) override {
    if (!takes(call)) return false;
    work = comm_.submit_task(call, [this, call](collectives::Context& ctx) { run(ctx, call); },
                             {}, /*inline_ok=*/false, now);
    return true;
  }
  // The three phases, run from the world's engine thread on the host-local
  // and cross-host communicators (each with its own engine, endpoint and
  // deadline); a failure names its communicator.
  void run(collectives::Context& ctx, const CollectiveCall& call) override {
    ctx.set_algorithm("hierarchical");
    CommunicatorImpl& local = *comm_.host_local;
    CommunicatorImpl& cross = *comm_.cross_host;
    const int l = local.rank, nl = local.size;
    const size_t count = call.count, es = element_size(call.dtype);
    auto* out = static_cast<std::byte*>(call.recv);
    std::byte* shard = out + shard_offset(count, nl, l) * es;
    const size_t shard_n = shard_count(count, nl, l);
    // Avg divides once, by the world size, after both sums: every element
    // is divided on one rank and then copied, so all ranks get the same bits.
    const ReduceOp sum = call.redop == ReduceOp::Avg ? ReduceOp::Sum : call.redop;
    // In place (send == recv) the shard lies inside send, as
    // reduce_scatter's in-place form wants; out of place the buffers do not
    // overlap.
    local.start(CollectiveCall::reduce_scatter(call.send, shard, count, call.dtype, sum)).wait();
    cross.start(CollectiveCall::allreduce(shard, shard, shard_n, call.dtype, sum)).wait();
    if (call.redop == ReduceOp::Avg && shard_n > 0) {
      kernels::divide(shard, shard_n, call.dtype, comm_.size);
    }
    local.start(CollectiveCall::allgather(shard, out, count, call.dtype)).wait();
  }

 private:
  CommunicatorImpl& comm_;
};

// 4. gradwire's algorithms over the transport: everything else.
class TransportAlgorithm final : public Strategy {
 public:
  explicit TransportAlgorithm(CommunicatorImpl& comm) : comm_(comm) {}
  std::string_view name() const override { return "transport"; }
  bool takes(const CollectiveCall&) override { return true; }
  bool start(const CollectiveCall& call, Clock::time_point now, Work& work) override {
    work = comm_.submit_task(call, [call](collectives::Context& ctx) { collectives::run(ctx, call); },
                             {}, /*inline_ok=*/false, now);
    return true;
  }
  void run(collectives::Context& ctx, const CollectiveCall& call) override {
    collectives::run(ctx, call);
  }

 private:
  CommunicatorImpl& comm_;
};

}  // namespace

Router::Router(CommunicatorImpl& comm) {
  owned_ = {std::make_unique<DevicePath>(comm), std::make_unique<OneHost>(comm, *this),
            std::make_unique<Hierarchical>(comm), std::make_unique<TransportAlgorithm>(comm)};
  for (size_t i = 0; i < kStrategies; ++i) order_[i] = owned_[i].get();
}

Router::~Router() = default;

void Router::after(const Strategy& declined, collectives::Context& ctx,
                   const CollectiveCall& call) {
  auto it = std::find(order_.begin(), order_.end(), &declined);
  for (++it; it != order_.end(); ++it) {
    if ((*it)->takes(call)) return (*it)->run(ctx, call);
  }
  raise(ErrorCode::Internal, "{}: every strategy declined it", ctx.what());
}

}  // namespace gradwire::route
