// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [etcd over its JSON gateway]: the etcd store speaks etcd's v3 API
// through the gRPC gateway every etcd server (3.4 and later) runs on its
// client URL: POST /v3/kv/range, /v3/kv/put, /v3/kv/txn, /v3/lease/grant,
// /v3/lease/keepalive, /v3/lease/revoke and /v3/watch, JSON bodies with keys
// and values in base64 (https://etcd.io/docs/v3.4/dev-guide/api_grpc_gateway/).
// Why not gRPC: a gRPC client means linking grpc++ and protobuf (Debian's
// libgrpc++ and its generated code: tens of megabytes and an ABI to match)
// into a library that takes care to link almost nothing (it even loads
// libfabric with dlopen). The store's traffic is a handful of small requests
// per rank and generation, so the gateway's JSON costs nothing that shows;
// a watch is one chunked HTTP/1.1 answer that streams events, one JSON object
// per line. What it needs is here: an HTTP/1.1 client over the socket
// helpers (http.h), a small JSON reader (json.h), both bounds-checked and
// fuzzed because their input comes from the network.
//  - Endpoints: calls go to one member of the cluster until it fails
//    (refused, reset, silent past a per-attempt bound, or etcd's
//    Unavailable: "no leader", "leader changed"), then to the next; a call
//    fails only when its deadline passes with no member answering, naming
//    each member and its last error. So a member that dies while a job
//    runs costs the calls in flight one retry (ctest -R etcd_cluster).
//  - set_if_absent is a transaction: put if the key's create_revision is 0
//    (absent), else read it. A retried transaction whose first answer was
//    lost cannot tell whether the first attempt wrote the key; it then
//    counts the key as its own if it holds exactly its value (elastic slot
//    values are unique per process).
//  - get() waits with a watch, not a poll: a range read, then a watch of
//    the key from the revision after that read (so no write between the two
//    is missed), bounded by the deadline; wait_change() does the same for a
//    prefix (elastic membership waits for slots with it).
//
// Note [etcd leases]: a process that uses set_ephemeral() holds one lease
// (GRADWIRE_ETCD_TTL_S, 5 s by default), refreshed by a thread every third
// of it; its ephemeral keys disappear once the process has been dead, cut
// off from the cluster, or done with the store, for the TTL (the lease is
// not revoked at the end: a failure a process published just before it
// closed must stay readable for the others' next look). Elastic members mark themselves present this way
// (Note [elastic generations]), so a host that dies drops out of the
// membership within the TTL even when no collective was running to notice.
// A fixed world over etcd writes all its keys with the lease
// (EtcdOptions::ephemeral_writes): a later run under the same prefix cannot
// read them once the processes that wrote them have been gone for the TTL
// (a new prefix per run, e.g. the job id, needs no wait). A lease that
// expired although this process lives (it was cut off for longer than the
// TTL) is replaced and its keys written again, with a warning: for the
// others it was lost for a while.
#include "bootstrap/etcd_store.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "base/logging.h"
#include "base/raise.h"
#include "bootstrap/http.h"
#include "bootstrap/json.h"
#include "bootstrap/socket.h"

