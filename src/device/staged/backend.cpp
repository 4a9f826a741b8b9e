// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [staged device collectives]: the "staged" way of Note [GPU memory
// over libfabric], as a device Backend (device/backend.h) that
// the Communicator routes CUDA buffers to when Options::device.path says
// "staged" (or "auto" in a build without NCCL). A collective runs gradwire's
// own algorithms over libfabric, on the engine thread, in the communicator's
// one order of collectives, on pinned host copies of the device buffers:
//  * allreduce and broadcast are elementwise, so a chunk of the buffer is a
//    collective of its own: they pipeline through the copy engine (Note
//    [staging pipeline]): chunk k+1 comes to the host and chunk k-1 goes
//    back to the device while chunk k crosses the fabric. Each chunk's
//    messages get their own slot range (Context::set_slot_base), so a rank
//    that runs a chunk ahead never matches a slower peer's receive.
//  * reduce_scatter, allgather and alltoall place rank-dependent shards, so
//    whole buffers are staged: everything to the host, one collective, the
//    result back.
// Ordering: the submission records an event on the producer stream (Note
// [producer stream]) and the engine waits for it (bounded by the deadline)
// before its first copy; the Work completes once the results are back in
// device memory, readable by any stream. Errors are the CPU path's: a dead
// peer is a PeerLost or Timeout naming it. Ranks may share a GPU.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.h"
#include "base/raise.h"
#include "diag/flight_recorder.h"
#include "device/backend.h"
#include "device/staged/staging.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime.h>

#include "device/cuda.h"
#endif

