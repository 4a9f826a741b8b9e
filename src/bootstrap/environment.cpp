// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// from_environment(): which launcher started us, read strictly. A typo in a
// launcher variable must fail at start-up with the variable's name, never
// quietly turn into a world of one rank or a hang at the first allgather.
#include <atomic>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/env.h"
#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "core/errors.h"
#include "core/logging.h"

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

}  // namespace env

namespace {

// Why the launcher variables are required: names the variable that chose
// this launcher, e.g. "MASTER_ADDR='10.0.0.1' is set".
struct Reader {
  std::string why;

  std::string require(const char* name, const std::string& expected) const {
    auto v = env::get(name);
    if (!v) {
      raise(ErrorCode::InvalidArgument,
            "{} is not set (expected {}); {}, so gradwire expects a torchrun-style launch with "
            "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (or GRADWIRE_STORE_DIR instead of "
            "the MASTER_ variables)",
            name, expected, why);
    }
    return *v;
  }

  // An integer in [lo, hi]; `expected` describes the range in the message.
  int integer(const char* name, int lo, int hi, const std::string& expected) const {
    std::string text = require(name, expected);
    auto v = env::parse_int(text);
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

std::unique_ptr<Bootstrap> file_store_bootstrap(const std::string& dir) {
  Reader r{describe_set("GRADWIRE_STORE_DIR")};
  if (dir.empty()) {
    raise(ErrorCode::InvalidArgument,
          "GRADWIRE_STORE_DIR='' is empty (expected a directory every rank can see)");
  }
  int world = r.world_size();
  int rank = r.rank(world);
  int local = r.local_rank(world);
  return make_store_bootstrap(make_file_store(dir), rank, world, local);
}

// Note [job secret policy]: GRADWIRE_JOB_SECRET set: every connection to
// the store proves it (Note [store handshake]). Unset: the store runs
// unauthenticated, as before the handshake existed, and rank 0 warns once,
// unless GRADWIRE_REQUIRE_SECRET=1 makes that an error on every rank.
// gwlaunch and the torch backend always hand out a secret; under torchrun
// the user sets it (the agent has no way to hand one to gradwire).
std::string job_secret(int rank, const std::string& where) {
  const auto require = env::get("GRADWIRE_REQUIRE_SECRET");
  if (require && *require != "0" && *require != "1") {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_REQUIRE_SECRET='{}' (expected 0 or 1)", *require);
  }
  if (auto secret = env::get("GRADWIRE_JOB_SECRET")) {
    check_secret(*secret, "GRADWIRE_JOB_SECRET");
    return *secret;
  }
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
  return {};
}

// GRADWIRE_STORE_BIND, or MASTER_ADDR itself when it is not a wildcard: a
// store listening on every interface must be asked for by name.
std::string bind_address(const std::string& master_addr, uint16_t port) {
  if (auto bind = env::get("GRADWIRE_STORE_BIND")) {
    if (bind->empty() || bind->find_first_of(" \t\r\n") != std::string::npos) {
      raise(ErrorCode::InvalidArgument,
            "GRADWIRE_STORE_BIND='{}' is not an address (expected an address of rank 0's "
            "host, or 0.0.0.0 / :: for every interface)",
            *bind);
    }
    return *bind;
  }
  std::string ignored;
  for (const SockAddr& a : resolve_tcp(master_addr, port, &ignored)) {
    if (is_unspecified(a)) {
      raise(ErrorCode::InvalidArgument,
            "MASTER_ADDR='{}' is a wildcard address: rank 0's store would listen on every "
            "interface; set MASTER_ADDR to rank 0's address, or GRADWIRE_STORE_BIND={} to ask "
            "for the wildcard explicitly",
            master_addr, master_addr);
    }
  }
  return {};  // bind MASTER_ADDR
}

std::unique_ptr<Bootstrap> tcp_store_bootstrap(const Options& options, const char* trigger) {
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
  // next port. GRADWIRE_STORE_PORT overrides both choices.
  if (env::get("GRADWIRE_STORE_PORT")) {
    port = r.integer("GRADWIRE_STORE_PORT", 1, 65535, "an integer 1..65535");
  } else if (env::get("TORCHELASTIC_RUN_ID")) {
    if (port == 65535) {
      raise(ErrorCode::InvalidArgument,
            "MASTER_PORT=65535 leaves no port for gradwire's store next to torchrun's; set "
            "GRADWIRE_STORE_PORT");
    }
    port += 1;
  }
  log().debug("bootstrap: torchrun store {}:{}, rank {} of {} (local rank {}){}", addr, port,
              rank, world, local, rank == 0 ? ", serving the store" : "");
  TcpStoreOptions store_options;
  store_options.secret = job_secret(rank, host_port(addr, uint16_t(port)));
  if (rank == 0) store_options.bind_host = bind_address(addr, uint16_t(port));
  auto store = make_tcp_store(addr, uint16_t(port), /*is_server=*/rank == 0,
                              Deadline::after(options.timeout), store_options);
  return make_store_bootstrap(std::move(store), rank, world, local);
}

}  // namespace

std::unique_ptr<Bootstrap> from_environment(const Options& options) {
  if (env::get("OMPI_COMM_WORLD_SIZE")) return make_mpi_bootstrap();
  if (auto dir = env::get("GRADWIRE_STORE_DIR")) return file_store_bootstrap(*dir);
  for (const char* trigger : {"MASTER_ADDR", "RANK", "MASTER_PORT", "WORLD_SIZE"}) {
    if (env::get(trigger)) return tcp_store_bootstrap(options, trigger);
  }
  return single_process();
}

}  // namespace gradwire::bootstrap
