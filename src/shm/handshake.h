// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The handshake through the control segments of one host's ranks, shared by
// the direct path (direct.cpp), the copy path (copy_path.cpp) and small
// collectives (small.cpp); internal to the shm layer.
#pragma once

#include <string>
#include <vector>

#include "base/collective_call.h"
#include "collectives/context.h"
#include "shm/shm.h"
#include "shm/windows.h"

namespace gradwire::shm {

using collectives::Context;

// Note [slot reuse] in small.cpp: waits until every peer has consumed
// what this rank published in the last handshake of this collective's
// index (seq % kDepth). Before writing the descriptor or the slot.
void wait_until_free(Context& ctx, const Windows& w);
// Note [the direct handshake]: publishes `mine` for this collective and
// returns every rank's descriptor (index = rank). Mismatch if a peer is at
// another collective.
// The returned vector is the windows' own (valid until the next handshake).
const std::vector<Descriptor>& handshake(Context& ctx, const Windows& w,
                                                 const Descriptor& mine);
// The two halves: publish never waits; collect waits for every peer (and
// may be called again after a WouldBlock).
void publish(Context& ctx, const Windows& w, const Descriptor& mine);
const std::vector<Descriptor>& collect(Context& ctx, const Windows& w);
// Only rank p's descriptor (waits for p alone).
Descriptor collect_one(Context& ctx, const Windows& w, int p);
// Mismatch naming both calls unless every rank called the same collective.
void check_same_call(Context& ctx, const std::vector<Descriptor>& all);
void check_same_call(Context& ctx, int pa, const Descriptor& a, int pb,
                     const Descriptor& b);
// This rank has read what its peers published for this collective
// (descriptors, and slots for a small one).
void consumed(Context& ctx, const Windows& w);
// Raises `departed` and waits for every peer's: no peer still touches this
// rank's buffers.
void depart(Context& ctx, const Windows& w);

std::string describe(const Descriptor& d);
// What a rank publishes about `call` (no buffers, not staged).
Descriptor descriptor_of(const CollectiveCall& call);

// Note [the copy path] (copy_path.cpp): after the direct handshake found
// a rank's buffers outside the shared windows.
void run_copy(Context& ctx, const Windows& windows, const CollectiveCall& call,
              DirectState& state);

}  // namespace gradwire::shm
