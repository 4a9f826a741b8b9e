// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Slurm's hostlist syntax, expanded (hostlist.h).
#include "bootstrap/hostlist.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdint>

#include "base/raise.h"

namespace gradwire::bootstrap {

namespace {

// One entry of the list ("gpu-a[1-2]x[3,5]"): literal text and bracket
// groups, in order; each group's numbers already formatted.
struct Piece {
  std::string literal;               // when `numbers` is empty
  std::vector<std::string> numbers;  // a bracket group
};

class Parser {
 public:
  Parser(std::string_view list, std::string_view name, size_t max_hosts)
      : list_(list), name_(name), max_(max_hosts) {}

  std::vector<std::string> run() {
    if (list_.empty()) fail("it is empty", 0);
    for (size_t i = 0; i < list_.size(); ++i) {
      if (std::isspace(static_cast<unsigned char>(list_[i]))) fail("white space", i);
    }
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= list_.size(); ++i) {
      const char c = i < list_.size() ? list_[i] : ',';
      if (c == '[') {
        if (depth > 0) fail("a '[' inside brackets", i);
        depth = 1;
      } else if (c == ']') {
        if (depth == 0) fail("a ']' without its '['", i);
        depth = 0;
      } else if (c == ',' && depth == 0) {
        entry(start, i);
        start = i + 1;
      }
    }
    if (depth > 0) fail("a '[' that is never closed", list_.rfind('['));
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    raise(ErrorCode::InvalidArgument,
          "{}='{}' is not a Slurm host list: {} at offset {} (expected names and bracket "
          "ranges such as node[01-04,07],gpu-a[1-2])",
          name_, list_, what, at);
  }

  // list_[begin, end) is one entry, brackets balanced.
  void entry(size_t begin, size_t end) {
    if (begin == end) fail("an empty name", begin);
    std::vector<Piece> pieces;
    size_t count = 1;
    size_t i = begin;
    while (i < end) {
      if (list_[i] == '[') {
        const size_t close = list_.find(']', i);
        Piece p;
        p.numbers = group(i + 1, close);
        count *= p.numbers.size();  // each factor <= max_: no overflow below
        if (count > max_ || out_.size() + count > max_) {
          fail(fmt::format("more than {} host names", max_), i);
        }
        pieces.push_back(std::move(p));
        i = close + 1;
      } else {
        const size_t next = std::min(list_.find('[', i), end);
        pieces.push_back(Piece{std::string(list_.substr(i, next - i)), {}});
        i = next;
      }
    }
    expand(pieces, 0, std::string());
  }

  void expand(const std::vector<Piece>& pieces, size_t k, std::string prefix) {
    if (k == pieces.size()) {
      out_.push_back(std::move(prefix));
      return;
    }
    if (pieces[k].numbers.empty()) {
      expand(pieces, k + 1, prefix + pieces[k].literal);
      return;
    }
    for (const auto& n : pieces[k].numbers) expand(pieces, k + 1, prefix + n);
  }

  // list_[begin, end) is the inside of one bracket group: "01-04,07".
  std::vector<std::string> group(size_t begin, size_t end) {
    if (begin == end) fail("empty brackets", begin - 1);
    std::vector<std::string> numbers;
    size_t start = begin;
    for (size_t i = begin; i <= end; ++i) {
      if (i < end && list_[i] != ',') continue;
      if (start == i) fail("an empty range in brackets", i);
      range(start, i, numbers);
      start = i + 1;
    }
    return numbers;
  }

  // "07" or "01-04", appended to `numbers` in the width of the first.
  void range(size_t begin, size_t end, std::vector<std::string>& numbers) {
    const std::string_view text = list_.substr(begin, end - begin);
    const size_t dash = text.find('-');
    const std::string_view lo_text = text.substr(0, dash);
    const uint64_t lo = number(lo_text, begin);
    uint64_t hi = lo;
    if (dash != std::string_view::npos) {
      hi = number(text.substr(dash + 1), begin + dash + 1);
      if (hi < lo) fail(fmt::format("the range {} runs backwards", text), begin);
    }
    if (hi - lo >= max_ || numbers.size() + (hi - lo + 1) > max_) {
      fail(fmt::format("more than {} host names", max_), begin);
    }
    for (uint64_t n = lo; n <= hi; ++n) {
      numbers.push_back(fmt::format("{:0{}}", n, lo_text.size()));
    }
  }

  uint64_t number(std::string_view text, size_t at) const {
    if (text.empty()) fail("a range bound that is missing", at);
    if (text.size() > 18) fail(fmt::format("the number {} is too long", text), at);
    uint64_t v = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
        fail(fmt::format("'{}' inside brackets where a number belongs", text[i]), at + i);
      }
      v = v * 10 + uint64_t(text[i] - '0');
    }
    return v;
  }

  std::string_view list_;
  std::string_view name_;
  size_t max_;
  std::vector<std::string> out_;
};

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view name,
                                         size_t max_hosts) {
  return Parser(list, name, max_hosts).run();
}

}  // namespace gradwire::bootstrap
