// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Reduce-scatter: the first half of the ring schedule (Note [one ring
// schedule]). Partial results of other ranks' blocks live in scratch memory,
// so the send buffer is never written (in place, only this rank's shard is).
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/algorithm.h"
#include "collectives/ring.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::collectives {

void reduce_scatter(Context& ctx, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op) {
  const int n = ctx.size();
  const size_t es = element_size(dtype);
  if (count == 0) return;
  const Blocks blocks = shard_blocks(count, n);
  const auto* in = static_cast<const std::byte*>(send);
  auto* own = static_cast<std::byte*>(recv);
  if (n == 1) {
    if (in != own) std::memcpy(own, in, count * es);
    return;
  }
  ctx.set_algorithm("ring");
  // run_ring takes its segment window from the Window area; the partial
  // results of other ranks' blocks live in the Work area.
  RingBuffers buf;
  buf.input = in;
  buf.work = ctx.scratch(count * es, Context::Area::Work);
  buf.own = own;
  run_ring(ctx, blocks, dtype, op, 0, n - 1, buf);
}

}  // namespace gradwire::collectives
