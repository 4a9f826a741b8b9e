// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What the engine and the state code share about plans: fingerprints.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "base/state_io.h"
#include "gradwire/sharded.h"

namespace gradwire {

// Little-endian fields hashed with FNV-1a 64 (base/state_io.h).
class Fnv1a {
 public:
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(char((v >> (8 * i)) & 0xff));
  }
  void add_double(double d) {
    uint64_t v;
    std::memcpy(&v, &d, 8);
    add(v);
  }
  uint64_t value() const { return compress::fnv1a64(bytes_); }

 private:
  std::string bytes_;
};

namespace sharded {

// The whole plan and the options that change what is communicated: what
// every rank compares at construction (Note [one plan on every rank] in
// engine.cpp).
uint64_t plan_fingerprint(const ShardPlan& plan, const ShardedOptions& options);

}  // namespace sharded
}  // namespace gradwire
