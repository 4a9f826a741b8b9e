// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [single-copy reads] in runtime/p2p.h: a long point-to-point message
// read straight from its sender's memory.
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "shm/shm.h"

namespace gradwire::shm {

const char* read_from_peer(const PeerRegion& from, void* buf, size_t bytes) {
  // The canary and the data in one call; the kernel may stop short (a
  // fault, a signal), so the rest in a loop.
  uint64_t canary = 0;
  const pid_t pid = pid_t(from.pid);
  iovec local[2] = {{&canary, sizeof(canary)}, {buf, bytes}};
  iovec remote[2] = {{reinterpret_cast<void*>(uintptr_t(from.canary_addr)), sizeof(canary)},
                     {reinterpret_cast<void*>(uintptr_t(from.addr)), bytes}};
  ssize_t n = process_vm_readv(pid, local, 2, remote, 2, 0);
  if (n < ssize_t(sizeof(canary))) return n < 0 ? std::strerror(errno) : "a short read";
  if (canary != from.canary) return "the process is not the sender";
  size_t done = size_t(n) - sizeof(canary);
  while (done < bytes) {
    iovec l{static_cast<std::byte*>(buf) + done, bytes - done};
    iovec r{reinterpret_cast<std::byte*>(uintptr_t(from.addr)) + done, bytes - done};
    n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) return n < 0 ? std::strerror(errno) : "a short read";
    done += size_t(n);
  }
  return nullptr;
}

}  // namespace gradwire::shm
