// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The collectives as free functions over a Context, one file each. They run
// on the communicator's engine thread; arguments were validated on
// submission (see communicator.cpp), so these only check invariants.
#pragma once

#include <cstddef>

#include "collectives/context.h"
#include "base/collective_call.h"
#include "memory/shared_windows.h"
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
// The transport algorithm for `call` (Note [one collective call]): one of
// the above by call.op. Internal (Other) calls have no algorithm here.
void run(Context& ctx, const CollectiveCall& call);

// The direct path between the shared buffers of one host (direct.cpp), for
// allreduce, reduce_scatter and allgather.
struct DirectCall {
  CollectiveCall call;
  shared::Location send_at, recv_at;  // window kNoWindow: not in a shared buffer
};
bool direct_path_takes(CollectiveOp op);
// Where a direct or copy-path collective is: a WouldBlock (Context::
// set_spin_budget) may end a call half-way; the next call with the same
// state goes on from there (Note [inline small collectives]).
struct DirectState {
  bool published = false;  // this rank's descriptor is out
  bool decided = false;    // the handshake is done and `copy` holds
  bool copy = false;       // Note [the copy path], else the direct path
  bool moved = false;      // direct path: the data is moved, depart remains
  uint64_t first_round = 0;  // copy path: Windows::copy_rounds at its start
  size_t round = 0;          // copy path: the round under way
  int step = 0;              // copy path: its step (Note [the copy path])
};
// Handshakes with the other ranks (Note [the direct handshake]) and runs
// the collective straight between their buffers if every rank's buffers
// allow it, else through the staging areas (Note [the copy path]) if
// options().shm_collectives; returns false (having touched no buffer) if
// neither, and the caller runs the transport algorithm. Mismatch if ranks
// disagree on the call.
bool run_direct(Context& ctx, const shared::Windows& windows, const DirectCall& call,
                DirectState& state);

// Note [the copy path] (copy_path.cpp): after the direct handshake found
// a rank's buffers outside the shared windows.
void run_copy(Context& ctx, const shared::Windows& windows, const CollectiveCall& call,
              DirectState& state);

// Note [small collectives] (small.cpp): a collective small enough for the
// slots of the control segments, on a communicator whose windows are
// active, runs through them; every rank decides alike from the call.
bool small_path_takes(const CollectiveCall& call, int size);
// Where a small collective is: a WouldBlock (Context::set_spin_budget) may
// end a call half-way; the next call with the same state goes on from there.
struct SmallState {
  bool published = false;  // this rank's slot and descriptor are out
};
void run_small(Context& ctx, const shared::Windows& windows, const CollectiveCall& call,
               SmallState& state);

// Building blocks shared between collectives.
void allreduce_recursive_doubling(Context& ctx, void* data, size_t count, DataType dtype,
                                  ReduceOp op);

}  // namespace gradwire::collectives
