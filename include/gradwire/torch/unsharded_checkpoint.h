// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Checkpoints of an unsharded (DDP) libtorch job in the sharded engine's
// format (Note [unsharded checkpoints] in src/checkpoint/sharded.cpp), so
// that a model trained with gradwire::torch::DistributedDataParallel and a
// torch::optim optimizer continues under ShardedDataParallel at any stage
// and world size, and back:
//
//   // DDP job, N ranks:
//   gradwire::torch::save_unsharded_checkpoint(*comm, "ckpt", step, *model, opt);
//   // ShardedDataParallel job, M ranks, any stage, the engine's optimizer
//   // (shard_optimizer(AdamOptions(...)) for a torch::optim::Adam):
//   sdp.load_checkpoint("ckpt");
//   ...  sdp.save_checkpoint("ckpt", step);
//   // DDP job again, any number of ranks:
//   gradwire::torch::load_unsharded_checkpoint(*comm, "ckpt", *model, opt);
//
// Note [torch optimizer state in sharded checkpoints]: the module's
// parameters that require grad, in registration order (as
// ShardedDataParallel takes them), are the engine's parameters. The
// optimizer must be torch::optim::Adam or AdamW (amsgrad off) or SGD, with
// every such parameter in its param groups; its per-parameter state maps
// to the engine's optimizer state by name: Adam/AdamW exp_avg and
// exp_avg_sq (kind "adam" / "adamw"), SGD momentum_buffer (kind
// "sgd_momentum"; "sgd" without momentum, no state). The step: Adam's
// per-parameter step (equal for every parameter, else refused); SGD keeps
// none, so the checkpoint's `step` (at least 1 once momentum buffers exist:
// the engine starts a buffer as a copy on its first step, as torch does),
// 0 before any buffer exists. Hyperparameters are not saved: each job's
// optimizer has its own. Mixed precision: a DDP job has no master weights
// (the torch optimizer steps on the parameters), so it saves the
// parameters widened to float32 as the master weights (exact), and its
// state (float32, or the parameter dtype as torch keeps it for bf16
// parameters) widened; loading a sharded checkpoint into bf16/fp16
// parameters takes the engine's parameter values (the master rounded as
// the engine rounds it) and casts the float32 state to the parameter dtype:
// the master weights' extra bits are dropped, which is the precision such
// a DDP job trains at anyway. Float32 parameters move both ways bit for bit.
// The manifest also records each parameter's name and shape
// ("gradwire.torch.parameters", written by ShardedDataParallel too); the
// loader refuses a checkpoint whose names or shapes differ, beside the
// engine's fingerprint (element counts and dtypes).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "gradwire/checkpoint.h"
#include "gradwire/communicator.h"

namespace gradwire::torch {

// Collective: every rank writes its slice of the module's parameters (as
// fp32 master weights too) and of the optimizer's state as its shard of
// sharded checkpoint `step` in `dir`, with a manifest (stage 0). Raised on
// every rank before anything is written: an unsupported optimizer or one
// with amsgrad, a parameter missing from the optimizer or with a state of
// another size, parameters at different Adam steps (InvalidArgument,
// naming the parameter). Otherwise as save_checkpoint (atomic, pruned).
void save_unsharded_checkpoint(Communicator& comm, const std::string& dir, uint64_t step,
                               const ::torch::nn::Module& module,
                               ::torch::optim::Optimizer& optimizer,
                               const CheckpointOptions& options = {});

// Collective: the newest sharded checkpoint in `dir`, written by any number
// of ranks at any stage (ShardedDataParallel, ShardedEngine) or by
// save_unsharded_checkpoint, into every rank's module and optimizer (the
// state replaced; its step as above); returns the checkpoint's step, or
// nullopt if there is none. Raised on every rank, leaving the module and
// the optimizer unchanged: a checkpoint of another model (InvalidArgument
// naming the first parameter whose name or shape differs, or the
// fingerprint), of another optimizer kind (InvalidArgument naming both;
// e.g. Adam's state into SGD), an unsupported optimizer, a missing,
// truncated or corrupt shard (Protocol, naming the file).
std::optional<uint64_t> load_unsharded_checkpoint(Communicator& comm, const std::string& dir,
                                                  ::torch::nn::Module& module,
                                                  ::torch::optim::Optimizer& optimizer);

// The manifest entry naming the parameters and their shapes
// ("fc1.weight [13, 6]" per line), as both adapters write it.
std::string parameter_manifest(const ::torch::nn::Module& module);
inline constexpr const char* kParameterManifestKey = "gradwire.torch.parameters";

// InvalidArgument, starting with `who` (rank and path), naming the first
// parameter whose name or shape differs, if the checkpoint manifest `meta`
// records parameters other than the module's; nothing if it records none
// (a ShardedEngine's own checkpoint). Both loaders (load_unsharded_checkpoint,
// ShardedDataParallel::load_checkpoint) check with it: the engine's
// fingerprint sees element counts and dtypes only.
void check_parameter_manifest(const std::map<std::string, std::string>& meta,
                              const ::torch::nn::Module& module, const std::string& who);

}  // namespace gradwire::torch
