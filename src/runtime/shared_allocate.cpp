// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// allocate_shared(): the collective half of shared buffers. The windows and
// segments are the memory layer's (memory/shared_windows.h); exchanging
// their names and agreeing on a verdict runs collectives on the
// communicator, which is the runtime's.
#include <sys/mman.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "bootstrap/bootstrap.h"
#include "base/logging.h"
#include "collectives/hierarchy.h"
#include "memory/shared_windows.h"
#include "runtime/communicator_impl.h"

namespace gradwire::shared {
namespace {

// Which machine and kernel this process runs on: ranks with the same
// identity can share /dev/shm (a private /dev/shm per container is caught
// when a peer's segment does not open).
std::string host_identity(const CommunicatorImpl& comm) {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  // Emulated hosts (GRADWIRE_HOST_ID) stay apart, as they would on a cluster.
  return host_name(comm.options) + "/" + boot;
}

struct Exchanged {
  bool direct = false;
  std::string why_not;      // when !direct
  std::vector<Mapping> maps;  // by rank when direct; else only own (at [rank])
  std::vector<size_t> bytes;  // by rank
};

// Note [mapping each other's segments]: two rounds over the communicator.
// Round one: every rank creates its segment and publishes host identity,
// name and size. If all share a host, each rank maps every peer's segment;
// round two publishes whether that worked, so all ranks reach the same
// verdict. Then each rank unlinks its own name: the memory lives on in the
// mappings, and nothing is left in /dev/shm if a process is killed later.
using Allgather = std::function<std::vector<std::string>(const std::string&)>;

Exchanged exchange_segments(CommunicatorImpl& comm, size_t bytes, uint32_t id,
                            const Allgather& allgather) {
  const int n = comm.size, me = comm.rank;
  Created mine = create_segment(bytes, id);
  const std::string blob = fmt::format("{}\n{}\n{}\n{}", host_identity(comm), mine.name, bytes,
                                       mine.error);
  const std::vector<std::string> all = allgather(blob);
  Exchanged out;
  out.maps.resize(n);
  out.bytes.resize(n);
  std::vector<std::string> names(n), hosts(n);
  std::string problem;
  for (int r = 0; r < n; ++r) {
    std::istringstream in(all[r]);
    std::string size_text, error;
    std::getline(in, hosts[r]);
    std::getline(in, names[r]);
    std::getline(in, size_text);
    std::getline(in, error);
    out.bytes[r] = size_t(std::strtoull(size_text.c_str(), nullptr, 10));
    if (problem.empty() && names[r].empty()) problem = fmt::format("rank {}: {}", r, error);
    if (problem.empty() && hosts[r] != hosts[0]) {
      problem = fmt::format("ranks 0 and {} run on different hosts", r);
    }
  }
  if (problem.empty()) {
    for (int r = 0; r < n && problem.empty(); ++r) {
      if (r == me) continue;
      std::string error;
      out.maps[r] = open_segment(names[r], page_round(out.bytes[r]), error);
      if (!out.maps[r].data()) problem = fmt::format("rank {}: {}", me, error);
    }
  }
  const std::vector<std::string> verdicts = allgather(problem);
  if (!mine.name.empty()) shm_unlink(mine.name.c_str());
  for (int r = 0; r < n && problem.empty(); ++r) problem = verdicts[r];
  out.maps[me] = std::move(mine.map);
  if (problem.empty() && n > 1) {
    out.direct = true;
  } else {
    out.why_not = n > 1 ? problem : "a communicator of one rank";
    for (int r = 0; r < n; ++r) {
      if (r != me) out.maps[r] = Mapping();
    }
  }
  return out;
}

}  // namespace

namespace {

Allgather over_collectives(CommunicatorImpl& comm) {
  return [&comm](const std::string& mine) { return comm.allgather_blobs(mine); };
}

// The control segments (under comm.shared_mu): collective.
void create_controls(CommunicatorImpl& comm, const char* why, const Allgather& allgather) {
  auto windows = std::make_shared<Windows>(comm.rank, comm.size);
  Exchanged ctl = exchange_segments(comm, control_bytes(comm.size), Descriptor::kNoWindow, allgather);
  if (ctl.direct) {
    // Only our own: a peer may already write its Control (a fresh segment
    // is zero-filled, which is what a constructed Control holds).
    new (ctl.maps[comm.rank].data()) Control();
    windows->set_controls(std::move(ctl.maps));
  } else if (comm.rank == 0) {
    log().info("{} on communicator {}: no direct path ({}); its collectives go through the "
               "transport", why, comm.name, ctl.why_not);
  }
  comm.shared = windows;
}

}  // namespace

void activate(CommunicatorImpl& comm) {
  std::lock_guard<std::mutex> lk(comm.shared_mu);
  if (comm.shared) return;
  // The world exchanges through its bootstrap, so that its collectives keep
  // their numbers (the first user collective is #1, as errors and flight-
  // recorder dumps have always said); a sub-communicator, which has none,
  // through its own collectives.
  if (comm.bootstrap) {
    bootstrap::Bootstrap& boot = *comm.bootstrap;
    const Deadline deadline = Deadline::after(comm.options.timeout);
    create_controls(comm, "shared-memory collectives",
                    [&](const std::string& mine) { return boot.allgather(mine, deadline); });
  } else {
    create_controls(comm, "shared-memory collectives", over_collectives(comm));
  }
}

std::shared_ptr<detail::SharedAllocation> allocate(CommunicatorImpl& comm, size_t bytes) {
  std::lock_guard<std::mutex> lk(comm.shared_mu);
  if (!comm.shared) create_controls(comm, "allocate_shared", over_collectives(comm));
  auto alloc = std::make_shared<detail::SharedAllocation>();
  alloc->bytes = bytes;
  const uint32_t id = comm.shared->next_id();
  Exchanged seg = exchange_segments(comm, bytes, id, over_collectives(comm));
  alloc->data = seg.maps[comm.rank].data();
  if (seg.direct && comm.shared->active()) {
    alloc->owner = comm.shared;
    alloc->id = id;
    alloc->direct = true;
    comm.shared->add(id, std::move(seg.maps), std::move(seg.bytes));
  } else {
    alloc->own = std::move(seg.maps[comm.rank]);
  }
  return alloc;
}

}  // namespace gradwire::shared
