// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: flight-recorder dumps as gradwire-fr reads them
// (src/diag/fr_report.h): parse, then diagnose the dump on its own and
// next to a second copy of itself.
#include <string>
#include <vector>

#include "diag/fr_report.h"
#include "fuzz_target.h"
#include "gradwire/error.h"

using namespace gradwire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  try {
    const fr::Dump d = fr::parse_dump(json, "fuzz.json");
    GW_FUZZ_CHECK(d.world_size >= 1 && d.rank >= 0 && d.rank < d.world_size);
    const fr::Diagnosis one = fr::diagnose({d});
    GW_FUZZ_CHECK(!one.text.empty());
    fr::Dump other = d;
    other.rank = (d.rank + 1) % d.world_size;
    (void)fr::diagnose({d, other});
  } catch (const Error& e) {
    GW_FUZZ_CHECK(e.code() == ErrorCode::Protocol);
  }
  return 0;
}
