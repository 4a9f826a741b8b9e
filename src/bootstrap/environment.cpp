// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// from_environment(): which launcher started us, read strictly. A typo in a
// launcher variable must fail at start-up with the variable's name, never
// quietly turn into a world of one rank or a hang at the first allgather.
//
// Note [explicit rendezvous]: how a communicator finds its peers is a value,
// gradwire::Rendezvous (gradwire/rendezvous.h), not the process's
// environment. Rendezvous::from_environment() is one way of filling it in
// (the launchers' variables, as before); a caller that knows its peers
// another way passes one: the torch backend builds each process group's
// communicator from the address, port and secret it publishes in torch's
// store (it used to setenv/unsetenv under a process-wide mutex), and tests
// run N ranks as threads of one process through an InProcessStore. make()
// checks a filled-in value as strictly as the variables: a bad field is an
// InvalidArgument naming it. The process-wide state a communicator keeps
// (the job-failure flag of Note [watchdog], the flight recorder, the log's
// rank prefix) is still one per process: ranks as threads share it, so a
// failure on one thread-rank interrupts the others, as it would interrupt
// the other ranks of a job.
#include <atomic>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/env.h"
#include "bootstrap/etcd_store.h"
#include "bootstrap/slurm.h"
#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "base/raise.h"
#include "base/logging.h"

