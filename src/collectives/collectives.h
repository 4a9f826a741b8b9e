// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The collectives as free functions over a Context, one file each. They run
// on the communicator's engine thread; arguments were validated on
// submission (see communicator.cpp), so these only check invariants.
#pragma once

#include <cstddef>

#include "collectives/context.h"
#include "base/collective_call.h"
#include "gradwire/types.h"

namespace gradwire::collectives {

void allreduce(Context& ctx, const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op);
void reduce_scatter(Context& ctx, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op);
void allgather(Context& ctx, const void* send, void* recv, size_t count, DataType dtype);
void broadcast(Context& ctx, const void* send, void* recv, size_t count, DataType dtype, int root);
void alltoall(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype);
void barrier(Context& ctx);
// Note [rooted collectives] (rooted.cpp).
void reduce(Context& ctx, const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
            int root);
void gather(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype,
            int root);
void scatter(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype,
             int root);
// Internal: run() got a call without a transport algorithm.
[[noreturn]] void no_algorithm(Context& ctx);
// The transport algorithm for `call` (Note [one collective call]): one of
// the above by call.op, the one switch over the op on the host path; a new
// op adds its function above and its line here. Internal (Other) calls have
// no algorithm here (Internal).
inline void run(Context& ctx, const CollectiveCall& c) {
  switch (c.op) {
    case CollectiveOp::Allreduce: return allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.redop);
    case CollectiveOp::ReduceScatter:
      return reduce_scatter(ctx, c.send, c.recv, c.count, c.dtype, c.redop);
    case CollectiveOp::Allgather: return allgather(ctx, c.send, c.recv, c.count, c.dtype);
    case CollectiveOp::Broadcast: return broadcast(ctx, c.send, c.recv, c.count, c.dtype, c.root);
    case CollectiveOp::Alltoall: return alltoall(ctx, c.send, c.recv, c.count, c.dtype);
    case CollectiveOp::Barrier: return barrier(ctx);
    case CollectiveOp::Reduce:
      return reduce(ctx, c.send, c.recv, c.count, c.dtype, c.redop, c.root);
    case CollectiveOp::Gather: return gather(ctx, c.send, c.recv, c.count, c.dtype, c.root);
    case CollectiveOp::Scatter: return scatter(ctx, c.send, c.recv, c.count, c.dtype, c.root);
    case CollectiveOp::Other: break;
  }
  no_algorithm(ctx);
}

// Building blocks shared between collectives.
void allreduce_recursive_doubling(Context& ctx, void* data, size_t count, DataType dtype,
                                  ReduceOp op);

}  // namespace gradwire::collectives
