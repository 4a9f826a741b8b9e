// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Alltoall by pairwise exchange: in step s rank r sends to r+s and receives
// from r-s, so every link carries one message per step. All steps are
// posted at once (receives first); the provider orders the wire traffic.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"

namespace gradwire::collectives {

void alltoall(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t block = count_per_rank * element_size(dtype);
  if (block == 0) return;
  ctx.set_algorithm("pairwise exchange");
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (in == out && n > 1) {
    // In place: keep a copy of what we send, since receives overwrite it.
    std::byte* copy = ctx.scratch(block * n);
    std::memcpy(copy, in, block * n);
    in = copy;
  }
  if (in + r * block != out + r * block) std::memcpy(out + r * block, in + r * block, block);
  if (n == 1) return;
  std::span<Request> reqs = ctx.requests(2 * size_t(n - 1));
  for (int s = 1; s < n; ++s) {
    const int from = (r - s + n) % n;
    ctx.recv(reqs[2 * (s - 1)], from, out + from * block, block, 0);
  }
  for (int s = 1; s < n; ++s) {
    const int to = (r + s) % n;
    ctx.send(reqs[2 * (s - 1) + 1], to, in + to * block, block, 0);
  }
  ctx.wait_all(reqs);
}

}  // namespace gradwire::collectives
