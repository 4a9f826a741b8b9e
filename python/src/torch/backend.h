// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire as a torch.distributed backend: a c10d::Backend whose collectives
// run on one gradwire Communicator per process group. Everything that
// touches c10d's Backend/Work API (the part that changes between torch
// versions) is in c10d_backend.cpp.
#pragma once

#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "gradwire/communicator.h"

namespace gradwire::python {

// The Python main thread's ident (threading.main_thread().ident): the only
// thread on which waits check for Ctrl-C.
void set_main_thread(uint64_t ident);

class GradwireBackend : public c10d::Backend {
 public:
  GradwireBackend(std::unique_ptr<Communicator> comm);
  ~GradwireBackend() override;

  // Bootstraps the group's Communicator through `store` (the group's prefix
  // store that torch passes to backend creators; Note [group bootstrap]).
  // Collective over the group's members. Blocks; call without the GIL.
  static c10::intrusive_ptr<GradwireBackend> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "gradwire"; }
  // The collectives this group has started, alike on every rank while they
  // are in step (torch compares them to spot desynchronisation).
  uint64_t getSequenceNumberForGroup() override { return collectives_.load(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // c10d_ops.cpp
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  Communicator& communicator();
  // Closes the Communicator (Note [communicators at exit] in
  // c10d_backend.cpp); later collectives raise AbortedError.
  void shutdown();
  // shutdown() of every Backend still alive; call without the GIL.
  static void shutdown_all();

 private:
  // Note [sparse allreduce] (c10d_sparse.cpp).
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor& t, const c10d::AllreduceOptions& opts,
                                                  Communicator& comm, const std::string& what);
  // The Communicator, or AbortedError naming `op` after shutdown().
  std::shared_ptr<Communicator> live(const char* op) const;

  mutable std::mutex mu_;
  std::shared_ptr<Communicator> comm_;
  mutable std::atomic<uint64_t> collectives_{0};
};

// A torch.futures.Future (Python object) completed with `result` when `work`
// completes, or with its error (Note [future callbacks on the engine
// thread] in c10d_backend.cpp). Call with the GIL held.
pybind11::object future_of(Work work, at::Tensor result);

// gradwire's PowerSGD as a DDP comm hook (powersgd.cpp).
void register_powersgd(pybind11::module_& m);

}  // namespace gradwire::python
