// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Barrier by dissemination: in round k rank r signals r + 2^k and waits for
// r - 2^k; after ceil(log2 n) rounds every rank has heard, transitively,
// from every other one.
#include "collectives/collectives.h"

namespace gradwire::collectives {

void barrier(Context& ctx) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return;
  ctx.set_algorithm("dissemination");
  uint32_t round = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++round) {
    std::span<Request> reqs = ctx.requests(2);
    ctx.recv(reqs[0], (r - dist + n) % n, nullptr, 0, round);
    ctx.send(reqs[1], (r + dist) % n, nullptr, 0, round);
    ctx.wait_all(reqs);
  }
}

}  // namespace gradwire::collectives
