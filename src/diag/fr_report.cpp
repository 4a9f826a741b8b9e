// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "diag/fr_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>
#include <set>

#include "base/raise.h"

namespace gradwire::fr {

namespace {

// A minimal JSON reader: enough for the dumps this library writes, and
// careful with anything else (bounded depth and size, no read past the end).
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double number = 0;
  int64_t integer = 0;
  std::string str;
  std::vector<Json> items;
  // An object's members as two parallel vectors: vector<Json> may name the
  // incomplete Json, pair<string, Json> may not (clang rejects it).
  std::vector<std::string> keys;
  std::vector<Json> values;

  const Json* get(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &values[i];
    return nullptr;
  }
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  Json parse() {
    if (s_.size() > kMaxDumpBytes) fail("larger than the 48 MiB a dump can be");
    Json v = value(0);
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    raise(ErrorCode::Protocol, "{}: not a gradwire flight-recorder dump: {} at byte {}", path_,
          what, i_);
  }
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string string() {
    if (!eat('"')) fail("expected a string");
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (s_.size() - i_ < 4) fail("short \\u escape");
          unsigned cp = 0;
          for (int k = 0; k < 4; ++k) {
            const int d = hex_digit(s_[i_ + size_t(k)]);
            if (d < 0) fail("bad \\u escape");
            cp = cp * 16 + unsigned(d);
          }
          i_ += 4;
          if (cp < 0x80) out += char(cp);
          else out += '?';
          break;
        }
        default: out += e;
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  Json value(int depth) {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    // Recursion depth and value count are the parser's only unbounded costs.
    if (depth > kMaxJsonDepth) fail("nested deeper than 64 levels");
    if (++values_ > kMaxJsonValues) fail("more values than a dump can hold");
    Json v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::Object;
      if (eat('}')) return v;
      do {
        std::string k = string();
        if (!eat(':')) fail("expected ':'");
        v.keys.push_back(std::move(k));
        v.values.push_back(value(depth + 1));
      } while (eat(','));
      if (!eat('}')) fail("expected '}'");
    } else if (c == '[') {
      ++i_;
      v.kind = Json::Array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      if (!eat(']')) fail("expected ']'");
    } else if (c == '"') {
      v.kind = Json::String;
      v.str = string();
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.kind = Json::Bool;
      v.integer = s_[i_] == 't';
      i_ += v.integer ? 4 : 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      if (c != '-' && (c < '0' || c > '9')) fail("unexpected character");
      const char* b = s_.c_str() + i_;
      char* e = nullptr;
      v.integer = std::strtoll(b, &e, 10);
      char* e2 = nullptr;
      v.number = std::strtod(b, &e2);
      if (e2 == b) fail("unexpected character");
      i_ += size_t(std::max(e, e2) - b);
      v.kind = Json::Number;
    }
    return v;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
  size_t values_ = 0;
};

int64_t num(const Json& o, std::string_view key, int64_t dflt = 0) {
  const Json* v = o.get(key);
  return v && v->kind == Json::Number ? v->integer : dflt;
}

// A field that must lie in [lo, hi]: Protocol naming it otherwise, so that
// no later arithmetic (timestamps, rank loops) sees an absurd value.
int64_t bounded(const Json& o, std::string_view key, int64_t dflt, int64_t lo, int64_t hi,
                const std::string& path) {
  const int64_t v = num(o, key, dflt);
  if (v < lo || v > hi) {
    raise(ErrorCode::Protocol, "{}: not a usable gradwire flight-recorder dump: \"{}\" is {} "
          "(expected {}..{})", path, key, v, lo, hi);
  }
  return v;
}
constexpr int64_t kMaxUs = int64_t(1) << 62;  // microseconds: far past any real clock
// Every string a dump holds is printed to a terminal: control characters
// (C0, DEL, C1) and bytes that are not UTF-8 become \xHH, so a forged
// reason can neither move the cursor nor add a line that looks like ours.
std::string printable(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  auto hex = [&](unsigned char b) { out += fmt::format("\\x{:02x}", b); };
  for (size_t i = 0; i < in.size();) {
    const auto b = static_cast<unsigned char>(in[i]);
    if (b >= 0x20 && b < 0x7f) {
      out += char(b);
      ++i;
      continue;
    }
    // Length and first-byte range of a well-formed UTF-8 sequence.
    const size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3
                   : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    bool ok = n > 0 && i + n <= in.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
    // U+0080..U+009F (C1 controls, e.g. the 8-bit CSI) are encoded c2 80..c2 9f.
    if (ok && n == 2 && b == 0xc2 && static_cast<unsigned char>(in[i + 1]) < 0xa0) ok = false;
    if (!ok) {
      hex(b);
      ++i;
      continue;
    }
    out.append(in.substr(i, n));
    i += n;
  }
  return out;
}

std::string str(const Json& o, std::string_view key) {
  const Json* v = o.get(key);
  return v && v->kind == Json::String ? printable(v->str) : std::string();
}

// At most 32 ranks are spelled out: a dump may claim a world of a million.
std::string join(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 32) return s + fmt::format(" and {} more", ranks.size() - i);
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
}
std::string ranks_word(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(ranks);
}