namespace gradwire::bootstrap {

using std::chrono::milliseconds;
using json::base64_decode;
using json::base64_encode;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(',', start);
    out.push_back(text.substr(start, at == std::string::npos ? at : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::vector<EtcdEndpoint> parse_etcd_endpoints(const std::vector<std::string>& items,
                                               const std::string& what) {
  if (items.empty()) {
    raise(ErrorCode::InvalidArgument, "{} is empty (expected the client URLs of the etcd "
          "cluster's members, e.g. http://10.0.0.5:2379,http://10.0.0.6:2379)", what);
  }
  std::vector<EtcdEndpoint> out;
  for (const std::string& item : items) {
    auto bad = [&](const std::string& why) {
      raise(ErrorCode::InvalidArgument, "{}: endpoint '{}' {} (expected http://HOST:PORT, e.g. "
            "http://10.0.0.5:2379, one per member of the etcd cluster, separated by commas)",
            what, item, why);
    };
    std::string rest = item;
    if (rest.empty()) bad("is empty");
    if (rest.find_first_of(" \t\r\n") != std::string::npos) bad("contains white space");
    if (const size_t scheme = rest.find("://"); scheme != std::string::npos) {
      const std::string s = rest.substr(0, scheme);
      if (s == "https") {
        bad("asks for TLS, which gradwire's etcd client does not support yet; use an http:// "
            "client URL on a network only the job's hosts reach");
      }
      if (s != "http") bad(fmt::format("has the scheme '{}'", s));
      rest = rest.substr(scheme + 3);
    }
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    if (rest.find('/') != std::string::npos) bad("has a path (gradwire adds /v3/... itself)");
    size_t colon = rest.rfind(':');
    std::string host;
    if (!rest.empty() && rest[0] == '[') {
      const size_t close = rest.find(']');
      if (close == std::string::npos) bad("has an unclosed '['");
      host = rest.substr(1, close - 1);
      colon = rest.size() > close + 1 && rest[close + 1] == ':' ? close + 1 : std::string::npos;
    } else if (colon != std::string::npos) {
      host = rest.substr(0, colon);
    }
    if (colon == std::string::npos) bad("has no port (etcd's client port is usually 2379)");
    const std::string port_text = rest.substr(colon + 1);
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) bad("has a malformed port");
      port = port * 10 + (c - '0');
    }
    if (port_text.empty() || port < 1 || port > 65535) bad("has a port outside 1..65535");
    if (host.empty()) bad("has no host");
    out.push_back({host, uint16_t(port), "http://" + host_port(host, uint16_t(port))});
  }
  return out;
}

namespace {

// The smallest key after every key that starts with `prefix` (etcd's
// range_end for a prefix; "\0" means "to the end of the key space").
std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = char(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::string b64(const std::string& s) { return base64_encode(s); }

milliseconds ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
}

// A call's answer: the JSON document, and whether an earlier attempt of the
// same call may have been applied (its answer was lost).
struct Answer {
  json::Value doc;
  bool maybe_applied_before = false;
};

// gRPC codes etcd's gateway reports that another member may not have:
// Unavailable (no leader, leader changed, stopping), DeadlineExceeded
// (request timed out), Aborted.
bool retriable_code(int64_t code) { return code == 14 || code == 4 || code == 10; }

// etcd answers a body-level error as {"error": ..., "code": N, "message": ...}
// (unary calls) or {"error": {...}} (streams).
std::string error_text(const json::Value& doc) {
  const json::Value* e = doc.find("error");
  if (!e) return {};
  if (e->is_string()) {
    const json::Value* m = doc.find("message");
    return m && m->is_string() && !m->text.empty() ? m->text : e->text;
  }
  if (const json::Value* m = e->find("message"); m && m->is_string()) return m->text;
  return "an error";
}

class EtcdStore final : public Store {
 public:
  explicit EtcdStore(EtcdOptions o) : o_(std::move(o)), idle_(o_.endpoints.size()) {
    std::string urls;
    for (const auto& e : o_.endpoints) urls += (urls.empty() ? "" : ",") + e.url;
    describe_ = "etcd " + urls;
    current_ = size_t(::getpid()) % o_.endpoints.size();  // spread clients over the members
  }

  ~EtcdStore() override {
    {
      std::lock_guard<std::mutex> lk(lease_mu_);
      stop_ = true;
    }
    lease_cv_.notify_all();
    if (keepalive_.joinable()) keepalive_.join();
    // The lease is left to expire rather than revoked: a failure this
    // process published just before it closed must stay readable for the
    // others' next look (the watchdogs read once a second).
  }

  // A read that proves an endpoint is etcd's v3 gateway.
  void first_contact() {
    const Deadline d = Deadline::after(o_.first_contact);
    range("gradwire/", false, d, "contact the cluster");
  }

  void set(const std::string& key, const std::string& value) override {
    check_key(key);
    put(key, value, o_.ephemeral_writes ? lease() : 0, request_deadline());
  }

  std::optional<std::string> try_get(const std::string& key) override {
    check_key(key);
    return range(key, false, request_deadline(), "read").value;
  }

  std::string get(const std::string& key, Deadline deadline,
                  const std::string& waiting_for) override {
    check_key(key);
    const auto t0 = Clock::now();
    for (;;) {
      const Range r = range(key, false, deadline, "read");
      if (r.value) return *r.value;
      if (auto v = watch_for(key, r.revision + 1, deadline)) return *v;
      if (deadline.expired()) break;
    }
    raise(ErrorCode::Timeout,
          "{}: timed out after {} ms waiting for {} (key '{}'); has it started, with the same "
          "etcd endpoints and job prefix?",
          describe_, ms_since(t0).count(), waiting_for, key);
  }

