// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A Store over an etcd cluster (v3 API, through its JSON gateway; Note [etcd
// over its JSON gateway] in etcd_store.cpp): the store of elastic jobs across
// hosts, which outlives every member (gradwire/elastic.h), and of fixed
// worlds that have no rank 0 to serve one. Internal to src/bootstrap.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.h"
#include "gradwire/rendezvous.h"

namespace gradwire::bootstrap {

// One member of the cluster, as given ("http://10.0.0.5:2379" or
// "10.0.0.5:2379"; a name or an IPv6 literal in brackets).
struct EtcdEndpoint {
  std::string host;
  uint16_t port = 0;
  std::string url;  // "http://host:port", for messages
};

// Parses `items` strictly: InvalidArgument naming `what` (the variable or
// Rendezvous field they came from) for an empty list, a scheme other than
// http ("https": TLS is not supported yet), a path, a missing or bad port.
std::vector<EtcdEndpoint> parse_etcd_endpoints(const std::vector<std::string>& items,
                                               const std::string& what);
// "a,b,c" -> {"a", "b", "c"} (empty items kept: parse_etcd_endpoints names them).
std::vector<std::string> split_list(const std::string& text);

struct EtcdOptions {
  std::vector<EtcdEndpoint> endpoints;
  // Where the endpoints came from ("GRADWIRE_ETCD_ENDPOINTS"), for messages.
  std::string source = "the etcd endpoints";
  // How long a call that has no deadline of its own (set, try_get,
  // set_if_absent) keeps trying the endpoints in turn before it fails.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(300)};
  // make_etcd_store() fails unless some endpoint answers within this.
  std::chrono::milliseconds first_contact{std::chrono::seconds(30)};
  // The lease of set_ephemeral() (Note [etcd leases]), whole seconds >= 1
  // (etcd raises a shorter TTL to its own minimum, 2 s with its default
  // heartbeat and election timeout).
  std::chrono::seconds ttl{5};
  // Every write is bound to this process's lease (a fixed world's keys
  // vanish with the processes that wrote them: Note [etcd leases]).
  bool ephemeral_writes = false;
};

// Contacts the cluster (a read that proves an endpoint is an etcd v3 JSON
// gateway) before it returns: Transport naming every endpoint and what each
// answered when none did within options.first_contact, Protocol when one
// answered but is not etcd.
std::unique_ptr<Store> make_etcd_store(const EtcdOptions& options);

// GRADWIRE_ETCD_TTL_S (1..3600), else EtcdOptions::ttl's default.
std::chrono::seconds etcd_ttl();
// Rendezvous::from_environment() when GRADWIRE_ETCD_ENDPOINTS is set
// (`endpoints_text` is its value): GRADWIRE_ETCD_PREFIX required, RANK and
// WORLD_SIZE both (a fixed world) or neither (size 0: an elastic job),
// LOCAL_RANK optional. InvalidArgument naming the variable.
Rendezvous etcd_rendezvous(const std::string& endpoints_text);
// The store of an Etcd rendezvous: its endpoints and prefix checked
// (InvalidArgument naming the field), calls bounded by `timeout` (the first
// contact by at most 30 s of it), every key under r.key_prefix.
std::unique_ptr<Store> make_etcd_job_store(const Rendezvous& r, std::chrono::milliseconds timeout,
                                           bool ephemeral_writes);
// Note [world generations] for etcd: the n-th fixed world of this process's
// r.rank under r.key_prefix (0 for the first).
uint64_t next_etcd_world(const Rendezvous& r);

}  // namespace gradwire::bootstrap
