// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "collectives/hierarchy.h"

#include <fmt/format.h>
#include <unistd.h>

#include <map>

#include "gradwire/options.h"

namespace gradwire {

std::string host_name(const Options& options) {
  if (!options.transport.host_id.empty()) return options.transport.host_id;
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// Note [hierarchical allreduce]: when ranks span hosts, a flat ring sends
// 2(n-1)/n of the buffer over the network from every rank, one hop at a
// time through all n ranks, so a step pays 2(n-1) network latencies. With
// H hosts of L ranks each, allreduce becomes
//   1. reduce-scatter inside each host (shm: memory speed): local rank l
//      ends with the host's sum of shard l (1/L of the buffer);
//   2. allreduce of shard l between the H ranks with local index l (one
//      stream per local rank, so all L of a host's network shares are used;
//      on EFA, each rank's own NIC share), 2(H-1) latencies, 2(H-1)/H of
//      1/L of the buffer per rank;
//   3. allgather inside each host.
// Every element is reduced on one rank per host in the same order on every
// host and then copied, so all ranks still end bitwise identical. Used only
// when every host has the same number of ranks (L > 1, H > 1): uneven hosts
// would leave some local ranks without a partner on other hosts.
Hierarchy plan_hierarchy(const std::vector<std::string>& hosts, int rank) {
  Hierarchy h;
  std::map<std::string, int> index;
  for (int r = 0; r < int(hosts.size()); ++r) {
    auto [it, fresh] = index.emplace(hosts[r], int(h.host_groups.size()));
    if (fresh) h.host_groups.emplace_back();
    if (r == rank) {
      h.host = it->second;
      h.local_rank = int(h.host_groups[it->second].size());
    }
    h.host_groups[it->second].push_back(r);
  }
  const size_t local = h.host_groups.empty() ? 0 : h.host_groups[0].size();
  if (h.host_groups.size() < 2) {
    h.why_not = "all ranks share one host";
    return h;
  }
  if (local < 2) {
    h.why_not = "one rank per host (the flat ring is already host to host)";
  }
  for (const auto& g : h.host_groups) {
    if (g.size() != local) {
      h.why_not = fmt::format("hosts hold different numbers of ranks ({} and {})", local, g.size());
    }
  }
  if (!h.why_not.empty()) return h;
  h.cross_groups.assign(local, {});
  for (const auto& g : h.host_groups) {
    for (size_t l = 0; l < local; ++l) h.cross_groups[l].push_back(g[l]);
  }
  h.use = true;
  return h;
}

}  // namespace gradwire
