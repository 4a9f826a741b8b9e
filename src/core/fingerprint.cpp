// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "core/fingerprint.h"

#include <cstring>

#include "collectives/context.h"
#include "core/errors.h"

namespace gradwire {

namespace {

// plan.cpp keeps the top 64 slots of the tag's slot space out of every
// algorithm's schedule; the exchange takes the last one, so its messages
// can never match a message of the collective itself (same seq).
constexpr uint32_t kFingerprintSlot = collectives::kMaxSlots - 1;

fr::CollectiveInfo info_of(const Fingerprint& f) {
  fr::CollectiveInfo i;
  i.op = fr::Op(f.op);
  i.dtype = DataType(f.dtype);
  i.redop = ReduceOp(f.redop);
  i.has_redop = f.has_redop != 0;
  i.root = f.root;
  i.count = f.count;
  return i;
}

std::string call_of(const Fingerprint& f) {
  if (f.magic != Fingerprint{}.magic) return "something that is not a gradwire fingerprint";
  const std::string d = describe(info_of(f));
  return fmt::format("{} #{}{}", fr::to_string(fr::Op(f.op)), f.seq,
                     d.empty() ? "" : fmt::format(" ({})", d));
}

std::string differing_fields(const Fingerprint& a, const Fingerprint& b) {
  std::string s;
  auto add = [&](bool differs, const char* name) {
    if (differs) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(a.op != b.op, "op");
  add(a.dtype != b.dtype, "dtype");
  add(a.count != b.count, "count");
  add(a.has_redop != b.has_redop || (a.has_redop && a.redop != b.redop), "reduce op");
  add(a.root != b.root, "root");
  add(a.seq != b.seq || a.magic != b.magic, "sequence number");
  return s;
}

}  // namespace

Fingerprint make_fingerprint(uint32_t seq, const fr::CollectiveInfo& info) {
  Fingerprint f;
  f.seq = seq;
  f.op = uint8_t(info.op);
  f.dtype = uint8_t(info.dtype);
  f.redop = info.has_redop ? uint8_t(info.redop) : 0;
  f.has_redop = info.has_redop;
  f.root = info.root;
  f.count = info.count;
  return f;
}

std::optional<std::string> compare_fingerprints(const std::vector<Fingerprint>& all) {
  std::string diffs;
  int n = 0;
  for (size_t r = 1; r < all.size(); ++r) {
    const std::string fields = differing_fields(all[0], all[r]);
    if (fields.empty()) continue;
    if (++n <= 8) {
      diffs += fmt::format("; rank {} called {} (differs in {})", r, call_of(all[r]), fields);
    }
  }
  if (n == 0) return std::nullopt;
  if (n > 8) diffs += fmt::format("; and {} more ranks", n - 8);
  return fmt::format("ranks called different collectives: rank 0 called {}{}; likely cause: a "
                     "rank skipped or added a collective, or passed a different count, dtype, "
                     "reduce op or root (found by GRADWIRE_DEBUG=DETAIL)",
                     call_of(all[0]), diffs);
}

void check_fingerprint(collectives::Context& ctx, const Fingerprint& mine) {
  const int n = ctx.size(), me = ctx.rank();
  if (n == 1) return;
  std::vector<Fingerprint> all(static_cast<size_t>(n));
  all[size_t(me)] = mine;
  auto reqs = ctx.requests(2 * size_t(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    ctx.recv(reqs[2 * size_t(p)], p, &all[size_t(p)], sizeof(Fingerprint), kFingerprintSlot);
  }
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    ctx.send(reqs[2 * size_t(p) + 1], p, &all[size_t(me)], sizeof(Fingerprint), kFingerprintSlot);
  }
  ctx.set_algorithm("fingerprint exchange (GRADWIRE_DEBUG=DETAIL)");
  ctx.wait_all(reqs);
  ctx.set_algorithm("");
  if (auto msg = compare_fingerprints(all)) {
    raise(ErrorCode::Mismatch, "{}: {}", ctx.what(), *msg);
  }
}

}  // namespace gradwire
