// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The three phases of Note [hierarchical allreduce] (collectives/hierarchy.cpp),
// run from the world's engine thread on the host-local and cross-host
// communicators (each with its own engine, endpoint and deadline).
#include "runtime/hierarchical.h"

#include "base/errors.h"
#include "kernels/cpu/reduce.h"

namespace gradwire {

void hierarchical_allreduce(CommunicatorImpl& world, const void* send, void* recv, size_t count,
                            DataType dtype, ReduceOp op) {
  CommunicatorImpl& local = *world.host_local;
  CommunicatorImpl& cross = *world.cross_host;
  const int l = local.rank, nl = local.size;
  const size_t es = element_size(dtype);
  auto* out = static_cast<std::byte*>(recv);
  std::byte* shard = out + shard_offset(count, nl, l) * es;
  const size_t shard_n = shard_count(count, nl, l);
  // Avg divides once, by the world size, after both sums: every element is
  // divided on one rank and then copied, so all ranks get the same bits.
  const ReduceOp sum = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  // In place (send == recv) the shard lies inside send, as reduce_scatter's
  // in-place form wants; out of place the buffers do not overlap.
  local.start(CollectiveCall::reduce_scatter(send, shard, count, dtype, sum)).wait();
  cross.start(CollectiveCall::allreduce(shard, shard, shard_n, dtype, sum)).wait();
  if (op == ReduceOp::Avg && shard_n > 0) kernels::divide(shard, shard_n, dtype, world.size);
  local.start(CollectiveCall::allgather(shard, out, count, dtype)).wait();
}

}  // namespace gradwire
