// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [the direct path]: when every rank of a communicator shares one host
// and passes buffers from allocate_shared(), a collective needs no messages:
// each rank reads its peers' inputs where they lie and writes results
// straight into its peers' outputs. Per rank, a 2-rank allreduce then reads
// its half of both inputs once and writes each result element twice (its
// own output and the peer's), where the transport path copies the peer's
// half into scratch, reduces from there and copies the other half back:
// half the memory traffic, and no per-message protocol.
//   allreduce: rank r reduces block r of all inputs (in rank order, so the
//              value does not depend on who computes it) into a small
//              scratch chunk, then copies the chunk into every rank's output;
//              each element is computed once, so all ranks end bitwise equal.
//   reduce_scatter: rank r reduces block r of all inputs into its output.
//   allgather: rank r copies every peer's shard into its own output.
// reduce_scatter and allgather only read peers' memory, so only their send
// buffers need to be shared; allreduce writes peers' outputs, so both.
#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "shm/shm.h"
#include "shm/handshake.h"
#include "collectives/algorithm.h"
#include "base/raise.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::shm {

// The Context, the planning of collectives/plan.h and WouldBlock: this
// layer runs collectives the way collectives/ does.
using namespace gradwire::collectives;

namespace {


// Elements are reduced in chunks of this many bytes: the scratch chunk
// stays in L2 while it is copied out to every rank.
constexpr size_t kChunkBytes = size_t(64) << 10;

// Fold of block [first, first + len) over every rank's input, in rank order,
// into `dst` (scratch or the caller's output), chunk by chunk via `emit`.
template <typename Emit>
void reduce_block(Context& ctx, const std::vector<const std::byte*>& in, size_t first, size_t len,
                  DataType dtype, ReduceOp op, Emit emit) {
  const size_t es = element_size(dtype);
  const size_t chunk = std::max<size_t>(1, kChunkBytes / es);
  std::byte* tmp = ctx.scratch(chunk * es);
  const int n = int(in.size());
  for (size_t x = 0; x < len; x += chunk) {
    const size_t c = std::min(chunk, len - x);
    const size_t at = (first + x) * es;
    kernels::reduce(tmp, in[0] + at, in[1] + at, c, dtype, op);
    for (int k = 2; k < n; ++k) kernels::reduce(tmp, tmp, in[k] + at, c, dtype, op);
    if (op == ReduceOp::Avg) kernels::divide(tmp, c, dtype, n);
    emit(x, tmp, c * es);
  }
}

}  // namespace

DirectCall locate(const Windows& w, const CollectiveCall& call, int rank, int size) {
  DirectCall d{call, {}, {}};
  d.send_at = w.find(call.send, call.send_bytes(rank, size)).value_or(Location{});
  d.recv_at = w.find(call.recv, call.recv_bytes(rank, size)).value_or(Location{});
  return d;
}

bool direct_path_takes(CollectiveOp op) {
  return op == CollectiveOp::Allreduce || op == CollectiveOp::ReduceScatter ||
         op == CollectiveOp::Allgather;
}

bool run_direct(Context& ctx, const Windows& w, const DirectCall& direct,
                DirectState& state) {
  const CollectiveCall& call = direct.call;
  const int n = ctx.size(), r = ctx.rank();
  const size_t es = element_size(call.dtype);
  if (!state.published) {
    Descriptor mine = descriptor_of(call);
    mine.send_window = direct.send_at.window;
    mine.send_offset = direct.send_at.offset;
    mine.recv_window = direct.recv_at.window;
    mine.recv_offset = direct.recv_at.offset;
    wait_until_free(ctx, w);
    publish(ctx, w, mine);
    state.published = true;
  }
  // The windows' own vector: no other handshake runs before this one ends.
  const std::vector<Descriptor>& all = state.decided ? w.seen : collect(ctx, w);
  if (!state.decided) {
    check_same_call(ctx, all);
    consumed(ctx, w);  // the descriptors are read; departed guards the buffers
    // Direct only if every rank's buffers lie in the same window, so every
    // rank maps them all (a window is released rank by rank).
    const bool needs_recv = call.op == CollectiveOp::Allreduce;
    for (const auto& d : all) {
      if (d.send_window == Descriptor::kNoWindow || d.send_window != all[0].send_window) {
        state.copy = true;
      }
      if (needs_recv &&
          (d.recv_window == Descriptor::kNoWindow || d.recv_window != all[0].recv_window)) {
        state.copy = true;
      }
    }
    state.first_round = w.copy_rounds;
    state.decided = true;
  }
  if (state.copy) {
    // Every rank saw the same descriptors and options (GRADWIRE_SHM_
    // COLLECTIVES must agree at start-up), so every rank decides alike.
    if (!ctx.options().collectives.shm_collectives) return false;
    run_copy(ctx, w, call, state);
    return true;
  }
  ctx.set_algorithm("direct");
  if (state.moved) {  // resumed in depart (Note [inline copy collectives])
    depart(ctx, w);
    return true;
  }
  const bool needs_recv = call.op == CollectiveOp::Allreduce;
  const Blocks blocks = shard_blocks(call.count, n);
  const size_t send_bytes =
      call.op == CollectiveOp::Allgather ? 0 : call.count * es;  // per-rank sizes below
  std::vector<const std::byte*> in(n);
  std::vector<std::byte*> out(n);
  for (int p = 0; p < n; ++p) {
    const size_t sb = call.op == CollectiveOp::Allgather ? blocks.count[p] * es : send_bytes;
    in[p] = w.address(p, all[p].send_window, all[p].send_offset, sb);
    if (needs_recv) out[p] = w.address(p, all[p].recv_window, all[p].recv_offset, call.count * es);
    if (!in[p] || (needs_recv && !out[p])) {
      raise(ErrorCode::Mismatch, "{}: rank {}'s buffer does not fit its shared window; likely "
            "cause: ranks passed different counts", ctx.what(), p);
    }
  }
  // Our own buffers are the caller's pointers (a window maps them, too).
  in[r] = static_cast<const std::byte*>(call.send);
  auto* recv = static_cast<std::byte*>(call.recv);
  if (needs_recv) out[r] = recv;

  const size_t first = blocks.offset[r], len = blocks.count[r];
  switch (call.op) {
    case CollectiveOp::Allreduce:
      reduce_block(ctx, in, first, len, call.dtype, call.redop,
                   [&](size_t x, const std::byte* tmp, size_t bytes) {
                     // Peers' outputs are lines their owners read (Note
                     // [stores into lines a peer reads]).
                     for (int p = 0; p < n; ++p) {
                       std::byte* dst = out[p] + (first + x) * es;
                       if (p == r) kernels::copy(dst, tmp, bytes);
                       else kernels::copy_for_peers(dst, tmp, bytes);
                     }
                   });
      break;
    case CollectiveOp::ReduceScatter:
      reduce_block(ctx, in, first, len, call.dtype, call.redop,
                   [&](size_t x, const std::byte* tmp, size_t bytes) {
                     kernels::copy(recv + x * es, tmp, bytes);
                   });
      break;
    case CollectiveOp::Allgather:
      for (int p = 0; p < n; ++p) {
        std::byte* dst = recv + blocks.offset[p] * es;
        if (dst != in[p] && blocks.count[p] > 0) kernels::copy(dst, in[p], blocks.count[p] * es);
      }
      break;
    default:
      raise(ErrorCode::Internal, "{}: the direct path has no {}", ctx.what(), call.name());
  }
  state.moved = true;
  depart(ctx, w);
  return true;
}

}  // namespace gradwire::shm
