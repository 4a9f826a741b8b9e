// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A key-value store for rendezvous: a TCP server on rank 0 (torchrun
// convention) or a shared directory (tests). Values are opaque bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/deadline.h"

namespace gradwire::bootstrap {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists; Timeout at `deadline`, naming `waiting_for`
  // (e.g. "rank 3") in the message.
  virtual std::string get(const std::string& key, Deadline deadline,
                          const std::string& waiting_for) = 0;
  virtual std::string describe() const = 0;
};

// TCP store. The server runs on a thread of the process with is_server set
// and binds only to `host` (never a wildcard unless host is "0.0.0.0"/"::").
// Clients connect with exponential backoff and jitter until `deadline`, then
// fail with Timeout naming host:port.
std::unique_ptr<Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                      Deadline deadline);
// File store: one file per key in `dir` (written atomically by rename).
std::unique_ptr<Store> make_file_store(const std::string& dir);

// A Bootstrap over any store: allgather round n writes "ag/<n>/<rank>" and
// reads every other rank's key.
std::unique_ptr<Bootstrap> make_store_bootstrap(std::unique_ptr<Store> store, int rank, int size,
                                                int local_rank);

}  // namespace gradwire::bootstrap
