// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [the one-host path]: the contract of the shm layer, the fastest of
// the router's strategies (Note [ordered strategies] in runtime/router.h).
// When every rank of a communicator runs on one host, each maps every other
// rank's control segment at creation (open(), collective), and then:
//
//  - collectives move through shared memory without a provider call, on
//    whichever thread holds the engine's claim (the engine's, or the
//    caller's: Note [inline small collectives] in runtime/engine.h):
//      small collectives (small_path_takes, decided from the call alone so
//      alike on every rank) through the slots (Note [small collectives] in
//      small.cpp); allreduce, reduce_scatter and allgather (direct_path_
//      takes) straight between buffers from allocate() (Note [the direct
//      path] in direct.cpp) or through the staging areas (Note [the copy
//      path] in copy_path.cpp), decided jointly in a handshake through the
//      control segments (Note [the direct handshake]);
//    a run may end half-way with collectives::WouldBlock under a spin
//    budget and goes on from its state (SmallState, DirectState) when
//    called again; every result is bitwise identical on every rank; ranks
//    that disagree on the call fail with Mismatch naming both calls; every
//    wait honours the Context's deadline and interrupt;
//  - point-to-point messages travel through one ring and one bulk channel
//    per ordered pair of ranks (Note [mailboxes] in mailbox.h; the
//    runtime's PointToPoint matches and completes them), and long ones may
//    be read straight from the sender's memory (read_from_peer, Note
//    [single-copy reads]);
//  - allocate() (collective) hands out memory every rank of the host maps,
//    behind Communicator::allocate_shared and SharedBuffer.
//
// Nothing here knows the runtime: what the layer needs of its communicator
// comes as a Peers value (the blob exchange, rank, size, the host's
// identity). The runtime includes this header and no other file of src/shm/
// (tools/check_layers.py, Note [the runtime's face]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/collective_call.h"
#include "collectives/context.h"
#include "gradwire/options.h"
#include "shm/mailbox.h"
#include "shm/windows.h"

namespace gradwire::shm {

// What the layer needs of the communicator whose ranks it connects.
struct Peers {
  int rank = 0, size = 1;
  std::string name;  // the communicator's, for log lines
  Options options;
  // Every rank's blob (collective, synchronous).
  std::function<std::vector<std::string>(const std::string&)> allgather;
};

// Collective: creates this rank's control segment and maps every peer's
// (with the slots of Note [small collectives], the staging areas of Note
// [the copy path] and the mailboxes). The Windows are active() only if
// every rank mapped every other's; otherwise the reason is logged once.
std::shared_ptr<Windows> open(const Peers& peers, const char* why);
// Collective over the same ranks: `bytes` every rank of the host maps
// (direct = true on every rank), or private memory (direct = false on every
// rank, the reason logged) when the ranks do not share a host or /dev/shm.
std::shared_ptr<detail::SharedAllocation> allocate(const std::shared_ptr<Windows>& windows,
                                                   const Peers& peers, size_t bytes);

// ---- collectives (run with the communicator's Context)

// Note [small collectives]: whether `call` fits the slots; alike on every rank.
bool small_path_takes(const CollectiveCall& call, int size);
// Where a small collective is: a WouldBlock may end a call half-way; the
// next call with the same state goes on from there.
struct SmallState {
  bool published = false;  // this rank's slot and descriptor are out
};
void run_small(collectives::Context& ctx, const Windows& windows, const CollectiveCall& call,
               SmallState& state);

// Note [the direct path]: allreduce, reduce_scatter and allgather.
bool direct_path_takes(CollectiveOp op);
// A call with where its buffers lie in this rank's windows.
struct DirectCall {
  CollectiveCall call;
  Location send_at, recv_at;  // window kNoWindow: not in a shared buffer
};
DirectCall locate(const Windows& windows, const CollectiveCall& call, int rank, int size);
// Where a direct or copy-path collective is (see SmallState).
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
// options().collectives.shm_collectives; returns false (having touched no buffer) if
// neither, and the caller runs another strategy. Mismatch if ranks
// disagree on the call.
bool run_direct(collectives::Context& ctx, const Windows& windows, const DirectCall& call,
                DirectState& state);

// ---- point-to-point

// Note [single-copy reads]: where a long message's data lies in its
// sender's memory, as its announcement carries it.
struct PeerRegion {
  uint64_t pid = 0;          // the sender's process
  uint64_t addr = 0;         // the message's data there
  uint64_t canary_addr = 0;  // a word of the sender's that proves the pid is still the sender
  uint64_t canary = 0;       // its value
};
// Reads `bytes` from `from` into `buf` (process_vm_readv, one copy). Null
// on success, else why not (the kernel refused, a short read, or the
// canary differs: the pid is no longer the sender); the caller then
// streams the message through the bulk channel instead.
const char* read_from_peer(const PeerRegion& from, void* buf, size_t bytes);

}  // namespace gradwire::shm
