// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The transport algorithm of a CollectiveCall (Note [one collective call]):
// the one switch over the op on the host path.
#include "collectives/collectives.h"
#include "base/errors.h"

namespace gradwire::collectives {

void run(Context& ctx, const CollectiveCall& c) {
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
  raise(ErrorCode::Internal, "{}: no algorithm for an internal call", ctx.what());
}

}  // namespace gradwire::collectives
