// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "checkpoint/format.h"

#include <openssl/evp.h>

#include <charconv>
#include <cstring>
#include <memory>

#include "base/le_bytes.h"
#include "base/raise.h"

namespace gradwire::checkpoint {

namespace {

constexpr std::string_view kShardMagic = "GWSHARD1";
constexpr uint32_t kShardVersion = 1;
constexpr std::string_view kManifestHeader = "gradwire-checkpoint 1";

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

bool unhex(std::string_view text, std::string& out) {
  if (text.size() % 2) return false;
  out.clear();
  out.reserve(text.size() / 2);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(char(hi * 16 + lo));
  }
  return true;
}

template <typename T>
bool number(std::string_view text, T& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// Space-separated fields; a trailing space ends with an empty field (a
// meta record of an empty value, e.g. the optimizer kind of a job whose
// optimizer is not the engine's, is "meta <hex key> ").
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  if (line.empty()) return out;
  size_t at = 0;
  while (out.size() < 8) {
    const size_t space = line.find(' ', at);
    const size_t end = space == std::string_view::npos ? line.size() : space;
    out.push_back(line.substr(at, end - at));
    if (space == std::string_view::npos) break;
    at = end + 1;
  }
  return out;
}

bool is_sha256(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string encode_shard(const std::map<std::string, std::string>& entries) {
  size_t total = kShardMagic.size() + 8;
  for (const auto& [name, data] : entries) total += 12 + name.size() + data.size();
  std::string out;
  out.reserve(total);
  out.append(kShardMagic);
  put_le(out, kShardVersion, 4);
  put_le(out, entries.size(), 4);
  for (const auto& [name, data] : entries) {
    if (name.empty() || name.size() > kMaxEntryName) {
      raise(ErrorCode::InvalidArgument, "checkpoint entry name '{}' must have 1 to {} bytes",
            name.substr(0, 64), kMaxEntryName);
    }
    put_le(out, name.size(), 4);
    out.append(name);
    put_le(out, data.size(), 8);
    out.append(data);
  }
  return out;
}

std::map<std::string, std::string> decode_shard(std::string_view bytes, const std::string& what) {
  LeReader r(bytes, what + ": corrupt");
  if (r.take(kShardMagic.size(), "the magic") != kShardMagic) {
    raise(ErrorCode::Protocol, "{}: not a gradwire checkpoint shard (wrong magic)", what);
  }
  const uint64_t version = r.u(4, "the format version");
  if (version != kShardVersion) {
    raise(ErrorCode::Protocol, "{}: shard format version {}, this gradwire reads {}", what,
          version, kShardVersion);
  }
  const uint64_t count = r.u(4, "the entry count");
  // Every entry takes at least 12 bytes: a count the file cannot hold is
  // corruption, caught before anything is allocated for it.
  if (count > r.left() / 12) {
    raise(ErrorCode::Protocol, "{}: corrupt: {} entries cannot fit in {} bytes", what, count,
          r.left());
  }
  std::map<std::string, std::string> entries;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t name_len = r.u(4, "an entry name length");
    if (name_len == 0 || name_len > kMaxEntryName) {
      raise(ErrorCode::Protocol, "{}: corrupt: entry {} has a name of {} bytes (1 to {})", what,
            k, name_len, kMaxEntryName);
    }
    std::string name(r.take(name_len, "an entry name"));
    const uint64_t data_len = r.u(8, "an entry length");
    std::string_view data = r.take(data_len, "an entry's data");
    // The writer emits names in increasing order: anything else (a
    // duplicate included) is not a file it wrote.
    if (!entries.empty() && !(entries.rbegin()->first < name)) {
      raise(ErrorCode::Protocol, "{}: corrupt: entry {} is out of order or repeated", what, k);
    }
    entries.emplace_hint(entries.end(), std::move(name), std::string(data));
  }
  if (r.left() != 0) {
    raise(ErrorCode::Protocol, "{}: corrupt: {} bytes after the last entry", what, r.left());
  }
  return entries;
}

std::string encode_manifest(const Manifest& m) {
  std::string out;
  out += std::string(kManifestHeader) + "\n";
  out += "version " + m.version + "\n";
  out += "step " + std::to_string(m.step) + "\n";
  out += "world_size " + std::to_string(m.world_size) + "\n";
  for (const auto& [k, v] : m.meta) out += "meta " + hex(k) + " " + hex(v) + "\n";
  for (size_t r = 0; r < m.shards.size(); ++r) {
    out += "shard " + std::to_string(r) + " " + std::to_string(m.shards[r].bytes) + " " +
           m.shards[r].sha256 + "\n";
  }
  out += "end\n";
  return out;
}

Manifest decode_manifest(std::string_view text, const std::string& what) {
  if (text.size() > kMaxManifestBytes) {
    raise(ErrorCode::Protocol, "{}: {} bytes, more than a manifest may have ({})", what,
          text.size(), kMaxManifestBytes);
  }
  Manifest m;
  bool header = false, have_version = false, have_step = false, ended = false;
  m.world_size = -1;
  size_t line_no = 0;
  auto bad = [&](std::string_view why) {
    raise(ErrorCode::Protocol, "{}: line {}: {}", what, line_no, why);
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) bad("the last line is not terminated (truncated file)");
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    if (ended) bad("content after 'end'");
    if (!header) {
      if (line != kManifestHeader) bad("not a gradwire checkpoint manifest (version 1)");
      header = true;
      continue;
    }
    const auto f = fields(line);
    if (f.empty()) bad("empty line");
    if (f[0] == "end" && f.size() == 1) {
      ended = true;
    } else if (f[0] == "version" && f.size() == 2) {
      m.version = std::string(f[1]);
      have_version = true;
    } else if (f[0] == "step" && f.size() == 2) {
      if (!number(f[1], m.step)) bad("step is not a number");
      have_step = true;
    } else if (f[0] == "world_size" && f.size() == 2) {
      if (!number(f[1], m.world_size) || m.world_size < 1 || m.world_size > kMaxWorldSize) {
        bad("world_size is not a number from 1 to 2^20");
      }
    } else if (f[0] == "meta" && f.size() == 3) {
      std::string k, v;
      if (!unhex(f[1], k) || !unhex(f[2], v)) bad("meta fields are not lowercase hex");
      m.meta[k] = v;
    } else if (f[0] == "shard" && f.size() == 4) {
      size_t rank = 0;
      ShardRecord rec;
      if (!number(f[1], rank) || rank != m.shards.size()) bad("shard ranks out of order");
      if (m.world_size < 0 || rank >= size_t(m.world_size)) bad("more shards than world_size");
      if (!number(f[2], rec.bytes)) bad("shard size is not a number");
      if (!is_sha256(f[3])) bad("shard checksum is not a SHA-256 in lowercase hex");
      rec.sha256 = std::string(f[3]);
      m.shards.push_back(std::move(rec));
    } else {
      bad("unknown record");
    }
  }
  if (!header) raise(ErrorCode::Protocol, "{}: empty file", what);
  if (!ended) raise(ErrorCode::Protocol, "{}: no 'end' line (truncated file)", what);
  if (!have_version || !have_step || m.world_size < 1) {
    raise(ErrorCode::Protocol, "{}: version, step or world_size missing", what);
  }
  if (m.shards.size() != size_t(m.world_size)) {
    raise(ErrorCode::Protocol, "{}: {} shard records for world_size {}", what, m.shards.size(),
          m.world_size);
  }
  return m;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    raise(ErrorCode::Internal, "SHA-256 failed (OpenSSL EVP_Digest)");
  }
  return hex(std::string_view(reinterpret_cast<const char*>(digest), len));
}

}  // namespace gradwire::checkpoint
