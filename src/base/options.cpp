// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "gradwire/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/env_values.h"
#include "base/raise.h"

extern char** environ;

namespace gradwire {

namespace {

// Every GRADWIRE_* variable gradwire reads. A variable with this prefix
// that is not listed is an error: a typo must not be silently ignored.
constexpr std::string_view kKnownVariables[] = {
    "GRADWIRE_TIMEOUT_S",       "GRADWIRE_OFI_PROVIDER", "GRADWIRE_OFI_IFACE",
    "GRADWIRE_SMALL_MSG_BYTES", "GRADWIRE_SEGMENT_BYTES", "GRADWIRE_OFI_REGISTER",
    "GRADWIRE_LOG_LEVEL",       "GRADWIRE_STORE_DIR",    "GRADWIRE_STORE_PORT",
    "GRADWIRE_CPU_KERNELS",     "GRADWIRE_FR_SIZE",      "GRADWIRE_FR_DIR",
    "GRADWIRE_DEBUG",           "GRADWIRE_ASYNC_ERROR_HANDLING",
    "GRADWIRE_STALL_WARN_S",    "GRADWIRE_STALL_SHUTDOWN_S",  // read by the Reducer
    "GRADWIRE_TRACE_DIR",       "GRADWIRE_HIERARCHICAL", "GRADWIRE_HOST_ID",
    "GRADWIRE_DEVICE_PATH",     "GRADWIRE_LIBFABRIC",  // transport/ofi/library.cpp
    "GRADWIRE_JOB_SECRET",      "GRADWIRE_REQUIRE_SECRET", "GRADWIRE_STORE_BIND",  // bootstrap
    "GRADWIRE_LIVENESS_S",      // bootstrap/socket.cpp (Note [store liveness])
    "GRADWIRE_HEALTHCHECK_INJECT",  // read by tools/gradwire-healthcheck (a test hook)
    "GRADWIRE_SHM_RECLAIM",         // base/shm_reclaim.cpp
    "GRADWIRE_SHM_COLLECTIVES",     "GRADWIRE_P2P_SINGLE_COPY",
    "GRADWIRE_ELASTIC_SETTLE_S",    // elastic/group.cpp
    "GRADWIRE_ASYMMETRIC_FENCES",   // base/asymmetric_fence.cpp
    "GRADWIRE_ETCD_ENDPOINTS",      "GRADWIRE_ETCD_PREFIX", "GRADWIRE_ETCD_TTL_S",  // bootstrap
    "GRADWIRE_ELASTIC_MIN_SIZE",    "GRADWIRE_ELASTIC_MAX_SIZE",  // elastic/group.cpp
    "GRADWIRE_HOST_LOST_S",         // runtime/watchdog.cpp (Note [heartbeats between hosts])
    "GRADWIRE_STRAGGLER_WINDOW_S",  "GRADWIRE_STRAGGLER_THRESHOLD",
    "GRADWIRE_SPIN_US",
};

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The most collectives the flight recorder may keep: the largest dump
// tools/gradwire-fr reads (kMaxRecorderEntries in diag/fr_report.h).
constexpr size_t kMaxFlightRecorderSize = 131072;

// Variables whose value is a number or a choice: set but empty is an error
// (Note [strict environment values]).
constexpr const char* kNumbersAndChoices[] = {
    "GRADWIRE_TIMEOUT_S",     "GRADWIRE_SMALL_MSG_BYTES",      "GRADWIRE_SEGMENT_BYTES",
    "GRADWIRE_OFI_REGISTER",  "GRADWIRE_HIERARCHICAL",         "GRADWIRE_DEVICE_PATH",
    "GRADWIRE_FR_SIZE",       "GRADWIRE_DEBUG",                "GRADWIRE_ASYNC_ERROR_HANDLING",
    "GRADWIRE_STALL_WARN_S",  "GRADWIRE_STALL_SHUTDOWN_S",     "GRADWIRE_LOG_LEVEL",
    "GRADWIRE_CPU_KERNELS",   "GRADWIRE_STORE_PORT",           "GRADWIRE_REQUIRE_SECRET",
    "GRADWIRE_SHM_RECLAIM",   "GRADWIRE_SHM_COLLECTIVES",      "GRADWIRE_P2P_SINGLE_COPY",
    "GRADWIRE_ELASTIC_SETTLE_S", "GRADWIRE_LIVENESS_S",      "GRADWIRE_ASYMMETRIC_FENCES",
    "GRADWIRE_ETCD_TTL_S",    "GRADWIRE_ELASTIC_MIN_SIZE",     "GRADWIRE_ELASTIC_MAX_SIZE",
    "GRADWIRE_HOST_LOST_S",   "GRADWIRE_STRAGGLER_WINDOW_S",   "GRADWIRE_STRAGGLER_THRESHOLD",
    "GRADWIRE_SPIN_US"};

const char* value_of(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

Options Options::with_env_overrides() const {
  Options o = *this;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (!kv.starts_with("GRADWIRE_")) continue;
    std::string_view name = kv.substr(0, kv.find('='));
    if (std::find(std::begin(kKnownVariables), std::end(kKnownVariables), name) !=
        std::end(kKnownVariables)) {
      continue;
    }
    std::string_view best;
    size_t best_d = SIZE_MAX;
    for (auto known : kKnownVariables) {
      size_t d = edit_distance(name, known);
      if (d < best_d) best_d = d, best = known;
    }
    std::string hint = best_d <= 4 ? fmt::format("; did you mean {}?", best) : "";
    std::string all;
    for (auto known : kKnownVariables) all += (all.empty() ? "" : ", ") + std::string(known);
    raise(ErrorCode::InvalidArgument, "environment variable {} is not one gradwire knows{} (known: {})",
          name, hint, all);
  }
  // Note [strict environment values]: numbers and choices may not be empty.
  for (const char* name : kNumbersAndChoices) (void)env::required_value(name);
  if (const char* v = value_of("GRADWIRE_TIMEOUT_S")) {
    o.timeout = env::parse_seconds("GRADWIRE_TIMEOUT_S", v, /*zero_allowed=*/false);
  }
  // Read by the Reducer (reducer/stall.cpp), checked here so that a bad
  // value fails at start-up even in a job that never builds a Reducer.
  for (const char* name : {"GRADWIRE_STALL_WARN_S", "GRADWIRE_STALL_SHUTDOWN_S",
                           "GRADWIRE_ELASTIC_SETTLE_S", "GRADWIRE_HOST_LOST_S"}) {
    if (const char* v = value_of(name)) (void)env::parse_seconds(name, v, /*zero_allowed=*/true);
  }
  // Read by elastic/group.cpp and bootstrap/etcd_rendezvous.cpp, which
  // check their ranges; here only that they are whole numbers.
  for (const char* name : {"GRADWIRE_ELASTIC_MIN_SIZE", "GRADWIRE_ELASTIC_MAX_SIZE",
                           "GRADWIRE_ETCD_TTL_S"}) {
    if (const char* v = value_of(name)) {
      int n = 0;
      const std::string_view t(v);
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
      if (ec != std::errc() || end != t.data() + t.size() || n < 1) {
        raise(ErrorCode::InvalidArgument, "{}='{}' is not a whole number >= 1", name, v);
      }
    }
  }
  // Read by base/shm_reclaim.cpp (Note [reclaiming dead regions]).
  if (const char* v = value_of("GRADWIRE_SHM_RECLAIM"); v && std::string_view(v) != "0" &&
                                                         std::string_view(v) != "1") {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_SHM_RECLAIM='{}' must be '0' or '1'", v);
  }
  if (const char* v = value_of("GRADWIRE_OFI_PROVIDER")) o.transport.provider = v;
  if (const char* v = value_of("GRADWIRE_OFI_IFACE")) o.transport.iface = v;
  if (const char* v = value_of("GRADWIRE_SMALL_MSG_BYTES"))
    o.collectives.small_message_bytes = env::parse_bytes("GRADWIRE_SMALL_MSG_BYTES", v);
  if (const char* v = value_of("GRADWIRE_SEGMENT_BYTES"))
    o.collectives.segment_bytes = env::parse_bytes("GRADWIRE_SEGMENT_BYTES", v);
  if (const char* v = value_of("GRADWIRE_OFI_REGISTER")) {
    std::string_view s(v);
    using Registration = Options::Transport::Registration;
    if (s == "always") o.transport.registration = Registration::Always;
    else if (s == "auto") o.transport.registration = Registration::Auto;
    else raise(ErrorCode::InvalidArgument, "GRADWIRE_OFI_REGISTER='{}' must be 'auto' or 'always'", v);
  }
  if (const char* v = value_of("GRADWIRE_LOG_LEVEL")) o.diagnostics.log_level = v;
  if (const char* v = value_of("GRADWIRE_HIERARCHICAL")) {
    std::string_view s(v);
    if (s == "auto") o.collectives.hierarchical = true;
    else if (s == "off") o.collectives.hierarchical = false;
    else raise(ErrorCode::InvalidArgument, "GRADWIRE_HIERARCHICAL='{}' must be 'auto' or 'off'", v);
  }
  if (const char* v = value_of("GRADWIRE_SHM_COLLECTIVES")) {
    std::string_view s(v);
    if (s == "auto") o.collectives.shm_collectives = true;
    else if (s == "off") o.collectives.shm_collectives = false;
    else raise(ErrorCode::InvalidArgument, "GRADWIRE_SHM_COLLECTIVES='{}' must be 'auto' or 'off'", v);
  }
  if (const char* v = value_of("GRADWIRE_P2P_SINGLE_COPY")) {
    std::string_view s(v);
    if (s == "auto") o.collectives.p2p_single_copy = true;
    else if (s == "off") o.collectives.p2p_single_copy = false;
    else raise(ErrorCode::InvalidArgument, "GRADWIRE_P2P_SINGLE_COPY='{}' must be 'auto' or 'off'", v);
  }
  // Read by base/asymmetric_fence.cpp once per process (Note [asymmetric
  // fences]); checked here so that a typo is an error, not a silent auto.
  if (const char* v = value_of("GRADWIRE_ASYMMETRIC_FENCES")) {
    std::string_view s(v);
    if (s != "auto" && s != "off") {
      raise(ErrorCode::InvalidArgument, "GRADWIRE_ASYMMETRIC_FENCES='{}' must be 'auto' or 'off'", v);
    }
  }
  if (const char* v = value_of("GRADWIRE_HOST_ID")) o.transport.host_id = v;
  if (const char* v = value_of("GRADWIRE_DEVICE_PATH")) {
    using Path = Options::Device::Path;
    std::string_view s(v);
    if (s == "auto") o.device.path = Path::Auto;
    else if (s == "nccl") o.device.path = Path::Nccl;
    else if (s == "staged") o.device.path = Path::Staged;
    else raise(ErrorCode::InvalidArgument,
               "GRADWIRE_DEVICE_PATH='{}' must be 'auto', 'nccl' or 'staged'", v);
  }
  if (const char* v = value_of("GRADWIRE_FR_SIZE")) {
    errno = 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0 || v[0] == '-' || n > kMaxFlightRecorderSize) {
      raise(ErrorCode::InvalidArgument,
            "GRADWIRE_FR_SIZE='{}' is not a number of collectives in [0, {}] (0 = off)", v,
            kMaxFlightRecorderSize);
    }
    o.diagnostics.flight_recorder_size = size_t(n);
  }
  if (const char* v = value_of("GRADWIRE_FR_DIR")) o.diagnostics.flight_recorder_dir = v;
  if (const char* v = value_of("GRADWIRE_TRACE_DIR")) o.diagnostics.trace_dir = v;
  if (const char* v = value_of("GRADWIRE_DEBUG")) {
    std::string s(v);
    for (auto& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    if (s == "DETAIL") o.diagnostics.debug_detail = true;
    else if (s == "OFF" || s == "INFO") o.diagnostics.debug_detail = false;
    else raise(ErrorCode::InvalidArgument, "GRADWIRE_DEBUG='{}' must be OFF, INFO or DETAIL", v);
  }
  if (const char* v = value_of("GRADWIRE_STRAGGLER_WINDOW_S")) {
    o.diagnostics.straggler_window =
        env::parse_seconds("GRADWIRE_STRAGGLER_WINDOW_S", v, /*zero_allowed=*/true);
  }
  if (const char* v = value_of("GRADWIRE_STRAGGLER_THRESHOLD")) {
    errno = 0;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !std::isfinite(x) || !(x > 0) || x > 1) {
      raise(ErrorCode::InvalidArgument,
            "GRADWIRE_STRAGGLER_THRESHOLD='{}' is not a fraction in (0, 1] (of the window the "
            "other ranks spent waiting for a rank, e.g. 0.25)", v);
    }
    o.diagnostics.straggler_threshold = x;
  }
  if (const char* v = value_of("GRADWIRE_SPIN_US")) {
    // Note [the spin budget] in collectives/context.cpp.
    const std::string_view s(v);
    constexpr int64_t kMax = Options::Collectives::kMaxSpinBudget.count();
    int64_t us = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), us);
    if (s == "auto") {
      o.collectives.spin_budget.reset();
    } else if (ec == std::errc() && end == s.data() + s.size() && us >= 0 && us <= kMax) {
      o.collectives.spin_budget = std::chrono::microseconds(us);
    } else {
      raise(ErrorCode::InvalidArgument,
            "GRADWIRE_SPIN_US='{}' must be 'auto' or a whole number of microseconds in [0, {}] "
            "(how long a waiting rank busy-polls before it gives its core away; 0: never)",
            v, kMax);
    }
  }
  if (const char* v = value_of("GRADWIRE_ASYNC_ERROR_HANDLING")) {
    std::string_view s(v);
    if (s == "abort") o.diagnostics.abort_process_on_error = true;
    else if (s == "raise") o.diagnostics.abort_process_on_error = false;
    else raise(ErrorCode::InvalidArgument,
               "GRADWIRE_ASYNC_ERROR_HANDLING='{}' must be 'raise' or 'abort'", v);
  }
  return o;
}

