// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/library.h"

#include <dlfcn.h>

#include <cstdlib>

#include <mutex>
#include <string>

#include "base/raise.h"
#include "base/logging.h"
#include "base/signals.h"
#include "gradwire/version.h"

namespace gradwire::transport::ofi {

namespace {

// Debian's libfabric1 ships libfabric.so.1 (libfabric-dev adds the
// unversioned link). GRADWIRE_LIBFABRIC names another build (e.g. AWS's
// EFA installer under /opt/amazon/efa/lib).
const char* library_name() {
  const char* env = std::getenv("GRADWIRE_LIBFABRIC");
  return env != nullptr && *env != '\0' ? env : "libfabric.so.1";
}

template <typename F>
void resolve(void* handle, const char* name, F& out) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    raise(ErrorCode::Transport, "{} has no symbol {} ({}): not a libfabric >= 1.11", library_name(),
          name, dlerror());
  }
  out = reinterpret_cast<F>(sym);
}

FabricLibrary load() {
  // Note [connections that stall] (transport/transport.h): `net` keeps at
  // most FI_NET_MAX_SAVED short unexpected messages per connection (4 by
  // default) and stalls the connection on the next. Point-to-point headers
  // are such messages: a rank that sends more than four before the peer
  // posts their receives would stall. Providers read their variables when
  // libfabric initialises them, on the first fi_getinfo, so this is set
  // before the library is loaded; a value the user set is kept.
  ::setenv("FI_NET_MAX_SAVED", "1024", 0);
  void* handle = nullptr;
  {
    SignalDispositionGuard guard(std::string("loading ") + library_name());
    // RTLD_GLOBAL: providers loaded as plugins by libfabric resolve its
    // symbols through the global scope.
    handle = dlopen(library_name(), RTLD_NOW | RTLD_GLOBAL);
  }
  if (handle == nullptr) {
    const char* why = dlerror();
    raise(ErrorCode::Transport,
          "cannot load libfabric ({}): {}; install Debian's libfabric1 or set GRADWIRE_LIBFABRIC "
          "to the library's path",
          library_name(), why ? why : "unknown error");
  }
  // Never dlclose'd: providers keep threads and atexit handlers.
  FabricLibrary lib{};
  resolve(handle, "fi_getinfo", lib.getinfo_);
  resolve(handle, "fi_fabric", lib.fabric_);
  resolve(handle, "fi_dupinfo", lib.dupinfo_);
  resolve(handle, "fi_freeinfo", lib.freeinfo_);
  resolve(handle, "fi_strerror", lib.strerror_);
  resolve(handle, "fi_tostr", lib.tostr_);
  resolve(handle, "fi_version", lib.version_);
  const uint32_t v = lib.version_();
  log().debug("loaded {} (libfabric {}.{})", library_name(), FI_MAJOR(v), FI_MINOR(v));
  return lib;
}

}  // namespace

int FabricLibrary::getinfo(uint32_t version, const char* node, const char* service,
                           uint64_t flags, const fi_info* hints, fi_info** info) const {
  // The first fi_getinfo initialises every provider (Note [foreign signal
  // handlers]); later ones may initialise a provider's library lazily.
  SignalDispositionGuard guard("fi_getinfo");
  return getinfo_(version, node, service, flags, hints, info);
}

int FabricLibrary::fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) const {
  SignalDispositionGuard guard("fi_fabric");
  return fabric_(attr, fabric, context);
}

const FabricLibrary& libfabric() {
  // A failed load is retried by the next call (a user may fix the
  // environment and try again); a successful one is kept for ever.
  // (std::call_once does not set its flag when the callable throws.)
  static std::once_flag once;
  static FabricLibrary* loaded = nullptr;  // leaked: handle closers use it at exit
  std::call_once(once, [] { loaded = new FabricLibrary(load()); });
  return *loaded;
}

}  // namespace gradwire::transport::ofi

namespace gradwire {

std::string libfabric_version() {
  try {
    const uint32_t v = transport::ofi::libfabric().version();
    return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
  } catch (const Error& e) {
    return "unavailable (" + e.message() + ")";
  }
}

}  // namespace gradwire
