// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire::torch::ShardedDataParallel: ZeRO stages 1-3 for a libtorch
// module over the ShardedEngine (gradwire/sharded.h), the sharded
// counterpart of DistributedDataParallel. The module's parameters become
// the engine's: each rank keeps its shard of the fp32 master weights and the
// optimizer state (stage 1), of the gradients (stage 2) and, at stage 3, of
// the parameters themselves between steps.
//
//   auto comm = gradwire::Communicator::create();
//   auto model = std::make_shared<Net>();
//   gradwire::torch::ShardedDataParallelOptions o;
//   o.stage = 2;
//   o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::AdamOptions(1e-3));
//   gradwire::torch::ShardedDataParallel sdp(model, *comm, o);
//   for (...) {
//     auto loss = loss_fn(model->forward(x), y);  // stage 3: sdp.use(*sub) in forward,
//                                                  // sdp.after_forward(*sub, out) after
//     loss.backward();   // gradients are reduce-scattered bucket by bucket
//     sdp.step();        // the optimizer on this rank's shard, parameters gathered back
//   }
//
// Note [sharded hooks]: as DistributedDataParallel (Note [ddp hooks]), a
// post hook on each parameter's gradient accumulator hands .grad to
// ShardedEngine::mark_ready as soon as autograd wrote it, and an
// autograd-engine final callback runs finalize() before backward() returns.
// The engine copies the gradient into its Bucket, so the hook then drops
// .grad (outside no_sync()): the full gradient is not kept, and the user
// needs no zero_grad(). Stages 1 and 2: every parameter's storage is its
// place in the engine's parameter Bucket, so the allgather after a step
// writes the parameters directly. Hence: load weights (torch::load) into
// the module before wrapping it; afterwards torch::load re-points the
// parameters (Tensor::set_) away from the engine, and steps would no longer
// reach them (restore through engine().load_state instead).
//
// Note [forward waits per bucket]: libtorch's C++ modules have no forward
// hooks, so nothing can wait for a parameter just before forward reads it.
// By default step() therefore waits for every Bucket's allgather before it
// returns. With overlap_parameter_gather, step() returns at once and the
// forward must call use(submodule) before each submodule's computation:
// that waits only for the Buckets holding the submodule's parameters (the
// first layers' Buckets are gathered first), so the rest of the allgather
// overlaps the forward.
//
// Note [stage 3 units]: at stage 3 every entry of `units` (default: each
// direct child module, in registration order, which should be forward
// order) is one engine unit; parameters of the root module itself join unit
// 0. Between steps a unit's parameters hold no memory (a broadcast NaN of
// their shape, so a forward that forgot use() produces NaNs and the next
// backward an error naming the parameter). use(submodule) gathers its unit
// (and prefetches the next) and points the parameters at the gathered
// values. Without after_forward() they stay gathered until backward ends
// (autograd keeps references to the weights it saved), then the final
// callback releases every unit: the full parameters are then held from a
// unit's forward to the end of backward, and only the shard between steps.
// after_forward() frees them in between (Note [reshard after forward]).
//
// Note [reshard after forward]: FSDP's reshard_after_forward. libtorch's
// C++ modules have no forward hooks and libtorch no C++ saved-tensor hooks,
// so the forward hands each unit's outputs over:
// `y = sdp.after_forward(sub, sub(x))`. With options.reshard_after_forward
// (the default) that frees the unit's gathered parameters at once, and a
// hook on each output's gradient (Tensor::register_hook: it runs before the
// node that made the output, so before any of the unit's backward nodes that
// lead to it; public API, where a pre-hook on grad_fn() is the same thing
// through torch::autograd internals) gathers the unit again and prefetches
// the next one in backward order (the highest-numbered unit below it that is
// not gathered).
// Freeing keeps the tensor objects autograd saved: each parameter sits on
// one storage for all of training (its `full` tensor) whose data pointer
// is pointed at the engine's gathered memory and set to null (0 bytes) when
// the unit is released, so the views autograd saved (a Linear saves
// weight.t()) follow it; the parameter itself rests on NaN between release
// and gather, as between steps. In backward, once every parameter of a unit
// has handed its gradient to the engine (which copies it into its Bucket),
// the unit is released again, as FSDP1 does after the gradient accumulator:
// so no unit's backward may read its weights after its gradients are done
// (a use through weight.detach() would then read a storage of 0 bytes: a
// torch error). A parameter read between after_forward() and its unit's backward
// is NaN: use() the submodule again first. Outputs that the unit's backward
// does not all pass through (a missing output) make its nodes read a
// storage of 0 bytes: a torch error ("out of bounds for storage of size 0",
// "data is not allocated"), or, where no node reads the weights, the
// "was not gathered" error of its gradient. Same gathers, same math:
// the results are bit for bit those of the kept units; each resharded unit
// is gathered twice per step. The last unit's backward comes first, so
// after_forward on it only costs one gather (FSDP2 keeps the root too).
// reshard_after_forward = false makes after_forward() a no-op: the old
// behaviour, for speed. find_unused_parameters implies it: a rank whose
// graph skips a unit would not gather it in backward while the others do,
// and the collectives of the ranks would differ (a Mismatch on every rank,
// found by python.test_sharded's unused-parameter scenario at stage 3).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gradwire/checkpoint.h"
#include "gradwire/communicator.h"
#include "gradwire/sharded.h"