  bool set_if_absent(const std::string& key, const std::string& value) override {
    check_key(key);
    const int64_t lease_id = o_.ephemeral_writes ? lease() : 0;
    const std::string k = b64(key);
    const std::string body = fmt::format(
        "{{\"compare\":[{{\"key\":\"{}\",\"target\":\"CREATE\",\"create_revision\":\"0\"}}],"
        "\"success\":[{{\"requestPut\":{{\"key\":\"{}\",\"value\":\"{}\"{}}}}}],"
        "\"failure\":[{{\"requestRange\":{{\"key\":\"{}\"}}}}]}}",
        k, k, b64(value), lease_field(lease_id), k);
    Answer a = call("/v3/kv/txn", body, request_deadline(), "write if absent", key);
    if (json::as_bool(a.doc.find("succeeded"))) return true;
    if (!a.maybe_applied_before) return false;
    // Our first attempt may have written it (its answer was lost).
    const json::Value* responses = a.doc.find("responses");
    if (!responses || responses->items.empty()) return false;
    const json::Value* rr = responses->items[0].find("response_range");
    const json::Value* kvs = rr ? rr->find("kvs") : nullptr;
    if (!kvs || kvs->items.empty()) return false;
    return decoded(kvs->items[0].find("value"), key) == value;
  }

  bool set_ephemeral(const std::string& key, const std::string& value) override {
    check_key(key);
    const int64_t id = lease();
    put(key, value, id, request_deadline());
    std::lock_guard<std::mutex> lk(lease_mu_);
    ephemeral_[key] = value;
    return true;
  }

  void wait_change(const std::string& prefix, uint64_t* cursor, Deadline until) override {
    if (*cursor == 0) {
      *cursor = uint64_t(std::max<int64_t>(1, range(prefix, true, until, "read").revision));
      return;
    }
    Watch w;
    w.key = prefix;
    w.range_end = prefix_end(prefix);
    w.start = int64_t(*cursor) + 1;
    if (watch(w, until) && w.revision > 0) *cursor = uint64_t(w.revision);
  }

  std::string describe() const override { return describe_; }

 private:
  struct Range {
    std::optional<std::string> value;  // the first key's (one key, or a prefix)
    int64_t revision = 0;              // the store's revision at the read
  };

  Deadline request_deadline() const { return Deadline::after(o_.request_timeout); }

  void check_key(const std::string& key) const {
    if (key.empty()) raise(ErrorCode::InvalidArgument, "{}: empty key", describe_);
  }

  static std::string lease_field(int64_t id) {
    return id ? fmt::format(",\"lease\":\"{}\"", id) : std::string();
  }

  std::string decoded(const json::Value* v, const std::string& key) const {
    if (!v) return {};  // proto3 leaves an empty value out
    std::optional<std::string> out = v->is_string() ? base64_decode(v->text) : std::nullopt;
    if (!out) {
      raise(ErrorCode::Protocol, "{}: the value of key '{}' is not base64 in etcd's answer",
            describe_, key);
    }
    return *out;
  }

  void put(const std::string& key, const std::string& value, int64_t lease_id, Deadline d) {
    call("/v3/kv/put",
         fmt::format("{{\"key\":\"{}\",\"value\":\"{}\"{}}}", b64(key), b64(value),
                     lease_field(lease_id)),
         d, "write", key);
  }

  // `prefix`: the first key under `key`; with count_only only the revision.
  Range range(const std::string& key, bool prefix, Deadline d, const char* op) {
    std::string body = fmt::format("{{\"key\":\"{}\"", b64(key));
    if (prefix) body += fmt::format(",\"range_end\":\"{}\",\"count_only\":true", b64(prefix_end(key)));
    body += "}";
    Answer a = call("/v3/kv/range", body, d, op, key);
    Range r;
    const json::Value* header = a.doc.find("header");
    r.revision = json::as_int(header ? header->find("revision") : nullptr).value_or(0);
    if (const json::Value* kvs = a.doc.find("kvs"); kvs && !kvs->items.empty() && !prefix) {
      r.value = decoded(kvs->items[0].find("value"), key);
    }
    return r;
  }

  // ---- calls, with failover between the members ------------------------

