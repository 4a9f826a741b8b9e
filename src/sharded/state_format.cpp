// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// ShardedState's byte format, a pure function both ways. Every length is
// checked against what is left before it is used or allocated, and
// decode() accepts only what encode() writes (canonical: sorted,
// non-overlapping, non-empty records, no trailing bytes), so a state read
// from disk is input like a peer's frame (Note [states are untrusted
// input]): a malformed one is a Protocol error naming the file, never a
// crash or an allocation sized by the file.
//
//   "GWSHST01" | u32 version | u64 fingerprint | u32 stage | u32 world |
//   u32 rank | str optimizer | u32 n, str state name * n | u64 step |
//   f32 loss scale | u64 good steps | u64 p, u8 dtype * p | u64 records |
//   record = u64 parameter | u64 offset | u64 count | values (count x the
//            parameter's dtype) | master (count x f32) | state (count x f32) * n
//            | error feedback (version 2: only a state that has some)
//   error feedback = u64 layout | u64 buckets | (u64 n | n x f32) * buckets
//   str = u32 length (<= 256) | bytes; little-endian. Version 1 (before
//   gradient compression) had no error feedback and is still read.
#include <cstring>

#include "base/le_bytes.h"
#include "base/raise.h"
#include "gradwire/sharded.h"

namespace gradwire {

namespace {

constexpr std::string_view kMagic = "GWSHST01";
constexpr uint32_t kVersion = 2;
constexpr size_t kMaxName = 256;
constexpr uint32_t kMaxWorld = 1u << 20;

void put_str(std::string& out, const std::string& s) {
  put_le(out, s.size(), 4);
  out.append(s);
}
void put_bytes(std::string& out, const void* p, size_t n) {
  if (n) out.append(static_cast<const char*>(p), n);
}

bool known_float(uint8_t d) {
  const auto dt = DataType(d);
  return d < std::size(kAllDataTypes) && is_floating(dt);
}

// The state's fields over LeReader, with its bounded strings.
class Reader : public LeReader {
 public:
  Reader(std::string_view bytes, const std::string& what)
      : LeReader(bytes, what + ": not a valid sharded-engine state") {}
  std::string str(const char* field) {
    const uint64_t n = u(4, field);
    if (n > kMaxName) fail(fmt::format("{} has {} bytes (at most {})", field, n, kMaxName));
    return std::string(take(n, field));
  }
};

}  // namespace

std::string ShardedState::encode() const {
  std::string out;
  // The lowest version that holds the state: a state without error
  // feedback is written as version 1 (one encoding per state, and older
  // readers keep reading it).
  const bool with_error_feedback = error_feedback_layout != 0 || !error_feedback.empty();
  out.append(kMagic);
  put_le(out, with_error_feedback ? kVersion : 1, 4);
  put_le(out, fingerprint, 8);
  put_le(out, uint64_t(stage), 4);
  put_le(out, uint64_t(world), 4);
  put_le(out, uint64_t(rank), 4);
  put_str(out, optimizer);
  put_le(out, state_names.size(), 4);
  for (const auto& n : state_names) put_str(out, n);
  put_le(out, step, 8);
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &loss_scale, 4);
  put_le(out, scale_bits, 4);
  put_le(out, good_steps, 8);
  put_le(out, dtypes.size(), 8);
  for (DataType d : dtypes) put_le(out, uint8_t(d), 1);
  put_le(out, records.size(), 8);
  for (const Record& r : records) {
    put_le(out, r.parameter, 8);
    put_le(out, r.offset, 8);
    put_le(out, r.count, 8);
    put_bytes(out, r.values.data(), r.values.size());
    put_bytes(out, r.master.data(), r.master.size() * 4);
    for (const auto& s : r.state) put_bytes(out, s.data(), s.size() * 4);
  }
  if (!with_error_feedback) return out;
  put_le(out, error_feedback_layout, 8);
  put_le(out, error_feedback.size(), 8);
  for (const auto& e : error_feedback) {
    put_le(out, e.size(), 8);
    put_bytes(out, e.data(), e.size() * 4);
  }
  return out;
}

