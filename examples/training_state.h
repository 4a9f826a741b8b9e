// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The example's training state as checkpoint entries (bytes) and as
// digests for the resume test (tests/ranks/checkpoint_resume.sh): module
// parameters and buffers, the optimizer's state, the CPU generator.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <sstream>
#include <string>

#include "gradwire/checkpoint.h"
#include "gradwire/digest.h"

namespace training_state {

// Parameters and buffers under their dotted names. Loading copies into the
// existing tensors, so parameter storage (and with it any alias the
// training loop holds) stays where it is; torch::load would re-point it
// (Tensor::set_), which DistributedDataParallel also survives (Note [hooks
// survive set_] in src/torch/distributed_data_parallel.cpp).
inline std::string module_bytes(torch::nn::Module& m) {
  torch::serialize::OutputArchive archive;
  for (const auto& p : m.named_parameters()) archive.write("param:" + p.key(), p.value());
  for (const auto& b : m.named_buffers()) archive.write("buffer:" + b.key(), b.value(), true);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

inline void load_module(torch::nn::Module& m, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  torch::NoGradGuard no_grad;
  for (auto& p : m.named_parameters()) {
    torch::Tensor t;
    archive.read("param:" + p.key(), t);
    p.value().copy_(t);
  }
  for (auto& b : m.named_buffers()) {
    torch::Tensor t;
    archive.read("buffer:" + b.key(), t, true);
    b.value().copy_(t);
  }
}

inline std::string optimizer_bytes(torch::optim::Optimizer& o) {
  torch::serialize::OutputArchive archive;
  o.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

inline void load_optimizer(torch::optim::Optimizer& o, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  o.load(archive);
}

// The CPU generator (dropout, random init of anything created later).
inline std::string rng_bytes() {
  auto state = at::detail::getDefaultCPUGenerator().get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), size_t(state.numel()));
}

inline void load_rng(const std::string& bytes) {
  auto state = torch::empty({int64_t(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(state);
}

inline void append(std::string& out, const torch::Tensor& t) {
  if (!t.defined()) return;
  auto c = t.detach().cpu().contiguous();
  out.append(static_cast<const char*>(c.data_ptr()), size_t(c.nbytes()));
}

inline std::string params_digest(torch::nn::Module& m) {
  std::string all;
  for (const auto& p : m.parameters()) append(all, p);
  for (const auto& b : m.buffers()) append(all, b);
  return gradwire::sha256_hex(all);
}

// The state tensors of torch's Adam and SGD, in parameter order (archives
// are not byte-stable across saves, tensors are).
inline std::string optimizer_digest(torch::optim::Optimizer& o) {
  std::string all;
  for (const auto& group : o.param_groups()) {
    for (const auto& p : group.params()) {
      auto it = o.state().find(p.unsafeGetTensorImpl());
      if (it == o.state().end()) continue;
      if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
        append(all, a->exp_avg());
        append(all, a->exp_avg_sq());
        const int64_t step = a->step();
        all.append(reinterpret_cast<const char*>(&step), sizeof step);
      } else if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
        append(all, s->momentum_buffer());
      }
    }
  }
  return gradwire::sha256_hex(all);
}

}  // namespace training_state
