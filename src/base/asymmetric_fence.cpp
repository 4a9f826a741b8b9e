// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace gradwire {
namespace {

long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0U, 0); }

}  // namespace

namespace detail {

// Registration must come before the first PRIVATE_EXPEDITED barrier, and
// light_fence() must not be a compiler barrier unless heavy_fence() works:
// both ask asymmetric_fences(), which calls this once.
// GRADWIRE_ASYMMETRIC_FENCES=off forces symmetric fences (for A/B
// measurements, and for a kernel whose membarrier misbehaves; the value is
// checked with the other variables in base/options.cpp).
bool register_membarrier() {
  if (const char* env = std::getenv("GRADWIRE_ASYMMETRIC_FENCES"); env && std::string_view(env) == "off") {
    return false;
  }
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
         membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

}  // namespace detail

void heavy_fence() {
  if (!detail::asymmetric_fences()) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return;
  }
  // Once registered the call fails only on a kernel bug; the hot sides'
  // fences are compiler barriers now, so going on would void every
  // handshake: stop loudly instead.
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::fputs("gradwire: membarrier(PRIVATE_EXPEDITED) failed after registration; aborting\n",
               stderr);
    std::abort();
  }
}

bool shared_fences_ready() {
  static const bool registered = [] {
    if (const char* env = std::getenv("GRADWIRE_ASYMMETRIC_FENCES");
        env && std::string_view(env) == "off") {
      return false;
    }
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED)) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
  }();
  return registered;
}

void heavy_fence_shared() {
  // The caller's own full fence first: membarrier orders the other
  // processes' threads; this orders ours whatever the kernel did.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (shared_fences_ready()) membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace gradwire
