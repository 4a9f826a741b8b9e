// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "collectives/ring.h"

#include <algorithm>
#include <array>

#include "base/raise.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::collectives {

namespace {
// Receives and sends in flight per direction: enough segments to keep about
// kInFlightBytes moving (four 1 MiB segments keep the fabric busy while the
// reduction of the previous segment runs), and at least four. Small
// segments (tcp;ofi_rxm sends them eagerly, Note [eager segments on tcp])
// need more of them in flight to fill a link's bandwidth-delay product.
//
// Note [eager segments on tcp]: ofi_rxm, the RDM layer over the tcp
// provider, sends a message eagerly only while it fits its buffers
// (FI_OFI_RXM_BUFFER_SIZE); larger ones go by its segmentation or
// rendezvous protocols, which on a rate-limited link reach well below line
// rate (docs/benchmark-history.md, "a bandwidth-limited link": 72 MB/s on a
// 1 Gbit/s link where gloo reaches 119). Segments small enough to go eagerly
// (GRADWIRE_SEGMENT_BYTES=16000) reached 99 MB/s there, with the window
// counted in bytes rather than segments: four 16 kB segments in flight are
// far less than the link's bandwidth-delay product, so the window grows to
// kInFlightBytes / segment size (at most kMaxWindow). The default segment
// size stays 1 MiB: small segments are 10x slower on loopback TCP, so
// nothing picks them automatically (GRADWIRE_SEGMENT_BYTES is the knob).
constexpr size_t kInFlightBytes = size_t(4) << 20;
constexpr size_t kMinWindow = 4, kMaxWindow = 256;

inline int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void run_ring(Context& ctx, const Blocks& blocks, DataType dtype, ReduceOp op, int first_step,
              int last_step, const RingBuffers& buf) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  const size_t es = element_size(dtype);
  const int nsteps = last_step - first_step;
  if (nsteps <= 0) return;

  const Segmentation seg =
      segment(blocks.max_count, es, ctx.options().collectives.segment_bytes, size_t(2 * (n - 1)));
  const size_t nseg = seg.nseg;
  const size_t units = size_t(nsteps) * nseg;
  const bool reduces = first_step < n - 1;
  const size_t slot_bytes = seg.seg_elems * es;
  const size_t kWindow =
      std::clamp(kInFlightBytes / std::max<size_t>(slot_bytes, 1), kMinWindow, kMaxWindow);
  std::byte* window = reduces ? ctx.scratch(kWindow * slot_bytes) : nullptr;
  // Slots are numbered by absolute step so that an allgather run alone and
  // the allgather half of an allreduce agree (and never collide).
  const uint32_t slot0 = uint32_t(size_t(first_step) * nseg);

  auto step_of = [&](size_t u) { return first_step + int(u / nseg); };
  auto send_block = [&](int s) { return mod(r - s - 1, n); };
  auto recv_block = [&](int s) { return mod(r - s - 2, n); };

  auto block_ptr = [&](std::byte* base, int b) { return base + blocks.offset[b] * es; };

  std::span<Request> sreq = ctx.requests(kWindow), rreq = ctx.requests(kWindow);
  size_t next_send = 0, next_recv = 0, done = 0;

  auto post_recv = [&](size_t u) {
    const int s = step_of(u);
    const int b = recv_block(s);
    const Range rg = segment_range(blocks.count[b], seg, u % nseg);
    std::byte* dst = s < n - 1 ? window + (u % kWindow) * slot_bytes
                               : block_ptr(buf.work, b) + rg.first * es;
    ctx.recv(rreq[u % kWindow], left, dst, rg.len * es, slot0 + uint32_t(u));
  };

  auto on_received = [&](size_t u) {
    const int s = step_of(u);
    if (s >= n - 1) return;  // allgather: the data landed in place
    const int b = recv_block(s);
    const Range rg = segment_range(blocks.count[b], seg, u % nseg);
    if (rg.len == 0) return;
    std::byte* dst = (b == r ? buf.own : block_ptr(buf.work, b)) + rg.first * es;
    const std::byte* a = buf.input + (blocks.offset[b] + rg.first) * es;
    kernels::reduce(dst, a, window + (u % kWindow) * slot_bytes, rg.len, dtype, op);
    if (b == r && op == ReduceOp::Avg) kernels::divide(dst, rg.len, dtype, n);
  };

  auto post_send = [&](size_t u) {
    const int s = step_of(u);
    const int b = send_block(s);
    const Range rg = segment_range(blocks.count[b], seg, u % nseg);
    const std::byte* src;
    if (s == 0) {
      src = buf.input + blocks.offset[b] * es;
    } else if (b == r) {
      src = buf.own;
    } else {
      src = block_ptr(buf.work, b);
    }
    ctx.send(sreq[u % kWindow], right, src + rg.first * es, rg.len * es, slot0 + uint32_t(u));
  };

  while (done < units || next_send < units) {
    bool acted = false;
    // Receives complete in posting order (one sender, one tag sequence).
    while (done < next_recv && rreq[done % kWindow].done()) {
      ctx.check(rreq[done % kWindow]);
      on_received(done);
      ++done;
      acted = true;
    }
    while (next_recv < units && next_recv - done < kWindow) {
      post_recv(next_recv++);
      acted = true;
    }
    while (next_send < units) {
      // Segment k of step s forwards what segment k of step s-1 brought.
      if (step_of(next_send) > first_step && done + nseg <= next_send) break;
      // Note [sends stay a window ahead]: small sends complete at once
      // (inject), so the request window alone does not bound how far a
      // rank runs ahead. A provider holds only so many unexpected messages;
      // if every rank of the ring ran ahead, all would block sending to a
      // neighbour that is itself blocked sending: a cycle. Sending at most
      // kWindow units beyond what we have received keeps the unreceived
      // messages per link bounded, and the cycle impossible.
      if (next_send >= done + kWindow) break;
      Request& sr = sreq[next_send % kWindow];
      if (sr.state == Request::State::Pending) break;
      if (sr.done()) ctx.check(sr);
      post_send(next_send++);
      acted = true;
    }
    if (!acted) ctx.stalled(done < next_recv ? &rreq[done % kWindow] : nullptr, sreq);
  }
  for (auto& sr : sreq) {
    if (sr.state != Request::State::Idle) ctx.wait(sr);
  }
}

}  // namespace gradwire::collectives
