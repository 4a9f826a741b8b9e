// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>

#include "collectives/context.h"
#include "collectives/algorithm.h"

namespace gradwire::collectives {

// Note [one ring schedule]: allreduce is reduce-scatter followed by
// allgather, and both use one schedule. Over steps s = 0 .. 2n-3, rank r
// sends block (r-s-1) mod n to its right neighbour and receives block
// (r-s-2) mod n from its left one. Steps 0..n-2 reduce what arrives into
// that block (reduce-scatter; block r is final after step n-2, and every
// block's final value is computed on one rank only, which is why all ranks
// end bitwise identical); steps n-1..2n-3 just store it (allgather).
// Reduce-scatter runs steps [0, n-1), allgather [n-1, 2n-2), allreduce both,
// so the allgather of one segment starts while later segments are still
// being reduced.
struct RingBuffers {
  const std::byte* input = nullptr;  // this rank's contribution (read at step 0 and in reduces)
  std::byte* work = nullptr;         // full layout: partial results and gathered blocks
  std::byte* own = nullptr;          // where block `rank` ends up (may lie inside work)
};

void run_ring(Context& ctx, const Blocks& blocks, DataType dtype, ReduceOp op, int first_step,
              int last_step, const RingBuffers& buffers);

}  // namespace gradwire::collectives
