// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The timeline (GRADWIRE_TRACE_DIR): a Chrome-trace JSON file per rank,
// gradwire-trace-rank<R>.json, viewable in chrome://tracing or Perfetto,
// with each collective's queued and running phases (one track per
// communicator) and each Reducer step's buckets (ready, launch, done); and
// a run manifest, gradwire-manifest.json, written by rank 0 at start-up
// (git commit, versions, provider, options). Off by default; when on, each
// event costs a lock and an append, so it is for diagnosis runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "gradwire/options.h"

namespace gradwire::trace {

namespace detail {
extern std::atomic<bool> g_enabled;
}
// Set once, by the first (world) communicator. Returns whether tracing is on.
void configure(const std::string& dir, int rank);
// Inline: every collective asks (Note [the lean inline path] in
// runtime/communicator.cpp).
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
// Microseconds on the steady clock (one timebase for every event of a host).
int64_t now_us();
int64_t to_us(std::chrono::steady_clock::time_point t);

// A span [start_us, end_us] on track `track` ("world", "reducer").
// `args` is a JSON object body without braces ("\"count\": 4") or "".
void span(const std::string& track, const std::string& name, const std::string& category,
          int64_t start_us, int64_t end_us, const std::string& args = "");
// `args` as span()'s.
void instant(const std::string& track, const std::string& name, int64_t at_us,
             const std::string& args = "");
// Writes the file (again, with everything so far); at communicator
// destruction and when the flight recorder dumps.
void flush();

// The run manifest (rank 0 only; no-op unless tracing is on).
void write_manifest(const Options& options, int world_size, const std::string& provider,
                    const std::string& bootstrap);

}  // namespace gradwire::trace
