// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Broadcast: a binomial tree for small buffers (log2 n latencies) and a
// pipelined chain along the ring for large ones (each rank forwards segment
// k while segment k+1 arrives, so the time approaches one buffer transfer).
#include <array>
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/algorithm.h"
#include "base/raise.h"

namespace gradwire::collectives {

namespace {

void binomial_tree(Context& ctx, const std::byte* src_root, std::byte* data, size_t bytes,
                   int root) {
  ctx.set_algorithm("binomial tree");
  const int n = ctx.size();
  const int vr = (ctx.rank() - root + n) % n;
  const std::byte* src = vr == 0 ? src_root : data;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      Request& q = ctx.requests(1)[0];
      ctx.recv(q, (vr - mask + root) % n, data, bytes, 0);
      ctx.wait(q);
      break;
    }
    mask <<= 1;
  }
  std::span<Request> sends = ctx.requests(32);
  size_t posted = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) ctx.send(sends[posted++], (vr + mask + root) % n, src, bytes, 0);
  }
  ctx.wait_all(sends.first(posted));
}

void chain(Context& ctx, const std::byte* src_root, std::byte* data, size_t bytes, int root) {
  ctx.set_algorithm("pipelined chain");
  constexpr size_t kWindow = 4;
  const int n = ctx.size();
  const int vr = (ctx.rank() - root + n) % n;
  const int next = vr + 1 < n ? (ctx.rank() + 1) % n : -1;
  const int prev = vr > 0 ? (ctx.rank() - 1 + n) % n : -1;
  const Segmentation seg = segment(bytes, 1, ctx.options().collectives.segment_bytes, 1);
  const size_t nseg = seg.nseg;
  const std::byte* src = vr == 0 ? src_root : data;

  std::span<Request> rreq = ctx.requests(kWindow), sreq = ctx.requests(kWindow);
  size_t next_recv = 0, done = vr == 0 ? nseg : 0, next_send = 0;
  const size_t sends = next < 0 ? 0 : nseg;
  while (done < nseg || next_send < sends) {
    bool acted = false;
    while (done < next_recv && rreq[done % kWindow].done()) {
      ctx.check(rreq[done % kWindow]);
      ++done;
      acted = true;
    }
    while (prev >= 0 && next_recv < nseg && next_recv - done < kWindow) {
      const Range rg = segment_range(bytes, seg, next_recv);
      ctx.recv(rreq[next_recv % kWindow], prev, data + rg.first, rg.len, uint32_t(next_recv));
      ++next_recv;
      acted = true;
    }
    while (next_send < sends && next_send < done) {
      Request& sr = sreq[next_send % kWindow];
      if (sr.state == Request::State::Pending) break;
      if (sr.done()) ctx.check(sr);
      const Range rg = segment_range(bytes, seg, next_send);
      ctx.send(sr, next, src + rg.first, rg.len, uint32_t(next_send));
      ++next_send;
      acted = true;
    }
    if (!acted) ctx.stalled(done < next_recv ? &rreq[done % kWindow] : nullptr, sreq);
  }
  for (auto& sr : sreq)
    if (sr.state != Request::State::Idle) ctx.wait(sr);
}

}  // namespace

void broadcast(Context& ctx, const void* send, void* recv, size_t count, DataType dtype, int root) {
  const size_t bytes = count * element_size(dtype);
  if (count == 0) return;
  const auto* src = static_cast<const std::byte*>(send);
  auto* data = static_cast<std::byte*>(recv);
  const bool is_root = ctx.rank() == root;
  // The root's receive buffer gets its own data too (out of place).
  if (is_root && src != data) std::memcpy(data, src, bytes);
  switch (choose_broadcast(bytes, ctx.size(), ctx.options())) {
    case Algorithm::Local: return;
    case Algorithm::Chain: return chain(ctx, is_root ? src : nullptr, data, bytes, root);
    default: return binomial_tree(ctx, is_root ? src : nullptr, data, bytes, root);
  }
}

}  // namespace gradwire::collectives
