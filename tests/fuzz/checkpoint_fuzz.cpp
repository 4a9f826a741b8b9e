// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: checkpoint files as read from disk (src/checkpoint/format.h).
// The first byte picks the parser (even: MANIFEST text, odd: shard); what
// decodes must re-encode to the same bytes (the formats are canonical), so
// a parser that accepts more than the writer produces is caught too.
#include <string>

#include "checkpoint/format.h"
#include "gradwire/error.h"
#include "fuzz_target.h"

using namespace gradwire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string what = "fuzz input";
  try {
    if (data[0] % 2 == 0) {
      const checkpoint::Manifest m = checkpoint::decode_manifest(bytes, what);
      GW_FUZZ_CHECK(m.world_size >= 1 && m.shards.size() == size_t(m.world_size));
      GW_FUZZ_CHECK(checkpoint::decode_manifest(checkpoint::encode_manifest(m), what).shards.size() ==
                    m.shards.size());
    } else {
      const auto entries = checkpoint::decode_shard(bytes, what);
      GW_FUZZ_CHECK(checkpoint::encode_shard(entries) == bytes);
    }
  } catch (const Error& e) {
    GW_FUZZ_CHECK(e.code() == ErrorCode::Protocol);
  }
  return 0;
}
