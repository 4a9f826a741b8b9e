// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Allreduce: ring (reduce-scatter + allgather, Note [one ring schedule]) for
// large buffers, recursive doubling for small ones.
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/algorithm.h"
#include "collectives/ring.h"
#include "base/raise.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::collectives {

namespace {

// The lower rank's data is always the left operand, so both partners of an
// exchange compute bitwise the same value even for operations whose result
// depends on operand order (NaN payloads, rounding of 16-bit floats).
void combine(std::byte* mine, const std::byte* theirs, bool theirs_first, size_t count,
             DataType dtype, ReduceOp op) {
  if (theirs_first) {
    kernels::reduce(mine, theirs, mine, count, dtype, op);
  } else {
    kernels::reduce(mine, mine, theirs, count, dtype, op);
  }
}

}  // namespace

// Note [recursive doubling with a remainder]: with p = 2^floor(log2 n) and
// rem = n - p, the first 2*rem ranks pair up (even rank hands its data to
// the odd one and sits out), the remaining p ranks exchange whole buffers
// with partners at distance 1, 2, 4, ... and the odd ranks hand the result
// back. log2(p) + 2 latencies instead of 2(n-1).
void allreduce_recursive_doubling(Context& ctx, void* data_v, size_t count, DataType dtype,
                                  ReduceOp op) {
  ctx.set_algorithm("recursive doubling");
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t bytes = count * element_size(dtype);
  auto* data = static_cast<std::byte*>(data_v);
  std::byte* tmp = ctx.scratch(bytes);

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  constexpr uint32_t kFoldSlot = 1000, kUnfoldSlot = 1001;

  int vrank;  // rank among the p ranks that exchange, or -1
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      Request& s = ctx.requests(1)[0];
      ctx.send(s, r + 1, data, bytes, kFoldSlot);
      ctx.wait(s);
      vrank = -1;
    } else {
      Request& q = ctx.requests(1)[0];
      ctx.recv(q, r - 1, tmp, bytes, kFoldSlot);
      ctx.wait(q);
      combine(data, tmp, /*theirs_first=*/true, count, dtype, op);
      vrank = r / 2;
    }
  } else {
    vrank = r - rem;
  }

  if (vrank >= 0) {
    uint32_t step = 0;
    for (int mask = 1; mask < p; mask <<= 1, ++step) {
      const int vpeer = vrank ^ mask;
      const int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;
      std::span<Request> reqs = ctx.requests(2);
      ctx.recv(reqs[0], peer, tmp, bytes, step);
      ctx.send(reqs[1], peer, data, bytes, step);
      ctx.wait_all(reqs);
      combine(data, tmp, /*theirs_first=*/vpeer < vrank, count, dtype, op);
    }
  }

  if (r < 2 * rem) {
    Request& q = ctx.requests(1)[0];
    if (r % 2 == 1) {
      ctx.send(q, r - 1, data, bytes, kUnfoldSlot);
    } else {
      ctx.recv(q, r + 1, data, bytes, kUnfoldSlot);
    }
    ctx.wait(q);
  }
  // Every rank divides the same bits by the same n: identical results.
  if (op == ReduceOp::Avg) kernels::divide(data, count, dtype, n);
}

void allreduce(Context& ctx, const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op) {
  const size_t es = element_size(dtype);
  const size_t bytes = count * es;
  const Algorithm algo = choose_allreduce(bytes, ctx.size(), ctx.options());
  if (count == 0) return;
  if (algo == Algorithm::Local) {
    if (send != recv) std::memcpy(recv, send, bytes);
    // Avg over one rank is the identity (x / 1).
    return;
  }
  if (algo == Algorithm::RecursiveDoubling) {
    if (send != recv) std::memcpy(recv, send, bytes);
    allreduce_recursive_doubling(ctx, recv, count, dtype, op);
    return;
  }
  ctx.set_algorithm("ring");
  const Blocks blocks = shard_blocks(count, ctx.size());
  RingBuffers buf;
  buf.input = static_cast<const std::byte*>(send);
  buf.work = static_cast<std::byte*>(recv);
  buf.own = buf.work + blocks.offset[ctx.rank()] * es;
  run_ring(ctx, blocks, dtype, op, 0, 2 * ctx.size() - 2, buf);
}

}  // namespace gradwire::collectives