  std::unique_ptr<http::Connection> take(size_t ep) {
    std::lock_guard<std::mutex> lk(mu_);
    if (idle_[ep].empty()) return nullptr;
    auto c = std::move(idle_[ep].back());
    idle_[ep].pop_back();
    return c;
  }

  void give_back(size_t ep, std::unique_ptr<http::Connection> c) {
    if (!c || !c->reusable()) return;
    std::lock_guard<std::mutex> lk(mu_);
    if (idle_[ep].size() < 8) idle_[ep].push_back(std::move(c));
  }

  // A new connection to endpoint `ep`, or null with `*why` set.
  std::unique_ptr<http::Connection> connect(size_t ep, Deadline d, std::string* why) {
    const EtcdEndpoint& e = o_.endpoints[ep];
    std::string gai;
    const auto addrs = resolve_tcp(e.host, e.port, &gai);
    if (addrs.empty()) {
      *why = fmt::format("cannot resolve '{}': {}", e.host, gai);
      return nullptr;
    }
    int err = 0;
    for (const SockAddr& a : addrs) {
      if (UniqueFd fd = try_connect(a, d, &err)) return std::make_unique<http::Connection>(std::move(fd));
    }
    *why = err == ETIMEDOUT ? "connect timed out" : errno_text(err);
    return nullptr;
  }

  void next_endpoint(size_t failed) {
    std::lock_guard<std::mutex> lk(mu_);
    if (current_ == failed) current_ = (failed + 1) % o_.endpoints.size();
  }

  size_t endpoint() {
    std::lock_guard<std::mutex> lk(mu_);
    return current_;
  }

  // One unary call: POST `path` with `body` to the current member, the next
  // one on failure, until `d`. `op` and `key` are for messages.
  Answer call(const std::string& path, const std::string& body, Deadline d, const char* op,
              const std::string& key) {
    const auto t0 = Clock::now();
    std::vector<std::string> last(o_.endpoints.size());
    Answer answer;
    int failures = 0;
    for (;;) {
      const size_t ep = endpoint();
      const EtcdEndpoint& e = o_.endpoints[ep];
      // An attempt on one member is bounded, so that a stopped or cut-off
      // member does not hold the call until its deadline.
      const Deadline attempt(std::min(d.at(), Clock::now() + milliseconds(5000)));
      std::string why;
      bool sent = false;
      // A kept-alive connection that the server closed since (it closes
      // idle ones) fails at once, before the request was read: one more try
      // on a new connection before the member counts as failed.
      std::unique_ptr<http::Connection> c = take(ep);
      bool reused = c != nullptr;
      for (;;) {
        if (!c) {
          reused = false;
          c = connect(ep, Deadline(std::min(attempt.at(), Clock::now() + milliseconds(2000))), &why);
          if (!c) break;
        }
        why.clear();
        http::ResponseHead head;
        std::string text;
        if (c->post(e.host + ":" + std::to_string(e.port), path, body, attempt, &why) !=
            http::Status::Ok) {
          if (reused) {
            c.reset();
            continue;
          }
          break;
        }
        const http::Status hs = c->read_head(&head, attempt, &why);
        if (hs == http::Status::NotHttp) {
          raise(ErrorCode::Protocol, "{} ({}): {} answered {} to {}: it does not speak HTTP; is "
                "it an etcd client URL ({})?", describe_, op, e.url, why, path, o_.source);
        }
        const bool got_head = hs == http::Status::Ok;
        if (!got_head && reused && why == "the server closed the connection") {
          c.reset();
          continue;
        }
        sent = true;
        if (!got_head || c->read_body(head, &text, attempt, &why) != http::Status::Ok) break;
        std::string jerr;
        auto doc = json::parse(text, &jerr);
        if (head.status == 404) {
          raise(ErrorCode::Protocol, "{} ({}): {} answered HTTP 404 to {}: not an etcd v3 JSON "
                "gateway (etcd 3.4 or later serves it on its client URL; is {} right?)",
                describe_, op, e.url, path, o_.source);
        }
        if (!doc) {
          raise(ErrorCode::Protocol, "{} ({} key '{}'): {} answered HTTP {} with a body that is "
                "not JSON ({}): is it an etcd client URL ({})?", describe_, op, key, e.url,
                head.status, jerr, o_.source);
        }
        const std::string etext = error_text(*doc);
        if (head.status != 200 || !etext.empty()) {
          const int64_t code = json::as_int(doc->find("code")).value_or(-1);
          if (head.status == 503 || retriable_code(code)) {
            why = fmt::format("etcd: {}", etext);
            give_back(ep, std::move(c));
            break;
          }
          raise(ErrorCode::Protocol, "{}: {} of key '{}' refused by {} (HTTP {}): {}", describe_,
                op, key, e.url, head.status, etext.empty() ? text.substr(0, 200) : etext);
        }
        give_back(ep, std::move(c));
        answer.doc = std::move(*doc);
        return answer;
      }
      if (sent) answer.maybe_applied_before = true;
      last[ep] = why;
      next_endpoint(ep);
      ++failures;
      if (d.expired()) break;
      // Once every member failed in turn, back off a little (a cluster
      // electing a leader answers Unavailable for about a second).
      if (failures % int(o_.endpoints.size()) == 0) {
        std::this_thread::sleep_for(std::min(milliseconds(50 * std::min(failures, 10)), d.remaining()));
      }
      if (d.expired()) break;
    }
    std::string each;
    for (size_t i = 0; i < last.size(); ++i) {
      each += fmt::format("{}{}: {}", each.empty() ? "" : "; ", o_.endpoints[i].url,
                          last[i].empty() ? "not tried" : last[i]);
    }
    raise(ErrorCode::Transport,
          "{}: could not {}{} within {} ms: no member of the cluster answered ({}); likely "
          "cause: etcd is not running there, has lost its quorum, or {} is wrong",
          describe_, op, key.empty() ? "" : fmt::format(" key '{}'", key), ms_since(t0).count(),
          each, o_.source);
  }

