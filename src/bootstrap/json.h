// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A small JSON reader for the answers of etcd's JSON gateway (etcd_store.cpp).
// Pure and bounds-checked: its input comes from the network (Note [states
// are untrusted input] applies alike), so it is fuzzed (tests/fuzz/
// etcd_json_fuzz.cpp). Numbers are kept as their text: etcd writes its
// 64-bit integers as strings anyway ("revision":"12"), and as_int() reads
// either form. Internal to src/bootstrap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradwire::bootstrap::json {

struct Member;

struct Value {
  enum class Type : uint8_t { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  std::string text;  // a String's decoded text, a Number's digits
  std::vector<Value> items;                           // Array
  // Object, in document order. Not std::pair<std::string, Value>: a pair
  // of an incomplete type does not compile with clang (the fuzz build).
  std::vector<Member> members;

  // The member `key` of an Object (the first one), or null.
  const Value* find(std::string_view key) const;
  bool is_string() const { return type == Type::String; }
};

struct Member {
  std::string key;
  Value value;
};

// The largest document and the deepest nesting parse() accepts: etcd's
// answers here are a few kilobytes (values are capped by etcd itself at
// 1.5 MiB, in base64).
inline constexpr size_t kMaxDocumentBytes = 64u << 20;
inline constexpr int kMaxDepth = 32;

// The whole of `text` as one JSON value (white space around it allowed);
// nullopt with `*error` saying what is wrong and at which offset.
std::optional<Value> parse(std::string_view text, std::string* error);

// A Number, or a String of decimal digits (etcd's int64 fields), as int64;
// nullopt for anything else, out of range included.
std::optional<int64_t> as_int(const Value* v);
// A Bool; proto3's JSON leaves false out, so a missing one is false.
bool as_bool(const Value* v);

// Standard base64 (RFC 4648, with padding): etcd's gateway carries keys and
// values as base64 strings.
std::string base64_encode(std::string_view bytes);
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace gradwire::bootstrap::json
