// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "diag/reach.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

namespace gradwire::reach {

std::string progress_key(std::string_view comm, int rank) {
  return fmt::format("gradwire/progress/{}/{}", comm, rank);
}

std::optional<int64_t> parse_progress(std::string_view value) {
  int64_t x = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || x < 0) {
    return std::nullopt;
  }
  return x;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    if (j - i >= 2) {
      s += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      s += std::to_string(ranks[i]);
      if (j > i) s += fmt::format(", {}", ranks[j]);
    }
    i = j + 1;
  }
  return s;
}

namespace {

std::string ranks_phrase(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_list(ranks));
}

}  // namespace

std::string sentence(std::string_view label, int64_t seq,
                     const std::vector<std::optional<int64_t>>& last_started,
                     std::string_view unknown_why) {
  std::vector<int> reached, unknown;
  // Not reached, by last started collective, furthest behind first: those
  // are the likeliest cause (the others wait for them).
  std::map<int64_t, std::vector<int>> behind;
  for (size_t r = 0; r < last_started.size(); ++r) {
    const auto& v = last_started[r];
    if (!v) unknown.push_back(int(r));
    else if (*v >= seq) reached.push_back(int(r));
    else behind[*v].push_back(int(r));
  }
  std::vector<std::string> parts;
  if (!reached.empty()) parts.push_back("reached by " + ranks_phrase(reached));
  if (!behind.empty()) {
    // A world where many ranks stopped at many different places: name the
    // first few groups; the error must stay readable (and is cut at
    // job::kMaxFailureReasonBytes when published).
    constexpr size_t kMaxGroups = 4;
    std::string s = "not reached by ";
    size_t groups = 0, more = 0;
    for (const auto& [last, ranks] : behind) {
      if (groups == kMaxGroups) {
        more += ranks.size();
        continue;
      }
      s += fmt::format("{}{} (last seen starting #{})", groups ? ", " : "", ranks_phrase(ranks), last);
      ++groups;
    }
    if (more) s += fmt::format(" and {} more {} seen later", more, more == 1 ? "rank" : "ranks");
    parts.push_back(std::move(s));
  }
  if (!unknown.empty()) {
    parts.push_back(fmt::format("progress unknown for {} ({})", ranks_phrase(unknown), unknown_why));
  }
  std::string out = fmt::format("{}:", label);
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : " ") + parts[i];
  return out;
}

}  // namespace gradwire::reach
