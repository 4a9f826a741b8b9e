// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Allgather: the second half of the ring schedule (Note [one ring
// schedule]); blocks land straight in the receive buffer.
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/algorithm.h"
#include "collectives/ring.h"

namespace gradwire::collectives {

void allgather(Context& ctx, const void* send, void* recv, size_t count, DataType dtype) {
  const int n = ctx.size();
  const size_t es = element_size(dtype);
  if (count == 0) return;
  const Blocks blocks = shard_blocks(count, n);
  auto* out = static_cast<std::byte*>(recv);
  std::byte* own = out + blocks.offset[ctx.rank()] * es;
  // A rank whose shard is empty may pass a null send buffer.
  const size_t mine = blocks.count[ctx.rank()] * es;
  if (send != own && mine > 0) std::memcpy(own, send, mine);
  if (n == 1) return;
  ctx.set_algorithm("ring");
  RingBuffers buf;
  buf.work = out;
  buf.own = own;
  run_ring(ctx, blocks, dtype, ReduceOp::Sum, n - 1, 2 * n - 2, buf);
}

}  // namespace gradwire::collectives
