// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Memory registration cache for the libfabric transport.
//
// Providers with FI_MR_LOCAL (EFA) need every send/receive buffer
// registered, and registration costs a system call plus page pinning, far
// too slow to do per message. Gradient buckets are long-lived and reused
// every iteration, so we cache registrations by address range: a lookup
// that falls inside a registered range reuses it.
//
// The cache logic is a template over the registration handle so that it can
// be unit-tested with a fake registrar (tests/unit/mr_cache_test.cpp); the
// transport instantiates it with MemoryRegionPtr (fi_close on destruction).
//
// Note [registration cache invalidation]: a cached registration pins the
// pages that were mapped when it was made. If the caller frees a buffer and
// the allocator hands the same addresses out again backed by other pages,
// a stale registration would make the NIC read/write the old pages. Callers
// must therefore call Transport::invalidate(buf, len) before freeing (or
// munmapping) memory they passed to isend/irecv. Bucket buffers live as long
// as the communicator, so in practice this happens at tear-down only.
//
// Not thread-safe: one engine thread owns one transport and its cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <utility>

#include "transport/ofi/resources.h"

namespace gradwire::transport::ofi {

// Half-open [begin, end) address range.
struct AddressRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;

  static AddressRange of(const void* buf, size_t length) {
    auto b = reinterpret_cast<uintptr_t>(buf);
    return {b, b + length};
  }
  size_t length() const { return end - begin; }
  bool contains(const AddressRange& r) const { return begin <= r.begin && r.end <= end; }
  bool overlaps(const AddressRange& r) const { return begin < r.end && r.begin < end; }
};

// Expands to whole pages: every byte of a page is mapped if one is, so the
// expansion is always registrable, and neighbouring buffers on the same
// pages then share one registration.
AddressRange page_expand(AddressRange r, size_t page_size);
size_t system_page_size();

template <typename Handle>
class RegistrationCache {
 public:
  struct Registered {
    Handle handle;        // owns the registration; destroying it deregisters
    void* desc = nullptr;  // what fi_tsend/fi_trecv take as `desc`
  };
  // Registers [base, base+length) or throws.
  using Registrar = std::function<Registered(void* base, size_t length)>;

  struct Entry {
    AddressRange range;
    Handle handle;
    void* desc = nullptr;
    int users = 0;         // operations in flight that use this registration
    bool invalid = false;  // invalidated while in use: no new users
  };

  explicit RegistrationCache(Registrar registrar, size_t capacity = 64,
                             size_t page_size = system_page_size())
      : registrar_(std::move(registrar)), capacity_(capacity == 0 ? 1 : capacity),
        page_size_(page_size) {}

  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // Returns a registration covering [buf, buf+length) with one more user;
  // hand it back with release() when the operation completes. nullptr for
  // length 0 (nothing to register). Registers on a miss.
  Entry* lookup(const void* buf, size_t length) {
    if (length == 0) return nullptr;
    AddressRange want = AddressRange::of(buf, length);
    for (auto it = live_.begin(); it != live_.end(); ++it) {
      if (it->range.contains(want)) {
        live_.splice(live_.begin(), live_, it);  // most recently used first
        ++hits_;
        ++live_.front().users;
        return &live_.front();
      }
    }
    ++misses_;
    AddressRange range = page_expand(want, page_size_);
    Registered reg = registrar_(reinterpret_cast<void*>(range.begin), range.length());
    live_.push_front(Entry{range, std::move(reg.handle), reg.desc, 1, false});
    Entry* entry = &live_.front();
    trim();
    return entry;
  }

  void release(Entry* entry) {
    if (entry == nullptr) return;
    --entry->users;
    if (entry->invalid) {
      if (entry->users == 0) {
        retired_.remove_if([entry](const Entry& e) { return &e == entry; });
      }
      return;
    }
    trim();
  }

  // Drops every registration overlapping [buf, buf+length): unused ones now,
  // ones still in use when their last operation completes. Returns how many.
  size_t invalidate(const void* buf, size_t length) {
    AddressRange gone = AddressRange::of(buf, length == 0 ? 1 : length);
    size_t dropped = 0;
    for (auto it = live_.begin(); it != live_.end();) {
      auto next = std::next(it);
      if (it->range.overlaps(gone)) {
        ++dropped;
        if (it->users == 0) {
          live_.erase(it);
        } else {
          it->invalid = true;
          retired_.splice(retired_.end(), live_, it);
        }
      }
      it = next;
    }
    return dropped;
  }

  size_t size() const { return live_.size(); }        // valid registrations
  size_t retired() const { return retired_.size(); }  // invalidated, still in use
  size_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  // Evicts least recently used registrations that nothing uses until the
  // cache is within capacity. Entries in use are never evicted, so the cache
  // may exceed capacity while more buffers than that are in flight.
  void trim() {
    for (auto it = live_.end(); live_.size() > capacity_ && it != live_.begin();) {
      --it;
      if (it->users == 0) it = live_.erase(it);
    }
  }

  Registrar registrar_;
  size_t capacity_;
  size_t page_size_;
  std::list<Entry> live_;     // most recently used first; pointers stay valid
  std::list<Entry> retired_;  // invalidated while in use
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

using MrCache = RegistrationCache<MemoryRegionPtr>;

// A registrar for fi_mr_reg on `domain` that honours the provider's mr_mode:
// FI_MR_ENDPOINT binds each MR to `ep` and enables it; without
// FI_MR_PROV_KEY we must supply keys unique within the domain. Throws
// Transport naming `provider` and the range on failure.
MrCache::Registrar fabric_registrar(fid_domain* domain, fid_ep* ep, uint64_t mr_mode,
                                    std::string provider);

}  // namespace gradwire::transport::ofi
