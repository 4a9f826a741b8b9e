// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "elastic/membership.h"

#include <algorithm>
#include <charconv>

namespace gradwire::elastic {

namespace {

constexpr std::string_view kVersion = "gwe1";
constexpr char kSep = '\x1f';

std::vector<std::string_view> fields(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

template <typename T>
std::optional<T> number(std::string_view t) {
  T x{};
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return x;
}

bool holds(const Candidate& c, uint64_t step) {
  return std::find(c.commits.begin(), c.commits.end(), step) != c.commits.end();
}

}  // namespace

std::string encode(const Candidate& c) {
  std::string commits;
  for (size_t i = 0; i < c.commits.size(); ++i) {
    if (i) commits += ',';
    commits += std::to_string(c.commits[i]);
  }
  std::string out(kVersion);
  for (const std::string& f :
       {c.id, std::to_string(c.last_generation), std::to_string(c.hint), commits}) {
    out += kSep;
    out += f;
  }
  return out;
}

std::optional<Candidate> decode(std::string_view text) {
  auto f = fields(text, kSep);
  if (f.size() != 5 || f[0] != kVersion || f[1].empty()) return std::nullopt;
  Candidate c;
  c.id = std::string(f[1]);
  auto last = number<int64_t>(f[2]);
  auto hint = number<int>(f[3]);
  if (!last || !hint || *last < -1) return std::nullopt;
  c.last_generation = *last;
  c.hint = *hint;
  if (!f[4].empty()) {
    for (auto s : fields(f[4], ',')) {
      auto step = number<uint64_t>(s);
      if (!step) return std::nullopt;
      c.commits.push_back(*step);
    }
  }
  return c;
}

Plan plan_generation(const std::vector<Candidate>& slots) {
  Plan p;
  int64_t newest = -1;
  for (const auto& c : slots) newest = std::max(newest, c.last_generation);
  auto continuing = [&](int slot) {
    return newest >= 0 && slots[size_t(slot)].last_generation == newest;
  };
  for (int s = 0; s < int(slots.size()); ++s) p.order.push_back(s);
  std::stable_sort(p.order.begin(), p.order.end(), [&](int a, int b) {
    if (continuing(a) != continuing(b)) return continuing(a);
    if (slots[size_t(a)].hint != slots[size_t(b)].hint) {
      return slots[size_t(a)].hint < slots[size_t(b)].hint;
    }
    return a < b;
  });
  p.continuing = int(std::count_if(p.order.begin(), p.order.end(), continuing));
  p.keeps_local.assign(slots.size(), false);
  if (p.continuing == 0) return p;
  // The newest commit every continuing member holds.
  bool every_one_committed = true;
  uint64_t step = UINT64_MAX;
  for (int r = 0; r < p.continuing; ++r) {
    const auto& c = slots[size_t(p.order[size_t(r)])];
    if (c.commits.empty()) {
      every_one_committed = false;
      break;
    }
    step = std::min(step, c.commits.front());
  }
  if (!every_one_committed) return p;
  for (int r = 0; r < p.continuing; ++r) {
    const bool has = holds(slots[size_t(p.order[size_t(r)])], step);
    p.keeps_local[size_t(r)] = has;
    if (has && p.root < 0) p.root = r;
  }
  p.restored = p.root >= 0;
  p.step = step;
  return p;
}

bool may_close(const CloseQuery& q) {
  if (q.count < 1) return false;
  const bool majority = 2 * q.peers > q.previous_size;
  if (q.expect > 0 && q.count >= q.expect && (!q.suspected || majority)) return true;
  if (q.max_size > 0 && q.count >= q.max_size) return true;
  if (q.first) return q.count >= q.min_size && q.quiet >= q.settle;
  if (!q.continuing || q.count < q.min_size) return false;
  return q.alive_arrived || (q.quiet >= q.settle && majority);
}

int closed_size(const CloseQuery& q) {
  return q.max_size > 0 ? std::min(q.count, q.max_size) : q.count;
}

}  // namespace gradwire::elastic
