// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [the copy path]: on one host, a large allreduce, reduce_scatter or
// allgather whose buffers are the caller's own (not from allocate_shared)
// goes through staging areas in the ranks' control segments instead of the
// transport (issue 18: the transport ran ordinary buffers at 0.7-1.7x Open
// MPI where the direct path between shared buffers ran at 2-5x).
//
// Why copies and not single-copy reads of a peer's memory: measured on the
// 2-core VM, process_vm_readv moved 3.4-9.7 GB/s (6.4 GB/s at 4 MiB, 3.6 at
// 16 MiB) where memcpy moved 12-40 GB/s: pinning the peer's pages costs more
// than the second copy. XPMEM, which maps a peer's pages once, is not in
// Debian's kernels. So every rank copies what its peers need into its own
// staging area, and the reduction and the copies out read from there; the
// staging areas are small (2 x kStageBytes per rank) so the data a peer
// reads was written a moment before and is still in the shared cache.
//
// The vector is cut as the direct path cuts it: block q (shard_blocks)
// belongs to rank q. Each block is walked in rounds of `chunk` elements
// (copy_plan); round g uses staging half g % 2, where block q's piece of
// the round sits at position q. Per round, rank r:
//   allreduce:      1. copies its pieces of every block but its own into
//                      its staging area (its own block's input only it
//                      reads), and raises `progress` to 2g + 1;
//                   2. waits for every peer's 2g + 1, folds block r's piece
//                      over every rank's input in rank order (from the
//                      peers' staging areas, its own from the caller's
//                      buffer) into its output and its staging position r,
//                      and raises `progress` to 2g + 2;
//                   3. waits for every peer's 2g + 2 and copies their
//                      results (their position q) into its output.
//   reduce_scatter: steps 1 and 2, the fold written to the output only.
//   allgather:      1. copies its shard's piece into its staging area
//                      (position 0), raises `progress` to 2g + 2, and
//                      copies the piece into its own output;
//                   3. waits for every peer's 2g + 1 and copies their pieces
//                      into its output.
// Every element is computed once, in rank order, so all ranks end bitwise
// equal (and equal to the direct and small paths' results).
//
// Reuse without a third flag: a rank writes half g % 2 again in round
// g + 2. Before that it has waited (in round g + 1) for every peer's
// 2(g + 1) + 1, which a peer raises only after its own round g ended,
// reads of this rank's staging area included. Rounds count across
// collectives (Windows::copy_rounds; every rank runs the same rounds), so
// this holds from one copy-path collective to the next, whatever runs in
// between (nothing else touches the staging areas).
//
// Peers never touch this rank's own buffers: a collective that fails half
// way (a dead peer, the deadline) leaves nothing that writes them later.
#include <algorithm>
#include <cstring>

#include "base/raise.h"
#include "collectives/collectives.h"
#include "shm/handshake.h"
#include "shm/shm.h"
#include "collectives/algorithm.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::shm {

// The Context, the planning of collectives/plan.h and WouldBlock: this
// layer runs collectives the way collectives/ does.
using namespace gradwire::collectives;

namespace {


// The fold of block r's piece is done through an L2-sized scratch chunk
// that is then copied to the output and the staging area.
constexpr size_t kFoldBytes = size_t(32) << 10;

void wait_progress(Context& ctx, const Windows& w, uint64_t at_least,
                   std::string_view what) {
  for (int p = 0; p < ctx.size(); ++p) {
    if (p == ctx.rank()) continue;
    Control& peer = w.control(p);
    ctx.wait_for([&] { return peer.progress.load(std::memory_order_acquire) >= at_least; }, p,
                 what, &peer.bell);
  }
}

}  // namespace

