// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Debug-mode collective fingerprints (GRADWIRE_DEBUG=DETAIL): before every
// collective the ranks exchange what they are about to run, so that
// different collectives, counts, dtypes or roots end in a Mismatch on every
// rank at once instead of a hang, a truncation error or a wrong result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diag/flight_recorder.h"

namespace gradwire {
namespace collectives {
class Context;
}

// Fixed size and layout: it travels as raw bytes between ranks of one build.
struct Fingerprint {
  uint32_t magic = 0x67774670;  // "gwFp": rejects bytes of anything else
  uint32_t seq = 0;
  uint8_t op = 0, dtype = 0, redop = 0, has_redop = 0;
  int32_t root = -1;
  uint64_t count = 0;
};
static_assert(sizeof(Fingerprint) == 24);

Fingerprint make_fingerprint(uint32_t seq, const CollectiveCall& call);

// Pure: the fingerprint in `n` bytes a peer sent, checked field by field
// (size, magic, op, dtype, reduce op, flag, root). nullptr on success, else
// why the bytes are not a fingerprint of this build.
const char* decode_fingerprint(const void* bytes, size_t n, Fingerprint* out);

// Pure. Every rank's fingerprint, indexed by rank; nullopt if they agree,
// else the body of a Mismatch message naming each rank that differs from
// rank 0, what it called, and the fields that differ.
std::optional<std::string> compare_fingerprints(const std::vector<Fingerprint>& all);

// Runs on the engine thread, before the collective, with the collective's
// sequence number (so a rank that skipped a collective compares against the
// one the others run in its place). Raises Mismatch naming the ranks and
// fields; Protocol naming the rank whose bytes do not decode;
// Timeout/PeerLost like any collective if a rank never arrives.
void check_fingerprint(collectives::Context& ctx, const Fingerprint& mine);

}  // namespace gradwire
