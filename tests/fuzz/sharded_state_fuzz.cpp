// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: the sharded engine's state as read back from a checkpoint
// shard (ShardedState::decode, src/sharded/state_format.cpp). What decodes
// must re-encode to the same bytes (the format is canonical), and its
// records must keep the promises load_state() relies on: sorted, not
// overlapping, non-empty, each holding exactly `count` elements of every
// kind.
#include <string>

#include "gradwire/error.h"
#include "gradwire/sharded.h"
#include "fuzz_target.h"

using namespace gradwire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ShardedState s = ShardedState::decode(bytes, "fuzz input");
    GW_FUZZ_CHECK(s.rank >= 0 && s.rank < s.world && s.stage >= 0 && s.stage <= 3);
    for (size_t k = 0; k < s.records.size(); ++k) {
      const auto& r = s.records[k];
      GW_FUZZ_CHECK(r.count > 0 && r.parameter < s.dtypes.size());
      GW_FUZZ_CHECK(r.values.size() == r.count * element_size(s.dtypes[r.parameter]));
      GW_FUZZ_CHECK(r.master.size() == r.count && r.state.size() == s.state_names.size());
      for (const auto& st : r.state) GW_FUZZ_CHECK(st.size() == r.count);
      if (k > 0) {
        const auto& p = s.records[k - 1];
        GW_FUZZ_CHECK(p.parameter < r.parameter ||
                      (p.parameter == r.parameter && p.offset + p.count <= r.offset));
      }
    }
    GW_FUZZ_CHECK(s.encode() == bytes);
  } catch (const Error& e) {
    GW_FUZZ_CHECK(e.code() == ErrorCode::Protocol);
  }
  return 0;
}