namespace gradwire::bootstrap {

namespace env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<int> parse_int(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

int parse_int_in(const char* name, const std::string& text, int lo, int hi,
                 const std::string& expected) {
  auto v = parse_int(text);
  if (!v) {
    raise(ErrorCode::InvalidArgument, "{}='{}' is not an integer (expected {})", name, text,
          expected);
  }
  if (*v < lo || *v > hi) {
    raise(ErrorCode::InvalidArgument, "{}='{}' is out of range (expected {})", name, text,
          expected);
  }
  return *v;
}

std::optional<uint64_t> parse_u64(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text[0] == '-' || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::string job_secret() {
  auto secret = get("GRADWIRE_JOB_SECRET");
  if (!secret) return {};
  check_secret(*secret, "GRADWIRE_JOB_SECRET");
  return *secret;
}

std::string store_bind() {
  auto bind = get("GRADWIRE_STORE_BIND");
  if (!bind) return {};
  if (bind->empty() || bind->find_first_of(" \t\r\n") != std::string::npos) {
    raise(ErrorCode::InvalidArgument,
          "GRADWIRE_STORE_BIND='{}' is not an address (expected an address of rank 0's "
          "host, or 0.0.0.0 / :: for every interface)",
          *bind);
  }
  return *bind;
}

}  // namespace env

namespace {

// Why the launcher variables are required: names the variable that chose
// this launcher, e.g. "MASTER_ADDR='10.0.0.1' is set".
struct Reader {
  std::string why;

  std::string require(const char* name, const std::string& expected) const {
    auto v = env::get(name);
    if (!v) {
      // Under srun a partial torchrun setting (an sbatch script's
      // MASTER_ADDR, say) hides Slurm's variables (Note [launcher order]).
      raise(ErrorCode::InvalidArgument,
            "{} is not set (expected {}); {}, so gradwire expects a torchrun-style launch with "
            "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (or GRADWIRE_STORE_DIR instead of "
            "the MASTER_ variables){}",
            name, expected, why,
            env::get("SLURM_STEP_ID") ? "; under srun, unset the torchrun variables to let "
                                        "gradwire read Slurm's"
                                      : "");
    }
    return *v;
  }

  // An integer in [lo, hi]; `expected` describes the range in the message.
  int integer(const char* name, int lo, int hi, const std::string& expected) const {
    return env::parse_int_in(name, require(name, expected), lo, hi, expected);
  }

  int world_size() const { return integer("WORLD_SIZE", 1, INT_MAX, "WORLD_SIZE >= 1"); }

  int rank(int world) const {
    return integer("RANK", 0, world - 1, fmt::format("0 <= RANK < WORLD_SIZE={}", world));
  }

  // Optional: torchrun always sets it, hand-rolled launchers may not.
  int local_rank(int world) const {
    if (!env::get("LOCAL_RANK")) return -1;
    return integer("LOCAL_RANK", 0, world - 1,
                   fmt::format("0 <= LOCAL_RANK < WORLD_SIZE={}", world));
  }
};

std::string describe_set(const char* name) {
  return fmt::format("{}='{}' is set", name, env::get(name).value_or(""));
}

Rendezvous file_store_rendezvous(const std::string& dir) {
  Reader r{describe_set("GRADWIRE_STORE_DIR")};
  if (dir.empty()) {
    raise(ErrorCode::InvalidArgument,
          "GRADWIRE_STORE_DIR='' is empty (expected a directory every rank can see)");
  }
  int world = r.world_size();
  Rendezvous out = Rendezvous::file(dir, r.rank(world), world);
  out.local_rank = r.local_rank(world);
  return out;
}

// Note [job secret policy]: GRADWIRE_JOB_SECRET set: every connection to
// the store proves it (Note [store handshake]). Unset: the store runs
// unauthenticated, as before the handshake existed, and rank 0 warns once,
// unless GRADWIRE_REQUIRE_SECRET=1 makes that an error on every rank.
// gwlaunch and the torch backend always hand out a secret; under torchrun
// the user sets it (the agent has no way to hand one to gradwire).
// The policy for a rendezvous whose secret is `secret` (empty: none).
void secret_policy(const std::string& secret, int rank, const std::string& where) {
  const auto require = env::get("GRADWIRE_REQUIRE_SECRET");
  if (require && *require != "0" && *require != "1") {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_REQUIRE_SECRET='{}' (expected 0 or 1)", *require);
  }
  if (!secret.empty()) return;
  if (require && *require == "1") {
    raise(ErrorCode::InvalidArgument,
          "GRADWIRE_REQUIRE_SECRET=1 but GRADWIRE_JOB_SECRET is not set; give every rank the "
          "same secret (e.g. export GRADWIRE_JOB_SECRET=$(openssl rand -hex 32) before "
          "launching)");
  }
  static std::atomic<bool> warned{false};
  if (rank == 0 && !warned.exchange(true)) {
    log().warn("GRADWIRE_JOB_SECRET is not set: the rendezvous store on {} accepts any client "
               "that can reach it; set the same GRADWIRE_JOB_SECRET on every rank (and "
               "GRADWIRE_REQUIRE_SECRET=1 to make this an error)",
               where);
  }
}

// GRADWIRE_STORE_BIND (read into Rendezvous::bind_host), else the store's
// host itself when it is not a wildcard: a store listening on every
// interface must be asked for by name.
void check_bind(const std::string& host, uint16_t port, const std::string& bind) {
  if (!bind.empty()) return;
  std::string ignored;
  for (const SockAddr& a : resolve_tcp(host, port, &ignored)) {
    if (is_unspecified(a)) {
      raise(ErrorCode::InvalidArgument,
            "MASTER_ADDR='{}' is a wildcard address: rank 0's store would listen on every "
            "interface; set MASTER_ADDR to rank 0's address, or GRADWIRE_STORE_BIND={} to ask "
            "for the wildcard explicitly",
            host, host);
    }
  }
}

Rendezvous tcp_store_rendezvous(const char* trigger) {
  Reader r{describe_set(trigger)};
  // WORLD_SIZE first: RANK's message quotes it.
  int world = r.world_size();
  int rank = r.rank(world);
  int local = r.local_rank(world);
  std::string addr = r.require("MASTER_ADDR", "the host name or address of rank 0's machine");
  if (addr.empty() || addr.find_first_of(" \t\r\n") != std::string::npos) {
    raise(ErrorCode::InvalidArgument,
          "MASTER_ADDR='{}' is {} (expected the host name or address of rank 0's machine)",
          addr, addr.empty() ? "empty" : "not a host name (it contains white space)");
  }
  int port = r.integer("MASTER_PORT", 1, 65535, "an integer 1..65535");
  // Note [store port under torchrun]: a real torchrun agent already serves
  // its own (c10d) store on MASTER_PORT, with a protocol that is not ours.
  // Its workers see TORCHELASTIC_RUN_ID; there gradwire's store takes the
  // next odd port. Odd, because Linux hands out even ephemeral ports to
  // connect() and odd ones to bind(0) (since 4.6): with --standalone,
  // MASTER_PORT comes from bind(0), so MASTER_PORT + 1 is even, and the
  // agent's own connections to its store took exactly that port in about
  // 1 launch of 10 here (EADDRINUSE on rank 0, every restart). An odd port
  // only collides with another bind(0), which checks that it is free.
  // GRADWIRE_STORE_PORT overrides both choices.
  if (env::get("GRADWIRE_STORE_PORT")) {
    port = r.integer("GRADWIRE_STORE_PORT", 1, 65535, "an integer 1..65535");
  } else if (env::get("TORCHELASTIC_RUN_ID")) {
    port += port % 2 == 0 ? 1 : 2;
    if (port > 65535) {
      raise(ErrorCode::InvalidArgument,
            "MASTER_PORT={} leaves no port for gradwire's store next to torchrun's; set "
            "GRADWIRE_STORE_PORT", port - 2);
    }
  }
  Rendezvous out = Rendezvous::tcp(addr, uint16_t(port), rank, world, env::job_secret());
  out.local_rank = local;
  out.bind_host = env::store_bind();
  return out;
}

}  // namespace

std::unique_ptr<Bootstrap> from_environment(const Options& options) {
  return make(Rendezvous::from_environment(), options);
}

namespace {
// Rendezvous::key_prefix: the world's keys under their own prefix.
std::unique_ptr<Store> with_prefix(std::unique_ptr<Store> store, const Rendezvous& r) {
  if (r.key_prefix.empty()) return store;
  return prefix_store(std::move(store), r.key_prefix);
}
}  // namespace

std::unique_ptr<Bootstrap> make(const Rendezvous& r, const Options& options) {
  using Kind = Rendezvous::Kind;
  if (r.kind == Kind::Etcd && r.size == 0) {
    raise(ErrorCode::InvalidArgument, "Rendezvous::size is 0: an etcd rendezvous without a size "
          "(GRADWIRE_ETCD_ENDPOINTS without RANK and WORLD_SIZE) is an elastic job's, whose "
          "ranks gradwire::ElasticGroup::join assigns (gradwire/elastic.h); for a fixed world "
          "over etcd set RANK and WORLD_SIZE (Rendezvous::etcd(endpoints, prefix, rank, size))");
  }
  if (!r.key_prefix.empty() && (r.kind == Kind::Single || r.kind == Kind::Mpi)) {
    raise(ErrorCode::InvalidArgument, "Rendezvous::key_prefix='{}' is set, but a {} rendezvous "
          "uses no store (key_prefix is for TcpStore, FileStore and InProcess)", r.key_prefix,
          r.kind == Kind::Single ? "Single" : "Mpi");
  }
  if (r.kind == Kind::Single) return single_process();
  if (r.kind == Kind::Mpi) return make_mpi_bootstrap();
  // Note [explicit rendezvous]: a filled-in value is checked as strictly as
  // the environment it may have come from.
  if (r.size < 1) {
    raise(ErrorCode::InvalidArgument, "Rendezvous::size={} (expected >= 1)", r.size);
  }
  if (r.rank < 0 || r.rank >= r.size) {
    raise(ErrorCode::InvalidArgument, "Rendezvous::rank={} is out of range (expected 0 <= rank "
          "< size={})", r.rank, r.size);
  }
  if (r.local_rank < -1 || r.local_rank >= r.size) {
    raise(ErrorCode::InvalidArgument, "Rendezvous::local_rank={} is out of range (expected -1 "
          "or 0 <= local_rank < size={})", r.local_rank, r.size);
  }
  switch (r.kind) {
    case Kind::FileStore:
      if (r.dir.empty()) {
        raise(ErrorCode::InvalidArgument, "Rendezvous::dir is empty (expected a directory every "
              "rank can see)");
      }
      return make_store_bootstrap(with_prefix(make_file_store(r.dir), r), r.rank, r.size,
                                  r.local_rank);
    case Kind::InProcess:
      if (!r.store) {
        raise(ErrorCode::InvalidArgument, "Rendezvous::store is null (expected "
              "make_in_process_store(), the same one for every rank of the job)");
      }
      return make_store_bootstrap(with_prefix(share_in_process_store(r.store), r), r.rank, r.size,
                                  r.local_rank);
    case Kind::TcpStore: {
      if (r.host.empty() || r.host.find_first_of(" \t\r\n") != std::string::npos) {
        raise(ErrorCode::InvalidArgument, "Rendezvous::host='{}' is not a host name or address "
              "(expected rank 0's)", r.host);
      }
      if (r.port == 0) {
        raise(ErrorCode::InvalidArgument, "Rendezvous::port is 0 (expected 1..65535)");
      }
      const std::string where = host_port(r.host, r.port);
      if (!r.secret.empty()) check_secret(r.secret, "the rendezvous secret");
      secret_policy(r.secret, r.rank, where);
      log().debug("bootstrap: torchrun store {}, rank {} of {} (local rank {}){}", where, r.rank,
                  r.size, r.local_rank, r.rank == 0 ? ", serving the store" : "");
      TcpStoreOptions store_options;
      store_options.secret = r.secret;
      if (r.rank == 0) {
        check_bind(r.host, r.port, r.bind_host);
        store_options.bind_host = r.bind_host;
      }
      std::unique_ptr<Store> store;
      try {
        store = make_tcp_store(r.host, r.port, /*is_server=*/r.rank == 0,
                               Deadline::after(options.timeout), store_options);
      } catch (const Error& e) {
        if (r.job.empty()) throw;
        // The store's messages speak of MASTER_ADDR/MASTER_PORT, which a
        // launcher such as srun never asked the user for.
        throw Error(e.code(), fmt::format("{} ({}: the store is rank 0's, on the step's first "
                                          "node {}, port {}; GRADWIRE_STORE_PORT picks another "
                                          "port)",
                                          e.message(), r.job, r.host, r.port));
      }
      // Note [world generations] (tcp_store.cpp): later worlds at the same
      // host:port keep to their own keys on the server that outlived the first.
      if (const uint64_t g = next_world_generation(r.host, r.port, r.rank); g > 0) {
        store = prefix_store(std::move(store), fmt::format("world{}/", g));
      }
      if (!r.job.empty()) {
        check_same_job(*store, where, r.rank, r.size, r.job, Deadline::after(options.timeout));
      }
      return make_store_bootstrap(with_prefix(std::move(store), r), r.rank, r.size, r.local_rank);
    }
    case Kind::Etcd: {
      // Note [etcd leases]: a fixed world's keys live as long as the
      // processes that wrote them, so a later run under the same prefix
      // never reads this one's addresses.
      auto store = make_etcd_job_store(r, options.timeout, /*ephemeral_writes=*/true);
      log().debug("bootstrap: {}, rank {} of {}", store->describe(), r.rank, r.size);
      if (const uint64_t g = next_etcd_world(r); g > 0) {
        store = prefix_store(std::move(store), fmt::format("world{}/", g));
      }
      if (!r.job.empty()) {
        check_same_job(*store, store->describe(), r.rank, r.size, r.job,
                       Deadline::after(options.timeout));
      }
      return make_store_bootstrap(std::move(store), r.rank, r.size, r.local_rank);
    }
    default: break;
  }
  raise(ErrorCode::InvalidArgument, "Rendezvous::kind {} is not a kind of rendezvous", int(r.kind));
}

}  // namespace gradwire::bootstrap

namespace gradwire {

// Note [launcher order]: mpirun's OMPI_* first, then GRADWIRE_STORE_DIR,
// then GRADWIRE_ETCD_ENDPOINTS (both gradwire's own, explicit settings:
// RANK and WORLD_SIZE are read with them, and an elastic job over etcd
// launched by srun or torchrun ignores their other variables), then
// torchrun's convention, then Slurm's variables (Note [launching
// under Slurm] in slurm.cpp), then a world of one. Slurm comes after the
// others because they are launched *inside* Slurm jobs and their workers
// inherit the SLURM_* of the step that started the launcher: `srun
// torchrun ...` (one agent per node) hands every worker of a node the
// agent's SLURM_PROCID and the agents' SLURM_NTASKS, and mpirun in an
// allocation starts its daemons with srun; there RANK/WORLD_SIZE and
// OMPI_COMM_WORLD_* are the workers' true places, and SLURM_* would put
// every worker of a node at one rank. GRADWIRE_STORE_DIR is gradwire's own
// setting and wins as it always did.
Rendezvous Rendezvous::from_environment() {
  using bootstrap::env::get;
  if (get("OMPI_COMM_WORLD_SIZE")) return mpi();
  if (auto dir = get("GRADWIRE_STORE_DIR")) return bootstrap::file_store_rendezvous(*dir);
  if (auto etcd = get("GRADWIRE_ETCD_ENDPOINTS")) return bootstrap::etcd_rendezvous(*etcd);
  for (const char* trigger : {"MASTER_ADDR", "RANK", "MASTER_PORT", "WORLD_SIZE"}) {
    if (get(trigger)) return bootstrap::tcp_store_rendezvous(trigger);
  }
  if (bootstrap::in_slurm_job()) return bootstrap::slurm_rendezvous();
  return single();
}

Rendezvous Rendezvous::from_slurm() { return bootstrap::slurm_rendezvous(); }

}  // namespace gradwire
