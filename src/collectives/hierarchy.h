// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Which ranks share a host, and whether allreduce should run hierarchically
// (Note [hierarchical allreduce] in src/collectives/hierarchy.cpp). Pure: tested
// without ranks.
#pragma once

#include <string>
#include <vector>

namespace gradwire {

struct Options;

// This rank's host: Options::host_id (GRADWIRE_HOST_ID) where set, else
// gethostname().
std::string host_name(const Options& options);

struct Hierarchy {
  bool use = false;
  std::string why_not;  // when !use, for the log
  // World ranks of each host, hosts ordered by their lowest rank.
  std::vector<std::vector<int>> host_groups;
  // cross_groups[l]: the l-th rank of every host, in host order.
  std::vector<std::vector<int>> cross_groups;
  int host = -1;        // this rank's host (index into host_groups)
  int local_rank = -1;  // its index within that host
};

// `hosts[r]` is rank r's host identity.
Hierarchy plan_hierarchy(const std::vector<std::string>& hosts, int rank);

}  // namespace gradwire
