// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [rooted collectives]: reduce, gather and scatter, the collectives
// with one root (MPI_Reduce, MPI_Gather, MPI_Scatter; torch.distributed's
// reduce, gather and scatter). Gather and scatter are linear: the root posts
// one receive (send) per rank at once and the transport moves them
// concurrently; that is what Gloo and Open MPI's basic linear algorithms do,
// and at the world sizes of one data-parallel group the root's link, not
// the number of steps, bounds the time. Reduce is a reduce-scatter followed
// by a gather of the reduced shards to the root (Rabenseifner's reduce): it
// moves 2(n-1)/n of the buffer per rank, like the ring allreduce, instead
// of (n-1) buffers into the root, and every element is reduced in the same
// order as in reduce_scatter, so a reduce's result equals the root's shard
// of an allreduce bitwise.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "base/raise.h"

namespace gradwire::collectives {

namespace {
// The gather step of a reduce follows a reduce_scatter in the same
// collective (one sequence number): its messages use the last slot, which
// the reduce_scatter's schedules never reach.
constexpr uint32_t kRootSlot = kMaxSlots - 1;

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}
}  // namespace

void gather(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype,
            int root) {
  ctx.set_algorithm("linear");
  const size_t bytes = count_per_rank * element_size(dtype);
  const int n = ctx.size(), me = ctx.rank();
  if (me != root) {
    Request& q = ctx.requests(1)[0];
    ctx.send(q, root, send, bytes, kRootSlot);
    ctx.wait(q);
    return;
  }
  auto* out = static_cast<std::byte*>(recv);
  std::span<Request> reqs = ctx.requests(size_t(n));
  for (int r = 0; r < n; ++r) {
    if (r != me) ctx.recv(reqs[r], r, out + size_t(r) * bytes, bytes, kRootSlot);
  }
  copy_bytes(out + size_t(me) * bytes, send, bytes);
  for (int r = 0; r < n; ++r) {
    if (r != me) ctx.wait(reqs[r]);
  }
}

void scatter(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype,
             int root) {
  ctx.set_algorithm("linear");
  const size_t bytes = count_per_rank * element_size(dtype);
  const int n = ctx.size(), me = ctx.rank();
  if (me != root) {
    Request& q = ctx.requests(1)[0];
    ctx.recv(q, root, recv, bytes, kRootSlot);
    ctx.wait(q);
    return;
  }
  const auto* in = static_cast<const std::byte*>(send);
  std::span<Request> reqs = ctx.requests(size_t(n));
  for (int r = 0; r < n; ++r) {
    if (r != me) ctx.send(reqs[r], r, in + size_t(r) * bytes, bytes, kRootSlot);
  }
  copy_bytes(recv, in + size_t(me) * bytes, bytes);
  for (int r = 0; r < n; ++r) {
    if (r != me) ctx.wait(reqs[r]);
  }
}

void reduce(Context& ctx, const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
            int root) {
  const size_t es = element_size(dtype);
  const int n = ctx.size(), me = ctx.rank();
  if (n == 1) {
    // Avg over one rank is the value itself, as in allreduce.
    copy_bytes(recv, send, count * es);
    return;
  }
  const size_t my_bytes = shard_count(count, n, me) * es;
  if (me != root) {
    // The send buffer is read-only: the shard goes to a buffer of our own.
    std::vector<std::byte> shard(my_bytes);
    const auto* in = static_cast<const std::byte*>(send);
    reduce_scatter(ctx, in, shard.data(), count, dtype, op);
    Request& q = ctx.requests(1)[0];
    ctx.send(q, root, shard.data(), my_bytes, kRootSlot);
    ctx.wait(q);
    return;
  }
  auto* out = static_cast<std::byte*>(recv);
  // In place (send == recv) this is reduce_scatter's in-place form.
  reduce_scatter(ctx, send, out + shard_offset(count, n, me) * es, count, dtype, op);
  std::span<Request> reqs = ctx.requests(size_t(n));
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    ctx.recv(reqs[r], r, out + shard_offset(count, n, r) * es, shard_count(count, n, r) * es,
             kRootSlot);
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) ctx.wait(reqs[r]);
  }
}

}  // namespace gradwire::collectives
