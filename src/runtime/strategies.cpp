// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The router's strategies, in the order of Note [ordered strategies]
// (runtime/router.h).
#include "runtime/router.h"

#include <algorithm>

#include "base/raise.h"
#include "collectives/collectives.h"
#include "collectives/algorithm.h"
#include "kernels/cpu/reduce.h"
#include "gradwire/device_stream.h"
#include "runtime/communicator_impl.h"

namespace gradwire::route {

namespace {

using Kind = Offer::Kind;

// 1. CUDA buffers (Note [device-buffer dispatch] in device/backend.h).
class DevicePath final : public Strategy {
 public:
  explicit DevicePath(CommunicatorImpl& comm) : comm_(comm) {}
  std::string_view name() const override { return "device"; }
  Offer offer(const CollectiveCall& call, Clock::time_point now, State&, Work& work) override {
    device::Backend* gpu = comm_.devices->route(call, now);
    if (gpu == nullptr) return {};
    work = gpu->submit(call, DeviceStreamScope::current().native());
    return {Kind::Submitted};
  }
  bool run(collectives::Context&, const CollectiveCall&, State&) override { return false; }

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
  explicit OneHost(CommunicatorImpl& comm) : comm_(comm) {}
  std::string_view name() const override { return "one host"; }
  Offer offer(const CollectiveCall& call, Clock::time_point, State& state, Work&) override {
    // Note [small collectives]: decided from the call alone, so alike on
    // every rank (buffers from allocate_shared too: at these sizes the copy
    // costs less than the direct path's second flag round).
    const bool copy_path = comm_.options.collectives.shm_collectives;
    if (copy_path && shm::small_path_takes(call, comm_.size)) {
      if (shm::Windows* w = comm_.active_windows()) {
        state.windows = w;
        state.small_call = true;
        return {Kind::Last, /*inline_ok=*/true};
      }
    }
    if (!shm::direct_path_takes(call.op)) return {};
    shm::Windows* w = comm_.active_windows();
    if (w == nullptr) return {};
    state.windows = w;
    state.located = shm::locate(*w, call, comm_.rank, comm_.size);
    // Note [the direct path]: once the windows are mapped, every allreduce,
    // reduce_scatter and allgather handshakes through them, whatever its
    // buffers, so all ranks decide together whether it runs directly. With
    // the copy path on it never declines (buffers outside the windows go
    // through the staging areas), so a small one may run on the caller's
    // thread: no provider call can follow.
    const bool inline_ok =
        copy_path && std::max(call.send_bytes(comm_.rank, comm_.size),
                              call.recv_bytes(comm_.rank, comm_.size)) <= kInlineCopyBytes;
    return {copy_path ? Kind::Last : Kind::Takes, inline_ok};
  }
  bool run(collectives::Context& ctx, const CollectiveCall& call, State& state) override {
    if (state.small_call) {
      shm::run_small(ctx, *state.windows, call, state.small);
      return true;
    }
    return shm::run_direct(ctx, *state.windows, state.located, state.direct);
  }

 private:
  CommunicatorImpl& comm_;
};

// 3. Note [hierarchical allreduce]: large allreduces across hosts; small
// ones stay latency-optimal.
class Hierarchical final : public Strategy {
 public:
  explicit Hierarchical(CommunicatorImpl& comm) : comm_(comm) {}
  std::string_view name() const override { return "hierarchical"; }
  Offer offer(const CollectiveCall& call, Clock::time_point, State&, Work&) override {
    if (call.op != CollectiveOp::Allreduce || !comm_.host_local || call.count == 0) return {};
    if (collectives::choose_allreduce(call.recv_bytes(comm_.rank, comm_.size), comm_.size,
                                      comm_.options) != collectives::Algorithm::Ring) {
      return {};
    }
    return {Kind::Last};
  }
  bool run(collectives::Context& ctx, const CollectiveCall& call, State&) override {
    ctx.set_algorithm("hierarchical");
    run_phases(call);
    return true;
  }

 private:
  // The three phases of Note [hierarchical allreduce], run from the
  // world's engine thread on the host-local and cross-host communicators
  // (each with its own engine, endpoint and deadline); a failure names its
  // communicator.
  void run_phases(const CollectiveCall& call) {
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

  CommunicatorImpl& comm_;
};

// 4. gradwire's algorithms over the transport: everything else.
class TransportAlgorithm final : public Strategy {
 public:
  std::string_view name() const override { return "transport"; }
  Offer offer(const CollectiveCall&, Clock::time_point, State&, Work&) override {
    return {Kind::Last};
  }
  bool run(collectives::Context& ctx, const CollectiveCall& call, State&) override {
    collectives::run(ctx, call);
    return true;
  }
};

}  // namespace

std::vector<std::unique_ptr<Strategy>> strategies_for(CommunicatorImpl& comm) {
  std::vector<std::unique_ptr<Strategy>> s;
  s.push_back(std::make_unique<DevicePath>(comm));
  s.push_back(std::make_unique<OneHost>(comm));
  s.push_back(std::make_unique<Hierarchical>(comm));
  s.push_back(std::make_unique<TransportAlgorithm>());
  return s;
}

}  // namespace gradwire::route
