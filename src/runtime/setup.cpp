// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "runtime/setup.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "collectives/collectives.h"
#include "base/raise.h"
#include "collectives/hierarchy.h"
#include "base/logging.h"
#include "diag/trace.h"
#include "gradwire/version.h"
#include "shm/shm.h"
#include "transport/transport.h"

namespace gradwire::setup {

namespace {

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8 && ranks.size() > 10) return s + fmt::format(", ... ({} ranks)", ranks.size());
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
}

// Every rank's view of a field must be identical; name those that differ
// from rank 0.
void require_same(const std::vector<std::string>& values, std::string_view field, int me) {
  std::vector<int> differ;
  for (size_t r = 1; r < values.size(); ++r)
    if (values[r] != values[0]) differ.push_back(int(r));
  if (differ.empty()) return;
  raise(ErrorCode::Mismatch,
        "rank {}: ranks disagree on {}: rank 0 has '{}' but rank(s) {} have '{}'{}; set it "
        "identically on every rank",
        me, field, values[0], join_ranks(differ), values[size_t(differ[0])],
        differ.size() > 1 ? " (and others)" : "");
}

std::vector<std::string> split_fields(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

void build_hierarchy(CommunicatorImpl& world, const std::vector<std::string>& hosts);

std::unique_ptr<transport::Transport> open_transport(const FabricChoice& fabric,
                                                     const Options& options, int rank) {
  transport::Config cfg;
  cfg.provider = fabric.provider;
  cfg.iface = fabric.iface;
  cfg.always_register = options.transport.registration == Options::Transport::Registration::Always;
  cfg.rank = rank;
  return transport::open("ofi", cfg);
}

// Note [a dead peer on this host]: "<pid>:<boot id>:<pid namespace>". Two
// processes with the same boot id and pid namespace see each other's pid.
std::string process_identity() {
  auto read = [](const char* path) {
    std::string out;
    if (FILE* f = std::fopen(path, "r")) {
      char buf[128] = {};
      if (std::fgets(buf, sizeof buf, f)) out = buf;
      std::fclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return fmt::format("{}:{}:{}", ::getpid(), read("/proc/sys/kernel/random/boot_id"),
                     n > 0 ? std::string(ns, size_t(n)) : std::string());
}

// Per rank, the pid this process can watch (0: another machine or pid
// namespace, or unknown).
std::vector<int> local_pids(const std::vector<std::string>& identities, int rank) {
  auto parts = [](const std::string& id) { return split_fields(id, ':'); };
  const auto mine = parts(identities[size_t(rank)]);
  std::vector<int> out(identities.size(), 0);
  for (size_t r = 0; r < identities.size(); ++r) {
    const auto p = parts(identities[r]);
    // "pid:ns" holds a ':' ("pid:[4026531836]"), so 4 fields or more.
    if (int(r) == rank || p.size() < 4 || mine.size() < 4 || p[1].empty()) continue;
    if (p[1] != mine[1] || p[2] != mine[2] || p[3] != mine[3]) continue;
    out[r] = std::atoi(p[0].c_str());
  }
  return out;
}

}  // namespace

// Note [the provider across hosts]: measured side by side on one 1 Gbit/s
// link (BENCHMARKS.md, "Across hosts"), allreduce of 1-256 MiB: libfabric's
// native `net` provider (RDM straight over TCP, one stream per peer) runs
// at the link's speed (98-100 % of iperf3), `sockets` at 73-95 %, and
// `tcp;ofi_rxm` falls from 98 % at 1 MiB to 52 % at 256 MiB: rxm's
// rendezvous for large messages costs a round trip per message and its
// eager path only reaches line rate with buffer pools of gigabytes. So `net` is the default between hosts, and
// tcp;ofi_rxm the fallback where a libfabric predates it (before 1.16).
// net's connections stall on unexpected messages, which the transport
// works around (Note [connections that stall] in transport/transport.h).
// On AWS, GRADWIRE_OFI_PROVIDER=efa.
FabricChoice choose_fabric(const std::string& requested_provider,
                           const std::string& requested_iface,
                           const std::vector<std::string>& hosts,
                           const std::vector<std::string>& available) {
  const bool one_host =
      std::all_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h == hosts[0]; });
  const bool have_net = std::find(available.begin(), available.end(), "net") != available.end();
  FabricChoice f;
  f.provider = !requested_provider.empty() ? requested_provider
               : one_host                  ? "shm"
               : have_net                  ? "net"
                                           : "tcp;ofi_rxm";
  f.iface = requested_iface;
  // On one host a socket provider should stay on loopback: it is the
  // fastest path and sends nothing onto a real network.
  const bool socket_provider = f.provider.starts_with("tcp") || f.provider.starts_with("net") ||
                               f.provider.starts_with("sockets");
  if (f.iface.empty() && one_host && socket_provider) f.iface = "lo";
  return f;
}

