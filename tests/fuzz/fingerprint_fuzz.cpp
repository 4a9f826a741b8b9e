// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: debug-mode collective fingerprints as peers send them
// (24 bytes each, src/diag/fingerprint.h): decode every record of the
// input, then compare those that decode, as check_fingerprint does.
#include <algorithm>
#include <string>
#include <vector>

#include "diag/fingerprint.h"
#include "fuzz_target.h"

using namespace gradwire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Fingerprint> all;
  for (size_t off = 0; off < size; off += sizeof(Fingerprint)) {
    const size_t n = std::min(sizeof(Fingerprint), size - off);
    Fingerprint f;
    if (decode_fingerprint(data + off, n, &f) == nullptr) {
      GW_FUZZ_CHECK(n == sizeof(Fingerprint));
      all.push_back(f);
    }
  }
  if (!all.empty()) {
    auto msg = compare_fingerprints(all);
    if (all.size() == 1) GW_FUZZ_CHECK(!msg.has_value());
    if (msg) GW_FUZZ_CHECK(msg->find("rank 0 called") != std::string::npos);
  }
  return 0;
}
