// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace gradwire::transport::ofi {

using Config = transport::Config;

// Opens fabric, domain, completion queue, address vector and an RDM
// endpoint with FI_TAGGED. Throws Transport (naming provider and call) on
// failure, InvalidArgument if the provider does not exist here.
std::unique_ptr<Transport> open(const Config& config);

// Names of the providers fi_getinfo offers for RDM + tagged on this machine.
std::vector<std::string> available_providers();

}  // namespace gradwire::transport::ofi
