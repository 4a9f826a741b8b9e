// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// RegistrationCache with a fake registrar: no libfabric involved.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "transport/ofi/registration_cache.h"

namespace gradwire::transport::ofi {
namespace {

constexpr size_t kPage = 4096;

// Records registrations; a handle's destruction is its deregistration.
struct FakeRegistrar {
  struct Log {
    std::vector<AddressRange> registered;
    int live = 0;
    int deregistered = 0;
    bool fail = false;
  };
  struct Handle {
    std::shared_ptr<Log> log;
    Handle() = default;
    explicit Handle(std::shared_ptr<Log> l) : log(std::move(l)) { ++log->live; }
    Handle(Handle&& o) noexcept : log(std::move(o.log)) {}
    Handle& operator=(Handle&& o) noexcept {
      reset();
      log = std::move(o.log);
      return *this;
    }
    ~Handle() { reset(); }
    void reset() {
      if (log) {
        --log->live;
        ++log->deregistered;
        log.reset();
      }
    }
  };
  using Cache = RegistrationCache<Handle>;

  std::shared_ptr<Log> log = std::make_shared<Log>();
  Cache::Registrar registrar() {
    auto l = log;
    return [l](void* base, size_t length) {
      if (l->fail) throw std::runtime_error("registration refused");
      l->registered.push_back(AddressRange::of(base, length));
      return Cache::Registered{Handle(l), reinterpret_cast<void*>(l->registered.size())};
    };
  }
};
using Cache = FakeRegistrar::Cache;

// Page-aligned fake addresses: the cache never dereferences them.
const void* at(uintptr_t page, uintptr_t offset = 0) {
  return reinterpret_cast<const void*>(0x10000000 + page * kPage + offset);
}

TEST(PageExpand, RoundsToWholePages) {
  AddressRange r = page_expand(AddressRange::of(at(1, 10), 100), kPage);
  EXPECT_EQ(r.begin, reinterpret_cast<uintptr_t>(at(1)));
  EXPECT_EQ(r.length(), kPage);
  r = page_expand(AddressRange::of(at(1, kPage - 1), 2), kPage);
  EXPECT_EQ(r.length(), 2 * kPage);
  r = page_expand(AddressRange::of(at(3), kPage), kPage);
  EXPECT_EQ(r.length(), kPage);
}

TEST(RegistrationCache, MissThenHitForContainedRange) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 8, kPage);
  Cache::Entry* a = cache.lookup(at(0, 100), 3 * kPage);  // spans pages 0..3
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(cache.misses(), 1u);
  ASSERT_EQ(fake.log->registered.size(), 1u);
  EXPECT_EQ(fake.log->registered[0].begin, reinterpret_cast<uintptr_t>(at(0)));
  EXPECT_EQ(fake.log->registered[0].length(), 4 * kPage);

  Cache::Entry* b = cache.lookup(at(2, 7), 100);  // inside the first
  EXPECT_EQ(b, a);
  EXPECT_EQ(b->desc, a->desc);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(a->users, 2);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(a->users, 0);
  EXPECT_EQ(fake.log->registered.size(), 1u);
}

TEST(RegistrationCache, PartialOverlapIsAMiss) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 8, kPage);
  cache.release(cache.lookup(at(0), kPage));
  Cache::Entry* e = cache.lookup(at(0, 10), 2 * kPage);  // runs past the first region
  EXPECT_EQ(cache.misses(), 2u);
  EXPECT_TRUE(e->range.contains(AddressRange::of(at(0, 10), 2 * kPage)));
  cache.release(e);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(RegistrationCache, ZeroLengthNeedsNoRegistration) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 8, kPage);
  EXPECT_EQ(cache.lookup(at(0), 0), nullptr);
  cache.release(nullptr);
  EXPECT_TRUE(fake.log->registered.empty());
}

TEST(RegistrationCache, EvictsLeastRecentlyUsedUnusedEntry) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 2, kPage);
  Cache::Entry* p0 = cache.lookup(at(0), 1);
  cache.release(p0);
  cache.release(cache.lookup(at(10), 1));
  cache.release(cache.lookup(at(0), 1));  // page 0 is now the most recent
  cache.release(cache.lookup(at(20), 1));  // evicts page 10
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(fake.log->deregistered, 1);
  EXPECT_EQ(fake.log->live, 2);
  cache.release(cache.lookup(at(0), 1));
  EXPECT_EQ(cache.misses(), 3u);  // page 0 survived
  cache.release(cache.lookup(at(10), 1));
  EXPECT_EQ(cache.misses(), 4u);  // page 10 did not
}

TEST(RegistrationCache, EntriesInUseAreNotEvicted) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 1, kPage);
  Cache::Entry* a = cache.lookup(at(0), 1);
  Cache::Entry* b = cache.lookup(at(10), 1);  // over capacity: both in use
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(fake.log->deregistered, 0);
  EXPECT_EQ(a->range.begin, reinterpret_cast<uintptr_t>(at(0)));  // still valid
  cache.release(a);  // now the LRU one goes
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(fake.log->deregistered, 1);
  cache.release(b);
  EXPECT_EQ(fake.log->live, 1);
}

TEST(RegistrationCache, InvalidateDropsOverlappingEntries) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 8, kPage);
  cache.release(cache.lookup(at(0), 1));
  cache.release(cache.lookup(at(5), 2 * kPage));
  cache.release(cache.lookup(at(20), 1));
  EXPECT_EQ(cache.invalidate(at(6, 3), 10), 1u);  // hits only the second
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(fake.log->deregistered, 1);
  cache.release(cache.lookup(at(5), 1));
  EXPECT_EQ(cache.misses(), 4u);  // registered afresh
  EXPECT_EQ(cache.invalidate(at(100), 1), 0u);
}

TEST(RegistrationCache, InvalidateWhileInUseDefersDeregistration) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 8, kPage);
  Cache::Entry* a = cache.lookup(at(0), 1);
  EXPECT_EQ(cache.invalidate(at(0), 1), 1u);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.retired(), 1u);
  EXPECT_EQ(fake.log->live, 1);  // the operation still uses it
  Cache::Entry* b = cache.lookup(at(0), 1);
  EXPECT_NE(b, a);  // new users get a fresh registration
  cache.release(a);
  EXPECT_EQ(cache.retired(), 0u);
  EXPECT_EQ(fake.log->live, 1);
  cache.release(b);
}

TEST(RegistrationCache, FailedRegistrationLeavesCacheUnchanged) {
  FakeRegistrar fake;
  Cache cache(fake.registrar(), 8, kPage);
  fake.log->fail = true;
  EXPECT_THROW(cache.lookup(at(0), 1), std::runtime_error);
  EXPECT_EQ(cache.size(), 0u);
  fake.log->fail = false;
  cache.release(cache.lookup(at(0), 1));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(RegistrationCache, DestructionDeregistersEverything) {
  FakeRegistrar fake;
  {
    Cache cache(fake.registrar(), 8, kPage);
    cache.release(cache.lookup(at(0), 1));
    cache.release(cache.lookup(at(10), 1));
  }
  EXPECT_EQ(fake.log->live, 0);
  EXPECT_EQ(fake.log->deregistered, 2);
}

}  // namespace
}  // namespace gradwire::transport::ofi
