// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/hmem.h"

#include <cstring>
#include <memory>

#include "base/raise.h"
#include "transport/ofi/resources.h"

namespace gradwire::transport::ofi {

HmemSupport probe_hmem(const std::string& provider, const std::string& iface) {
  HmemSupport out;
  InfoPtr hints = allocate_info();
  if (!hints) return {false, "fi_allocinfo: out of memory"};
  hints->caps = FI_TAGGED | FI_MSG | FI_HMEM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  fi_info* list = nullptr;
  int rc = libfabric().getinfo(FI_VERSION(1, 11), nullptr, nullptr, 0, hints.get(), &list);
  InfoPtr owned(list);
  if (rc != 0) {
    out.detail = fmt::format("provider '{}' offers no FI_HMEM endpoint: {}", provider,
                             libfabric().strerror(-rc));
    return out;
  }
  for (const fi_info* p = list; p != nullptr; p = p->next) {
    if (!iface.empty() && (p->domain_attr->name == nullptr || iface != p->domain_attr->name)) {
      continue;
    }
    if ((p->caps & FI_HMEM) == 0) continue;
    out.fi_hmem = true;
    out.detail = fmt::format("provider '{}' offers FI_HMEM on domain {} (mr_mode {:#x})",
                             p->fabric_attr->prov_name, p->domain_attr->name,
                             p->domain_attr->mr_mode);
    return out;
  }
  out.detail = fmt::format("provider '{}' offers FI_HMEM only on other domains than '{}'",
                           provider, iface);
  return out;
}

std::string_view to_string(GpuPath path) {
  switch (path) {
    case GpuPath::Nccl: return "nccl";
    case GpuPath::Direct: return "libfabric FI_HMEM";
    case GpuPath::Staged: return "libfabric staged through pinned host memory";
    case GpuPath::Unsupported: return "unsupported (built without CUDA)";
  }
  return "?";
}

GpuPath choose_gpu_path(bool built_with_cuda, bool nccl_usable, const HmemSupport& hmem) {
  if (!built_with_cuda) return GpuPath::Unsupported;
  if (nccl_usable) return GpuPath::Nccl;
  return hmem.fi_hmem ? GpuPath::Direct : GpuPath::Staged;
}

MrCache::Registrar fabric_hmem_registrar(fid_domain* domain, fid_ep* ep, uint64_t mr_mode,
                                         std::string provider, int device) {
  auto next_key = std::make_shared<uint64_t>(uint64_t{1} << 48);  // apart from host keys
  return [domain, ep, mr_mode, provider = std::move(provider), device, next_key](void* base,
                                                                                 size_t length) {
    iovec iov{base, length};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_SEND | FI_RECV;
    attr.requested_key = (mr_mode & FI_MR_PROV_KEY) ? 0 : (*next_key)++;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    fid_mr* raw = nullptr;
    int rc = fi_mr_regattr(domain, &attr, 0, &raw);
    if (rc != 0) {
      raise(ErrorCode::Transport,
            "fi_mr_regattr (FI_HMEM_CUDA, device {}) of {} bytes at {} failed on provider {}: {} "
            "({}); is GPUDirect RDMA (nvidia-peermem / dma-buf) available?",
            device, length, base, provider, libfabric().strerror(-rc), rc);
    }
    MemoryRegionPtr mr(raw);
    if (mr_mode & FI_MR_ENDPOINT) {
      rc = fi_mr_bind(mr.get(), &ep->fid, 0);
      if (rc == 0) rc = fi_mr_enable(mr.get());
      if (rc != 0) {
        raise(ErrorCode::Transport, "binding an FI_HMEM_CUDA registration failed on provider {}: "
              "{} ({})", provider, libfabric().strerror(-rc), rc);
      }
    }
    void* desc = fi_mr_desc(mr.get());
    return MrCache::Registered{std::move(mr), desc};
  };
}

}  // namespace gradwire::transport::ofi
