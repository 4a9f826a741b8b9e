// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The pure half of the debug-mode fingerprints: building, decoding and
// comparing them (the exchange between ranks: fingerprint_exchange.cpp).
// It needs no communicator or transport, so tests/fuzz/ builds it on its own.
#include "diag/fingerprint.h"

#include <cstring>

#include "base/raise.h"

namespace gradwire {

namespace {

std::string call_of(const Fingerprint& f) {
  if (f.magic != Fingerprint{}.magic) return "something that is not a gradwire fingerprint";
  const CollectiveCall c = CollectiveCall::from_wire(f.op, f.dtype, f.redop, f.root, f.count);
  const std::string d = c.describe();
  return fmt::format("{} #{}{}", c.name(), f.seq,
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

Fingerprint make_fingerprint(uint32_t seq, const CollectiveCall& info) {
  Fingerprint f;
  f.seq = seq;
  f.op = uint8_t(info.op);
  f.dtype = uint8_t(info.dtype);
  f.redop = info.has_redop() ? uint8_t(info.redop) : 0;
  f.has_redop = info.has_redop();
  f.root = info.root;
  f.count = info.count;
  return f;
}

const char* decode_fingerprint(const void* bytes, size_t n, Fingerprint* out) {
  if (n != sizeof(Fingerprint)) return "wrong size";
  Fingerprint f;
  std::memcpy(&f, bytes, sizeof(f));
  if (f.magic != Fingerprint{}.magic) return "wrong magic";
  if (f.op >= kCollectiveOps) return "unknown collective";
  bool dtype_ok = false;
  for (DataType d : kAllDataTypes) dtype_ok |= f.dtype == uint8_t(d);
  if (!dtype_ok) return "unknown dtype";
  if (f.has_redop > 1) return "reduce-op flag is neither 0 nor 1";
  bool redop_ok = false;
  for (ReduceOp r : kAllReduceOps) redop_ok |= f.redop == uint8_t(r);
  if (!redop_ok) return "unknown reduce op";
  if (f.root < -1) return "negative root";
  *out = f;
  return nullptr;
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

}  // namespace gradwire