namespace gradwire::device::staged {

#if GRADWIRE_HAVE_CUDA
namespace {


constexpr int kSlots = 3;                     // in, on the fabric, out
constexpr size_t kChunkBytes = size_t(4) << 20;
constexpr uint32_t kSlotsPerChunk = 1u << 14;  // Context slots one chunk may use
constexpr uint32_t kChunkBases = collectives::kMaxSlots / kSlotsPerChunk;

class StagedBackend final : public Backend {
 public:
  StagedBackend(const Host& comm, int device)
      : comm_(comm), device_(device),
        copies_(make_cuda_copy_engine(device, kSlots, kChunkBytes)) {
    DeviceGuard guard(device_);
    check(cudaStreamCreateWithFlags(&whole_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~StagedBackend() override {
    if (whole_stream_) cudaStreamDestroy(whole_stream_);
  }

  int device() const override { return device_; }

  Work submit(const CollectiveCall& c, void* producer, Steps steps) override {
    return submit_steps({c}, producer, std::move(steps));
  }

  Work submit_group(const std::vector<CollectiveCall>& group, void* producer) override {
    return submit_steps(group, producer, {});
  }

 private:
  Work submit_steps(const std::vector<CollectiveCall>& group, void* producer, Steps steps) {
    if (aborted_.load()) {
      std::lock_guard<std::mutex> lk(mu_);
      raise(ErrorCode::Aborted, "rank {}: device collectives on communicator {} were aborted: {}",
            comm_.rank, comm_.name, reason_);
    }
    // The producer's work so far, which the engine waits for (host-side,
    // bounded) before it reads the buffers.
    auto ready = std::make_shared<EventPtr>();
    {
      DeviceGuard guard(device_);
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      ready->reset(e);
      check(cudaEventRecord(e, static_cast<cudaStream_t>(producer)), "cudaEventRecord");
    }
    // One call is recorded as itself (Note [one collective call]); a group
    // as an internal exchange.
    CollectiveCall record;
    CallLabel label;
    if (group.size() == 1) {
      record = group[0];
      label = {record.name(), record.describe() + ", staged through host memory"};
    } else {
      label = {"device group", fmt::format("group of {}, staged through host memory", group.size())};
    }
    return comm_.submit(record, [this, group, ready, steps = std::move(steps)](
                                    collectives::Context& ctx) {
      ctx.set_algorithm("staged");
      wait_gpu([&] { return cudaEventQuery(ready->get()); }, ctx,
               "the work enqueued on the producer stream before this collective");
      // Note [device steps]: on the staging stream, waited for here, so
      // the collective reads what `before` wrote and the Work completes
      // after what `after` wrote.
      if (steps.before) {
        DeviceGuard guard(device_);
        steps.before(whole_stream_);
        wait_gpu([&] { return cudaStreamQuery(whole_stream_); }, ctx, "the steps before it");
      }
      for (const CollectiveCall& c : group) run(ctx, c);
      if (steps.after) {
        DeviceGuard guard(device_);
        steps.after(whole_stream_);
        wait_gpu([&] { return cudaStreamQuery(whole_stream_); }, ctx, "the steps after it");
      }
    }, label);
  }

 public:

  void abort(const std::string& reason) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!aborted_.exchange(true)) reason_ = reason;
  }
  bool aborted() const override { return aborted_.load(); }

 private:
  void check(cudaError_t err, const char* call) const {
    if (err == cudaSuccess) return;
    cudaGetLastError();
    raise(ErrorCode::Internal, "rank {}: staged device collectives on device {}: {} failed: {}",
          comm_.rank, device_, call, cudaGetErrorString(err));
  }

  // Polls `query` (cudaEventQuery or cudaStreamQuery) until the GPU work
  // it asks about is done; Timeout naming `waiting_for` at the deadline.
  template <typename Query>
  void wait_gpu(Query query, collectives::Context& ctx, const char* waiting_for) const {
    DeviceGuard guard(device_);
    for (;;) {
      const cudaError_t err = query();
      if (err == cudaSuccess) return;
      if (err != cudaErrorNotReady) check(err, waiting_for);
      if (ctx.deadline().expired()) {
        raise(ErrorCode::Timeout, "{}: {} did not finish by the deadline; likely cause: a hung "
              "or oversubscribed GPU", ctx.what(), waiting_for);
      }
      std::this_thread::yield();
    }
  }

  // Chunk by chunk through the copy engine (allreduce, broadcast).
  template <typename Step>
  void pipelined(collectives::Context& ctx, const void* src, void* dst, size_t bytes,
                 size_t es, Step step) {
    const size_t chunk = kChunkBytes / es * es;  // run_staged's chunk length
    run_staged(*copies_, src, dst, bytes, es, [&](void* host, size_t offset, size_t len) {
      ctx.set_slot_base(uint32_t(offset / chunk % kChunkBases) * kSlotsPerChunk);
      step(host, len / es);
    }, ctx.deadline(), ctx.what());
    ctx.set_slot_base(0);
  }

  // The whole buffers at once (shards at rank-dependent offsets).
  void* pinned(size_t i, size_t bytes) {
    if (whole_[i].second < bytes) {
      whole_[i].first.reset();
      void* p = nullptr;
      check(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable), "cudaHostAlloc");
      whole_[i] = {PinnedMemoryPtr(p), bytes};
    }
    return whole_[i].first.get();
  }
  void copy_sync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                 collectives::Context& ctx) {
    if (bytes == 0) return;
    DeviceGuard guard(device_);
    check(cudaMemcpyAsync(dst, src, bytes, kind, whole_stream_), "cudaMemcpyAsync");
    wait_gpu([&] { return cudaStreamQuery(whole_stream_); }, ctx, "a staging copy");
  }

