// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire::torch::ElasticDistributedDataParallel: DistributedDataParallel
// over an ElasticGroup (gradwire/elastic.h) that commits the module and the
// optimizer in memory and, when the membership changes, rebuilds itself
// over the new communicator and puts every member back at the same step.
//
//   auto group = gradwire::ElasticGroup::join({}, gradwire::Rendezvous::from_environment());
//   ::torch::optim::Adam opt(model->parameters());
//   gradwire::torch::ElasticDistributedDataParallel ddp(*group, model, opt);
//   while (ddp.step() < total) {
//     try {
//       auto batch = data_for(ddp.step(), group->size(), group->rank());
//       opt.zero_grad();
//       loss_fn(model->forward(batch.x), batch.y).backward();
//       opt.step();
//       ddp.step_done();          // commits; lets a waiting process in
//     } catch (...) {
//       ddp.recover(std::current_exception());   // survivors continue
//     }
//   }
//
// What a commit holds: the module's parameters and buffers, the
// optimizer's state and the DDP's Bucket plan (the same on every member),
// plus ElasticDDPOptions' extra state; this member's CPU generator (dropout)
// and PowerSGD's error feedback as its own local state. The committed step
// is step(): data loading that follows it (the step's global batch, split
// by the current size and rank) continues where the commit left off.
//
// With a 1-bit optimizer (gradwire::torch::OneBitAdam or OneBitLamb, built
// over group->communicator()) there is no DDP: the optimizer averages the
// gradients itself, so call the module directly and ddp() is an error.
// Its replicated state (moments, frozen variance, step counter and stage,
// LAMB's coefficients) is committed; at a membership change it moves to
// the new communicator (OneBitOptimizer::rebind) and continues from the
// commit, its error feedback restarting at zero on every member (Note
// [1-bit optimizers under elastic generations] in
// src/compress/onebit_optimizers.cpp).
//
//   gradwire::torch::OneBitAdam opt(model->parameters(), group->communicator(), o);
//   gradwire::torch::ElasticDistributedDataParallel elastic(*group, model, opt);
//   ... model->forward(x); loss.backward(); opt.step(); elastic.step_done();
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "gradwire/compress.h"
#include "gradwire/elastic.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "gradwire/torch/optim.h"

namespace gradwire::torch {

struct ElasticDDPOptions {
  DDPOptions ddp;
  // Commit every this many steps: at most this many steps are computed
  // again after a failure. A commit serialises the module and optimizer
  // (about 3x the parameter bytes for Adam) and asks whether a process
  // waits to join (one small broadcast).
  uint64_t commit_every = 1;
  // The state of ddp.comm_hook when it is powersgd_hook(powersgd): Q, the
  // counters and this rank's error-feedback buffers are committed with the
  // DDP's Bucket plan. After a change a survivor restores its own; a member
  // that joined takes the broadcasting survivor's Q and counters and starts
  // its error feedback at zero (a lost rank's residual is dropped: it is
  // bounded by one step's compression error).
  std::shared_ptr<PowerSGDState> powersgd;
  // More replicated state to commit and restore with the model (an epoch
  // counter, a learning-rate schedule); both or neither.
  std::function<std::string()> save_extra;
  std::function<void(const std::string&)> load_extra;
};

class ElasticDistributedDataParallel {
 public:
  // Collective over the group's members. A member that joined a running job
  // (group.state().restored) starts from the state it received; otherwise
  // the module is broadcast from rank 0 and step 0 is committed.
  // `group`, `module` and `optimizer` are borrowed and must outlive this.
  ElasticDistributedDataParallel(ElasticGroup& group, std::shared_ptr<::torch::nn::Module> module,
                                 ::torch::optim::Optimizer& optimizer,
                                 ElasticDDPOptions options = {});
  template <typename M>
  ElasticDistributedDataParallel(ElasticGroup& group, const ::torch::nn::ModuleHolder<M>& module,
                                 ::torch::optim::Optimizer& optimizer,
                                 ElasticDDPOptions options = {})
      : ElasticDistributedDataParallel(group, std::shared_ptr<::torch::nn::Module>(module.ptr()),
                                       optimizer, std::move(options)) {}
  ~ElasticDistributedDataParallel();

  // The current generation's DistributedDataParallel (rebuilt at every
  // membership change). InvalidArgument with a 1-bit optimizer (no DDP).
  DistributedDataParallel& ddp();
  // Steps completed, counting from the job's start; after a membership
  // change, the committed step every member continues from.
  uint64_t step() const { return step_; }
  // Membership changes seen by this member (joins and recoveries).
  uint64_t changes() const { return changes_; }

  // After optimizer.step(): counts the step and commits every
  // commit_every steps. True if a process joined at this commit (ddp() is
  // new; nothing to redo).
  bool step_done();
  // In the handler of anything a step threw: ElasticGroup::recover (which
  // rethrows errors that are not a lost member; this object is then
  // unusable), then the module, optimizer and step() are those of the last
  // common commit. Returns step().
  uint64_t recover(std::exception_ptr error);

 private:
  void commit();
  void adopt(const ElasticState& state);

  ElasticGroup& group_;
  std::shared_ptr<::torch::nn::Module> module_;
  ::torch::optim::Optimizer& optimizer_;
  OneBitOptimizer* onebit_;        // optimizer_, if it is a 1-bit one
  uint64_t onebit_generation_ = 0;  // the generation whose communicator it is on
  ElasticDDPOptions options_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  uint64_t step_ = 0;
  uint64_t changes_ = 0;
};

}  // namespace gradwire::torch
