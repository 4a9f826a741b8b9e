// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace gradwire::transport::ofi {

struct Config {
  std::string provider;        // "" is not allowed here: resolved by the caller
  std::string iface;           // tcp: interface/domain name, e.g. "lo"; "" = any
  bool always_register = false;
  int rank = 0;                // for messages only
  size_t mr_cache_entries = 64;  // registrations kept before LRU eviction
  // Longest wait for the provider to confirm cancellations in cancel_all().
  int cancel_timeout_ms = 2000;
  // Test hook: split messages larger than this even if the provider takes
  // more (0 = use the provider's max_msg_size).
  size_t max_msg_size_override = 0;
  // Called between retries of a post the provider refused (-FI_EAGAIN),
  // after this transport's own progress(). A refusal can need the peer to
  // make progress (shm and tcp;ofi_rxm set up a connection on first send),
  // so a thread that drives several transports, e.g. a test holding both
  // ranks, passes a function that progresses the others.
  std::function<void()> while_refused;
};

// Opens fabric, domain, completion queue, address vector and an RDM
// endpoint with FI_TAGGED. Throws Transport (naming provider and call) on
// failure, InvalidArgument if the provider does not exist here.
std::unique_ptr<Transport> open(const Config& config);

// Names of the providers fi_getinfo offers for RDM + tagged on this machine.
std::vector<std::string> available_providers();

}  // namespace gradwire::transport::ofi
