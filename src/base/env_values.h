// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [strict environment values]: a GRADWIRE_* variable that holds a
// number or a choice is parsed strictly and checked when a communicator is
// created (Options::with_env_overrides), whether or not the feature that
// reads it is used: no trailing text, no wrap-around (a byte count that
// overflows 64 bits is refused, not reduced modulo 2^64), no NaN or
// infinity, and a variable that is set but empty is an error rather than
// the default (an empty value is almost always a launcher script's typo).
// Free-text variables (directories, interface, host id) treat empty as unset.
#pragma once

#include <chrono>
#include <cstddef>

namespace gradwire::env {

// The value of `name`, or nullptr if unset. Set but empty: InvalidArgument.
const char* required_value(const char* name);

// "1048576", "64K", "1M", "2G" (binary units) -> bytes; InvalidArgument
// naming `name` for anything else, including values past 2^64 - 1.
size_t parse_bytes(const char* name, const char* value);

// Seconds as a decimal number ("300", "0.5") -> milliseconds, rounded.
// Refuses negative, NaN, infinite and > 1e7 s; 0 only if `zero_allowed`
// (where 0 means "off").
std::chrono::milliseconds parse_seconds(const char* name, const char* value, bool zero_allowed);

}  // namespace gradwire::env
