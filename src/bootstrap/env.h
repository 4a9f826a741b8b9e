// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Strict environment-variable reading for the launchers. Internal to
// src/bootstrap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gradwire::bootstrap::env {

// The variable's value, or nullopt when unset (set-but-empty is "").
std::optional<std::string> get(const char* name);

// A whole-string decimal integer that fits in int: no sign other than a
// leading '-', no spaces, no "0x", no trailing junk.
std::optional<int> parse_int(const std::string& text);

// parse_int() of variable `name`'s value `text`, in [lo, hi]:
// InvalidArgument naming the variable and `expected` (the range in words).
int parse_int_in(const char* name, const std::string& text, int lo, int hi,
                 const std::string& expected);

// The same for a whole-string unsigned decimal that fits in 64 bits (no
// sign at all): Slurm's job and step ids.
std::optional<uint64_t> parse_u64(const std::string& text);

// GRADWIRE_JOB_SECRET, checked (store_auth.h); "" when unset.
std::string job_secret();

// GRADWIRE_STORE_BIND, checked to be an address; "" when unset.
std::string store_bind();

}  // namespace gradwire::bootstrap::env