ShardedState ShardedState::decode(std::string_view bytes, const std::string& what) {
  Reader r(bytes, what);
  if (r.take(kMagic.size(), "the magic") != kMagic) r.fail("wrong magic");
  const uint64_t version = r.u(4, "the version");
  if (version < 1 || version > kVersion) {
    r.fail(fmt::format("format version {}, this gradwire reads 1 to {}", version, kVersion));
  }
  ShardedState s;
  s.fingerprint = r.u(8, "the fingerprint");
  const uint64_t stage = r.u(4, "the stage"), world = r.u(4, "the world size"),
                 rank = r.u(4, "the rank");
  if (stage > 3) r.fail(fmt::format("stage {}", stage));
  if (world < 1 || world > kMaxWorld || rank >= world) {
    r.fail(fmt::format("rank {} of world size {}", rank, world));
  }
  s.stage = int(stage);
  s.world = int(world);
  s.rank = int(rank);
  s.optimizer = r.str("the optimizer kind");
  const uint64_t names = r.u(4, "the state name count");
  if (names > r.left() / 4) r.fail(fmt::format("{} state names cannot fit", names));
  for (uint64_t k = 0; k < names; ++k) s.state_names.push_back(r.str("a state name"));
  s.step = r.u(8, "the step");
  const uint32_t scale_bits = uint32_t(r.u(4, "the loss scale"));
  std::memcpy(&s.loss_scale, &scale_bits, 4);
  s.good_steps = r.u(8, "the good-step count");
  const uint64_t params = r.u(8, "the parameter count");
  if (params > r.left()) r.fail(fmt::format("{} parameters cannot fit", params));
  for (uint64_t k = 0; k < params; ++k) {
    const uint64_t d = r.u(1, "a dtype");
    if (!known_float(uint8_t(d))) r.fail(fmt::format("parameter {} has dtype code {}", k, d));
    s.dtypes.push_back(DataType(d));
  }
  const uint64_t records = r.u(8, "the record count");
  if (records > r.left() / 24) r.fail(fmt::format("{} records cannot fit", records));
  s.records.reserve(size_t(records));
  for (uint64_t k = 0; k < records; ++k) {
    Record rec;
    rec.parameter = size_t(r.u(8, "a record's parameter"));
    rec.offset = size_t(r.u(8, "a record's offset"));
    rec.count = size_t(r.u(8, "a record's count"));
    if (rec.parameter >= params) {
      r.fail(fmt::format("record {} names parameter {} of {}", k, rec.parameter, params));
    }
    if (rec.count == 0 || rec.offset > UINT64_MAX - rec.count) {
      r.fail(fmt::format("record {} has elements [{}, +{})", k, rec.offset, rec.count));
    }
    if (!s.records.empty()) {
      const Record& prev = s.records.back();
      if (prev.parameter > rec.parameter ||
          (prev.parameter == rec.parameter && prev.offset + prev.count > rec.offset)) {
        r.fail(fmt::format("record {} is out of order or overlaps the one before", k));
      }
    }
    const size_t es = element_size(s.dtypes[rec.parameter]);
    const size_t per_element = es + 4 * (1 + s.state_names.size());
    if (rec.count > r.left() / per_element) {
      r.fail(fmt::format("record {} of {} elements cannot fit in {} bytes", k, rec.count, r.left()));
    }
    const std::string_view values = r.take(rec.count * es, "values");
    rec.values.resize(values.size());
    std::memcpy(rec.values.data(), values.data(), values.size());
    auto floats = [&](std::vector<float>& out, const char* field) {
      const std::string_view f = r.take(rec.count * 4, field);
      out.resize(rec.count);
      std::memcpy(out.data(), f.data(), f.size());
    };
    floats(rec.master, "master weights");
    rec.state.resize(s.state_names.size());
    for (auto& st : rec.state) floats(st, "optimizer state");
    s.records.push_back(std::move(rec));
  }
  if (version >= 2) {
    s.error_feedback_layout = r.u(8, "the error-feedback layout");
    const uint64_t buckets = r.u(8, "the error-feedback bucket count");
    if (buckets > r.left() / 8) r.fail(fmt::format("{} error-feedback buffers cannot fit", buckets));
    // encode() writes version 1 for a state without error feedback.
    if (s.error_feedback_layout == 0 && buckets == 0) r.fail("an empty error-feedback part");
    for (uint64_t k = 0; k < buckets; ++k) {
      const uint64_t n = r.u(8, "an error-feedback buffer's length");
      if (n > r.left() / 4) r.fail(fmt::format("error-feedback buffer {} of {} floats cannot fit", k, n));
      const std::string_view f = r.take(n * 4, "error feedback");
      std::vector<float> e(n);
      if (n) std::memcpy(e.data(), f.data(), f.size());
      s.error_feedback.push_back(std::move(e));
    }
  }
  if (r.left() != 0) r.fail(fmt::format("{} bytes after the last record", r.left()));
  return s;
}

}  // namespace gradwire
