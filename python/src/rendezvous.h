// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bringing up a Communicator for a group whose members already share some
// other rendezvous (torch.distributed's store, or mpirun), through gradwire's
// own torchrun-style TCP store (Note [group bootstrap]).
#pragma once

#include <memory>
#include <string>

#include "gradwire/communicator.h"

namespace gradwire::python {

// An IPv4 address of this host that the other ranks can reach: 127.0.0.1
// when `peer_host` is a loopback name or empty, else the address of the
// interface that routes to `peer_host` (no packet is sent).
std::string reachable_address(const std::string& peer_host);

// A TCP port that is free on `host` right now (the kernel's choice).
int free_port(const std::string& host);

// A fresh job secret for a group's store: 32 bytes from the kernel's
// CSPRNG (getrandom), as 64 hex characters.
std::string random_secret();

// Group rank 0's published rendezvous, "host port" or "host port secret";
// Protocol error when `text` is anything else (it comes from another
// process through torch's store).
struct GroupRendezvous {
  std::string host;
  int port = 0;
  std::string secret;  // empty: GRADWIRE_JOB_SECRET from the environment, if any
};
GroupRendezvous parse_rendezvous(const std::string& text);

// Note [group bootstrap]: the public API creates a Communicator only from the
// environment (Communicator::create). To give each torch.distributed group
// (world and new_group alike) its own Communicator whose ranks are exactly
// the group's ranks, we present the torchrun convention for the duration of
// create(): RANK/WORLD_SIZE = the group rank/size, MASTER_ADDR and
// GRADWIRE_STORE_PORT = the address group rank 0 published, with the
// variables that would select another launcher (OMPI_COMM_WORLD_SIZE,
// GRADWIRE_STORE_DIR) and LOCAL_RANK hidden, and GRADWIRE_JOB_SECRET = the
// group's secret when rank 0 published one; the environment is restored
// afterwards. A process-wide mutex serialises these windows. (Other threads
// reading the environment meanwhile would see the group's values; nothing in
// gradwire or torch reads these variables after start-up.) A public
// Communicator::create taking a rendezvous would remove this.
// `secret` empty: the environment's GRADWIRE_JOB_SECRET (if any) is used.
std::unique_ptr<Communicator> create_at(const Options& options, int rank, int size,
                                        const std::string& host, int port,
                                        const std::string& secret = {});

}  // namespace gradwire::python
