// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The fingerprint exchange between ranks (GRADWIRE_DEBUG=DETAIL); the pure
// half (decode, compare) is fingerprint.cpp.
#include <array>
#include <vector>

#include "collectives/context.h"
#include "base/raise.h"
#include "diag/fingerprint.h"

namespace gradwire {

namespace {

// plan.cpp keeps the top 64 slots of the tag's slot space out of every
// algorithm's schedule; the exchange takes the last one, so its messages
// can never match a message of the collective itself (same seq).
constexpr uint32_t kFingerprintSlot = collectives::kMaxSlots - 1;

}  // namespace

void check_fingerprint(collectives::Context& ctx, const Fingerprint& mine) {
  const int n = ctx.size(), me = ctx.rank();
  if (n == 1) return;
  std::vector<Fingerprint> all(static_cast<size_t>(n));
  all[size_t(me)] = mine;
  // Peers' bytes land in raw buffers and become Fingerprints only once
  // decoded: a fingerprint is never trusted as a struct.
  using Raw = std::array<uint8_t, sizeof(Fingerprint)>;
  std::vector<Raw> raw(static_cast<size_t>(n));
  auto reqs = ctx.requests(2 * size_t(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    ctx.recv(reqs[2 * size_t(p)], p, raw[size_t(p)].data(), sizeof(Raw), kFingerprintSlot);
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    ctx.send(reqs[2 * size_t(p) + 1], p, &all[size_t(me)], sizeof(Fingerprint), kFingerprintSlot);
  }
  ctx.set_algorithm("fingerprint exchange (GRADWIRE_DEBUG=DETAIL)");
  ctx.wait_all(reqs);
  ctx.set_algorithm("");
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    if (const char* why = decode_fingerprint(raw[size_t(p)].data(), sizeof(Raw), &all[size_t(p)])) {
      raise(ErrorCode::Protocol,
            "{}: rank {} sent a malformed collective fingerprint ({}); is every rank running "
            "the same gradwire build? (GRADWIRE_DEBUG=DETAIL)",
            ctx.what(), p, why);
    }
  }
  if (auto msg = compare_fingerprints(all)) {
    raise(ErrorCode::Mismatch, "{}: {}", ctx.what(), *msg);
  }
}

}  // namespace gradwire
