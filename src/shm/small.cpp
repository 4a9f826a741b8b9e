// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [small collectives]: on one host, a small collective costs what its
// handshakes cost. Through the transport a 2-rank 8-byte allreduce took
// 7.9 us against Open MPI's 1.6 us (issue 18): the provider's message
// latency plus the hand-off to the engine thread and back. So when every
// rank of a communicator maps every other's control segment (
// activate at creation, for communicators on one host), a small collective
// with ordinary buffers goes through pre-mapped shared memory instead, the
// way MPI's shared-memory collectives and NCCL's LL protocol avoid
// per-message handshakes:
//   1. each rank copies its input into its own slot (index seq % kDepth)
//      in its control segment, or, up to 16 bytes, into its descriptor
//      (Note [one line per message] in shm/windows.h);
//   2. the handshake (Note [the direct handshake]) publishes the call: the
//      descriptor's seq1 is stored last, a release store: a peer that sees
//      it sees the descriptor and the slot;
//   3. each rank reads what it needs from the peers' slots: allreduce
//      folds every slot in rank order into its own output (every rank
//      computes every element, in the same order, so all end bitwise
//      equal), reduce_scatter folds its block, allgather copies the
//      shards, broadcast copies the root's slot (only it waits, and only
//      for the root), barrier reads nothing;
//   4. it raises `consumed`.
// One flag round per collective, and no provider call at all: which is why
// these may run on the caller's thread (Note [no inline execution] in
// runtime/engine.h concerns provider calls that may never return; these
// only poll flags, with the deadline and the interrupt checked as always).
//
// Note [slot reuse]: a rank writes its slot and descriptor of index
// i = seq % kDepth again kDepth handshakes later. Before that it waits
// until every peer has `consumed` the handshake that last used index i, so
// no peer still reads the old contents. Usually that is long done: the
// handshakes in between needed every rank. The wait matters after
// collectives that do not need this rank's peers: a broadcast from this
// rank (here or through the transport), which may run kDepth - 1 ahead.
#include <algorithm>
#include <cstring>

#include "base/raise.h"
#include "collectives/collectives.h"
#include "shm/shm.h"
#include "shm/handshake.h"
#include "collectives/algorithm.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::shm {

// The Context, the planning of collectives/plan.h and WouldBlock: this
// layer runs collectives the way collectives/ does.
using namespace gradwire::collectives;

namespace {

// What each rank writes into its slot: the whole input for the
// reductions, the largest shard for allgather (the same bound on every
// rank), the root's buffer for broadcast.
size_t staged_bytes(const CollectiveCall& call, int size) {
  const size_t es = element_size(call.dtype);
  switch (call.op) {
    case CollectiveOp::Allreduce:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::Broadcast: return call.count * es;
    case CollectiveOp::Allgather: return shard_count(call.count, size, 0) * es;
    case CollectiveOp::Barrier: return 0;
    default: return SIZE_MAX;
  }
}

// Step 1 of Note [small collectives]: this rank's input into its slot.
void stage(std::byte* slot, const CollectiveCall& call, int r, int n) {
  const size_t es = element_size(call.dtype);
  const auto* send = static_cast<const std::byte*>(call.send);
  switch (call.op) {
    case CollectiveOp::Allreduce:
    case CollectiveOp::ReduceScatter:
      if (call.count) kernels::copy(slot, send, call.count * es);
      break;
    case CollectiveOp::Allgather:
      if (const size_t c = shard_count(call.count, n, r)) kernels::copy(slot, send, c * es);
      break;
    case CollectiveOp::Broadcast:
      if (r == call.root && call.count) kernels::copy(slot, send, call.count * es);
      break;
    default: break;
  }
}

}  // namespace

bool small_path_takes(const CollectiveCall& call, int size) {
  return size > 1 && staged_bytes(call, size) <= kSlotBytes;
}

void run_small(Context& ctx, const Windows& w, const CollectiveCall& call,
               SmallState& state) {
  const int n = ctx.size(), r = ctx.rank();
  const uint64_t seq1 = w.seq1(ctx.seq());
  const size_t es = element_size(call.dtype);
  ctx.set_algorithm("shared slots");

  Descriptor mine = descriptor_of(call);
  mine.staged = 1;
  // Note [one line per message] in shm/windows.h: up to 16 bytes
  // go in the descriptor itself (the same on every rank: the calls match,
  // or check_same_call fails before anything is read).
  const bool in_line = staged_bytes(call, n) <= Descriptor::kInlineBytes;
  // A WouldBlock from a wait leaves `state` as it was: the engine thread
  // calls again and goes on from there (Note [inline small collectives]).
  if (!state.published) {
    wait_until_free(ctx, w);  // Note [slot reuse]
    stage(in_line ? mine.data : w.slot(r, seq1), call, r, n);
    publish(ctx, w, mine);
    state.published = true;
  }
  // Where rank k's staged input is: its slot, or the copy of its
  // descriptor read by the handshake.
  const std::vector<Descriptor>* all = nullptr;
  Descriptor root_desc;
  if (call.op == CollectiveOp::Broadcast) {
    // Only the root's slot is read: the root waits for nobody, the others
    // for the root (Note [slot reuse] keeps the root from overwriting it).
    if (r != call.root) {
      root_desc = collect_one(ctx, w, call.root);
      check_same_call(ctx, call.root, root_desc, r, mine);
    }
  } else {
    all = &collect(ctx, w);
    check_same_call(ctx, *all);
  }
  auto staged = [&](int k) -> const std::byte* {
    if (!in_line) return w.slot(k, seq1);
    return all ? (*all)[size_t(k)].data : root_desc.data;
  };

  auto* recv = static_cast<std::byte*>(call.recv);
  auto fold = [&](std::byte* dst, size_t first, size_t len) {
    if (len == 0) return;
    const size_t at = first * es;
    kernels::reduce(dst, staged(0) + at, staged(1) + at, len, call.dtype, call.redop);
    for (int k = 2; k < n; ++k) {
      kernels::reduce(dst, dst, staged(k) + at, len, call.dtype, call.redop);
    }
    if (call.redop == ReduceOp::Avg) kernels::divide(dst, len, call.dtype, n);
  };
  switch (call.op) {
    case CollectiveOp::Allreduce:
      fold(recv, 0, call.count);
      break;
    case CollectiveOp::ReduceScatter:
      fold(recv, shard_offset(call.count, n, r), shard_count(call.count, n, r));
      break;
    case CollectiveOp::Allgather:
      for (int p = 0; p < n; ++p) {
        std::byte* dst = recv + shard_offset(call.count, n, p) * es;
        const std::byte* src = p == r ? static_cast<const std::byte*>(call.send) : staged(p);
        const size_t c = shard_count(call.count, n, p);
        if (dst != src && c) kernels::copy(dst, src, c * es);
      }
      break;
    case CollectiveOp::Broadcast: {
      const std::byte* src =
          r == call.root ? static_cast<const std::byte*>(call.send) : staged(call.root);
      if (recv != src && call.count) kernels::copy(recv, src, call.count * es);
      break;
    }
    case CollectiveOp::Barrier:
      break;
    default:
      raise(ErrorCode::Internal, "{}: the shared-slot path has no {}", ctx.what(), call.name());
  }
  consumed(ctx, w);
}

}  // namespace gradwire::shm