namespace gradwire::torch {

// The engine's built-in optimizers, from torch::optim's own options (the
// first param group's values): Adam (weight decay added to the gradient),
// AdamW (decoupled) and SGD with momentum, dampening and nesterov. amsgrad
// is refused (InvalidArgument). The formulas are gradwire/sharded.h's:
// float32, element by element, as torch computes them up to rounding.
std::shared_ptr<ShardOptimizer> shard_optimizer(const ::torch::optim::AdamOptions& o);
std::shared_ptr<ShardOptimizer> shard_optimizer(const ::torch::optim::AdamWOptions& o);
std::shared_ptr<ShardOptimizer> shard_optimizer(const ::torch::optim::SGDOptions& o);

// Makes any torch::optim optimizer over the given parameters: here one flat
// float32 tensor per Bucket, this rank's shard of the master weights.
using TorchOptimizerFactory =
    std::function<std::unique_ptr<::torch::optim::Optimizer>(std::vector<::torch::Tensor>)>;

struct ShardedDataParallelOptions {
  int stage = 2;  // 1, 2 or 3
  BucketCaps caps;
  size_t alignment = 32;
  // One of the two: the engine's built-in optimizer (shard_optimizer(...)),
  // or a factory of any torch::optim optimizer, which then steps on flat
  // shard tensors (as torch's ZeroRedundancyOptimizer takes an optimizer
  // class). Element-wise optimizers (SGD, Adam, AdamW, RMSprop, Adagrad)
  // compute what they would on whole parameters; ones that use a whole
  // tensor's norm (LBFGS's line search, LAMB-like trust ratios) see a
  // Bucket's shard instead. The torch optimizer's state is its own: not in
  // the engine's state() / checkpoints.
  std::shared_ptr<ShardOptimizer> optimizer;
  TorchOptimizerFactory torch_optimizer;
  // As ShardedOptions (gradwire/sharded.h).
  std::optional<DataType> reduce_dtype;
  double max_grad_norm = 0;
  LossScaling loss_scaling;
  bool find_unused_parameters = false;
  size_t max_buckets_in_flight = 4;
  // Int8 gradient reduce-scatter with error feedback after start_step
  // optimizer steps (ShardedOptions::gradient_compression).
  GradientCompressionOptions gradient_compression;
  // Stage 3: the parameters' gathers as int8 after start_step optimizer
  // steps (ShardedOptions::parameter_compression; stages 1, 2 refuse it).
  ParameterCompressionOptions parameter_compression;
  // Note [forward waits per bucket].
  bool overlap_parameter_gather = false;
  // Stage 3: the submodules that are units, by name (Note [stage 3 units]).
  std::vector<std::string> units;
  // Stage 3: after_forward() frees a unit's gathered parameters until its
  // backward gathers them again, and a unit is freed as soon as its
  // gradients are handed over in backward (Note [reshard after forward]).
  // False: units stay gathered from use() to the end of backward; implied
  // by find_unused_parameters.
  bool reshard_after_forward = true;
};

class ShardedDataParallel {
 public:
  // Collective over `comm`: checks that every rank holds the same
  // parameters and buffers (Mismatch on every rank naming the first
  // difference), broadcasts them from rank 0, builds the engine over the
  // parameters that require grad (host memory; float32, bfloat16, float16)
  // and re-points them at its memory. `comm` must outlive this object.
  ShardedDataParallel(std::shared_ptr<::torch::nn::Module> module, Communicator& comm,
                      ShardedDataParallelOptions options = {});
  template <typename M>
  ShardedDataParallel(const ::torch::nn::ModuleHolder<M>& module, Communicator& comm,
                      ShardedDataParallelOptions options = {})
      : ShardedDataParallel(std::shared_ptr<::torch::nn::Module>(module.ptr()), comm,
                            std::move(options)) {}
  // Removes the hooks; stages 1, 2: the parameters keep their values (copied
  // out of the engine); stage 3: they are left gathered whole.
  ~ShardedDataParallel();
  ShardedDataParallel(const ShardedDataParallel&) = delete;
  ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

