// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "runtime/job.h"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "bootstrap/store.h"
#include "base/raise.h"
#include "diag/flight_recorder.h"
#include "base/logging.h"

namespace gradwire {

namespace job {

namespace {

constexpr const char* kFailureKey = "gradwire/failure";

// Leaked: watchdogs of leaked (stuck) communicators may outlive statics.
struct State {
  std::mutex mu;
  std::string to_publish;  // our first failure, "<rank>\x1f<code>\x1f<reason>"
  int my_rank = -1;
  bool published = false;
  std::atomic<bool> pending{false};  // to_publish set, not yet published
  std::atomic<bool> failed{false};
  std::string remote;  // written once, before `failed` is set
  std::atomic<int> code{int(ErrorCode::Aborted)};  // likewise
  std::string status, published_status;  // stall inspector
  std::vector<std::string> others;        // indexed by rank
  std::atomic<int> world_size{0};
  std::vector<int> exited;  // Note [a dead peer on this host]: world ranks seen gone
  std::vector<int> suspected;  // Note [heartbeats between hosts]: silent world ranks
  std::optional<LostRank> lost;  // Note [a lost rank on another host]
};
State& state() {
  static State* s = new State();
  return *s;
}

}  // namespace

void begin_world(int world_size) {
  // A new world is a new job: its first failure is news again. A process
  // that heard of another rank's failure stays failed (it should exit).
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.world_size = world_size;
  s.to_publish.clear();
  s.published = false;
  s.pending.store(false);
  s.status.clear();
  s.published_status.clear();
  s.others.clear();
  s.lost.reset();
}

void report_failure(int world_rank, const std::string& reason, ErrorCode code) {
  bootstrap::cap_store_linger(bootstrap::kFailedJobLinger);  // Note [a failed job does not linger]
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.to_publish.empty() || s.failed.load()) return;  // first failure only
  s.my_rank = world_rank;
  s.to_publish = fmt::format("{}\x1f{}\x1f{}", world_rank, int(code), reason);
  s.pending.store(true);
}

bool pending() { return state().pending.load(); }

void reset_for_new_world() {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.to_publish.clear();
  s.published = false;
  s.my_rank = -1;
  s.pending.store(false);
  s.code.store(int(ErrorCode::Aborted));
  s.status.clear();
  s.published_status.clear();
  s.others.clear();
  s.exited.clear();
  s.suspected.clear();
  s.lost.reset();
  s.failed.store(false, std::memory_order_release);
}

void fail_locally(int world_rank, const std::string& reason, ErrorCode code) {
  bootstrap::cap_store_linger(bootstrap::kFailedJobLinger);
  auto& s = state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.failed.load()) return;
    s.remote = reason;
    s.code.store(int(code));
    s.failed.store(true, std::memory_order_release);
    if (s.to_publish.empty()) {
      s.my_rank = world_rank;
      s.to_publish = fmt::format("{}\x1f{}\x1f{}", world_rank, int(code), reason);
      s.pending.store(true);
    }
  }
  fr::Recorder::instance().dump(reason);
}

void set_status(const std::string& status) {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.status = status;
}

std::vector<std::string> statuses() {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.others;
}

namespace {

// While this rank reports a stall: publish its status, read everyone's.
void exchange_status(bootstrap::Store& store, int my_rank, int world_size) {
  auto& s = state();
  std::string mine, published;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    mine = s.status;
    published = s.published_status;
  }
  if (mine.empty() && published.empty()) return;
  const std::string key = fmt::format("gradwire/status/{}", my_rank);
  if (mine != published) store.set(key, mine);
  std::vector<std::string> others(static_cast<size_t>(world_size));
  if (!mine.empty()) {
    for (int r = 0; r < world_size; ++r) {
      if (r == my_rank) continue;
      if (auto v = store.try_get(fmt::format("gradwire/status/{}", r))) others[size_t(r)] = *v;
    }
  }
  std::lock_guard<std::mutex> lk(s.mu);
  s.published_status = mine;
  s.others = std::move(others);
}

// A whole decimal int, or nothing. from_chars, not atoi: atoi's result on
// an out-of-range number is undefined.
std::optional<int> integer(std::string_view t) {
  int x = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return x;
}

}  // namespace

std::optional<FailureReport> parse_failure_report(std::string_view value) {
  const size_t sep = value.find('\x1f');
  const size_t sep2 = sep == std::string_view::npos ? sep : value.find('\x1f', sep + 1);
  if (sep2 == std::string_view::npos) return std::nullopt;
  const auto rank = integer(value.substr(0, sep));
  const auto code = integer(value.substr(sep + 1, sep2 - sep - 1));
  if (!rank || !code || *rank < 0) return std::nullopt;
  FailureReport r;
  r.rank = *rank;
  const bool known = *code >= 0 && *code <= int(ErrorCode::Unauthenticated);
  r.code = known ? ErrorCode(*code) : ErrorCode::Aborted;
  r.reason = std::string(value.substr(sep2 + 1, kMaxFailureReasonBytes));
  return r;
}

