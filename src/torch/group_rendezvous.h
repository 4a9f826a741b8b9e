// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bringing up a Communicator for a group whose members already share some
// other rendezvous (a c10d store, or mpirun), through gradwire's own
// torchrun-style TCP store (Note [group bootstrap]). Used by
// Backend::create (c10d_backend.cpp) and mpi_master_address.
#pragma once

#include <memory>
#include <string>

#include "gradwire/communicator.h"

namespace gradwire::torch::detail {

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

// Note [group bootstrap]: each torch.distributed group (world and
// new_group alike) gets its own Communicator whose ranks are exactly the
// group's ranks: group rank 0 publishes an address, a free port and (unless
// the user set GRADWIRE_JOB_SECRET) a fresh secret in torch's store, and
// every member joins gradwire's TCP store there through an explicit
// Rendezvous (Note [explicit rendezvous] in src/bootstrap/environment.cpp);
// LOCAL_RANK and the launcher variables play no part. Before the public
// Communicator::create(options, rendezvous) existed, this presented the
// torchrun convention with setenv/unsetenv under a process-wide mutex.
// `secret` empty: the environment's GRADWIRE_JOB_SECRET (if any) is used.
std::unique_ptr<Communicator> create_at(const Options& options, int rank, int size,
                                        const std::string& host, int port,
                                        const std::string& secret = {});

}  // namespace gradwire::torch::detail
