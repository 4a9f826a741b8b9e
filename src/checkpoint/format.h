// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The two checkpoint file formats, as pure functions from bytes to values
// (Note [checkpoint layout] in checkpoint.cpp). Parsers are bounds-checked
// and length-capped: a file from disk is input like any peer's frame, and a
// malformed one is a Protocol error naming `what` (the file), never a crash
// or an allocation sized by the file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gradwire::checkpoint {

// A shard: "GWSHARD1", u32 format version, u32 entry count, then per entry
// u32 name length, name, u64 data length, data (little-endian).
std::string encode_shard(const std::map<std::string, std::string>& entries);
std::map<std::string, std::string> decode_shard(std::string_view bytes, const std::string& what);

struct ShardRecord {
  uint64_t bytes = 0;
  std::string sha256;  // 64 lowercase hex digits
};

struct Manifest {
  uint64_t step = 0;
  int world_size = 0;
  std::string version;  // gradwire's, of the writer
  std::map<std::string, std::string> meta;
  std::vector<ShardRecord> shards;  // by rank
};

// A text file, one record per line:
//   gradwire-checkpoint 1
//   version <gradwire version>
//   step <n>
//   world_size <n>
//   meta <hex key> <hex value>      (any number)
//   shard <rank> <bytes> <sha256>   (world_size lines, ranks 0..n-1 in order)
//   end
// The "end" line proves the file is complete.
std::string encode_manifest(const Manifest& m);
Manifest decode_manifest(std::string_view text, const std::string& what);

// Caps on what a parser accepts.
inline constexpr size_t kMaxManifestBytes = 16u << 20;
inline constexpr int kMaxWorldSize = 1 << 20;
inline constexpr size_t kMaxEntryName = 4096;

std::string sha256_hex(std::string_view bytes);

}  // namespace gradwire::checkpoint