std::unique_ptr<CommunicatorImpl> create_world(const Options& in, const Rendezvous& rendezvous) {
  Options options = in.with_env_overrides();
  options.validate();
  set_log_level(options.diagnostics.log_level);
  return create_world_over(options, bootstrap::make(rendezvous, options));
}

std::unique_ptr<CommunicatorImpl> create_world_over(const Options& options,
                                                    std::unique_ptr<bootstrap::Bootstrap> boot) {
  const int rank = boot->rank(), size = boot->size();
  set_log_rank(rank, size);
  log().info("joining a world of {} through {}", size, boot->describe());

  // Exchange what every rank must agree on before opening the fabric.
  const std::string host = host_name(options);
  const std::string hello = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", version(), host,
                                        options.transport.provider, options.transport.iface,
                                        options.collectives.shm_collectives ? "auto" : "off",
                                        process_identity());
  auto hellos = boot->allgather(hello, Deadline::after(options.timeout));
  std::vector<std::string> versions, hosts, providers, ifaces, shm_collectives, processes;
  for (const auto& h : hellos) {
    auto f = split_fields(h, '\x1f');
    if (f.size() != 6) {
      raise(ErrorCode::Protocol, "rank {}: malformed start-up message from a peer ({} fields); "
            "is every rank running the same gradwire?", rank, f.size());
    }
    versions.push_back(f[0]);
    hosts.push_back(f[1]);
    providers.push_back(f[2]);
    ifaces.push_back(f[3]);
    shm_collectives.push_back(f[4]);
    processes.push_back(f[5]);
  }
  require_same(versions, "the gradwire version", rank);
  require_same(providers, "the provider (Options::provider / GRADWIRE_OFI_PROVIDER)", rank);
  require_same(ifaces, "the interface (Options::iface / GRADWIRE_OFI_IFACE)", rank);
  // Ranks that disagree would take different paths for the same collective.
  require_same(shm_collectives,
               "the small-collective path (Options::shm_collectives / GRADWIRE_SHM_COLLECTIVES)",
               rank);
  const bool one_host =
      std::all_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h == hosts[0]; });
  // Only consulted when the ranks span hosts and no provider was named.
  const FabricChoice fabric =
      choose_fabric(options.transport.provider, options.transport.iface, hosts,
                    options.transport.provider.empty() && !one_host ? transport::available_providers("ofi")
                                                          : std::vector<std::string>{});
  collectives::set_host_ranks(int(std::count(hosts.begin(), hosts.end(), host)));

  auto transport = open_transport(fabric, options, rank);
  auto addresses = boot->allgather(transport->address(), Deadline::after(options.timeout));
  transport->connect(addresses);
  log().info("provider {} (fabric {}), max_msg_size {}, inject_size {}",
             transport->properties().provider, transport->properties().fabric,
             transport->properties().max_msg_size, transport->properties().inject_size);

  auto impl = std::make_unique<CommunicatorImpl>(options, rank, size, "world", std::move(boot),
                                                 std::move(transport), fabric.iface);
  impl->set_members({local_pids(processes, rank), {}});
  // Proves every rank is reachable over the fabric before training starts;
  // a failure names the rank that did not answer.
  impl->submit(CollectiveCall::barrier(),
               [](collectives::Context& ctx) { collectives::barrier(ctx); },
               {"barrier", "start-up"})
      .wait();
  trace::write_manifest(options, size, impl->transport->properties().provider,
                        impl->bootstrap->describe());
  if (options.collectives.hierarchical) {
    build_hierarchy(*impl, hosts);
  } else {
    impl->host_count = int(plan_hierarchy(hosts, rank).host_groups.size());
  }
  // Note [small collectives] in shm/small.cpp.
  if (options.collectives.shm_collectives && size > 1 && impl->host_count == 1) impl->activate_shm();
  return impl;
}