void Options::validate() const {
  if (timeout.count() <= 0) {
    raise(ErrorCode::InvalidArgument, "Options::timeout must be positive (got {} ms)", timeout.count());
  }
  // Enum values arrive from casts (Python, C callers).
  if (uint8_t(device.path) > uint8_t(Device::Path::Staged)) {
    raise(ErrorCode::InvalidArgument,
          "Options::device.path / GRADWIRE_DEVICE_PATH = {} is not a device path (Auto, Nccl, "
          "Staged)", int(device.path));
  }
  if (uint8_t(transport.registration) > uint8_t(Transport::Registration::Always)) {
    raise(ErrorCode::InvalidArgument,
          "Options::transport.registration / GRADWIRE_OFI_REGISTER = {} is not a registration "
          "mode (Auto, Always)", int(transport.registration));
  }
  const size_t segment_bytes = collectives.segment_bytes;
  const size_t small_message_bytes = collectives.small_message_bytes;
  const size_t flight_recorder_size = diagnostics.flight_recorder_size;
  const std::string& log_level = diagnostics.log_level;
  const std::string& provider = transport.provider;
  if (segment_bytes < 4096 || segment_bytes > (size_t(1) << 30)) {
    raise(ErrorCode::InvalidArgument,
          "Options::collectives.segment_bytes / GRADWIRE_SEGMENT_BYTES = {} is out of range [4096, 1G]",
          segment_bytes);
  }
  if (flight_recorder_size > kMaxFlightRecorderSize) {
    raise(ErrorCode::InvalidArgument,
          "Options::diagnostics.flight_recorder_size / GRADWIRE_FR_SIZE = {} is larger than {}, the most a "
          "dump gradwire-fr reads can hold", flight_recorder_size, kMaxFlightRecorderSize);
  }
  if (small_message_bytes > (size_t(1) << 30)) {
    raise(ErrorCode::InvalidArgument,
          "Options::collectives.small_message_bytes / GRADWIRE_SMALL_MSG_BYTES = {} is larger than 1G",
          small_message_bytes);
  }
  static constexpr std::string_view kLevels[] = {"trace", "debug", "info", "warn",
                                                 "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), log_level) == std::end(kLevels)) {
    raise(ErrorCode::InvalidArgument,
          "Options::diagnostics.log_level / GRADWIRE_LOG_LEVEL = '{}' is not one of trace, debug, info, warn, "
          "error, critical, off",
          log_level);
  }
  const auto window = diagnostics.straggler_window;
  if (window.count() < 0 || (window.count() > 0 && window < std::chrono::seconds(3))) {
    raise(ErrorCode::InvalidArgument,
          "Options::diagnostics.straggler_window / GRADWIRE_STRAGGLER_WINDOW_S = {:.3f} s must be "
          "0 (off) or at least 3 s: a rank is named only after three one-second rounds",
          std::chrono::duration<double>(window).count());
  }
  const double threshold = diagnostics.straggler_threshold;
  if (!std::isfinite(threshold) || !(threshold > 0) || threshold > 1) {
    raise(ErrorCode::InvalidArgument,
          "Options::diagnostics.straggler_threshold / GRADWIRE_STRAGGLER_THRESHOLD = {} is not a "
          "fraction in (0, 1]", threshold);
  }
  if (const auto& spin = collectives.spin_budget;
      spin && (spin->count() < 0 || *spin > Collectives::kMaxSpinBudget)) {
    raise(ErrorCode::InvalidArgument,
          "Options::collectives.spin_budget / GRADWIRE_SPIN_US = {} us is out of range [0, {}] "
          "(0: never spin; unset: auto)", spin->count(), Collectives::kMaxSpinBudget.count());
  }
  for (char c : provider) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == ';' || c == '_' || c == '-')) {
      raise(ErrorCode::InvalidArgument,
            "Options::transport.provider / GRADWIRE_OFI_PROVIDER = '{}' is not a libfabric provider name "
            "(e.g. shm, tcp;ofi_rxm, efa)",
            provider);
    }
  }
}

std::string_view to_string(Options::Device::Path path) {
  switch (path) {
    case Options::Device::Path::Auto: return "auto";
    case Options::Device::Path::Nccl: return "nccl";
    case Options::Device::Path::Staged: return "staged";
  }
  return "?";
}

std::string_view to_string(Options::Transport::Registration registration) {
  return registration == Options::Transport::Registration::Always ? "always" : "auto";
}

}  // namespace gradwire
