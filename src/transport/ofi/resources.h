// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// RAII for libfabric handles (docs/architecture.md, "Conventions": RAII over every C handle): one
// unique_ptr type per fid type, whose deleter calls fi_close, and one for
// fi_info (fi_freeinfo). Modelled on aws-ofi-nccl's resource_wrapper.h.
//
// Close order matters (an endpoint must go before the AV/CQ it is bound to,
// those before the domain, the domain before the fabric). Owners get it
// right by declaring members in open order, so C++ destroys them in
// reverse: fabric, domain, MRs, CQ, AV, EP.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <memory>

#include "base/logging.h"
#include "transport/ofi/library.h"

namespace gradwire::transport::ofi {

// Closes any fid-derived handle. A failing close cannot be reported from a
// destructor, so it is logged: it usually means operations were still in
// flight or something bound to it was not closed first.
template <typename T>
struct FidCloser {
  void operator()(T* handle) const noexcept {
    if (handle == nullptr) return;
    int rc = fi_close(&handle->fid);
    if (rc != 0) {
      log().warn("fi_close({}) failed: {} ({})", static_cast<void*>(handle),
                 libfabric().strerror(-rc), rc);
    }
  }
};

template <typename T>
using FidPtr = std::unique_ptr<T, FidCloser<T>>;

using FabricPtr = FidPtr<fid_fabric>;
using DomainPtr = FidPtr<fid_domain>;
using EndpointPtr = FidPtr<fid_ep>;
using AddressVectorPtr = FidPtr<fid_av>;
using CompletionQueuePtr = FidPtr<fid_cq>;
using MemoryRegionPtr = FidPtr<fid_mr>;

struct InfoFreer {
  void operator()(fi_info* info) const noexcept { libfabric().freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoFreer>;

// fi_allocinfo() returns nullptr only when out of memory.
inline InfoPtr allocate_info() { return InfoPtr(libfabric().allocinfo()); }

}  // namespace gradwire::transport::ofi
