// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "diag/flight_recorder.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

#include "base/logging.h"
#include "diag/trace.h"
#include "gradwire/version.h"

namespace gradwire::fr {

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
        else out += c;
    }
  }
  return out;
}

namespace {

constexpr std::string_view kStates[] = {"queued", "started", "completed", "failed"};

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

}  // namespace

std::string_view to_string(State s) { return kStates[std::min<size_t>(size_t(s), 3)]; }
State parse_state(std::string_view s) {
  for (size_t i = 0; i < 4; ++i)
    if (kStates[i] == s) return State(i);
  return State::Queued;
}

// Note [coarse clock]: CLOCK_REALTIME_COARSE costs a few ns where a precise
// clock read costs 25-40 ns in a VM, and three reads per collective would
// be most of the recorder's cost. Its resolution (a scheduler tick, 1-4 ms)
// is plenty for telling which rank stopped where.
int64_t now_us() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

Recorder& Recorder::instance() {
  // Leaked on purpose: engine threads of leaked (stuck) communicators may
  // still record while static destructors run.
  static Recorder* r = new Recorder();
  return *r;
}

void Recorder::configure(size_t entries, std::string dir, int world_rank, int world_size) {
  std::lock_guard<std::mutex> lk(mu_);
  if (configured_) return;
  configured_ = true;
  dir_ = dir.empty() ? "/tmp/gradwire-fr" : std::move(dir);
  world_rank_ = world_rank;
  world_size_ = world_size;
  if (entries > 0) slots_ = std::make_unique<Slot[]>(entries);
  mask_ = entries && (entries & (entries - 1)) == 0 ? entries - 1 : 0;
  capacity_ = entries;  // published last: the hot path checks it first
}

uint16_t Recorder::register_comm(const std::string& name, int rank, int size) {
  std::lock_guard<std::mutex> lk(mu_);
  comms_.push_back(Comm{name, rank, size, 0, {}});
  return uint16_t(comms_.size() - 1);
}

// Inlined into both queued(): a call and its frame were ~20 instructions of
// every collective.
[[gnu::always_inline]] inline uint64_t Recorder::record(uint64_t id, uint16_t comm, uint32_t seq,
                                                       const CollectiveCall& info,
                                                       Clock::time_point now) {
  Slot& s = slot(id);
  constexpr auto r = std::memory_order_relaxed;
  s.id.store(0, r);
  s.seq.store(seq, r);
  s.comm.store(comm, r);
  s.op.store(uint8_t(info.op), r);
  s.dtype.store(uint8_t(info.dtype), r);
  s.redop.store(uint8_t(info.redop), r);
  s.has_redop.store(info.has_redop(), r);
  s.root.store(info.root, r);
  s.count.store(info.count, r);
  s.state.store(uint8_t(State::Queued), r);
  s.queued_us.store(monotonic_us(now), r);
  s.started_us.store(0, r);
  s.done_us.store(0, r);
  s.id.store(id, std::memory_order_release);
  return id;
}

uint64_t Recorder::queued(uint16_t comm, uint32_t seq, const CollectiveCall& info,
                          Clock::time_point now) {
  if (capacity_ == 0) return 0;
  return record(next_id_.fetch_add(1, std::memory_order_relaxed) + 1, comm, seq, info, now);
}

uint64_t Recorder::queued(IdBlock& ids, uint16_t comm, uint32_t seq, const CollectiveCall& info,
                          Clock::time_point now) {
  if (capacity_ == 0) return 0;
  // Note [ids in blocks]. A plain load of the shared counter: it changes
  // once per block of any communicator, so it is almost always cached.
  if (ids.next == ids.end || next_id_.load(std::memory_order_relaxed) - ids.next >= capacity_ / 2) {
    const uint64_t n = std::max<uint64_t>(1, std::min<uint64_t>(kIdBlock, capacity_ / 4));
    ids.next = next_id_.fetch_add(n, std::memory_order_relaxed) + 1;
    ids.end = ids.next + n;
  }
  return record(ids.next++, comm, seq, info, now);
}

void Recorder::completed(uint16_t comm, int64_t after, std::vector<Done>& out) const {
  if (capacity_ == 0) return;
  constexpr auto r = std::memory_order_relaxed;
  for (size_t i = 0; i < capacity_; ++i) {
    const Slot& s = slots_[i];
    const uint64_t id = s.id.load(std::memory_order_acquire);
    if (id == 0 || s.comm.load(r) != comm || s.state.load(r) != uint8_t(State::Completed)) continue;
    const Done d{s.seq.load(r), s.op.load(r), s.started_us.load(r), s.done_us.load(r)};
    if (int64_t(d.seq) <= after || s.id.load(std::memory_order_acquire) != id) continue;
    out.push_back(d);
  }
}

void Recorder::set_error(uint16_t comm, uint32_t seq, const std::string& message) {
  std::lock_guard<std::mutex> lk(mu_);
  if (comm >= comms_.size() || !comms_[comm].error.empty()) return;
  comms_[comm].error = message;
  comms_[comm].error_seq = seq;
}

