// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace gradwire::transport::ofi {

struct Config {
  std::string provider;        // "" is not allowed here: resolved by the caller
  std::string iface;           // tcp: interface/domain name, e.g. "lo"; "" = any
  bool always_register = false;
  int rank = 0;                // for messages only
};

// Opens fabric, domain, completion queue, address vector and an RDM
// endpoint with FI_TAGGED. Throws Transport (naming provider and call) on
// failure, InvalidArgument if the provider does not exist here.
std::unique_ptr<Transport> open(const Config& config);

// Names of the providers fi_getinfo offers for RDM + tagged on this machine.
std::vector<std::string> available_providers();

}  // namespace gradwire::transport::ofi
