// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Launching under Slurm (Note [launching under Slurm] in slurm.cpp).
// Internal to src/bootstrap.
#pragma once

#include <cstdint>
#include <string>

#include "base/deadline.h"
#include "gradwire/rendezvous.h"

namespace gradwire::bootstrap {

class Store;

// True when any variable that Slurm sets for a job is present
// (SLURM_JOB_ID, SLURM_PROCID, SLURM_STEP_ID or SLURM_STEPID):
// from_environment() then asks slurm_rendezvous().
bool in_slurm_job();

// The rendezvous of this process under Slurm, read strictly:
//  - a task that srun started (SLURM_STEP_ID set): TcpStore, rank
//    SLURM_PROCID of SLURM_STEP_NUM_TASKS, the store on the step's first
//    node at slurm_store_port() (or GRADWIRE_STORE_PORT), `job` set;
//  - the job's batch script or salloc shell (no SLURM_STEP_ID): Single
//    when the job has one task, else InvalidArgument (it is not a task);
//  - missing, malformed or inconsistent variables: InvalidArgument naming
//    them and what to do.
Rendezvous slurm_rendezvous();

// The store's port for step `step` of job `job` (Note [Slurm store port]):
// even, in [kSlurmPortBase, kSlurmPortBase + 2 * kSlurmPortSlots); the odd
// port above it is left for torch's own store (python/gradwire/torch).
inline constexpr uint16_t kSlurmPortBase = 16000;
inline constexpr uint32_t kSlurmPortSlots = 8000;
uint16_t slurm_store_port(uint64_t job, uint64_t step);

// Every rank's `job` and `size` must equal rank 0's (Note [same job] in
// slurm.cpp), compared over `store` (keys "job/<rank>"; `where` is its
// host:port, for messages) before anything else is written there:
// InvalidArgument naming both on every rank that sees the difference; a
// rank of another job never writes to this job's store. Timeout at
// `deadline` as a store get.
void check_same_job(Store& store, const std::string& where, int rank, int size,
                    const std::string& job, Deadline deadline);

}  // namespace gradwire::bootstrap
