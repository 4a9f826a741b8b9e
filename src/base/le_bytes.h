// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Little-endian fixed-width fields, written to and read from byte strings,
// for the on-disk formats (checkpoint shards, the sharded engine's state).
// They are read from files that may be truncated, damaged or hostile (Note
// [states are untrusted input]), so every read is checked against what is
// left and fails with a Protocol error that names the file and the field,
// never with a read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/raise.h"

namespace gradwire {

// Appends the low `width` bytes of `v`, least significant first.
inline void put_le(std::string& out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

class LeReader {
 public:
  // Errors read "<context>: <problem>"; `context` names the file and what it
  // should be (e.g. "rank 1's shard: not a valid sharded-engine state").
  LeReader(std::string_view bytes, std::string context)
      : rest_(bytes), context_(std::move(context)) {}

  // An unsigned field of `width` bytes (1 to 8).
  uint64_t u(int width, const char* field) {
    need(uint64_t(width), field);
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) v |= uint64_t(uint8_t(rest_[size_t(i)])) << (8 * i);
    rest_.remove_prefix(size_t(width));
    return v;
  }
  // The next `n` bytes (a view into the input).
  std::string_view take(uint64_t n, const char* field) {
    need(n, field);
    std::string_view v = rest_.substr(0, size_t(n));
    rest_.remove_prefix(size_t(n));
    return v;
  }
  size_t left() const { return rest_.size(); }
  [[noreturn]] void fail(std::string_view problem) const {
    raise(ErrorCode::Protocol, "{}: {}", context_, problem);
  }

 private:
  void need(uint64_t n, const char* field) const {
    if (n > rest_.size()) {
      fail(fmt::format("truncated: {} needs {} bytes, {} left", field, n, rest_.size()));
    }
  }
  std::string_view rest_;
  std::string context_;
};

}  // namespace gradwire
