// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The handshake through the control segments of one host's ranks, shared by
// the direct path (direct.cpp) and small collectives (small.cpp).
#pragma once

#include <string>
#include <vector>

#include "base/collective_call.h"
#include "collectives/context.h"
#include "memory/shared_windows.h"

namespace gradwire::collectives {

// Note [slot reuse] in small.cpp: waits until every peer has consumed
// what this rank published in the last handshake of this collective's
// index (seq % kDepth). Before writing the descriptor or the slot.
void wait_until_free(Context& ctx, const shared::Windows& w);
// Note [the direct handshake]: publishes `mine` for this collective and
// returns every rank's descriptor (index = rank). Mismatch if a peer is at
// another collective.
// The returned vector is the windows' own (valid until the next handshake).
const std::vector<shared::Descriptor>& handshake(Context& ctx, const shared::Windows& w,
                                                 const shared::Descriptor& mine);
// The two halves: publish never waits; collect waits for every peer (and
// may be called again after a WouldBlock).
void publish(Context& ctx, const shared::Windows& w, const shared::Descriptor& mine);
const std::vector<shared::Descriptor>& collect(Context& ctx, const shared::Windows& w);
// Only rank p's descriptor (waits for p alone).
shared::Descriptor collect_one(Context& ctx, const shared::Windows& w, int p);
// Mismatch naming both calls unless every rank called the same collective.
void check_same_call(Context& ctx, const std::vector<shared::Descriptor>& all);
void check_same_call(Context& ctx, int pa, const shared::Descriptor& a, int pb,
                     const shared::Descriptor& b);
// This rank has read what its peers published for this collective
// (descriptors, and slots for a small one).
void consumed(Context& ctx, const shared::Windows& w);
// Raises `departed` and waits for every peer's: no peer still touches this
// rank's buffers.
void depart(Context& ctx, const shared::Windows& w);

std::string describe(const shared::Descriptor& d);
// What a rank publishes about `call` (no buffers, not staged).
shared::Descriptor descriptor_of(const CollectiveCall& call);

}  // namespace gradwire::collectives
