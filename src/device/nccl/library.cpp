// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#if GRADWIRE_HAVE_NCCL
#include "device/nccl/library.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "base/raise.h"
#include "base/logging.h"

#ifndef GRADWIRE_NCCL_LIBRARY
#define GRADWIRE_NCCL_LIBRARY ""
#endif

namespace gradwire::device::nccl {
namespace {

constexpr int kMinimumVersion = 21400;  // 2.14: non-blocking communicators

template <typename Fn>
void resolve(void* handle, const char* name, Fn& fn, std::vector<std::string>& missing) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) missing.emplace_back(name);
}

Library load() {
  std::vector<std::string> tried;
  void* handle = nullptr;
  std::string path;
  for (std::string candidate : {std::string("libnccl.so.2"), std::string(GRADWIRE_NCCL_LIBRARY)}) {
    if (candidate.empty()) continue;
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      path = candidate;
      break;
    }
    const char* err = dlerror();
    tried.push_back(fmt::format("{} ({})", candidate, err ? err : "not found"));
  }
  if (handle == nullptr) {
    raise(ErrorCode::InvalidArgument,
          "cannot run collectives on CUDA buffers: NCCL could not be loaded (tried {}); install "
          "NCCL or add its directory to LD_LIBRARY_PATH",
          fmt::join(tried, "; "));
  }
  // Never dlclose()d: NCCL keeps threads and CUDA state for the process.
  Library lib;
  lib.path = path;
  std::vector<std::string> missing;
  resolve(handle, "ncclGetVersion", lib.GetVersion, missing);
  resolve(handle, "ncclGetUniqueId", lib.GetUniqueId, missing);
  resolve(handle, "ncclCommInitRankConfig", lib.CommInitRankConfig, missing);
  resolve(handle, "ncclCommFinalize", lib.CommFinalize, missing);
  resolve(handle, "ncclCommDestroy", lib.CommDestroy, missing);
  resolve(handle, "ncclCommAbort", lib.CommAbort, missing);
  resolve(handle, "ncclCommGetAsyncError", lib.CommGetAsyncError, missing);
  resolve(handle, "ncclGetErrorString", lib.GetErrorString, missing);
  resolve(handle, "ncclGetLastError", lib.GetLastError, missing);
  resolve(handle, "ncclAllReduce", lib.AllReduce, missing);
  resolve(handle, "ncclReduce", lib.Reduce, missing);
  resolve(handle, "ncclReduceScatter", lib.ReduceScatter, missing);
  resolve(handle, "ncclAllGather", lib.AllGather, missing);
  resolve(handle, "ncclBroadcast", lib.Broadcast, missing);
  resolve(handle, "ncclSend", lib.Send, missing);
  resolve(handle, "ncclRecv", lib.Recv, missing);
  resolve(handle, "ncclGroupStart", lib.GroupStart, missing);
  resolve(handle, "ncclGroupEnd", lib.GroupEnd, missing);
  if (lib.GetVersion != nullptr) lib.GetVersion(&lib.version);
  if (!missing.empty() || lib.version < kMinimumVersion) {
    raise(ErrorCode::InvalidArgument,
          "cannot run collectives on CUDA buffers: {} is NCCL version code {}, gradwire needs "
          "2.14 or newer{}{}",
          path, lib.version, missing.empty() ? "" : "; missing symbols: ",
          fmt::join(missing, ", "));
  }
  log().info("loaded NCCL {} from {}", lib.version, path);
  return lib;
}

}  // namespace

const Library& Library::get() {
  // A failed load is retried by the next caller (and fails the same way),
  // so every device collective reports why.
  static std::mutex mu;
  static std::unique_ptr<Library> loaded;
  std::lock_guard<std::mutex> lk(mu);
  if (!loaded) loaded = std::make_unique<Library>(load());
  return *loaded;
}

std::string Library::describe(ncclResult_t rc, ncclComm_t comm) const {
  std::string s = GetErrorString(rc);
  const char* last = GetLastError(comm);
  if (last != nullptr && *last != '\0') s += fmt::format(": {}", last);
  return s;
}

}  // namespace gradwire::device::nccl
#endif  // GRADWIRE_HAVE_NCCL

#include <fmt/format.h>

#include "base/raise.h"
#include "gradwire/version.h"

namespace gradwire {

std::string nccl_version() {
#if GRADWIRE_HAVE_NCCL
  try {
    const int v = device::nccl::Library::get().version;
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  } catch (const Error& e) {
    return fmt::format("unavailable ({})", e.message());
  }
#else
  return "not built";
#endif
}

}  // namespace gradwire
