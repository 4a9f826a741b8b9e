// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [strict environment values] in base/env_values.h.
#include "base/env_values.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "base/raise.h"

namespace gradwire::env {

const char* required_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return nullptr;
  if (*v == '\0') {
    raise(ErrorCode::InvalidArgument,
          "environment variable {} is set but empty; give it a value or unset it for the default",
          name);
  }
  return v;
}

size_t parse_bytes(const char* name, const char* value) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(value, &end, 10);
  if (end == value || errno != 0 || value[0] == '-' || value[0] == '+' || value[0] == ' ') {
    raise(ErrorCode::InvalidArgument, "{}='{}' is not a byte count (expected e.g. 65536, 64K, 1M)",
          name, value);
  }
  const std::string_view suffix(end);
  unsigned long long mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ull << 30;
  else if (!suffix.empty()) {
    raise(ErrorCode::InvalidArgument, "{}='{}' has an unknown unit '{}' (expected K, M or G)",
          name, value, suffix);
  }
  if (n > ULLONG_MAX / mult || n * mult > SIZE_MAX) {
    raise(ErrorCode::InvalidArgument, "{}='{}' is more bytes than a 64-bit count holds", name,
          value);
  }
  return size_t(n * mult);
}

std::chrono::milliseconds parse_seconds(const char* name, const char* value, bool zero_allowed) {
  errno = 0;
  char* end = nullptr;
  const double s = std::strtod(value, &end);
  const bool ok = end != value && *end == '\0' && errno == 0 && std::isfinite(s) && s <= 1e7 &&
                  (zero_allowed ? s >= 0 : s > 0);
  if (!ok) {
    raise(ErrorCode::InvalidArgument, "{}='{}' is not {} (e.g. 300 or 0.5{})", name, value,
          zero_allowed ? "a number of seconds >= 0" : "a positive number of seconds",
          zero_allowed ? "; 0 turns it off" : "");
  }
  const long long ms = std::llround(s * 1000.0);
  return std::chrono::milliseconds(zero_allowed || ms > 0 ? ms : 1);
}

}  // namespace gradwire::env