const std::atomic<bool>& failed_flag() { return state().failed; }
const std::string& failure_reason() { return state().remote; }
const std::atomic<int>& failure_code() { return state().code; }
const Interrupt& interrupt() {
  static const Interrupt i{state().failed, state().remote, state().code};
  return i;
}

namespace {

// Another rank's failure is known here: fail this process's collectives
// with it (Note [interrupting a collective]). False if this process had
// failed first itself.
bool heard(int my_rank, std::string remote, ErrorCode code, const Options& options) {
  bootstrap::cap_store_linger(bootstrap::kFailedJobLinger);
  auto& s = state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.failed.load() || !s.to_publish.empty()) return false;
    s.remote = std::move(remote);
    s.code.store(int(code));
    s.failed.store(true, std::memory_order_release);
  }
  log().error("rank {}: {}", my_rank, s.remote);
  fr::Recorder::instance().dump(s.remote);
  if (options.diagnostics.abort_process_on_error) {
    log().critical("rank {}: aborting the process (GRADWIRE_ASYNC_ERROR_HANDLING=abort)",
                   my_rank);
    std::abort();
  }
  return true;
}

}  // namespace

void peer_exited(int my_world_rank, int exited_rank, const std::string& reason) {
  {
    auto& s = state();
    std::lock_guard<std::mutex> lk(s.mu);
    if (exited_rank >= 0) s.exited.push_back(exited_rank);
  }
  log().error("{}", reason);
  fail_locally(my_world_rank, reason, ErrorCode::PeerLost);
}

void peers_suspected(int my_world_rank, const std::vector<int>& ranks, const std::string& reason) {
  {
    auto& s = state();
    std::lock_guard<std::mutex> lk(s.mu);
    for (int r : ranks) {
      if (r >= 0) s.suspected.push_back(r);
    }
  }
  log().error("{}", reason);
  fail_locally(my_world_rank, reason, ErrorCode::PeerLost);
}

std::vector<int> suspected_ranks() {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.suspected;
}

std::vector<int> exited_ranks() {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.exited;
}

void store_host_lost(int my_rank, const std::string& why, const Options& options) {
  heard(my_rank,
        fmt::format("rank 0 is gone: the job's store, which rank 0 serves, closed its "
                    "connections ({}); likely cause: rank 0 died or exited, or its host or "
                    "the network to it went down",
                    why),
        ErrorCode::PeerLost, options);
}

// One round with the store: publish our failure (once), then look for
// another rank's. Returns false when the store is gone (rank 0 exited).
bool exchange(bootstrap::Store& store, int my_rank, const Options& options, std::string* lost) {
  auto& s = state();
  std::string mine;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.published && !s.to_publish.empty()) mine = s.to_publish;
  }
  try {
    if (!mine.empty()) {
      if (!store.try_get(kFailureKey)) store.set(kFailureKey, mine);  // the first report stays
      std::lock_guard<std::mutex> lk(s.mu);
      s.published = true;
      s.pending.store(false);
      return true;
    }
    exchange_status(store, my_rank, s.world_size);
    // Note [a lost rank on another host]: read, not acted on here; the
    // watchdog fails a collective that is waiting for it.
    if (auto w = store.try_get(kLostKey)) {
      if (auto lost = parse_lost_rank(*w); lost && lost->rank != my_rank) {
        std::lock_guard<std::mutex> lk(s.mu);
        if (!s.lost) s.lost = std::move(lost);
      }
    }
    auto v = store.try_get(kFailureKey);
    if (!v) return true;
    const auto report = parse_failure_report(*v);
    if (!report) {
      log().debug("rank {}: ignoring a malformed {} value ({} bytes)", my_rank, kFailureKey,
                  v->size());
      return true;
    }
    if (report->rank == my_rank) return true;
    heard(my_rank, fmt::format("rank {} reported a failure: {}", report->rank, report->reason),
          report->code, options);
    return true;
  } catch (const Error& e) {
    // Rank 0 (which serves the TCP store) exited or is unreachable: nobody
    // can be told any more; stop trying.
    log().debug("rank {}: watchdog stops using the store: {}", my_rank, e.what());
    if (lost && e.code() == ErrorCode::PeerLost) *lost = e.message();
    return false;
  }
}

std::string encode_lost_rank(const LostRank& lost) {
  return fmt::format("{}\x1f{}\x1f{}", lost.rank, lost.pid, lost.host);
}

std::optional<LostRank> parse_lost_rank(std::string_view value) {
  const size_t a = value.find('\x1f');
  const size_t b = a == std::string_view::npos ? a : value.find('\x1f', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  const auto rank = integer(value.substr(0, a));
  const auto pid = integer(value.substr(a + 1, b - a - 1));
  if (!rank || !pid || *rank < 0 || *pid < 0) return std::nullopt;
  LostRank l;
  l.rank = *rank;
  l.pid = *pid;
  // Goes into error messages: printable ASCII, at most a host name's length.
  for (char c : value.substr(b + 1, 255)) l.host += (c >= 0x20 && c <= 0x7e) ? c : '?';
  return l;
}

std::optional<LostRank> lost_rank() {
  auto& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.lost;
}

}  // namespace job

}  // namespace gradwire
