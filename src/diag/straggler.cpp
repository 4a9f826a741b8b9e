// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The pure parts of Note [straggler detection] (diag/straggler.h).
#include "diag/straggler.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/collective_call.h"
#include "diag/flight_recorder.h"

namespace gradwire::straggler {

void WaitLog::add(uint32_t seq, uint8_t op, int64_t wait_us) {
  if (ring_.empty() || int64_t(seq) <= last_) return;
  Entry& e = ring_[seq % ring_.size()];
  e.seq = seq;
  e.op = op;
  e.wait_us = std::max<int64_t>(0, wait_us);
  last_ = seq;
}

WaitLog::Sum WaitLog::sum(uint32_t first, uint32_t end) const {
  Sum s;
  if (ring_.empty()) return s;
  // Only the newest ring_.size() sequence numbers can still be there.
  const int64_t lo = std::max<int64_t>(first, last_ + 1 - int64_t(ring_.size()));
  for (int64_t q = lo; q < int64_t(end) && q <= last_; ++q) {
    const Entry& e = ring_[size_t(q) % ring_.size()];
    if (e.seq != q) continue;  // never harvested (overwritten in the recorder first)
    s.wait_us += e.wait_us;
    ++s.seen;
    if (e.op < 32) s.ops |= 1u << e.op;
  }
  return s;
}

std::optional<std::vector<double>> lateness(const std::vector<Answer>& answers, uint32_t count) {
  std::vector<double> waits;
  for (const Answer& a : answers) {
    if (a.seen == 0) return std::nullopt;
    waits.push_back(double(a.wait_us) * 1e-6 * double(count) / double(a.seen));
  }
  std::vector<double> late(waits.size(), 0.0), others;
  for (size_t i = 0; i < waits.size() && waits.size() > 1; ++i) {
    others.clear();
    for (size_t j = 0; j < waits.size(); ++j)
      if (j != i) others.push_back(waits[j]);
    std::sort(others.begin(), others.end());
    const size_t m = others.size() / 2;
    const double median = others.size() % 2 ? others[m] : (others[m - 1] + others[m]) / 2;
    late[i] = median - waits[i];
  }
  return late;
}

void Judge::add(Window w) {
  windows_.push_back(std::move(w));
  // Keep the newest windows that cover the span: drop the oldest while the
  // others still do.
  double newer = 0;
  for (const Window& x : windows_) newer += x.seconds;
  while (windows_.size() > 1 && newer - windows_.front().seconds >= window_s_) {
    newer -= windows_.front().seconds;
    windows_.erase(windows_.begin());
  }
}

std::vector<Named> Judge::standings() const {
  std::vector<Named> out;
  if (windows_.empty()) return out;
  const size_t ranks = windows_.back().late_s.size();
  out.resize(ranks);
  double seconds = 0;
  uint64_t collectives = 0;
  uint32_t ops = 0;
  for (const Window& w : windows_) {
    if (w.late_s.size() != ranks) continue;
    seconds += w.seconds;
    collectives += w.end - w.first;
    ops |= w.ops;
    for (size_t r = 0; r < ranks; ++r) {
      out[r].late_s += w.late_s[r];
      if (w.seconds > 0 && w.late_s[r] >= threshold_ * w.seconds) ++out[r].late_windows;
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    Named& n = out[r];
    n.rank = int(r);
    n.share = seconds > 0 ? n.late_s / seconds : 0;
    n.window_s = seconds;
    n.collectives = collectives;
    n.first = windows_.front().first;
    n.last = windows_.back().end > 0 ? windows_.back().end - 1 : 0;
    n.ops = ops;
  }
  return out;
}

std::vector<Named> Judge::verdict() const {
  std::vector<Named> out;
  for (const Named& n : standings()) {
    if (n.share >= threshold_ && n.late_windows >= kMinLateWindows) out.push_back(n);
  }
  std::sort(out.begin(), out.end(), [](const Named& a, const Named& b) { return a.share > b.share; });
  return out;
}

namespace {

template <class T>
bool number(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    const size_t j = std::min(line.find(' ', i), line.size());
    out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Calls `fn` on every line of `text`; false as soon as it returns false.
template <class F>
bool lines(std::string_view text, F fn) {
  while (!text.empty()) {
    const size_t nl = std::min(text.find('\n'), text.size());
    if (!fn(text.substr(0, nl))) return false;
    text.remove_prefix(std::min(nl + 1, text.size()));
  }
  return true;
}

constexpr std::string_view kBoardHeader = "gradwire-straggler/1";
// Sanity bounds on what other processes wrote (Note [states are untrusted
// input] in base/state_io.h): a board is small.
constexpr size_t kMaxBoardEntries = 4096;

}  // namespace

std::string encode(const Board& b) {
  std::string out(kBoardHeader);
  out += '\n';
  for (const Ask& a : b.asks) out += fmt::format("a {} {} {}\n", a.id, a.first, a.end);
  for (const Named& n : b.named) {
    out += fmt::format("n {} {} {} {} {} {} {} {}\n", n.rank, std::llround(n.share * 1e6),
                       std::llround(n.late_s * 1e3), std::llround(n.window_s * 1e3), n.collectives,
                       n.first, n.last, n.ops);
  }
  return out;
}

std::optional<Board> parse_board(std::string_view text) {
  if (!text.starts_with(kBoardHeader) || text.size() < kBoardHeader.size() + 1 ||
      text[kBoardHeader.size()] != '\n') {
    return std::nullopt;
  }
  text.remove_prefix(kBoardHeader.size() + 1);
  Board b;
  const bool ok = lines(text, [&](std::string_view line) {
    const auto w = words(line);
    if (b.asks.size() + b.named.size() >= kMaxBoardEntries) return false;
    if (w.size() == 4 && w[0] == "a") {
      Ask a;
      if (!number(w[1], a.id) || !number(w[2], a.first) || !number(w[3], a.end) || a.end < a.first)
        return false;
      b.asks.push_back(a);
      return true;
    }
    if (w.size() == 9 && w[0] == "n") {
      Named n;
      int64_t share_ppm = 0, late_ms = 0, window_ms = 0;
      if (!number(w[1], n.rank) || n.rank < 0 || !number(w[2], share_ppm) ||
          !number(w[3], late_ms) || !number(w[4], window_ms) || !number(w[5], n.collectives) ||
          !number(w[6], n.first) || !number(w[7], n.last) || !number(w[8], n.ops)) {
        return false;
      }
      n.share = double(share_ppm) * 1e-6;
      n.late_s = double(late_ms) * 1e-3;
      n.window_s = double(window_ms) * 1e-3;
      b.named.push_back(n);
      return true;
    }
    return false;
  });
  if (!ok) return std::nullopt;
  return b;
}

std::string encode(const std::vector<Answer>& answers) {
  std::string out;
  for (const Answer& a : answers) out += fmt::format("{} {} {}\n", a.id, a.wait_us, a.seen);
  return out;
}

std::optional<std::vector<Answer>> parse_answers(std::string_view text) {
  std::vector<Answer> out;
  const bool ok = lines(text, [&](std::string_view line) {
    const auto w = words(line);
    Answer a;
    if (out.size() >= kMaxBoardEntries || w.size() != 3 || !number(w[0], a.id) ||
        !number(w[1], a.wait_us) || a.wait_us < 0 || !number(w[2], a.seen)) {
      return false;
    }
    out.push_back(a);
    return true;
  });
  if (!ok) return std::nullopt;
  return out;
}

std::string op_names(uint32_t ops) {
  std::string out;
  for (size_t op = 0; op < kCollectiveOps; ++op) {
    if (ops & (1u << op)) out += (out.empty() ? "" : ", ") + std::string(to_string(CollectiveOp(op)));
  }
  return out;
}

StragglerReport report(const Named& n, bool named, double threshold) {
  using namespace std::chrono;
  StragglerReport r;
  r.rank = n.rank;
  r.named = named;
  r.share = n.share;
  r.late = milliseconds(std::llround(n.late_s * 1e3));
  r.per_collective =
      microseconds(n.collectives ? std::llround(n.late_s * 1e6 / double(n.collectives)) : 0);
  r.window = milliseconds(std::llround(n.window_s * 1e3));
  r.collectives = n.collectives;
  r.first_seq = n.first;
  r.last_seq = n.last;
  r.ops = op_names(n.ops);
  if (named) {
    r.message = fmt::format(
        "straggler: rank {} kept the other ranks waiting {:.0f}% of the last {:.1f} s ({:.2f} s "
        "in all, {:.1f} ms a collective, over {} collectives: {} #{}-#{}); likely cause: rank "
        "{}'s host is slower or busier than the others' (another process on its cores, thermal "
        "throttling, a bad NIC) or it has more work between collectives (data loading, logging, "
        "evaluation)",
        n.rank, n.share * 100, n.window_s, n.late_s, double(r.per_collective.count()) / 1e3,
        n.collectives, r.ops.empty() ? "collectives" : r.ops, n.first, n.last, n.rank);
  } else {
    r.message = fmt::format(
        "straggler: rank {} is no longer named: it kept the others waiting {:.0f}% of the last "
        "{:.1f} s (threshold {:.0f}%)",
        n.rank, n.share * 100, n.window_s, threshold * 100);
  }
  return r;
}

std::string to_json(const StragglerReport& r) {
  return fmt::format(
      "{{\"rank\": {}, \"named\": {}, \"share\": {:.4f}, \"late_ms\": {}, "
      "\"per_collective_us\": {}, \"window_ms\": {}, \"collectives\": {}, \"first_seq\": {}, "
      "\"last_seq\": {}, \"ops\": \"{}\", \"message\": \"{}\"}}",
      r.rank, r.named, r.share, r.late.count(), r.per_collective.count(), r.window.count(),
      r.collectives, r.first_seq, r.last_seq, fr::json_escape(r.ops), fr::json_escape(r.message));
}

}  // namespace gradwire::straggler
