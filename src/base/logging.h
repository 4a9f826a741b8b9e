// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace gradwire {

// The library's logger ("gradwire"), writing to stderr. Its level comes from
// Options::log_level / GRADWIRE_LOG_LEVEL; messages are prefixed with the
// rank once set_log_rank() has been called.
spdlog::logger& log();
// Throws InvalidArgument for an unknown level name.
void set_log_level(const std::string& level);
void set_log_rank(int rank, int world);

}  // namespace gradwire
