// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/signals.h"

#include <dlfcn.h>

#include <cstring>

#include "base/logging.h"

namespace gradwire {

namespace {

// Signals a library may install a handler for: the classic ones, not the
// real-time range (glibc reserves some of those for itself).
constexpr int kLastSignal = 31;

void* handler_address(const struct sigaction& sa) {
  if (sa.sa_flags & SA_SIGINFO) return reinterpret_cast<void*>(sa.sa_sigaction);
  if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) return nullptr;
  return reinterpret_cast<void*>(sa.sa_handler);
}

std::string owner_of(void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

// sa_handler and sa_sigaction share storage: comparing one compares both.
bool same(const struct sigaction& a, const struct sigaction& b) {
  return a.sa_handler == b.sa_handler && a.sa_flags == b.sa_flags;
}

}  // namespace

SignalDispositionGuard::SignalDispositionGuard(std::string what,
                                               std::function<bool(const std::string&)> keep)
    : what_(std::move(what)), keep_(std::move(keep)), saved_(kLastSignal + 1) {
  for (int s = 1; s <= kLastSignal; ++s) sigaction(s, nullptr, &saved_[s]);
}

SignalDispositionGuard::~SignalDispositionGuard() {
  for (int s = 1; s <= kLastSignal; ++s) {
    struct sigaction now {};
    if (sigaction(s, nullptr, &now) != 0 || same(now, saved_[s])) continue;
    const std::string owner = owner_of(handler_address(now));
    if (keep_ && !owner.empty() && keep_(owner)) continue;
    sigaction(s, &saved_[s], nullptr);
    log().debug("{} installed a handler for signal {} ({}) from {}; put back the previous one "
                "(Note [foreign signal handlers])",
                what_, s, strsignal(s), owner.empty() ? "an unknown object" : owner);
  }
}

}  // namespace gradwire
