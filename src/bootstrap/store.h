// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A key-value store for rendezvous: a TCP server on rank 0 (torchrun
// convention), an etcd cluster (etcd_store.h), a shared directory or a map
// in this process's memory (tests). Values are opaque bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "bootstrap/bootstrap.h"
#include "base/deadline.h"

namespace gradwire::bootstrap {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists; Timeout at `deadline`, naming `waiting_for`
  // (e.g. "rank 3") in the message.
  virtual std::string get(const std::string& key, Deadline deadline,
                          const std::string& waiting_for) = 0;
  // The value of `key` if it exists now, without waiting for it (one round
  // trip for the TCP store). Used to name every missing rank at a deadline.
  virtual std::optional<std::string> try_get(const std::string& key) = 0;
  // Writes `key` only if it does not exist yet; true if this call wrote it.
  // Atomic: of concurrent callers (threads or processes) exactly one wins.
  // Elastic membership claims its slots with it (Note [elastic generations]
  // in src/elastic/group.cpp). The TCP store does not offer it yet: this
  // default raises InvalidArgument naming the store.
  virtual bool set_if_absent(const std::string& key, const std::string& value);
  // Writes `key` bound to this process's lease (Note [etcd leases] in
  // etcd_store.cpp): the key disappears once this process has died, or lost
  // the store, or destroyed this Store, for the store's TTL.
  // False, writing nothing, where the store has no leases (the default).
  virtual bool set_ephemeral(const std::string& key, const std::string& value);
  // Returns once a key under `prefix` was written or deleted after
  // `*cursor`, or at `until`, whichever comes first; spurious returns are
  // allowed, lost changes are not. `*cursor` is the store's own position:
  // 0 at first, which returns at once having set it, so that a caller reads
  // what it needs after that and then waits for anything newer:
  //   uint64_t cursor = 0;
  //   for (;;) { read what you need; decide; store.wait_change(p, &cursor, d); }
  // A store that can watch (etcd) wakes on the change; the default sleeps
  // 10 ms (a poll).
  virtual void wait_change(const std::string& prefix, uint64_t* cursor, Deadline until);
  // Leaves a last will (Note [a connection's last will] in
  // tcp_store_server.h): should this process lose the store without
  // destroying this Store (it died, its host or its link went down), the
  // store writes `value` to `key`, unless `key` exists. Destroying the Store
  // withdraws it. False where the store cannot tell that a process is gone
  // (file and in-process stores: the default); throws as set() does.
  virtual bool set_will(const std::string& key, const std::string& value);
  virtual std::string describe() const = 0;
};

// TCP store. The server runs on a thread of the process with is_server set
// and binds only to `host` (never a wildcard unless host, or
// TcpStoreOptions::bind_host, is "0.0.0.0"/"::"). Every connection first
// passes the store handshake (Note [store handshake] in store_wire.h):
// same protocol version, and with a secret, HMAC proofs both ways.
// Clients connect with exponential backoff and jitter until `deadline`, then
// fail with Timeout naming host:port.
// `deadline` bounds the first connection; later requests without a deadline
// of their own (set, try_get) get as long as the first connection was given.
// Keys are 1..4 KiB, values at most 16 MiB (InvalidArgument otherwise). A
// server that goes away mid-job: PeerLost naming host:port. A store that
// refuses this process, or that this process refuses: Unauthenticated
// (secret mismatch, missing secret) or Protocol (another gradwire version,
// not a gradwire store, malformed bytes).
std::unique_ptr<Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                      Deadline deadline);

struct TcpStoreOptions {
  // How long the server, when its Store is destroyed, keeps serving clients
  // that are still connected (ranks still reading rank 0's keys).
  std::chrono::milliseconds linger{std::chrono::seconds(5)};
  // The job secret, 16..1024 bytes (GRADWIRE_JOB_SECRET). Set: the server
  // lets in only clients that prove it and a client uses only a store that
  // proves it. Empty: no authentication, either way.
  std::string secret;
  // Where the server listens; empty: `host`, the address clients connect to
  // (GRADWIRE_STORE_BIND).
  std::string bind_host;
};
std::unique_ptr<Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                      Deadline deadline, const TcpStoreOptions& options);

// Note [a failed job does not linger]: caps, for the rest of the process,
// how long this process's store servers linger for connected clients when
// they close (TcpStoreOptions::linger). Called when the job has failed.
void cap_store_linger(std::chrono::milliseconds cap);
// A failed job's linger: a live rank's watchdog reads the failure key
// within a second (its polling period), so this is enough for it to learn.
constexpr std::chrono::milliseconds kFailedJobLinger{1500};
// Note [world generations] (tcp_store.cpp): the n-th world that `rank` of
// this process creates over the TCP store at host:port (0 for the first).
// Every rank counts alike, because worlds are created collectively.
uint64_t next_world_generation(const std::string& host, uint16_t port, int rank);
// A view of `store` in which every key is `prefix` + key.
std::unique_ptr<Store> prefix_store(std::unique_ptr<Store> store, std::string prefix);
// A Store that forwards to `store`, which it shares (it outlives any one
// communicator's bootstrap: elastic generations reuse one store).
std::unique_ptr<Store> shared_store(std::shared_ptr<Store> store);

// Etcd store (etcd_store.h): make_etcd_store().

// File store: one file per key in `dir` (written atomically by rename).
// `dir` is created if missing. It must be fresh for each job: keys left by an
// earlier run would be read as this run's.
std::unique_ptr<Store> make_file_store(const std::string& dir);
// A Store over an InProcessStore (gradwire/rendezvous.h): ranks that are
// threads of one process. Deadlines and Timeout messages as the others.
std::unique_ptr<Store> share_in_process_store(std::shared_ptr<InProcessStore> store);

// Store requests this thread has made (set, get, try_get, set_if_absent,
// set_will of the TCP, file and in-process stores): how a test counts a
// rank's start-up traffic (ranks as threads, Note [an allgather in two
// store requests] in store_bootstrap.cpp). count_store_request() is what
// each request calls.
uint64_t store_requests_on_this_thread();
void count_store_request();

// A Bootstrap over any store: allgather round n writes "ag/<n>/<rank>" and
// reads every other rank's key.
std::unique_ptr<Bootstrap> make_store_bootstrap(std::unique_ptr<Store> store, int rank, int size,
                                                int local_rank);

}  // namespace gradwire::bootstrap
