// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// How a process learns its place in the job and exchanges small blobs
// (endpoint names, host names) with the other ranks before the fabric is up.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "gradwire/options.h"
#include "gradwire/rendezvous.h"

namespace gradwire::bootstrap {

class Store;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank within this host (LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_RANK), or -1.
  virtual int local_rank() const = 0;
  // Every rank calls this with its own blob, in the same order of calls;
  // returns every rank's blob, indexed by rank. Fails with Timeout naming
  // the ranks that had not contributed by `deadline`.
  virtual std::vector<std::string> allgather(const std::string& mine, Deadline deadline) = 0;
  // "mpirun", "torchrun store 127.0.0.1:29500", "file store /tmp/x".
  virtual std::string describe() const = 0;
  // The key-value store behind this bootstrap, if it has one (torchrun env,
  // file store); the watchdog reports failures through it (Note [watchdog]).
  virtual Store* store() { return nullptr; }
};

// Picks the launcher from the environment, in this order:
//  1. OMPI_COMM_WORLD_SIZE set          -> MPI (MPI_Init if needed)
//  2. GRADWIRE_STORE_DIR set            -> file store (needs RANK, WORLD_SIZE)
//  3. MASTER_ADDR or RANK set           -> TCP store (torchrun convention)
//     (MASTER_PORT or WORLD_SIZE alone also selects it, and then fails
//     naming the missing variables, rather than silently running alone)
//  4. SLURM_STEP_ID set (a task of srun) -> TCP store on the step's first
//     node (Note [launching under Slurm] in slurm.cpp; a batch script of
//     several tasks, with SLURM_JOB_ID but no SLURM_STEP_ID, fails)
//  5. nothing set                       -> a world of one rank
// Missing or malformed variables: InvalidArgument naming the variable.
// LOCAL_RANK is optional (-1 when unset) but checked when set. The TCP store
// server runs in rank 0 and binds MASTER_ADDR:MASTER_PORT; every store wait
// is bounded by options.timeout.
std::unique_ptr<Bootstrap> from_environment(const Options& options);

// The Bootstrap for an explicit rendezvous (Note [explicit rendezvous] in
// environment.cpp); from_environment is make(Rendezvous::from_environment()).
// InvalidArgument naming the field for a value that cannot work.
std::unique_ptr<Bootstrap> make(const Rendezvous& rendezvous, const Options& options);

// The mpirun (Open MPI) bootstrap: MPI_Init_thread if MPI is not initialized
// yet (then MPI_Finalize runs at exit), rank/size from MPI_COMM_WORLD,
// local rank from OMPI_COMM_WORLD_LOCAL_RANK. Collective: every rank calls it.
std::unique_ptr<Bootstrap> make_mpi_bootstrap();

// A world of exactly one rank (no launcher).
std::unique_ptr<Bootstrap> single_process();

}  // namespace gradwire::bootstrap