  // ---- watches ---------------------------------------------------------

  struct Watch {
    std::string key, range_end;
    int64_t start = 0;
    // Out: the newest revision among the events, and the first PUT's value.
    int64_t revision = 0;
    std::optional<std::string> put_value;
  };

  // Watches from w.start until the first events or `until`. True when
  // events arrived; false at `until` or when the stream broke (the caller
  // reads again: spurious returns are allowed, and a failed member is
  // skipped on the next try).
  bool watch(Watch& w, Deadline until) {
    const size_t ep = endpoint();
    const EtcdEndpoint& e = o_.endpoints[ep];
    std::string why;
    auto c = connect(ep, Deadline(std::min(until.at(), Clock::now() + milliseconds(2000))), &why);
    if (!c) {
      next_endpoint(ep);
      pause(until);
      return false;
    }
    std::string body = fmt::format("{{\"create_request\":{{\"key\":\"{}\",\"start_revision\":\"{}\"",
                                   b64(w.key), w.start);
    if (!w.range_end.empty()) body += fmt::format(",\"range_end\":\"{}\"", b64(w.range_end));
    body += "}}";
    http::ResponseHead head;
    if (c->post(e.host + ":" + std::to_string(e.port), "/v3/watch", body, until, &why) !=
            http::Status::Ok ||
        c->read_head(&head, until, &why) != http::Status::Ok) {
      if (!until.expired()) next_endpoint(ep);
      return false;
    }
    if (head.status != 200 || !head.chunked) {
      next_endpoint(ep);
      pause(until);
      return false;
    }
    for (;;) {
      std::string message;
      const http::Status s = c->next_message(&message, until, &why);
      if (s == http::Status::TimedOut) return false;
      if (s != http::Status::Ok) {
        log().debug("{}: watch of '{}' on {} ended: {}", describe_, w.key, e.url, why);
        next_endpoint(ep);
        pause(until);
        return false;
      }
      std::string jerr;
      auto doc = json::parse(message, &jerr);
      if (!doc) {
        raise(ErrorCode::Protocol, "{}: a watch answer from {} is not JSON ({})", describe_,
              e.url, jerr);
      }
      if (!error_text(*doc).empty()) {
        log().debug("{}: watch of '{}' on {}: {}", describe_, w.key, e.url, error_text(*doc));
        next_endpoint(ep);
        pause(until);
        return false;
      }
      const json::Value* result = doc->find("result");
      if (!result) continue;
      // Canceled: the start revision was compacted away; read again.
      if (json::as_bool(result->find("canceled"))) return false;
      const json::Value* events = result->find("events");
      if (!events || events->items.empty()) continue;  // "created", progress notices
      for (const json::Value& ev : events->items) {
        const json::Value* kv = ev.find("kv");
        const int64_t rev = json::as_int(kv ? kv->find("mod_revision") : nullptr).value_or(0);
        w.revision = std::max(w.revision, rev);
        const json::Value* type = ev.find("type");
        const bool is_put = !type || (type->is_string() && type->text == "PUT");
        if (is_put && kv && !w.put_value) w.put_value = decoded(kv->find("value"), w.key);
      }
      return true;
    }
  }

