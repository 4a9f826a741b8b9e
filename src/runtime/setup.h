// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bringing a communicator up: bootstrap, provider choice, endpoint address
// exchange, a first barrier that proves every rank is reachable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/communicator_impl.h"

namespace gradwire::setup {

// The provider and interface every rank will use. Pure: tested without ranks.
struct FabricChoice {
  std::string provider;
  std::string iface;
};
// `requested` is Options::provider/iface (identical on every rank, checked
// before), `hosts` every rank's host name, `available` the providers this
// libfabric offers (Note [the provider across hosts] in setup.cpp).
FabricChoice choose_fabric(const std::string& requested_provider,
                           const std::string& requested_iface,
                           const std::vector<std::string>& hosts,
                           const std::vector<std::string>& available);

std::unique_ptr<CommunicatorImpl> create_world(const Options& options,
                                               const Rendezvous& rendezvous);
// The same over a bootstrap the caller made (elastic generations: a store
// view per generation); `options` already has its environment overrides
// applied and is validated.
std::unique_ptr<CommunicatorImpl> create_world_over(const Options& options,
                                                    std::unique_ptr<bootstrap::Bootstrap> boot);
std::unique_ptr<CommunicatorImpl> split(CommunicatorImpl& parent, const std::vector<int>& ranks);

}  // namespace gradwire::setup
