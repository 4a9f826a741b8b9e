// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire as a c10d backend: a c10d::Backend whose collectives run on one
// gradwire Communicator per process group, so that c10d::ProcessGroup's
// collectives (and with them c10d::Reducer, DDP's engine) run on gradwire
// from C++, and torch.distributed's from Python (gradwire.torch registers
// this class as backend "gradwire"; the extension only binds it).
//
//   // Every rank: a store the group shares (a c10d::TCPStore, FileStore...).
//   auto pg = gradwire::torch::make_process_group(store, rank, size);
//   std::vector<at::Tensor> t{grad};
//   pg->allreduce(t)->wait();          // c10d::AllreduceOptions: SUM
//
// CPU and CUDA tensors (CUDA ones through the Communicator's device path:
// NCCL or staged, after PyTorch's current stream; Note [CUDA tensors in the
// backend] in src/torch/c10d_work.cpp). Dtypes: float32/64, float16,
// bfloat16, int8/16/32/64, uint8, bool and complex (as pairs of reals).
// Errors are gradwire::Errors (InvalidArgument before anything is sent,
// naming the rank and the operation; Mismatch, Timeout, PeerLost... from
// Work::wait()). The names and signatures of the overrides follow the
// c10d::Backend of the torch this adapter is built against (2.15).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "gradwire/communicator.h"
#include "gradwire/options.h"

namespace gradwire::torch {

class Backend : public c10d::Backend {
 public:
  // Over `comm`, whose ranks are the group's. The Backend shares it: it
  // stays alive while the Backend or a collective in flight uses it.
  explicit Backend(std::shared_ptr<Communicator> comm);
  ~Backend() override;

  // Bootstraps the group's Communicator through `store` (Note [group
  // bootstrap] in src/torch/group_rendezvous.h): group rank 0 publishes an
  // address, a free port and a fresh secret in it, every member joins
  // gradwire's own store there. Collective over the group's members;
  // blocks. Give each group a store of its own (a c10d::PrefixStore, as
  // torch.distributed does): the keys are the same for every group.
  // `timeout` bounds every collective (GRADWIRE_TIMEOUT_S overrides it).
  static c10::intrusive_ptr<Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int size, std::chrono::milliseconds timeout);

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

  // src/torch/c10d_ops.cpp
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
  // FSDP2's and DTensor's (Note [coalesced single-tensor collectives]).
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  Communicator& communicator();
  // Closes the Communicator (Note [communicators at exit] in
  // src/torch/c10d_backend.cpp); later collectives raise Aborted.
  void shutdown();
  // shutdown() of every Backend still alive (Python runs it at exit).
  static void shutdown_all();

 private:
  // Note [sparse allreduce] (src/torch/c10d_sparse.cpp).
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor& t, const c10d::AllreduceOptions& opts,
                                                  Communicator& comm, const std::string& what);
  // The Communicator, or Aborted naming `op` after shutdown().
  std::shared_ptr<Communicator> live(const char* op) const;

  mutable std::mutex mu_;
  std::shared_ptr<Communicator> comm_;
  mutable std::atomic<uint64_t> collectives_{0};
};

// A c10d::ProcessGroup of `size` ranks whose CPU and CUDA collectives run on
// a gradwire Backend made by Backend::create(store, rank, size, timeout).
// Collective over the group's members.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout = Options{}.timeout);

// A c10d::ProcessGroup over an existing Backend, e.g. one over a
// Communicator the program already has:
//   make_process_group(c10::make_intrusive<gradwire::torch::Backend>(std::move(comm)))
// `store` is only what ProcessGroup::getStore() returns; none is needed.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    c10::intrusive_ptr<Backend> backend, c10::intrusive_ptr<c10d::Store> store = {});

// Called by the c10d Work's wait() between slices of at most 50 ms while
// the collective runs; it may throw to abandon the wait (the collective
// itself goes on). The Python extension installs one that runs Python's
// signal handlers, so Ctrl-C interrupts a wait (Note [interruptible wait]
// in python/src/common.cpp). Process-wide; nullptr: none (the default).
using WaitInterrupt = void (*)();
void set_wait_interrupt(WaitInterrupt check);

// Under mpirun, a c10d store needs a host and a port that no one chose:
// collective over the mpirun job (a gradwire Communicator of the job's
// ranks, made and closed here). Rank 0 takes `master_addr`, or 127.0.0.1
// when every rank is on one host (`single_host`), or the address that
// routes off this host, and a free TCP port there; every rank returns
// them.
std::pair<std::string, int> mpi_master_address(const std::string& master_addr, bool single_host);

}  // namespace gradwire::torch