std::string call(const DumpEntry& e) {
  std::string d;
  if (e.op == "barrier" || e.op == "internal") d = "";
  else if (e.op == "broadcast") d = fmt::format("{} x {} from rank {}", e.count, e.dtype, e.root);
  else d = fmt::format("{} x {}{}{}", e.count, e.dtype, e.redop.empty() ? "" : " ", e.redop);
  return fmt::format("{} #{}{}", e.op, e.seq, d.empty() ? "" : " (" + d + ")");
}

// The peer an error message says a rank was waiting for: the first
// "waiting for data from rank N", "sending to rank N" or (the direct path,
// Context::wait_for) "waiting for rank N" in it.
std::optional<int> waited_for(const std::string& error) {
  std::optional<int> found;
  size_t best = std::string::npos;
  for (std::string_view phrase : {"waiting for data from rank ", "sending to rank ", "waiting for rank "}) {
    for (size_t at = error.find(phrase); at != std::string::npos;
         at = error.find(phrase, at + 1)) {
      if (at >= best) break;
      const char* b = error.data() + at + phrase.size();
      const char* end = error.data() + error.size();
      int peer = 0;
      auto [p, ec] = std::from_chars(b, end, peer);
      if (ec == std::errc() && p != b && peer >= 0) {
        found = peer;
        best = at;
        break;
      }
    }
  }
  return found;
}

bool same_call(const DumpEntry& a, const DumpEntry& b) {
  return a.op == b.op && a.dtype == b.dtype && a.count == b.count && a.redop == b.redop &&
         a.root == b.root;
}

}  // namespace

Dump parse_dump(const std::string& json, const std::string& path) {
  Json doc = Parser(json, path).parse();
  if (doc.kind != Json::Object || str(doc, "format") != "gradwire-fr/1") {
    raise(ErrorCode::Protocol, "{}: not a gradwire flight-recorder dump (format is not "
          "gradwire-fr/1)", path);
  }
  Dump d;
  d.path = path;
  d.world_size = int(bounded(doc, "world_size", 0, 1, kMaxDumpWorldSize, path));
  d.rank = int(bounded(doc, "rank", 0, 0, d.world_size - 1, path));
  d.pid = int(bounded(doc, "pid", 0, 0, INT32_MAX, path));
  d.host = str(doc, "host");
  d.version = str(doc, "version");
  d.reason = str(doc, "reason");
  d.dumped_us = bounded(doc, "dumped_us", 0, 0, kMaxUs, path);
  if (const Json* cs = doc.get("communicators")) {
    for (const Json& c : cs->items) {
      DumpComm x;
      x.id = int(bounded(c, "id", 0, 0, UINT16_MAX, path));
      x.name = str(c, "name");
      x.size = int(bounded(c, "size", 1, 1, kMaxDumpWorldSize, path));
      x.rank = int(bounded(c, "rank", 0, 0, x.size - 1, path));
      x.error_seq = bounded(c, "error_seq", -1, -1, UINT32_MAX, path);
      x.error = str(c, "error");
      d.comms.push_back(std::move(x));
    }
  }
  if (const Json* es = doc.get("entries")) {
    for (const Json& e : es->items) {
      DumpEntry x;
      x.comm = int(bounded(e, "comm", 0, 0, UINT16_MAX, path));
      x.seq = uint32_t(bounded(e, "seq", 0, 0, UINT32_MAX, path));
      x.op = str(e, "op");
      x.dtype = str(e, "dtype");
      x.redop = str(e, "redop");
      x.count = uint64_t(bounded(e, "count", 0, 0, INT64_MAX, path));
      x.root = int(bounded(e, "root", -1, -1, INT32_MAX, path));
      x.state = parse_state(str(e, "state"));
      x.queued_us = bounded(e, "queued_us", 0, 0, kMaxUs, path);
      x.started_us = bounded(e, "started_us", 0, 0, kMaxUs, path);
      x.done_us = bounded(e, "done_us", 0, 0, kMaxUs, path);
      d.entries.push_back(std::move(x));
    }
  }
  return d;
}

