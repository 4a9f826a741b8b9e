// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// allocate_shared(): the collective half of shared buffers. The windows and
// segments are the memory layer's (shm/windows.h); exchanging
// their names and agreeing on a verdict runs collectives on the
// communicator, which is the runtime's.
#include <sys/mman.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/asymmetric_fence.h"
#include "base/raise.h"
#include "base/logging.h"
#include "collectives/hierarchy.h"
#include "shm/windows.h"
#include "shm/shm.h"

namespace gradwire::shm {
namespace {

// Which machine and kernel this process runs on: ranks with the same
// identity can share /dev/shm (a private /dev/shm per container is caught
// when a peer's segment does not open).
std::string host_identity(const Options& options) {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  // Emulated hosts (GRADWIRE_HOST_ID) stay apart, as they would on a cluster.
  return host_name(options) + "/" + boot;
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
// `prepare`, if given, runs on this rank's own segment before its name is
// published, so before any peer can map it (Note [a Control is built before
// its name is out]).
Exchanged exchange_segments(const Peers& peers, size_t bytes, uint32_t id,
                            const std::function<void(std::byte*)>& prepare = nullptr) {
  const int n = peers.size, me = peers.rank;
  Created mine = create_segment(bytes, id);
  if (prepare && mine.map.data()) prepare(mine.map.data());
  const std::string blob = fmt::format("{}\n{}\n{}\n{}", host_identity(peers.options), mine.name,
                                       bytes, mine.error);
  const std::vector<std::string> all = peers.allgather(blob);
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
  const std::vector<std::string> verdicts = peers.allgather(problem);
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

std::shared_ptr<Windows> open(const Peers& peers, const char* why) {
  auto windows = std::make_shared<Windows>(peers.rank, peers.size);
  // Note [asymmetric fences between processes]: registered before the
  // exchange, so before any peer can wait on this rank's doorbell.
  shared_fences_ready();
  // Note [a Control is built before its name is out]: a rank's Control is
  // not only its own: peers write its doorbell's `sleepers` (Note [the
  // doorbell] in collectives/doorbell.h) as soon as they wait on it. It was
  // constructed here after the exchange, and the exchange's last round
  // returns on each rank at its own time: a peer that returned first could
  // enter the next small collective, wait for this rank and announce itself
  // (sleepers 0 -> 1) before this rank's placement new stored 0 over it.
  // When that peer's wait ended, sleepers went to -1 and stayed off by one
  // for the communicator's life, so one sleeper later read as none, the
  // publisher skipped its FUTEX_WAKE and the sleeper woke only at its
  // timeout (up to 10 ms). Traced at GRADWIRE_SPIN_US=0, 3 ranks (the
  // doorbell test's wake case, which failed about 1 run in 3): ranks 0 and
  // 1 handed the first barrier to their engine threads, which announced on
  // rank 2's doorbell at +2.0 ms; rank 2 constructed its Control at +3.7 ms
  // reading sleepers == 2 just before; both waits ended by timeout, leaving
  // sleepers at -2; in the next collective both waiters slept on rank 2's
  // doorbell (sleepers -2 + 2 = 0), and rank 2, 300 ms late, read 0 when it
  // published: no wake-up. A budget of 0 announces after one empty poll;
  // auto's spin and yields (up to ~2 ms) usually outlasted the gap, which
  // is why only GRADWIRE_SPIN_US=0 failed. So the Control is constructed
  // on the fresh segment before its name goes to the peers.
  Exchanged ctl = exchange_segments(peers, control_bytes(peers.size), Descriptor::kNoWindow,
                                    [](std::byte* mine) { new (mine) Control(); });
  if (ctl.direct) {
    windows->set_controls(std::move(ctl.maps));
  } else if (peers.rank == 0) {
    log().info("{} on communicator {}: no direct path ({}); its collectives go through the "
               "transport", why, peers.name, ctl.why_not);
  }
  return windows;
}

std::shared_ptr<detail::SharedAllocation> allocate(const std::shared_ptr<Windows>& windows,
                                                   const Peers& peers, size_t bytes) {
  auto alloc = std::make_shared<detail::SharedAllocation>();
  alloc->bytes = bytes;
  const uint32_t id = windows->next_id();
  Exchanged seg = exchange_segments(peers, bytes, id);
  alloc->data = seg.maps[peers.rank].data();
  if (seg.direct && windows->active()) {
    alloc->owner = windows;
    alloc->id = id;
    alloc->direct = true;
    windows->add(id, std::move(seg.maps), std::move(seg.bytes));
  } else {
    alloc->own = std::move(seg.maps[peers.rank]);
  }
  return alloc;
}

}  // namespace gradwire::shm
