// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Strict environment-variable reading for the launchers. Internal to
// src/bootstrap.
#pragma once

#include <optional>
#include <string>

namespace gradwire::bootstrap::env {

// The variable's value, or nullopt when unset (set-but-empty is "").
std::optional<std::string> get(const char* name);

// A whole-string decimal integer that fits in int: no sign other than a
// leading '-', no spaces, no "0x", no trailing junk.
std::optional<int> parse_int(const std::string& text);

}  // namespace gradwire::bootstrap::env
