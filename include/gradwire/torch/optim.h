// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// 1-bit Adam and 1-bit LAMB as torch::optim optimizers (over the flat-buffer
// implementations in gradwire/compress.h).
//
// They average gradients themselves: use them on a plain module, NOT on one
// wrapped in DistributedDataParallel (which would average the gradients a
// second time and defeat the compression). The constructor broadcasts the
// parameters from rank 0, so the replicas start equal; each rank then calls
// loss.backward() on its own batch and optimizer.step() as usual.
//
//   auto comm = gradwire::Communicator::create();
//   gradwire::OneBitAdamOptions o;  o.lr = 1e-3;  o.freeze_step = 200;
//   gradwire::torch::OneBitAdam opt(model->parameters(), *comm, o);
//   ... loss.backward(); opt.step(); opt.zero_grad();
//
// Parameters may live on a CUDA device (all on one): the optimizer's state,
// the compression and the collectives then stay on the GPU, after PyTorch's
// current stream. Parameters must be dense float32 (master weights): mixed
// precision keeps them so and computes in 16 bits under autocast.
//
// The learning rate of param group 0 (set by torch's LR schedulers) is used
// at every step. save()/load() write this rank's whole state (moments, error
// buffers, step counter), so a resumed run continues bit for bit; every rank
// must save and load its own.
//
// Elastic training: pass one, built over group->communicator(), to
// ElasticDistributedDataParallel (gradwire/torch/elastic.h), which commits
// its state and moves it to each new generation.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/compress.h"

namespace gradwire::torch {

// What the two optimizers share: the parameters gathered into flat float32
// buffers on their device, the step of the core optimizer there, and
// save()/load() of its whole state. Made only as a OneBitAdam or a
// OneBitLamb.
class OneBitOptimizer : public ::torch::optim::Optimizer {
 public:
  ~OneBitOptimizer() override;

  ::torch::Tensor step(LossClosure closure = nullptr) override;
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;

  // The flat-buffer optimizer it steps (OneBitAdam::core() and
  // OneBitLamb::core() give it as its own type).
  gradwire::OneBitOptimizer& core() { return *core_; }
  Communicator& communicator() const { return *comm_; }
  // Collective over `comm`, as the constructor is (the same collectives:
  // the parameter counts checked, the parameters broadcast from rank 0):
  // moves the optimizer onto `comm`, e.g. a new elastic generation's,
  // through gradwire::OneBitOptimizer::rebind (the error feedback restarts
  // at zero). ElasticDistributedDataParallel calls it; a process that
  // joins constructs its optimizer over the generation it joined instead.
  void rebind(Communicator& comm);

 protected:
  // Checks the parameters and broadcasts them from rank 0; the derived
  // class then makes core_ over count() elements on device().
  OneBitOptimizer(std::vector<::torch::Tensor> params, Communicator& comm,
                  const gradwire::OneBitOptions& options, const char* who);
  size_t count() const { return count_; }
  int device() const { return device_; }  // -1: the CPU

  std::vector<::torch::Tensor> params_;
  std::unique_ptr<gradwire::OneBitOptimizer> core_;

 private:
  Communicator* comm_;
  size_t count_ = 0;
  int device_ = -1;
  ::torch::Tensor flat_params_, flat_grads_;  // on the parameters' device
};

// core(): the core optimizer as its own type.
template <typename Core>
class OneBitOptimizerOver : public OneBitOptimizer {
 public:
  Core& core() { return static_cast<Core&>(*core_); }

 protected:
  using OneBitOptimizer::OneBitOptimizer;
};

class OneBitAdam : public OneBitOptimizerOver<gradwire::OneBitAdam> {
 public:
  OneBitAdam(std::vector<::torch::Tensor> params, Communicator& comm,
             gradwire::OneBitAdamOptions options = {});
};

class OneBitLamb : public OneBitOptimizerOver<gradwire::OneBitLamb> {
 public:
  // Each parameter tensor is one LAMB layer (its own scaling coefficient).
  OneBitLamb(std::vector<::torch::Tensor> params, Communicator& comm,
             gradwire::OneBitLambOptions options = {});
};

}  // namespace gradwire::torch
