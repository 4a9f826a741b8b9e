// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/registration_cache.h"

#include <unistd.h>

#include <memory>

#include "base/raise.h"

namespace gradwire::transport::ofi {

size_t system_page_size() {
  static const size_t page = [] {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

AddressRange page_expand(AddressRange r, size_t page_size) {
  uintptr_t mask = ~(static_cast<uintptr_t>(page_size) - 1);
  return {r.begin & mask, (r.end + page_size - 1) & mask};
}

MrCache::Registrar fabric_registrar(fid_domain* domain, fid_ep* ep, uint64_t mr_mode,
                                    std::string provider) {
  // Without FI_MR_PROV_KEY the application picks the keys and they must be
  // unique within the domain; the counter is shared by this registrar's
  // copies only, which is enough because one transport owns one domain.
  auto next_key = std::make_shared<uint64_t>(1);
  return [domain, ep, mr_mode, provider = std::move(provider), next_key](void* base,
                                                                         size_t length) {
    uint64_t key = (mr_mode & FI_MR_PROV_KEY) ? 0 : (*next_key)++;
    fid_mr* raw = nullptr;
    // Two-sided messaging only: the NIC reads sends and writes receives.
    int rc = fi_mr_reg(domain, base, length, FI_SEND | FI_RECV, 0, key, 0, &raw, nullptr);
    if (rc != 0) {
      raise(ErrorCode::Transport,
            "fi_mr_reg of {} bytes at {} failed on provider {}: {} ({}); is the memory "
            "locked-memory limit (ulimit -l) large enough?",
            length, base, provider, libfabric().strerror(-rc), rc);
    }
    MemoryRegionPtr mr(raw);
    if (mr_mode & FI_MR_ENDPOINT) {
      // Endpoint-scoped MRs are created disabled; they work only once bound
      // to the endpoint that will use them and enabled.
      rc = fi_mr_bind(mr.get(), &ep->fid, 0);
      if (rc != 0) {
        raise(ErrorCode::Transport, "fi_mr_bind failed on provider {}: {} ({})", provider,
              libfabric().strerror(-rc), rc);
      }
      rc = fi_mr_enable(mr.get());
      if (rc != 0) {
        raise(ErrorCode::Transport, "fi_mr_enable failed on provider {}: {} ({})", provider,
              libfabric().strerror(-rc), rc);
      }
    }
    void* desc = fi_mr_desc(mr.get());
    return MrCache::Registered{std::move(mr), desc};
  };
}

}  // namespace gradwire::transport::ofi