std::string Recorder::dump_path() const {
  std::lock_guard<std::mutex> lk(mu_);
  return fmt::format("{}/gradwire-fr-rank{}.json", dir_, world_rank_);
}

// Note [flight recorder dump format]: one JSON object per rank,
//   {"format": "gradwire-fr/1", "rank", "world_size", "host", "pid",
//    "version", "reason", "dumped_us",
//    "communicators": [{"id", "name", "rank", "size", "error_seq", "error"}],
//    "entries": [{"comm", "seq", "op", "dtype", "count", "redop", "root",
//                 "state", "queued_us", "started_us", "done_us"}]}
// entries oldest first; redop is "" where the collective has none, root -1
// except for broadcast, times 0 where the state was not reached.
std::string Recorder::to_json(const std::string& reason) const {
  std::lock_guard<std::mutex> lk(mu_);
  // Note [recorded on the monotonic clock]: to the Unix epoch; 0 stays 0.
  const int64_t shift = now_us() - monotonic_us(coarse_now());
  const auto epoch = [shift](int64_t t) { return t ? t + shift : 0; };
  std::string out = fmt::format(
      "{{\"format\": \"gradwire-fr/1\", \"rank\": {}, \"world_size\": {}, \"host\": \"{}\", "
      "\"pid\": {}, \"version\": \"{}\", \"reason\": \"{}\", \"dumped_us\": {},\n"
      "\"communicators\": [",
      world_rank_, world_size_, json_escape(hostname()), int(getpid()), json_escape(version()),
      json_escape(reason), now_us());
  for (size_t i = 0; i < comms_.size(); ++i) {
    const Comm& c = comms_[i];
    out += fmt::format("{}\n  {{\"id\": {}, \"name\": \"{}\", \"rank\": {}, \"size\": {}, "
                       "\"error_seq\": {}, \"error\": \"{}\"}}",
                       i ? "," : "", i, json_escape(c.name), c.rank, c.size,
                       c.error.empty() ? -1 : int64_t(c.error_seq), json_escape(c.error));
  }
  out += "],\n\"entries\": [";
  const uint64_t last = next_id_.load(std::memory_order_acquire);
  const uint64_t first = last > capacity_ ? last - capacity_ + 1 : 1;
  // Note [ids in blocks]: id order is block order across communicators;
  // entries are listed by queued time (then id), oldest first.
  std::vector<std::tuple<int64_t, uint64_t, std::string>> entries;
  for (uint64_t id = first; capacity_ > 0 && id <= last; ++id) {
    const Slot& s = slot(id);
    constexpr auto r = std::memory_order_relaxed;
    if (s.id.load(std::memory_order_acquire) != id) continue;
    std::string e = fmt::format(
        "\n  {{\"comm\": {}, \"seq\": {}, \"op\": \"{}\", \"dtype\": \"{}\", \"count\": {}, "
        "\"redop\": \"{}\", \"root\": {}, \"state\": \"{}\", \"queued_us\": {}, "
        "\"started_us\": {}, \"done_us\": {}}}",
        s.comm.load(r), s.seq.load(r), to_string(CollectiveOp(s.op.load(r))),
        to_string(DataType(s.dtype.load(r))), s.count.load(r),
        s.has_redop.load(r) ? to_string(ReduceOp(s.redop.load(r))) : std::string_view(),
        s.root.load(r), to_string(State(s.state.load(r))), epoch(s.queued_us.load(r)),
        epoch(s.started_us.load(r)), epoch(s.done_us.load(r)));
    if (s.id.load(std::memory_order_acquire) != id) continue;  // rewritten while read
    entries.emplace_back(s.queued_us.load(r), id, std::move(e));
  }
  std::sort(entries.begin(), entries.end());
  for (size_t i = 0; i < entries.size(); ++i) out += (i ? "," : "") + std::get<2>(entries[i]);
  out += "]}\n";
  return out;
}

std::string Recorder::dump(const std::string& reason) {
  std::string dir;
  int rank;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!configured_ || capacity_ == 0) return "";
    if (dumped_) return dumped_path_;
    dumped_ = true;
    dir = dir_;
    rank = world_rank_;
  }
  const std::string json = to_json(reason);
  // One level of mkdir -p is enough for the default; a user's directory
  // must exist or have an existing parent.
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    log().error("flight recorder: cannot create {}: {}", dir, std::strerror(errno));
    return "";
  }
  const std::string path = fmt::format("{}/gradwire-fr-rank{}.json", dir, rank);
  const std::string tmp = fmt::format("{}.{}.tmp", path, int(getpid()));
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  if (f) ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    log().error("flight recorder: cannot write {}: {}", path, std::strerror(errno));
    std::remove(tmp.c_str());
    return "";
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    dumped_path_ = path;
  }
  trace::flush();  // the timeline up to the failure, if one is kept
  log().error("flight recorder: wrote the last collectives of rank {} to {} (read all ranks' "
              "dumps with: gradwire-fr {})",
              rank, path, dir);
  return path;
}

}  // namespace gradwire::fr