  const std::shared_ptr<::torch::nn::Module>& module() const { return module_; }

  // After backward: the optimizer on this rank's shard, then the
  // parameters gathered (Note [forward waits per bucket]). False if the
  // step was skipped (a loss-scale overflow).
  bool step();
  // Before `submodule`'s computation in forward (needed at stage 3, and
  // with overlap_parameter_gather; otherwise free): its parameters are
  // current and readable. `submodule` must be part of the module.
  void use(const ::torch::nn::Module& submodule);
  template <typename M>
  void use(const ::torch::nn::ModuleHolder<M>& submodule) {
    use(*submodule);
  }
  // After `submodule`'s computation in forward, with its outputs (stage 3
  // with options.reshard_after_forward; otherwise free): frees its unit's
  // gathered parameters and hooks the outputs' gradients to gather them
  // again before the unit's backward (Note [reshard after forward]). Give
  // every output the unit's backward starts from. Returns the outputs.
  ::torch::Tensor after_forward(const ::torch::nn::Module& submodule,
                                const ::torch::Tensor& output);
  std::vector<::torch::Tensor> after_forward(const ::torch::nn::Module& submodule,
                                             const std::vector<::torch::Tensor>& outputs);
  template <typename M>
  ::torch::Tensor after_forward(const ::torch::nn::ModuleHolder<M>& submodule,
                                const ::torch::Tensor& output) {
    return after_forward(*submodule, output);
  }
  // Every parameter current and readable (stage 3: every unit gathered,
  // until the next backward ends).
  void use_all();

  [[nodiscard]] ShardedEngine::NoSync no_sync();
  float loss_scale() const;

  // Collective: every parameter whole on every rank (a stage-0 state that
  // loads into a sharded engine of any stage and world size).
  ShardedState full_state();
  // ShardedEngine::load_state between steps (stage 3: the units are
  // released first): states of any stage and world size, or a full state.
  // The engine's optimizer state only: with options.torch_optimizer, the
  // torch optimizer's own state is not restored.
  void load_state(const std::vector<const ShardedState*>& sources);

  // Collective: save_sharded_checkpoint (gradwire/checkpoint.h) of the
  // engine: every rank its pieces, with a manifest, in `dir`.
  void save_checkpoint(const std::string& dir, uint64_t step,
                       const CheckpointOptions& options = {});
  // Collective: the newest sharded checkpoint in `dir`, written by any
  // number of ranks (load_sharded_checkpoint; stage 3: the units released
  // first, as load_state); its step, or nullopt if there is none. A
  // checkpoint whose recorded parameter names or shapes differ from the
  // module's (check_parameter_manifest, as load_unsharded_checkpoint) is
  // refused on every rank before anything is read (InvalidArgument naming
  // the first differing parameter), the module unchanged.
  std::optional<uint64_t> load_checkpoint(const std::string& dir);

  ShardedEngine& engine();
  const std::vector<std::string>& parameter_names() const;
  // The torch optimizer made by options.torch_optimizer (null otherwise),
  // e.g. for LR schedules.
  ::torch::optim::Optimizer* torch_optimizer();

  struct State;  // shared with the autograd hooks (src/torch/)

 private:
  std::shared_ptr<::torch::nn::Module> module_;
  std::shared_ptr<State> state_;
};

}  // namespace gradwire::torch
