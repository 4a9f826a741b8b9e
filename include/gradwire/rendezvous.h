// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// How a Communicator finds its peers (Note [explicit rendezvous] in
// src/bootstrap/environment.cpp): a value the caller fills in, or reads
// from the launcher's environment with Rendezvous::from_environment().
//
//   // rank 0 serves the store on 10.0.0.1:29400; every rank passes the same
//   auto comm = gradwire::Communicator::create(
//       {}, gradwire::Rendezvous::tcp("10.0.0.1", 29400, rank, size, secret));
//
//   // an etcd cluster every process reaches (elastic jobs across hosts:
//   // gradwire/elastic.h assigns ranks; or a fixed world with rank and size)
//   auto group = gradwire::ElasticGroup::join({}, gradwire::Rendezvous::etcd(
//       {"http://10.0.0.5:2379", "http://10.0.0.6:2379"}, "/gradwire/job-42/"));
//
//   // N ranks as threads of one process (tests, single-process tools)
//   auto store = gradwire::make_in_process_store();
//   ... on thread r: Communicator::create({}, Rendezvous::in_process(store, r, n));
#pragma once

#include "gradwire/export.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gradwire {

// A key-value store in this process's memory, shared by the ranks that are
// threads of it. Opaque; make_in_process_store() makes one per job.
class InProcessStore;
GRADWIRE_API std::shared_ptr<InProcessStore> make_in_process_store();

struct GRADWIRE_API Rendezvous {
  enum class Kind : uint8_t {
    Single,     // a world of one rank, no launcher
    Mpi,        // Open MPI's mpirun: rank and size from MPI_COMM_WORLD (MPI_Init if needed)
    TcpStore,   // gradwire's TCP store, served by rank 0 at host:port
    FileStore,  // a directory every rank sees (one file per key)
    InProcess,  // an InProcessStore: ranks are threads of one process
    Etcd,       // an etcd cluster (v3 API, http): a store that outlives every member
  };
  Kind kind = Kind::Single;
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // rank within its host, -1 unknown (Mpi: from mpirun)
  // TcpStore: where rank 0's store listens and clients connect; `bind_host`
  // (empty: `host`) is where it listens when that differs, e.g. "0.0.0.0".
  std::string host;
  uint16_t port = 0;
  std::string bind_host;
  // TcpStore: the job secret (16..1024 bytes) every connection proves
  // (README "Running securely"); empty: an unauthenticated store, which
  // rank 0 warns about (an error under GRADWIRE_REQUIRE_SECRET=1).
  std::string secret;
  // TcpStore: who the job is, e.g. "Slurm job 42 step 0" (empty: not
  // checked). Every rank's, and its size, must equal rank 0's, compared
  // over the store before anything else is written there; a rank of
  // another job that reached this store is refused without touching it.
  std::string job;
  std::string dir;                         // FileStore
  std::shared_ptr<InProcessStore> store;   // InProcess
  // Etcd: the client URLs of the cluster's members ("http://10.0.0.5:2379";
  // calls fail over between them; TLS is not supported yet).
  std::vector<std::string> endpoints;
  // TcpStore, FileStore, InProcess, Etcd: every key this world's bootstrap
  // uses lives under this prefix of the store, so that several worlds can
  // share one store (the generations of an elastic job, gradwire/elastic.h).
  // Empty: none. Refused for Single and Mpi, which use no store. Required
  // for Etcd, where it is the job's own part of a cluster that other jobs
  // may share (e.g. "/gradwire/<job id>/").
  std::string key_prefix;

  static Rendezvous single() { return {}; }
  static Rendezvous mpi() { return of(Kind::Mpi, 0, 0); }
  static Rendezvous tcp(std::string host, uint16_t port, int rank, int size,
                        std::string secret = {}) {
    Rendezvous r = of(Kind::TcpStore, rank, size);
    r.host = std::move(host);
    r.port = port;
    r.secret = std::move(secret);
    return r;
  }
  static Rendezvous file(std::string dir, int rank, int size) {
    Rendezvous r = of(Kind::FileStore, rank, size);
    r.dir = std::move(dir);
    return r;
  }
  static Rendezvous in_process(std::shared_ptr<InProcessStore> store, int rank, int size) {
    Rendezvous r = of(Kind::InProcess, rank, size);
    r.store = std::move(store);
    return r;
  }
  // An elastic job's rendezvous (size 0: ElasticGroup::join assigns ranks),
  // or with rank and size a fixed world over etcd (Communicator::create),
  // whose keys live as long as the processes that wrote them.
  static Rendezvous etcd(std::vector<std::string> endpoints, std::string job_prefix,
                         int rank = 0, int size = 0) {
    Rendezvous r = of(Kind::Etcd, rank, size);
    r.endpoints = std::move(endpoints);
    r.key_prefix = std::move(job_prefix);
    return r;
  }
  // The launcher's variables, read strictly (a typo fails naming the
  // variable): OMPI_COMM_WORLD_SIZE -> Mpi; GRADWIRE_STORE_DIR (+ RANK,
  // WORLD_SIZE) -> FileStore; GRADWIRE_ETCD_ENDPOINTS and
  // GRADWIRE_ETCD_PREFIX (+ RANK and WORLD_SIZE for a fixed world, neither
  // for an elastic one) -> Etcd; MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
  // (torchrun's convention, GRADWIRE_JOB_SECRET, GRADWIRE_STORE_PORT,
  // GRADWIRE_STORE_BIND) -> TcpStore; else Slurm's (from_slurm()); none of
  // them -> Single.
  static Rendezvous from_environment();
  // Slurm's variables alone (README "Launching under Slurm"): a task that
  // srun started -> TcpStore (rank SLURM_PROCID of SLURM_STEP_NUM_TASKS,
  // the store on the step's first node at a port derived from
  // SLURM_JOB_ID and SLURM_STEP_ID, or GRADWIRE_STORE_PORT; `job` set);
  // a job's batch script or salloc shell with one task, or no Slurm job
  // -> Single; InvalidArgument naming the variable for anything missing,
  // malformed or inconsistent, and for a batch script of several tasks.
  static Rendezvous from_slurm();

 private:
  static Rendezvous of(Kind kind, int rank, int size) {
    Rendezvous r;
    r.kind = kind;
    r.rank = rank;
    r.size = size;
    return r;
  }
};

}  // namespace gradwire