Diagnosis diagnose(const std::vector<Dump>& dumps) {
  Diagnosis out;
  std::string& t = out.text;
  std::vector<int> suspects;  // in order of evidence, deduplicated at the end
  if (dumps.empty()) {
    out.findings.push_back("no dumps given");
    t = "gradwire-fr: no dumps given\n";
    return out;
  }
  int world = 0;
  std::map<int, const Dump*> by_rank;
  for (const Dump& d : dumps) {
    world = std::max(world, d.world_size);
    by_rank[d.rank] = &d;
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r)
    if (!by_rank.count(r)) missing.push_back(r);

  t += fmt::format("gradwire-fr: {} dump(s) of a world of {} ranks\n", dumps.size(), world);
  for (auto& [r, d] : by_rank) {
    t += fmt::format("  rank {} ({} pid {}, gradwire {}): {}\n", r, d->host, d->pid, d->version,
                     d->reason);
  }
  int64_t first_us = INT64_MAX, last_us = 0;
  for (const Dump& d : dumps) first_us = std::min(first_us, d.dumped_us), last_us = std::max(last_us, d.dumped_us);
  if (last_us - first_us > int64_t(600) * 1000000) {
    out.findings.push_back(fmt::format(
        "the dumps were written {:.0f} minutes apart: some may be from an earlier run (give "
        "gradwire-fr only this run's files, or a fresh GRADWIRE_FR_DIR per job)",
        double(last_us - first_us) / 60e6));
  }
  for (size_t i = 0; i < missing.size() && i < 32; ++i) {
    t += fmt::format("  rank {}: NO DUMP (the process died, was stopped, is hung outside "
                     "gradwire, or could not write its dump)\n", missing[i]);
  }
  if (missing.size() > 32) {
    t += fmt::format("  ... and {} more ranks: NO DUMP\n", missing.size() - 32);
  }

  // Communicators by name; each rank's entries on it, by seq.
  std::set<std::string> names;
  for (const Dump& d : dumps)
    for (const DumpComm& c : d.comms) names.insert(c.name);
  // Each dump's entries by communicator id, indexed once (not once per name).
  std::vector<std::map<int, std::vector<const DumpEntry*>>> entries_by_comm(dumps.size());
  for (size_t i = 0; i < dumps.size(); ++i)
    for (const DumpEntry& e : dumps[i].entries) entries_by_comm[i][e.comm].push_back(&e);

  for (const std::string& name : names) {
    struct View {
      const Dump* dump;
      const DumpComm* comm;
      std::map<uint32_t, const DumpEntry*> by_seq;
    };
    std::map<int, View> views;  // by world rank
    for (size_t i = 0; i < dumps.size(); ++i) {
      const Dump& d = dumps[i];
      for (const DumpComm& c : d.comms) {
        if (c.name != name) continue;
        View v{&d, &c, {}};
        auto it = entries_by_comm[i].find(c.id);
        if (it != entries_by_comm[i].end())
          for (const DumpEntry* e : it->second) v.by_seq[e->seq] = e;
        views[d.rank] = std::move(v);
      }
    }
    t += fmt::format("\ncommunicator '{}':\n", name);
    int64_t top = -1;
    const DumpEntry* top_entry = nullptr;
    for (auto& [r, v] : views) {
      if (v.by_seq.empty()) {
        t += fmt::format("  rank {}: no collective recorded\n", r);
        continue;
      }
      const DumpEntry* last = v.by_seq.rbegin()->second;
      const DumpEntry* last_done = nullptr;
      for (auto it = v.by_seq.rbegin(); it != v.by_seq.rend(); ++it)
        if (it->second->state == State::Completed) { last_done = it->second; break; }
      t += fmt::format("  rank {}: last {} {}; last completed {}\n", r, call(*last),
                       to_string(last->state), last_done ? call(*last_done) : "none recorded");
      if (int64_t(last->seq) > top) top = last->seq, top_entry = last;
    }
    // Who is behind: ranks whose newest collective is older than the newest any rank reached.
    std::vector<int> reached, behind;
    for (auto& [r, v] : views) {
      if (!v.by_seq.empty() && int64_t(v.by_seq.rbegin()->first) == top) reached.push_back(r);
      else behind.push_back(r);
    }
    if (top_entry) {
      // Who had and had not reached the newest collective anyone reached.
      std::vector<int> unknown;
      if (name == "world")
        for (int r : missing) unknown.push_back(r);
      std::string line = fmt::format("'{}' {}: reached by {}", name, call(*top_entry),
                                     ranks_word(reached));
      if (!behind.empty()) line += "; not reached by " + ranks_word(behind);
      if (!unknown.empty()) line += "; unknown for " + ranks_word(unknown) + " (no dump)";
      if (!behind.empty() || !unknown.empty()) out.findings.push_back(line);
    }
    if (top_entry && !behind.empty()) {
      for (int r : behind) {
        const auto& v = views[r];
        std::string where = v.by_seq.empty() ? "no collective recorded"
                                             : "its last is " + call(*v.by_seq.rbegin()->second) +
                                                   " (" +
                                                   std::string(to_string(
                                                       v.by_seq.rbegin()->second->state)) +
                                                   ")";
        out.findings.push_back(fmt::format(
            "rank {} is behind on '{}': it never reached {} (seq {}), which {} reached; {}", r,
            name, call(*top_entry), top, ranks_word(reached), where));
        suspects.push_back(r);
      }
    }
    // Whom the failed ranks were waiting for.
    std::map<int, std::vector<int>> waited;  // peer -> ranks waiting for it
    for (auto& [r, v] : views) {
      if (v.comm->error.empty()) continue;
      t += fmt::format("  rank {} failed at seq {}: {}\n", r, v.comm->error_seq, v.comm->error);
      if (auto peer = waited_for(v.comm->error)) waited[*peer].push_back(r);
    }
    for (auto& [peer, waiters] : waited) {
      const bool is_world = name == "world";
      const bool no_dump = is_world && !by_rank.count(peer);
      // A peer that failed waiting for someone else is a link in a chain,
      // not its end: say whom it waited for.
      std::string chain;
      if (auto pv = views.find(peer); pv != views.end() && !pv->second.comm->error.empty()) {
        if (auto next = waited_for(pv->second.comm->error); next && *next != peer) {
          chain = fmt::format("; rank {} was itself waiting for rank {}", peer, *next);
        }
      }
      out.findings.push_back(fmt::format(
          "{} waited for {}rank {} on '{}' and timed out{}{}", ranks_word(waiters),
          is_world ? "" : "group ", peer, name,
          no_dump ? fmt::format("; rank {} left no dump: it died, was stopped (e.g. SIGSTOP) or "
                                "hangs outside gradwire", peer)
                  : "",
          chain));
      if (is_world) suspects.insert(suspects.begin(), peer);
    }
    // Different calls at the same sequence number.
    int reported = 0;
    std::set<uint32_t> seqs;
    for (auto& [r, v] : views)
      for (auto& [s, e] : v.by_seq) seqs.insert(s);
    for (uint32_t s : seqs) {
      std::vector<std::pair<int, const DumpEntry*>> calls;
      for (auto& [r, v] : views) {
        auto it = v.by_seq.find(s);
        if (it != v.by_seq.end()) calls.emplace_back(r, it->second);
      }
      bool differ = false;
      for (auto& c : calls) differ |= !same_call(*c.second, *calls[0].second);
      if (!differ) continue;
      std::string f = fmt::format("ranks called different collectives at seq {} of '{}':", s, name);
      for (auto& [r, e] : calls) f += fmt::format(" rank {} {};", r, call(*e));
      f.pop_back();
      out.findings.push_back(f);
      if (++reported == 3) break;
    }
  }
  // Deduplicated in order of evidence, with a set: a dump may claim a
  // world of a million ranks, all missing. A rank known to be gone (no
  // dump) that the evidence points at comes first, then the other ranks
  // without a dump, then the live ranks the evidence points at: a live
  // rank that others waited for is usually waiting itself, for the one
  // that is gone (issue 17: rank 0 SIGKILLed, "look at ranks 1, 0 first").
  const std::set<int> no_dump(missing.begin(), missing.end());
  std::vector<int> gone_implicated, live_implicated;
  for (int r : suspects) (no_dump.count(r) ? gone_implicated : live_implicated).push_back(r);
  std::vector<int> ordered = std::move(gone_implicated);
  ordered.insert(ordered.end(), missing.begin(), missing.end());
  ordered.insert(ordered.end(), live_implicated.begin(), live_implicated.end());
  std::set<int> seen;
  for (int r : ordered)
    if (seen.insert(r).second) out.suspects.push_back(r);

  t += "\ndiagnosis:\n";
  if (out.findings.empty() && missing.empty()) {
    t += "  every rank reached the same collectives with the same arguments; look at the "
         "errors above (a transport failure, or an application that stopped calling gradwire)\n";
  }
  for (auto& f : out.findings) t += "  - " + f + "\n";
  if (!out.suspects.empty()) {
    t += fmt::format("  => look at {} first\n", ranks_word(out.suspects));
  }
  return out;
}

}  // namespace gradwire::fr
