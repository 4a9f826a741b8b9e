// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The byte format of save_state()/load_state() of the compression objects:
//
//   "GWST" | u32 version | str kind | field* | u64 checksum
//   field = str name | u64 length | bytes        str = u32 length | bytes
//
// little-endian, checksum = FNV-1a 64 over everything before it. Fields are
// read back in the order they were written, each by name, so a state of a
// different kind, version or layout is refused with a message that says
// which field differs; every length is bounds-checked before it is used (a
// state is input from disk: Note [states are untrusted input]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gradwire::compress {

inline constexpr uint32_t kStateVersion = 1;

class StateWriter {
 public:
  explicit StateWriter(std::string_view kind);
  void bytes(std::string_view name, const void* data, size_t size);
  void u64(std::string_view name, uint64_t v) { bytes(name, &v, sizeof v); }
  void f32(std::string_view name, float v) { bytes(name, &v, sizeof v); }
  void floats(std::string_view name, const std::vector<float>& v) {
    bytes(name, v.data(), v.size() * sizeof(float));
  }
  // The finished state (appends the checksum; the writer is spent).
  std::string finish();

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void str(std::string_view s);
  std::string out_;
};

class StateReader {
 public:
  // Checks magic, version, checksum and kind; throws InvalidArgument naming
  // `what` (e.g. "rank 1: OneBitAdam::load_state") and the problem.
  StateReader(std::string_view state, std::string_view kind, std::string what);
  std::string_view bytes(std::string_view name);
  uint64_t u64(std::string_view name);
  float f32(std::string_view name);
  // Exactly `count` floats, else InvalidArgument naming the field and both sizes.
  std::vector<float> floats(std::string_view name, size_t count);
  // The byte length of the next field, which must be `name` (not consumed).
  size_t peek_size(std::string_view name);
  // Every field was read (trailing fields mean a different layout).
  void done();

 private:
  [[noreturn]] void fail(std::string_view problem) const;
  uint64_t take_u64();
  uint32_t take_u32();
  std::string_view take(size_t n, std::string_view what);

  std::string_view data_;  // without the checksum
  size_t pos_ = 0;
  std::string what_;
};

uint64_t fnv1a64(std::string_view data);

}  // namespace gradwire::compress
