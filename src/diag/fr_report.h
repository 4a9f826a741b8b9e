// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Reading flight-recorder dumps back (Note [flight recorder dump format])
// and diagnosing a hang or failure from every rank's dump: which rank is
// behind and at which sequence number, which rank the others waited for,
// and whether ranks called different collectives, counts or dtypes. Pure:
// used by tools/gradwire-fr and tested without ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diag/flight_recorder.h"

namespace gradwire::fr {

struct DumpEntry {
  int comm = 0;
  uint32_t seq = 0;
  std::string op, dtype, redop;
  uint64_t count = 0;
  int root = -1;
  State state = State::Queued;
  int64_t queued_us = 0, started_us = 0, done_us = 0;
};

struct DumpComm {
  int id = 0;
  std::string name;
  int rank = 0, size = 0;
  int64_t error_seq = -1;
  std::string error;
};

struct Dump {
  std::string path;
  int rank = 0, world_size = 0, pid = 0;
  std::string host, version, reason;
  int64_t dumped_us = 0;
  std::vector<DumpComm> comms;
  std::vector<DumpEntry> entries;
};

// Parses one dump; throws gradwire::Error (Protocol) naming `path` and what
// is wrong. A dump is untrusted input (any file in GRADWIRE_FR_DIR): it is
// capped at kMaxDumpBytes, kMaxJsonDepth levels of nesting and
// kMaxJsonValues values, and every number is range-checked before use.
constexpr size_t kMaxDumpBytes = size_t(48) << 20;
constexpr int kMaxJsonDepth = 64;
// A dump holds 12 values per collective, and GRADWIRE_FR_SIZE is at most
// kMaxRecorderEntries: every dump the library writes fits, and a forged one
// costs at most a few hundred MB to refuse (issue 17: 20 M values cost 4 GB).
constexpr size_t kMaxJsonValues = 2'000'000;
constexpr size_t kMaxRecorderEntries = 131072;
constexpr int kMaxDumpWorldSize = 1 << 20;
Dump parse_dump(const std::string& json, const std::string& path = "<dump>");

struct Diagnosis {
  std::vector<std::string> findings;  // one line each, most important first
  std::vector<int> suspects;          // world ranks, most likely first
  std::string text;                   // the full human-readable report
};
Diagnosis diagnose(const std::vector<Dump>& dumps);

}  // namespace gradwire::fr
