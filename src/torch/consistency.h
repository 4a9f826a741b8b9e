// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Construction-time agreement between ranks: every rank holds the same
// parameters and buffers (checked by fingerprint), and rank 0's values are
// broadcast to the others.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/types.h"
#include "tensors.h"  // current_stream(), shared with optim.cpp and the c10d backend

namespace gradwire::torch::detail {

struct TensorEntry {
  std::string name;
  ::torch::Tensor tensor;
  bool buffer = false;
};

// The module's parameters (recursively, in registration order), then its
// buffers; n_params: how many of them are parameters.
std::vector<TensorEntry> module_entries(const ::torch::nn::Module& module, size_t& n_params);

// InvalidArgument unless the tensor is in host memory or on a CUDA device.
void check_supported_device(Communicator& comm, const TensorEntry& e);

// "parameter fc.weight [10, 20] float32 cpu" (requires_grad noted if off;
// the device type without its index, which differs from rank to rank).
std::string describe(const TensorEntry& e);

// gradwire's DataType for a floating tensor dtype; InvalidArgument otherwise.
DataType gradient_dtype(const ::torch::Tensor& t, const std::string& name);

// Collective. Throws Mismatch on every rank if the entries differ anywhere,
// naming the first differing entry and what each disagreeing rank holds;
// `who` (the module class) begins the message after the rank.
void check_same_entries(Communicator& comm, const std::vector<TensorEntry>& entries,
                        const std::string& who = "DistributedDataParallel");

// Collective: every tensor gets root's values (bytes; any dtype). Host and
// CUDA tensors (CUDA ones through NCCL, after PyTorch's current stream).
void broadcast_tensors(Communicator& comm, const std::vector<TensorEntry>& entries, int root);

}  // namespace gradwire::torch::detail