  static void pause(Deadline until) {
    std::this_thread::sleep_for(std::min(milliseconds(50), until.remaining()));
  }

  // The value of `key` once written after revision `start`; nullopt at `d`
  // or when the watch must be made again.
  std::optional<std::string> watch_for(const std::string& key, int64_t start, Deadline d) {
    Watch w;
    w.key = key;
    w.start = start;
    if (!watch(w, d)) return std::nullopt;
    return w.put_value;
  }

  // ---- the lease -------------------------------------------------------

  // This process's lease, granted on first use, with its keepalive thread.
  int64_t lease() {
    std::lock_guard<std::mutex> lk(lease_mu_);
    if (lease_ == 0) {
      lease_ = grant();
      keepalive_ = std::thread([this] { keep_alive(); });
    }
    return lease_;
  }

  int64_t grant() {
    Answer a = call("/v3/lease/grant", fmt::format("{{\"TTL\":\"{}\"}}", o_.ttl.count()),
                    request_deadline(), "grant a lease", "");
    const auto id = json::as_int(a.doc.find("ID"));
    if (!id || *id == 0) {
      raise(ErrorCode::Protocol, "{}: etcd granted no lease (its answer holds no ID)", describe_);
    }
    return *id;
  }

  void keep_alive() {
    const milliseconds period = std::max(milliseconds(200), milliseconds(o_.ttl) / 3);
    std::unique_lock<std::mutex> lk(lease_mu_);
    for (;;) {
      if (lease_cv_.wait_for(lk, period, [&] { return stop_; })) return;
      const int64_t id = lease_;
      lk.unlock();
      bool expired = false;
      try {
        Answer a = call("/v3/lease/keepalive", fmt::format("{{\"ID\":\"{}\"}}", id),
                        Deadline::after(period), "refresh the lease", "");
        const json::Value* result = a.doc.find("result");
        expired = json::as_int(result ? result->find("TTL") : nullptr).value_or(0) <= 0;
      } catch (const Error& e) {
        log().debug("{}: lease keepalive failed: {}", describe_, e.what());
      }
      if (expired) renew(id);
      lk.lock();
    }
  }

  // The lease expired while this process lived: a new one, and every
  // ephemeral key written again with it.
  void renew(int64_t old) {
    try {
      const int64_t id = grant();
      std::map<std::string, std::string> keys;
      {
        std::lock_guard<std::mutex> lk(lease_mu_);
        lease_ = id;
        keys = ephemeral_;
      }
      log().warn("{}: lease {} expired although this process is alive (cut off from etcd for "
                 "longer than its TTL of {} s?); its keys are written again under lease {}",
                 describe_, old, o_.ttl.count(), id);
      for (const auto& [k, v] : keys) put(k, v, id, request_deadline());
    } catch (const Error& e) {
      log().warn("{}: could not replace expired lease {}: {}", describe_, old, e.what());
    }
  }

  EtcdOptions o_;
  std::string describe_;
  std::mutex mu_;
  size_t current_ = 0;
  std::vector<std::vector<std::unique_ptr<http::Connection>>> idle_;
  std::mutex lease_mu_;
  std::condition_variable lease_cv_;
  bool stop_ = false;
  int64_t lease_ = 0;
  std::map<std::string, std::string> ephemeral_;
  std::thread keepalive_;
};

}  // namespace

std::unique_ptr<Store> make_etcd_store(const EtcdOptions& options) {
  if (options.endpoints.empty()) {
    raise(ErrorCode::InvalidArgument, "etcd store: no endpoints ({})", options.source);
  }
  if (options.ttl.count() < 1) {
    raise(ErrorCode::InvalidArgument, "etcd store: lease TTL {} s (expected >= 1)", options.ttl.count());
  }
  auto store = std::make_unique<EtcdStore>(options);
  store->first_contact();
  return store;
}

}  // namespace gradwire::bootstrap
