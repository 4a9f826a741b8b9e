// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/state_io.h"

#include <cstring>

#include "base/raise.h"

namespace gradwire::compress {

// Note [states are untrusted input]: a state comes back from a checkpoint
// file that may be truncated, corrupted or written by another version. The
// checksum catches damage; the length checks make sure that even a state
// with a valid checksum but a hostile layout can only produce an error.

namespace {
constexpr char kMagic[4] = {'G', 'W', 'S', 'T'};
}

uint64_t fnv1a64(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

StateWriter::StateWriter(std::string_view kind) {
  raw(kMagic, 4);
  const uint32_t v = kStateVersion;
  raw(&v, 4);
  str(kind);
}

void StateWriter::str(std::string_view s) {
  const uint32_t n = uint32_t(s.size());
  raw(&n, 4);
  raw(s.data(), s.size());
}

void StateWriter::bytes(std::string_view name, const void* data, size_t size) {
  str(name);
  const uint64_t n = size;
  raw(&n, 8);
  if (size) raw(data, size);
}

std::string StateWriter::finish() {
  const uint64_t sum = fnv1a64(out_);
  raw(&sum, 8);
  return std::move(out_);
}

StateReader::StateReader(std::string_view state, std::string_view kind, std::string what)
    : what_(std::move(what)) {
  if (state.size() < 4 + 4 + 4 + 8 || std::memcmp(state.data(), kMagic, 4) != 0) {
    fail(state.size() < 20 ? "it is truncated (shorter than a header)"
                           : "it is not a gradwire state (bad magic)");
  }
  uint64_t stored;
  std::memcpy(&stored, state.data() + state.size() - 8, 8);
  data_ = state.substr(0, state.size() - 8);
  if (fnv1a64(data_) != stored) fail("its checksum does not match: the state is corrupt or truncated");
  pos_ = 4;
  const uint32_t version = take_u32();
  if (version != kStateVersion) {
    fail(fmt::format("it has format version {}, this gradwire reads version {}", version,
                     kStateVersion));
  }
  const uint32_t n = take_u32();
  const std::string_view got = take(n, "kind");
  if (got != kind) fail(fmt::format("it is a {} state, not a {} state", got, kind));
}

void StateReader::fail(std::string_view problem) const {
  raise(ErrorCode::InvalidArgument, "{}: cannot load the state: {}", what_, problem);
}

std::string_view StateReader::take(size_t n, std::string_view what) {
  if (n > data_.size() - pos_) {
    fail(fmt::format("field {} needs {} bytes but only {} remain", what, n, data_.size() - pos_));
  }
  std::string_view out = data_.substr(pos_, n);
  pos_ += n;
  return out;
}

uint32_t StateReader::take_u32() {
  uint32_t v;
  std::memcpy(&v, take(4, "length").data(), 4);
  return v;
}

uint64_t StateReader::take_u64() {
  uint64_t v;
  std::memcpy(&v, take(8, "length").data(), 8);
  return v;
}

std::string_view StateReader::bytes(std::string_view name) {
  if (pos_ == data_.size()) fail(fmt::format("field '{}' is missing", name));
  const uint32_t n = take_u32();
  const std::string_view got = take(n, "name");
  if (got != name) fail(fmt::format("expected field '{}' but found '{}'", name, got));
  const uint64_t len = take_u64();
  if (len > data_.size()) fail(fmt::format("field '{}' claims {} bytes", name, len));
  return take(size_t(len), name);
}

size_t StateReader::peek_size(std::string_view name) {
  const size_t saved = pos_;
  const size_t n = bytes(name).size();
  pos_ = saved;
  return n;
}

uint64_t StateReader::u64(std::string_view name) {
  const auto b = bytes(name);
  if (b.size() != 8) fail(fmt::format("field '{}' has {} bytes, not 8", name, b.size()));
  uint64_t v;
  std::memcpy(&v, b.data(), 8);
  return v;
}

float StateReader::f32(std::string_view name) {
  const auto b = bytes(name);
  if (b.size() != 4) fail(fmt::format("field '{}' has {} bytes, not 4", name, b.size()));
  float v;
  std::memcpy(&v, b.data(), 4);
  return v;
}

std::vector<float> StateReader::floats(std::string_view name, size_t count) {
  const auto b = bytes(name);
  if (b.size() != count * sizeof(float)) {
    fail(fmt::format("field '{}' holds {} floats, this object has {} (a different model or "
                     "world size?)", name, b.size() / sizeof(float), count));
  }
  std::vector<float> v(count);
  if (count) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

void StateReader::done() {
  if (pos_ != data_.size()) fail(fmt::format("{} unexpected bytes follow the last field", data_.size() - pos_));
}

}  // namespace gradwire::compress
