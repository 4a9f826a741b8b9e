// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "diag/trace.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "base/logging.h"
#include "gradwire/version.h"

#ifndef GRADWIRE_GIT_COMMIT
#define GRADWIRE_GIT_COMMIT "unknown"
#endif

namespace gradwire::trace {

namespace {

// Leaked: engine threads of leaked communicators may still trace at exit.
struct State {
  std::mutex mu;
  bool configured = false;
  std::string dir;
  int rank = 0;
  std::vector<std::string> events;
  std::map<std::string, int> tracks;  // name -> tid
};
State& state() {
  static State* s = new State();
  return *s;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

int tid(State& s, const std::string& track) {
  auto it = s.tracks.find(track);
  if (it != s.tracks.end()) return it->second;
  const int id = int(s.tracks.size()) + 1;
  s.tracks[track] = id;
  s.events.push_back(fmt::format(
      "{{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": {}, \"tid\": {}, "
      "\"args\": {{\"name\": \"{}\"}}}}", s.rank, id, esc(track)));
  return id;
}

bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    log().error("timeline: cannot write {}: {}", path, std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

void configure(const std::string& dir, int rank) {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.configured) return;
  s.configured = true;
  if (dir.empty()) return;
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    log().error("timeline: cannot create {}: {}; tracing is off", dir, std::strerror(errno));
    return;
  }
  s.dir = dir;
  s.rank = rank;
  s.events.push_back(fmt::format(
      "{{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": {}, \"args\": {{\"name\": \"rank {}\"}}}}",
      rank, rank));
  detail::g_enabled.store(true);
}

std::atomic<bool> detail::g_enabled{false};

int64_t to_us(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
int64_t now_us() { return to_us(std::chrono::steady_clock::now()); }

void span(const std::string& track, const std::string& name, const std::string& category,
          int64_t start_us, int64_t end_us, const std::string& args) {
  if (!enabled()) return;
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  const int t = tid(s, track);
  s.events.push_back(fmt::format(
      "{{\"name\": \"{}\", \"cat\": \"{}\", \"ph\": \"X\", \"pid\": {}, \"tid\": {}, \"ts\": {}, "
      "\"dur\": {}{}}}",
      esc(name), esc(category), s.rank, t, start_us, std::max<int64_t>(0, end_us - start_us),
      args.empty() ? "" : ", \"args\": {" + args + "}"));
}

void instant(const std::string& track, const std::string& name, int64_t at_us,
             const std::string& args) {
  if (!enabled()) return;
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  const int t = tid(s, track);
  s.events.push_back(fmt::format(
      "{{\"name\": \"{}\", \"ph\": \"i\", \"s\": \"t\", \"pid\": {}, \"tid\": {}, \"ts\": {}{}}}",
      esc(name), s.rank, t, at_us, args.empty() ? "" : ", \"args\": {" + args + "}"));
}

void flush() {
  if (!enabled()) return;
  auto& s = state();
  std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  std::string path;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    for (size_t i = 0; i < s.events.size(); ++i) text += (i ? ",\n" : "") + s.events[i];
    path = fmt::format("{}/gradwire-trace-rank{}.json", s.dir, s.rank);
  }
  text += "\n]}\n";
  write_file(path, text);
}

void write_manifest(const Options& o, int world_size, const std::string& provider,
                    const std::string& bootstrap) {
  if (!enabled()) return;
  auto& s = state();
  if (s.rank != 0) return;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string text = fmt::format(
      "{{\"gradwire_version\": \"{}\", \"git_commit\": \"{}\", \"libfabric_version\": \"{}\", "
      "\"provider\": \"{}\", \"bootstrap\": \"{}\", \"world_size\": {}, \"rank0_host\": \"{}\", "
      "\"started_unix_s\": {},\n \"options\": {{\"timeout_s\": {:.3f}, \"provider\": \"{}\", "
      "\"iface\": \"{}\", \"small_message_bytes\": {}, \"segment_bytes\": {}, "
      "\"always_register\": {}, \"log_level\": \"{}\", \"flight_recorder_size\": {}, "
      "\"flight_recorder_dir\": \"{}\", \"debug_detail\": {}, \"abort_process_on_error\": {}, "
      "\"trace_dir\": \"{}\"}}}}\n",
      esc(version()), esc(GRADWIRE_GIT_COMMIT), esc(libfabric_version()),
      esc(provider), esc(bootstrap), world_size, esc(host), long(time(nullptr)),
      std::chrono::duration<double>(o.timeout).count(), esc(o.transport.provider), esc(o.transport.iface),
      o.collectives.small_message_bytes, o.collectives.segment_bytes, to_string(o.transport.registration) == "always", esc(o.diagnostics.log_level),
      o.diagnostics.flight_recorder_size, esc(o.diagnostics.flight_recorder_dir), o.diagnostics.debug_detail,
      o.diagnostics.abort_process_on_error, esc(o.diagnostics.trace_dir));
  write_file(s.dir + "/gradwire-manifest.json", text);
}

}  // namespace gradwire::trace