  void run(collectives::Context& ctx, const CollectiveCall& c) {
    const size_t es = element_size(c.dtype);
    const int n = ctx.size(), r = ctx.rank();
    switch (c.op) {
      case CollectiveOp::Allreduce:
        pipelined(ctx, c.send, c.recv, c.count * es, es, [&](void* host, size_t count) {
          collectives::allreduce(ctx, host, host, count, c.dtype, c.redop);
        });
        return;
      case CollectiveOp::Broadcast:
        pipelined(ctx, r == c.root ? c.send : c.recv, c.recv, c.count * es, es,
                  [&](void* host, size_t count) {
                    collectives::broadcast(ctx, host, host, count, c.dtype, c.root);
                  });
        return;
      case CollectiveOp::Barrier:
        collectives::barrier(ctx);
        return;
      case CollectiveOp::ReduceScatter: {
        const size_t all = c.count * es, mine = shard_count(c.count, n, r) * es;
        void* in = pinned(0, all);
        copy_sync(in, c.send, all, cudaMemcpyDeviceToHost, ctx);
        void* out = static_cast<std::byte*>(in) + shard_offset(c.count, n, r) * es;  // in place
        collectives::reduce_scatter(ctx, in, out, c.count, c.dtype, c.redop);
        copy_sync(c.recv, out, mine, cudaMemcpyHostToDevice, ctx);
        return;
      }
      case CollectiveOp::Allgather: {
        const size_t all = c.count * es, mine = shard_count(c.count, n, r) * es;
        void* buf = pinned(0, all);
        void* my_shard = static_cast<std::byte*>(buf) + shard_offset(c.count, n, r) * es;
        copy_sync(my_shard, c.send, mine, cudaMemcpyDeviceToHost, ctx);
        collectives::allgather(ctx, my_shard, buf, c.count, c.dtype);
        copy_sync(c.recv, buf, all, cudaMemcpyHostToDevice, ctx);
        return;
      }
      case CollectiveOp::Alltoall: {
        const size_t all = c.count * es * size_t(n);
        void* in = pinned(0, all);
        void* out = pinned(1, all);
        copy_sync(in, c.send, all, cudaMemcpyDeviceToHost, ctx);
        collectives::alltoall(ctx, in, out, c.count, c.dtype);
        copy_sync(c.recv, out, all, cudaMemcpyHostToDevice, ctx);
        return;
      }
      case CollectiveOp::Reduce: {
        // Note [rooted collectives]: staged whole, reduced in place on the host.
        const size_t all = c.count * es;
        void* buf = pinned(0, all);
        copy_sync(buf, c.send, all, cudaMemcpyDeviceToHost, ctx);
        collectives::reduce(ctx, buf, buf, c.count, c.dtype, c.redop, c.root);
        if (r == c.root) copy_sync(c.recv, buf, all, cudaMemcpyHostToDevice, ctx);
        return;
      }
      case CollectiveOp::Gather: {
        const size_t block = c.count * es;
        void* buf = pinned(0, r == c.root ? block * size_t(n) : block);
        void* mine = static_cast<std::byte*>(buf) + (r == c.root ? block * size_t(r) : 0);
        copy_sync(mine, c.send, block, cudaMemcpyDeviceToHost, ctx);
        collectives::gather(ctx, mine, r == c.root ? buf : nullptr, c.count, c.dtype, c.root);
        if (r == c.root) copy_sync(c.recv, buf, block * size_t(n), cudaMemcpyHostToDevice, ctx);
        return;
      }
      case CollectiveOp::Scatter: {
        const size_t block = c.count * es;
        void* buf = pinned(0, r == c.root ? block * size_t(n) : block);
        void* mine = static_cast<std::byte*>(buf) + (r == c.root ? block * size_t(r) : 0);
        if (r == c.root) copy_sync(buf, c.send, block * size_t(n), cudaMemcpyDeviceToHost, ctx);
        collectives::scatter(ctx, r == c.root ? buf : nullptr, mine, c.count, c.dtype, c.root);
        copy_sync(c.recv, mine, block, cudaMemcpyHostToDevice, ctx);
        return;
      }
      case CollectiveOp::Other:
        raise(ErrorCode::Internal, "{}: the staged path has no internal collective", ctx.what());
      default:
        break;
    }
    // Any other op, whole: its inputs into pinned memory, the host
    // algorithm out of place (which every collective allows), its outputs
    // back. A new op needs no case here; the ones above stage less or
    // pipeline.
    const size_t sb = c.send_bytes(r, n), rb = c.recv_bytes(r, n);
    CollectiveCall host = c;
    host.send = sb ? pinned(0, sb) : nullptr;
    host.recv = rb ? pinned(1, rb) : nullptr;
    copy_sync(const_cast<void*>(host.send), c.send, sb, cudaMemcpyDeviceToHost, ctx);
    collectives::run(ctx, host);
    copy_sync(c.recv, host.recv, rb, cudaMemcpyHostToDevice, ctx);
  }

  const Host comm_;
  const int device_;
  std::unique_ptr<CopyEngine> copies_;  // engine thread only
  cudaStream_t whole_stream_ = nullptr;
  std::pair<PinnedMemoryPtr, size_t> whole_[2];  // engine thread only
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  std::string reason_;
};

}  // namespace

BackendPtr create(const Host& comm, int device) {
  return std::make_unique<StagedBackend>(comm, device);
}

#else

BackendPtr create(const Host& comm, int device) {
  raise(ErrorCode::InvalidArgument, "rank {}: a collective got CUDA device memory (device {}), "
        "but this gradwire was built without CUDA", comm.rank, device);
}

#endif

}  // namespace gradwire::device::staged
