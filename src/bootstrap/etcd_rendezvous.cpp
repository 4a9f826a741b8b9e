// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The etcd rendezvous (Rendezvous::Kind::Etcd): read from the environment
// (GRADWIRE_ETCD_ENDPOINTS, GRADWIRE_ETCD_PREFIX, optionally RANK and
// WORLD_SIZE) as strictly as the other launchers' variables, checked as a
// filled-in value, and turned into the job's store.
#include <fmt/format.h>

#include <climits>
#include <map>
#include <mutex>

#include "base/env_values.h"
#include "base/logging.h"
#include "base/raise.h"
#include "bootstrap/env.h"
#include "bootstrap/etcd_store.h"

namespace gradwire::bootstrap {

namespace {

// A job prefix names the job's part of a cluster other jobs may share.
void check_prefix(const std::string& prefix, const char* what) {
  auto bad = [&](const char* why) {
    raise(ErrorCode::InvalidArgument, "{}='{}' {} (expected the job's own prefix of keys in "
          "etcd, e.g. /gradwire/<job id>/: printable, no spaces, at most 512 bytes; jobs that "
          "share an etcd cluster need different prefixes)", what, prefix.substr(0, 80), why);
  };
  if (prefix.empty()) bad("is empty");
  if (prefix.size() > 512) bad("is too long");
  for (char c : prefix) {
    if (c <= ' ' || c > '~') bad("holds a space or a character that is not printable ASCII");
  }
}

int integer_var(const char* name, int lo, int hi, const std::string& expected) {
  return env::parse_int_in(name, env::get(name).value_or(""), lo, hi, expected);
}

}  // namespace

std::chrono::seconds etcd_ttl() {
  const char* v = gradwire::env::required_value("GRADWIRE_ETCD_TTL_S");
  if (!v) return EtcdOptions{}.ttl;
  const std::string text = v;
  auto n = env::parse_int(text);
  if (!n || *n < 1 || *n > 3600) {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_ETCD_TTL_S='{}' is not a whole number of "
          "seconds in 1..3600 (the lease of each process in etcd: how soon a dead process drops "
          "out of an elastic job's membership)", text);
  }
  return std::chrono::seconds(*n);
}

Rendezvous etcd_rendezvous(const std::string& endpoints_text) {
  const auto items = split_list(endpoints_text);
  parse_etcd_endpoints(items, "GRADWIRE_ETCD_ENDPOINTS");  // fails here, naming the variable
  auto prefix = env::get("GRADWIRE_ETCD_PREFIX");
  if (!prefix) {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_ETCD_ENDPOINTS is set but GRADWIRE_ETCD_PREFIX "
          "is not (expected the job's own prefix of keys in etcd, e.g. /gradwire/<job id>/, the "
          "same for every process of the job; jobs that share an etcd cluster need different "
          "prefixes)");
  }
  check_prefix(*prefix, "GRADWIRE_ETCD_PREFIX");
  Rendezvous r = Rendezvous::etcd(items, *prefix);
  const bool has_size = env::get("WORLD_SIZE").has_value(), has_rank = env::get("RANK").has_value();
  if (has_rank != has_size) {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_ETCD_ENDPOINTS is set with {} but not {} (a "
          "fixed world over etcd needs both; an elastic job, whose ranks gradwire assigns, "
          "neither)", has_rank ? "RANK" : "WORLD_SIZE", has_rank ? "WORLD_SIZE" : "RANK");
  }
  if (has_size) {
    r.size = integer_var("WORLD_SIZE", 1, INT_MAX, "WORLD_SIZE >= 1");
    r.rank = integer_var("RANK", 0, r.size - 1, fmt::format("0 <= RANK < WORLD_SIZE={}", r.size));
  }
  if (env::get("LOCAL_RANK")) {
    r.local_rank = integer_var("LOCAL_RANK", 0, INT_MAX, "LOCAL_RANK >= 0");
    if (r.size > 0 && r.local_rank >= r.size) {
      raise(ErrorCode::InvalidArgument, "LOCAL_RANK={} is out of range (expected 0 <= "
            "LOCAL_RANK < WORLD_SIZE={})", r.local_rank, r.size);
    }
  }
  return r;
}

std::unique_ptr<Store> make_etcd_job_store(const Rendezvous& r, std::chrono::milliseconds timeout,
                                           bool ephemeral_writes) {
  EtcdOptions o;
  o.source = "Rendezvous::endpoints (GRADWIRE_ETCD_ENDPOINTS)";
  o.endpoints = parse_etcd_endpoints(r.endpoints, o.source);
  check_prefix(r.key_prefix, "Rendezvous::key_prefix (GRADWIRE_ETCD_PREFIX)");
  o.request_timeout = timeout;
  o.first_contact = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(30));
  o.ttl = etcd_ttl();
  o.ephemeral_writes = ephemeral_writes;
  return prefix_store(make_etcd_store(o), r.key_prefix);
}

// Note [world generations] for etcd: the n-th fixed world this process's
// `rank` creates under one prefix (as next_world_generation for the TCP
// store): a world made again in the same job keeps to its own keys.
uint64_t next_etcd_world(const Rendezvous& r) {
  static std::mutex mu;
  static auto* counts = new std::map<std::string, uint64_t>;
  std::string key = r.key_prefix + "#" + std::to_string(r.rank);
  for (const auto& e : r.endpoints) key += "#" + e;
  std::lock_guard<std::mutex> lk(mu);
  return (*counts)[key]++;
}

}  // namespace gradwire::bootstrap
