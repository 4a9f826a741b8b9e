// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [loading libfabric]
// libgradwire does not link libfabric: the first call that needs it loads
// libfabric.so.1 with dlopen and looks up the few functions libfabric
// exports (everything else in its API is an inline call through the ops
// tables of the handles these return). Loading it lazily is what lets us
// undo what its provider libraries do to the process at load time (Note
// [foreign signal handlers] in base/signals.h): the load and every call
// that may initialise a provider run under a SignalDispositionGuard. A
// process that never opens a transport (a tool that reads flight-recorder
// dumps, a Python script that only imports gradwire) never loads it.
//
// Code in transport/ofi calls `libfabric().getinfo(...)` where it would
// call fi_getinfo; a direct call to one of these exported functions would
// make the link depend on libfabric again, which the build refuses
// (-Wl,--no-undefined without libfabric on the link line).
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

namespace gradwire::transport::ofi {

struct FabricLibrary {
  // fi_getinfo, fi_fabric: run under the signal guard.
  int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
              const fi_info* hints, fi_info** info) const;
  int fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) const;
  // fi_allocinfo is an inline over fi_dupinfo(nullptr).
  fi_info* allocinfo() const { return dupinfo_(nullptr); }
  fi_info* dupinfo(const fi_info* info) const { return dupinfo_(info); }
  void freeinfo(fi_info* info) const { freeinfo_(info); }
  const char* strerror(int errnum) const { return strerror_(errnum); }
  char* tostr(const void* data, enum fi_type type) const { return tostr_(data, type); }
  uint32_t version() const { return version_(); }

  int (*getinfo_)(uint32_t, const char*, const char*, uint64_t, const fi_info*, fi_info**);
  int (*fabric_)(fi_fabric_attr*, fid_fabric**, void*);
  fi_info* (*dupinfo_)(const fi_info*);
  void (*freeinfo_)(fi_info*);
  const char* (*strerror_)(int);
  char* (*tostr_)(const void*, enum fi_type);
  uint32_t (*version_)();
};

// Loads libfabric on the first call (thread-safe); throws gradwire::Error
// (Transport) naming the library and dlerror() when it cannot be loaded.
const FabricLibrary& libfabric();

}  // namespace gradwire::transport::ofi
