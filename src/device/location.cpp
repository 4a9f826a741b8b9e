// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "device/location.h"

#include <fmt/format.h>

#if GRADWIRE_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>

#include "base/deadline.h"
#endif

namespace gradwire::device {

#if GRADWIRE_HAVE_CUDA
namespace {

// Note [no CUDA initialisation for host-only processes]. The driver API's
// cuPointerGetAttributes, taken from the already loaded libcuda, neither
// initialises the driver nor creates a context (the runtime's
// cudaPointerGetAttributes would create one on device 0 in a process that
// loaded CUDA but never used it, e.g. one that imported torch): for an
// unknown pointer it answers "no attributes", before cuInit it answers
// CUDA_ERROR_NOT_INITIALIZED. Both mean host memory. Once found, the entry
// point is cached (the driver is never unloaded).
using PointerGetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);

// Shared objects loaded into the process so far (dl_iterate_phdr's
// dlpi_adds, read from the first object only: ~10 ns).
unsigned long long objects_loaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}

// Note [rechecking for the driver]: while libcuda is not loaded, whether it
// is loaded now is asked at most once per tick of the coarse clock (1-4
// ms): dl_iterate_phdr takes the loader's lock, ~40 ns, 6 % of an 8-byte
// broadcast on the caller's thread (issue 18), where the coarse clock is
// ~11 ns. It cannot miss device memory: the first device pointer exists
// only after the driver is loaded, initialised (cuInit) and has a context,
// which takes tens of milliseconds at the least, not one tick.

// `now`: a coarse_now() the caller read anyway (Note [one clock read per
// call] in runtime/communicator.cpp), or null: the clock is then read here,
// and only while the driver is not found yet.
PointerGetAttributes pointer_get_attributes(const Clock::time_point* now) {
  static std::atomic<PointerGetAttributes> cached{nullptr};
  // dlopen(RTLD_NOLOAD) of a library that is not loaded costs ~25 us (it
  // searches the library path), far too much for every host collective, so
  // it is asked again only after the process loaded another object.
  static std::atomic<unsigned long long> checked_at{~0ull};
  static std::atomic<int64_t> checked_tick{-1};
  PointerGetAttributes fn = cached.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  // Note [coarse clock]
  const int64_t tick = (now ? *now : coarse_now()).time_since_epoch().count();
  if (checked_tick.load(std::memory_order_relaxed) == tick) return nullptr;
  const unsigned long long loaded = objects_loaded();
  if (checked_at.load(std::memory_order_relaxed) == loaded) {
    checked_tick.store(tick, std::memory_order_relaxed);
    return nullptr;
  }
  checked_at.store(loaded, std::memory_order_relaxed);
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {  // not loaded: no device memory exists
    checked_tick.store(tick, std::memory_order_relaxed);
    return nullptr;
  }
  fn = reinterpret_cast<PointerGetAttributes>(dlsym(handle, "cuPointerGetAttributes"));
  // The handle's reference is kept on purpose: it pins what `fn` points into.
  if (fn != nullptr) cached.store(fn, std::memory_order_release);
  return fn;
}

}  // namespace

bool cuda_driver_loaded(Clock::time_point now) { return pointer_get_attributes(&now) != nullptr; }

bool cuda_driver_loaded() { return pointer_get_attributes(nullptr) != nullptr; }

MemoryLocation locate(const void* p) {
  if (p == nullptr) return {};
  PointerGetAttributes get = pointer_get_attributes(nullptr);
  if (get == nullptr) return {};
  unsigned memory_type = 0;
  unsigned is_managed = 0;
  int ordinal = -1;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&memory_type, &is_managed, &ordinal};
  if (get(3, attrs, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return {};
  if (memory_type == CU_MEMORYTYPE_DEVICE || is_managed != 0) {
    return {MemoryLocation::Kind::Cuda, ordinal < 0 ? 0 : ordinal};
  }
  return {};  // pageable or pinned host memory
}

bool built_with_cuda() { return true; }
#else
MemoryLocation locate(const void*) { return {}; }
bool cuda_driver_loaded(Clock::time_point) { return false; }
bool cuda_driver_loaded() { return false; }
bool built_with_cuda() { return false; }
#endif

#if GRADWIRE_HAVE_NCCL
bool built_with_nccl() { return true; }
#else
bool built_with_nccl() { return false; }
#endif

std::string describe(const MemoryLocation& where) {
  return where.is_device() ? fmt::format("CUDA device memory on device {}", where.device)
                           : std::string("host memory");
}

}  // namespace gradwire::device
