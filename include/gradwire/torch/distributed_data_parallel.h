// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire::torch::DistributedDataParallel: data-parallel training of a
// libtorch module over a gradwire Communicator, driving the Reducer from
// autograd. This header (and only the gradwire::torch target) uses libtorch;
// the core headers never do. Inside namespace gradwire::torch, libtorch is
// always spelled ::torch.
//
//   auto comm = gradwire::Communicator::create();
//   auto model = std::make_shared<Net>();
//   gradwire::torch::DistributedDataParallel ddp(model, *comm);
//   ::torch::optim::SGD opt(model->parameters(), 0.1);
//   for (...) {
//     opt.zero_grad();
//     auto loss = loss_fn(model->forward(x), y);  // call the module itself
//     loss.backward();   // gradients are averaged over ranks when it returns
//     opt.step();        // any ::torch::optim optimizer
//   }
//
// Note [ddp hooks]: each parameter's gradient accumulator (the autograd node
// that writes .grad) gets a post hook, which runs after .grad holds this
// backward pass's gradient and calls Reducer::mark_ready, so Buckets launch
// while backward continues. The first hook of a backward pass queues an
// autograd-engine final callback that runs Reducer::finalize() when the
// whole backward pass is done, before loss.backward() returns. So the user
// calls nothing: .grad holds the average over ranks after backward, and an
// error (a peer lost, a parameter that got no gradient) is thrown by
// backward(). There is no forward wrapper: c10d's forward work (searching
// the graph for unused parameters, broadcasting buffers every step) is done
// instead at finalize() (unused parameters) and on request
// (broadcast_buffers()).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gradwire/checkpoint.h"
#include "gradwire/communicator.h"
#include "gradwire/reducer.h"

namespace gradwire::torch {

struct DDPOptions {
  // Bucket caps: first Bucket 1 MiB, later ones 25 MiB (c10d's defaults).
  BucketCaps caps;
  // Parameters that get no gradient in a step (on some or all ranks) count
  // as zeros on that rank, so the step completes; each then holds the
  // average over ranks, which is zero (a defined tensor) where no rank used
  // it. Without it, such a parameter is an error from backward() naming it.
  bool find_unused_parameters = false;
  // Parameters' .grad alias their Bucket memory, so no copy is made in or
  // out of the Buckets. Zero-copy needs optimizer.zero_grad(false) (zeroing
  // in place); zero_grad() with set_to_none=true (libtorch's default) works
  // too, but then the next backward's gradient is copied into the Bucket
  // once and .grad re-aliased. The aliasing ends when the
  // DistributedDataParallel is destroyed (.grad becomes a copy).
  bool gradient_as_bucket_view = false;
  // Re-plan the Buckets once from rank 0's observed gradient order.
  bool rebuild_buckets = true;
  // Reduce-scatter instead of allreduce (ZeRO-style): after backward, each
  // .grad holds the average only on the elements in this rank's shards
  // (reducer().shard(b)); the other elements are unspecified.
  bool sharded = false;
  // Synchronise every k-th backward pass only (gradient accumulation).
  int sync_every_k_steps = 1;
  // Bucket -> Work; empty: allreduce-average (see gradwire/reducer.h for
  // fp16_compress_hook and bf16_compress_hook).
  CommHook comm_hook;
  // At construction: broadcast parameters and buffers from rank 0.
  bool broadcast_from_rank0 = true;
};

class DistributedDataParallel {
 public:
  // Collective over `comm`. Checks that every rank holds the same
  // parameters and buffers (names, shapes, dtypes, devices; Mismatch naming
  // the first difference, thrown on every rank), broadcasts them from rank 0
  // and registers the hooks. Host (CPU) and CUDA parameters (CUDA ones get
  // device Buckets, Note [device Buckets]); other devices are InvalidArgument.
  // Only parameters with requires_grad take part in the reduction.
  // `comm` is borrowed and must outlive this object.
  DistributedDataParallel(std::shared_ptr<::torch::nn::Module> module, Communicator& comm,
                          DDPOptions options = {});
  // For TORCH_MODULE holders: DistributedDataParallel ddp(net, comm).
  template <typename M>
  DistributedDataParallel(const ::torch::nn::ModuleHolder<M>& module, Communicator& comm,
                          DDPOptions options = {})
      : DistributedDataParallel(std::shared_ptr<::torch::nn::Module>(module.ptr()), comm,
                                std::move(options)) {}
  // Removes the hooks (must not overlap a backward pass).
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  const std::shared_ptr<::torch::nn::Module>& module() const { return module_; }

  // While the guard lives, backward passes accumulate into .grad locally;
  // the first backward after it ends averages the accumulated gradients.
  // Create it before forward/backward, not in the middle of one.
  [[nodiscard]] Reducer::NoSync no_sync();

  // Broadcasts the module's buffers (e.g. BatchNorm running statistics) from
  // `root`. Collective; call it between steps where c10d would do it before
  // every forward.
  void broadcast_buffers(int root = 0);

  // Checkpointing (include/gradwire/checkpoint.h): the Reducer's plan and
  // step counters (Reducer::save_state). load_state() between steps; the
  // gradient views follow the restored plan.
  std::string save_state() const;
  void load_state(std::string_view state);

  // Collective: the module and `optimizer` (torch::optim Adam, AdamW or
  // SGD) as a sharded checkpoint that ShardedDataParallel loads at any
  // stage and world size, and loading one written by it (or by this) at any
  // world size: save_unsharded_checkpoint / load_unsharded_checkpoint
  // (gradwire/torch/unsharded_checkpoint.h, Note [torch optimizer state in
  // sharded checkpoints]). Between steps.
  void save_checkpoint(const std::string& dir, uint64_t step,
                       ::torch::optim::Optimizer& optimizer,
                       const CheckpointOptions& options = {});
  std::optional<uint64_t> load_checkpoint(const std::string& dir,
                                          ::torch::optim::Optimizer& optimizer);

  // The engine underneath: plan, step statistics, shards (sharded mode).
  Reducer& reducer();
  const StepStats& last_step_stats() const;
  // Parameters in the reduction, in registration order (index = Reducer's
  // gradient index).
  const std::vector<std::string>& parameter_names() const;

  struct State;  // shared with the autograd hooks (src/torch/)

 private:
  std::shared_ptr<::torch::nn::Module> module_;
  std::shared_ptr<State> state_;
};

}  // namespace gradwire::torch
