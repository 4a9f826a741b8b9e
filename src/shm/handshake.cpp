// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "shm/handshake.h"

#include <cstddef>
#include <cstring>

#include "base/collective_call.h"
#include "base/raise.h"

namespace gradwire::shm {

// The Context, the planning of collectives/plan.h and WouldBlock: this
// layer runs collectives the way collectives/ does.
using namespace gradwire::collectives;


namespace {

CollectiveCall call_of(const Descriptor& d) {
  return CollectiveCall::from_wire(d.kind, d.dtype, d.op, d.root, d.count);
}

}  // namespace

Descriptor descriptor_of(const CollectiveCall& call) {
  Descriptor d;
  d.kind = uint8_t(call.op);
  d.dtype = uint8_t(call.dtype);
  d.op = uint8_t(call.redop);
  d.count = call.count;
  d.root = call.op == CollectiveOp::Broadcast ? call.root : -1;
  return d;
}

std::string describe(const Descriptor& d) {
  const CollectiveCall c = call_of(d);
  return fmt::format("{} of {}", c.name(), c.describe());
}

// Note [the direct handshake]: each rank writes its Descriptor (what it
// calls, with which buffers) into its control segment, at index seq %
// kDepth, its seq1 last, then raises `arrived` to seq + 1; it reads a
// peer's descriptor once that descriptor's seq1 is seq + 1 (Note [one line
// per message]; `arrived` past it means the peer called something else:
// Mismatch). Every rank then
// holds the same n descriptors and makes the same decision. Before writing,
// a rank waits until every peer has `consumed` the last handshake of the
// same index (Note [slot reuse] in small.cpp); it used to rely on the
// collective in between needing this rank's data, which a transport
// broadcast from this rank does not. After the transfers of the direct
// path each rank raises `departed` and waits for everyone's: only then is
// no peer still reading this rank's input or writing its output, and the
// caller may reuse them.
void wait_until_free(Context& ctx, const Windows& w) {
  const uint64_t seq1 = w.seq1(ctx.seq());
  if (const uint64_t before = w.last_handshake[seq1 % kDepth]) {
    auto& seen = w.consumed_seen;
    seen.resize(size_t(ctx.size()));
    for (int p = 0; p < ctx.size(); ++p) {
      // Note [one line per message]: `consumed` only grows, so a value
      // read earlier that is new enough spares reading the peer's line.
      if (p == ctx.rank() || seen[p] >= before) continue;
      Control& peer = w.control(p);
      ctx.wait_for([&] {
        seen[p] = peer.consumed.load(std::memory_order_acquire);
        return seen[p] >= before;
      }, p, " to finish reading an earlier collective", &peer.bell);
    }
  }
  w.last_handshake[seq1 % kDepth] = seq1;
}

void publish(Context& ctx, const Windows& w, const Descriptor& mine) {
  const uint64_t seq1 = w.seq1(ctx.seq());
  Control& me = w.control(ctx.rank());
  Descriptor& d = me.desc[seq1 % kDepth].d;
  // Note [one line per message]: everything but seq1 first (a peer may be
  // polling seq1: it must see the old value or the new, nothing between),
  // then seq1, what a waiting peer polls, with a release store.
  static_assert(offsetof(Descriptor, seq1) == 0);
  std::memcpy(reinterpret_cast<std::byte*>(&d) + sizeof(d.seq1),
              reinterpret_cast<const std::byte*>(&mine) + sizeof(mine.seq1),
              sizeof(Descriptor) - sizeof(d.seq1));
  __atomic_store_n(&d.seq1, seq1, __ATOMIC_RELEASE);
  me.arrived.store(seq1, std::memory_order_release);
  ring(me.bell);  // Note [the doorbell]
}

Descriptor collect_one(Context& ctx, const Windows& w, int p) {
  const uint64_t seq1 = w.seq1(ctx.seq());
  Control& peer = w.control(p);
  const Descriptor& line = peer.desc[seq1 % kDepth].d;
  // Note [one line per message]: the descriptor's own seq1 says it is
  // there; `arrived` is read only while waiting, so that a peer that went
  // on to a later collective (ranks that called different ones) is told
  // apart from one that has not come yet.
  // `arrived` is read on every 64th poll only: each read pulls the peer's
  // line into our cache, and its next store must then fetch it back.
  uint32_t polls = 0;
  ctx.wait_for([&] {
    return __atomic_load_n(&line.seq1, __ATOMIC_ACQUIRE) == seq1 ||
           ((++polls & 63u) == 0 && peer.arrived.load(std::memory_order_acquire) >= seq1);
  }, p, " to enter this collective", &peer.bell);
  const Descriptor d = line;
  if (d.seq1 != seq1) {
    raise(ErrorCode::Mismatch, "{}: rank {} entered collective #{} where this rank entered #{}; "
          "likely cause: ranks called different collectives", ctx.what(), p, d.seq1 - 1,
          seq1 - 1);
  }
  return d;
}

const std::vector<Descriptor>& collect(Context& ctx, const Windows& w) {
  const int n = ctx.size(), r = ctx.rank();
  const uint64_t seq1 = w.seq1(ctx.seq());
  std::vector<Descriptor>& all = w.seen;  // reused: no allocation per collective
  all.resize(size_t(n));
  for (int p = 0; p < n; ++p) {
    all[p] = p == r ? w.control(r).desc[seq1 % kDepth].d : collect_one(ctx, w, p);
  }
  return all;
}

const std::vector<Descriptor>& handshake(Context& ctx, const Windows& w,
                                         const Descriptor& mine) {
  publish(ctx, w, mine);
  return collect(ctx, w);
}

void check_same_call(Context& ctx, int pa, const Descriptor& a, int pb, const Descriptor& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.count != b.count ||
      (call_of(a).has_redop() && a.op != b.op) || a.root != b.root || a.staged != b.staged) {
    const bool same_kind = a.kind == b.kind && a.root == b.root;
    const char* cause = !same_kind           ? "ranks called different collectives"
                        : a.dtype != b.dtype ? "ranks passed different dtypes"
                        : a.count != b.count ? "ranks passed different counts"
                                             : "ranks passed different reduce ops";
    raise(ErrorCode::Mismatch,
          "{}: ranks called different collectives: rank {} {}, rank {} {}; likely cause: {}",
          ctx.what(), pa, describe(a), pb, describe(b), cause);
  }
}

void check_same_call(Context& ctx, const std::vector<Descriptor>& all) {
  for (size_t p = 1; p < all.size(); ++p) check_same_call(ctx, 0, all[0], int(p), all[p]);
}

void depart(Context& ctx, const Windows& w) {
  const uint64_t seq1 = w.seq1(ctx.seq());
  Control& me = w.control(ctx.rank());
  me.departed.store(seq1, std::memory_order_release);
  ring(me.bell);
  for (int p = 0; p < ctx.size(); ++p) {
    if (p == ctx.rank()) continue;
    Control& peer = w.control(p);
    ctx.wait_for([&] { return peer.departed.load(std::memory_order_acquire) >= seq1; }, p,
                 " to finish this collective", &peer.bell);
  }
}

void consumed(Context& ctx, const Windows& w) {
  Control& me = w.control(ctx.rank());
  me.consumed.store(w.seq1(ctx.seq()), std::memory_order_release);
  ring(me.bell);
}

}  // namespace gradwire::shm