namespace {

// Opens this rank's endpoint for the group `members` (parent ranks, in the
// group's rank order; empty: this rank is in no group of this call),
// exchanges every rank's address over the parent (collective over it) and
// connects. Returns nullptr on non-members.
std::unique_ptr<CommunicatorImpl> join_group(CommunicatorImpl& parent,
                                             const std::vector<int>& members,
                                             const FabricChoice& fabric, const std::string& name) {
  auto it = std::find(members.begin(), members.end(), parent.rank);
  const int child_rank = it == members.end() ? -1 : int(it - members.begin());
  std::unique_ptr<transport::Transport> tr;
  std::string my_address;
  if (child_rank >= 0) {
    tr = open_transport(fabric, parent.options, child_rank);
    my_address = tr->address();
  }
  // Non-members take part in the exchange with an empty blob.
  auto blobs = parent.allgather_blobs(my_address);
  if (child_rank < 0) return nullptr;
  std::vector<std::string> addresses;
  for (int r : members) addresses.push_back(blobs[size_t(r)]);
  tr->connect(addresses);
  auto impl = std::make_unique<CommunicatorImpl>(parent.options, child_rank, int(members.size()),
                                                 name, nullptr, std::move(tr), fabric.iface);
  impl->world_rank = parent.world_rank;
  {
    const CommunicatorImpl::Members up = parent.members();
    CommunicatorImpl::Members mine;
    for (int r : members) {
      mine.local_pids.push_back(up.local_pids.empty() ? 0 : up.local_pids[size_t(r)]);
      mine.world_ranks.push_back(up.world_ranks.empty() ? r : up.world_ranks[size_t(r)]);
    }
    impl->set_members(std::move(mine));
  }
  impl->submit(CollectiveCall::barrier(),
               [](collectives::Context& ctx) { collectives::barrier(ctx); },
               {"barrier", "start-up"})
      .wait();
  // Note [small collectives]: turns active only if the members share a host.
  if (impl->options.collectives.shm_collectives && impl->size > 1) impl->activate_shm();
  return impl;
}

// The communicators of Note [hierarchical allreduce]: ranks of one host over
// shm (where this libfabric has it), and the l-th ranks of every host over
// the world's provider.
void build_hierarchy(CommunicatorImpl& world, const std::vector<std::string>& hosts) {
  Hierarchy h = plan_hierarchy(hosts, world.rank);
  world.host_count = int(h.host_groups.size());
  if (!h.use) {
    if (h.host_groups.size() > 1) log().info("flat collectives across hosts: {}", h.why_not);
    return;
  }
  const auto providers = transport::available_providers("ofi");
  const bool have_shm = std::find(providers.begin(), providers.end(), "shm") != providers.end();
  FabricChoice local{have_shm ? "shm" : world.transport->properties().provider,
                     have_shm ? "" : world.iface};
  FabricChoice cross{world.transport->properties().provider, world.iface};
  const auto& mine = h.host_groups[size_t(h.host)];
  const auto& peers = h.cross_groups[size_t(h.local_rank)];
  ++world.children;
  auto host_local = join_group(world, mine, local,
                               fmt::format("host-local {} [{}]", world.children, join_ranks(mine)));
  ++world.children;
  auto cross_host = join_group(world, peers, cross,
                               fmt::format("cross-host {} [{}]", world.children, join_ranks(peers)));
  world.host_local = ImplPtr(host_local.release());
  world.cross_host = ImplPtr(cross_host.release());
  log().info("hierarchical allreduce: {} hosts x {} ranks (host-local over {}, cross-host over {})",
             h.host_groups.size(), mine.size(), local.provider, cross.provider);
}

}  // namespace

std::unique_ptr<CommunicatorImpl> split(CommunicatorImpl& parent, const std::vector<int>& ranks) {
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= parent.size) {
      raise(ErrorCode::InvalidArgument, "rank {}: split() got rank {}, which is not a rank of {} "
            "(size {})", parent.rank, r, parent.name, parent.size);
    }
    if (!seen.insert(r).second) {
      raise(ErrorCode::InvalidArgument, "rank {}: split() got rank {} twice", parent.rank, r);
    }
  }
  if (ranks.empty()) {
    raise(ErrorCode::InvalidArgument, "rank {}: split() needs at least one rank", parent.rank);
  }
  // Every rank must pass the same list; compare them over the parent.
  const std::string list = join_ranks(ranks);
  require_same(parent.allgather_blobs(fmt::format("{}:{}", ranks.size(), list)),
               "the rank list passed to split()", parent.rank);
  ++parent.children;
  const std::string name = fmt::format("group {} [{}]", parent.children, list);
  FabricChoice fabric{parent.transport->properties().provider, parent.iface};
  return join_group(parent, ranks, fabric, name);
}

}  // namespace gradwire::setup