void run_copy(Context& ctx, const Windows& w, const CollectiveCall& call,
              DirectState& state) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = element_size(call.dtype);
  // Allgather stages one piece per rank (its shard's); the reductions one
  // per block.
  const CopyPlan plan = copy_plan(call.count, n, es, kStageBytes,
                                  call.op == CollectiveOp::Allgather ? 1 : size_t(n));
  const Blocks& b = plan.blocks;
  const size_t piece_bytes = plan.chunk * es;  // a staging position
  const auto* send = static_cast<const std::byte*>(call.send);
  auto* recv = static_cast<std::byte*>(call.recv);
  Control& me = w.control(r);
  ctx.set_algorithm("shared copy");

  // Elements [first, first + len) of block q in round k.
  const Segmentation rounds{plan.chunk, plan.rounds};
  auto piece = [&](int q, size_t k) { return segment_range(b.count[q], rounds, k); };
  // Step 1 of the reductions: our input of every block but ours.
  auto stage_blocks = [&](std::byte* mine, size_t k) {
    for (int q = 0; q < n; ++q) {
      const Range p = piece(q, k);
      if (q != r && p.len) {
        kernels::copy_for_peers(mine + size_t(q) * piece_bytes,
                                send + (b.offset[q] + p.first) * es, p.len * es);
      }
    }
  };
  // Step 3: every peer's piece of round k into our output, from position q
  // of peer q's staging area (allreduce: its result) or position 0
  // (allgather: its shard).
  auto copy_out = [&](uint64_t g, size_t k, bool own_position) {
    for (int q = 0; q < n; ++q) {
      const Range p = piece(q, k);
      if (q != r && p.len) {
        kernels::copy(recv + (b.offset[q] + p.first) * es,
                      w.stage(q, g) + (own_position ? size_t(q) * piece_bytes : 0), p.len * es);
      }
    }
  };
  // Step 2: block r's piece folded over every rank's input, rank order.
  auto fold = [&](uint64_t g, const Range& mine, std::byte* out, std::byte* staged_out) {
    std::byte* tmp = ctx.scratch(kFoldBytes);
    const size_t step = std::max<size_t>(1, kFoldBytes / es);
    auto input = [&](int q, size_t at) -> const std::byte* {
      return q == r ? send + (b.offset[r] + mine.first + at) * es
                    : w.stage(q, g) + size_t(r) * piece_bytes + at * es;
    };
    for (size_t x = 0; x < mine.len; x += step) {
      const size_t c = std::min(step, mine.len - x);
      kernels::reduce(tmp, input(0, x), input(1, x), c, call.dtype, call.redop);
      for (int q = 2; q < n; ++q) kernels::reduce(tmp, tmp, input(q, x), c, call.dtype, call.redop);
      if (call.redop == ReduceOp::Avg) kernels::divide(tmp, c, call.dtype, n);
      kernels::copy(out + x * es, tmp, c * es);
      if (staged_out) kernels::copy_for_peers(staged_out + x * es, tmp, c * es);
    }
  };

  // A WouldBlock from a wait leaves `state` at the step that waited: the
  // engine thread calls again and goes on from there.
  for (; state.round < plan.rounds; ++state.round, state.step = 0) {
    const size_t k = state.round;
    const uint64_t g = state.first_round + k;
    std::byte* mine = w.stage(r, g);
    const Range own = piece(r, k);
    switch (call.op) {
      case CollectiveOp::Allreduce:
        if (state.step == 0) {
          stage_blocks(mine, k);
          me.progress.store(2 * g + 1, std::memory_order_release);
          ring(me.bell);  // Note [the doorbell]
          state.step = 1;
        }
        if (state.step == 1) {
          wait_progress(ctx, w, 2 * g + 1, " to stage its part of this collective");
          fold(g, own, recv + (b.offset[r] + own.first) * es, mine + size_t(r) * piece_bytes);
          me.progress.store(2 * g + 2, std::memory_order_release);
          ring(me.bell);  // Note [the doorbell]
          state.step = 2;
        }
        wait_progress(ctx, w, 2 * g + 2, " to reduce its block of this collective");
        copy_out(g, k, /*own_position=*/true);
        break;
      case CollectiveOp::ReduceScatter:
        if (state.step == 0) {
          stage_blocks(mine, k);
          me.progress.store(2 * g + 2, std::memory_order_release);
          ring(me.bell);  // Note [the doorbell]
          state.step = 1;
        }
        wait_progress(ctx, w, 2 * g + 1, " to stage its part of this collective");
        fold(g, own, recv + own.first * es, nullptr);
        break;
      case CollectiveOp::Allgather:
        if (state.step == 0) {
          // Our shard into the staging area (a copy into lines the peers
          // hold: Note [stores into lines a peer reads]), published at
          // once; then, while the peers read it, into our own output
          // (unless in place) from the piece still in L2.
          const std::byte* src = send + own.first * es;
          std::byte* dst = recv + (b.offset[r] + own.first) * es;
          if (own.len) kernels::copy_for_peers(mine, src, own.len * es);
          me.progress.store(2 * g + 2, std::memory_order_release);
          ring(me.bell);  // Note [the doorbell]
          if (own.len && dst != src) kernels::copy(dst, src, own.len * es);
          state.step = 1;
        }
        wait_progress(ctx, w, 2 * g + 1, " to stage its shard of this collective");
        copy_out(g, k, /*own_position=*/false);
        break;
      default:
        raise(ErrorCode::Internal, "{}: the copy path has no {}", ctx.what(), call.name());
    }
  }
  w.copy_rounds = state.first_round + plan.rounds;
}

}  // namespace gradwire::shm
