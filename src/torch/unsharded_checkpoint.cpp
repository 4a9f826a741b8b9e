// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// An unsharded libtorch job's checkpoints in the sharded engine's format
// (Note [torch optimizer state in sharded checkpoints] in
// gradwire/torch/unsharded_checkpoint.h; Note [unsharded checkpoints] in
// src/checkpoint/sharded.cpp).
#include "gradwire/torch/unsharded_checkpoint.h"

#include <ATen/core/grad_mode.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <cstring>
#include <exception>
#include <unordered_set>

#include "consistency.h"
#include "gradwire/error.h"
#include "gradwire/torch/sharded_data_parallel.h"

namespace gradwire::torch {

using detail::TensorEntry;

namespace {

// The engine's view of the module: the parameters that require grad.
struct Model {
  std::vector<std::string> names;
  std::vector<::torch::Tensor> params;
  std::vector<ShardedParameter> sharded;
};

Model model_of(const ::torch::nn::Module& module) {
  size_t n_params = 0;
  const std::vector<TensorEntry> entries = detail::module_entries(module, n_params);
  Model m;
  for (size_t k = 0; k < n_params; ++k) {
    const TensorEntry& e = entries[k];
    if (!e.tensor.requires_grad()) continue;
    ShardedParameter sp;
    sp.elements = size_t(e.tensor.numel());
    sp.dtype = detail::gradient_dtype(e.tensor, e.name);
    sp.name = e.name;  // device: host, as the checkpoint's bytes are
    m.sharded.push_back(std::move(sp));
    m.names.push_back(e.name);
    m.params.push_back(e.tensor);
  }
  return m;
}

enum class Kind { Adam, AdamW, Sgd };

struct Mapping {
  Kind kind;
  std::string name;                  // ShardOptimizer::kind()
  std::vector<std::string> states;   // its state_names()
};

// The engine optimizer a torch::optim optimizer corresponds to (Note
// [torch optimizer state in sharded checkpoints]).
Mapping mapping_of(::torch::optim::Optimizer& opt, const std::string& who) {
  if (opt.param_groups().empty()) detail::invalid(who + ": the optimizer has no param groups");
  const auto& group = opt.param_groups()[0].options();
  std::shared_ptr<ShardOptimizer> shard;
  Kind kind;
  bool amsgrad = false;
  if (dynamic_cast<::torch::optim::Adam*>(&opt)) {
    const auto& o = static_cast<const ::torch::optim::AdamOptions&>(group);
    amsgrad = o.amsgrad();
    kind = Kind::Adam;
    if (!amsgrad) shard = shard_optimizer(o);
  } else if (dynamic_cast<::torch::optim::AdamW*>(&opt)) {
    const auto& o = static_cast<const ::torch::optim::AdamWOptions&>(group);
    amsgrad = o.amsgrad();
    kind = Kind::AdamW;
    if (!amsgrad) shard = shard_optimizer(o);
  } else if (dynamic_cast<::torch::optim::SGD*>(&opt)) {
    kind = Kind::Sgd;
    shard = shard_optimizer(static_cast<const ::torch::optim::SGDOptions&>(group));
  } else {
    detail::invalid(who + ": the optimizer is not torch::optim::Adam, AdamW or SGD, the ones "
                    "the sharded engine has (shard_optimizer): its state has no place in a "
                    "sharded checkpoint");
  }
  if (amsgrad) {
    detail::invalid(who + ": the optimizer has amsgrad on; the sharded engine's Adam keeps no "
                    "max_exp_avg_sq, so this state cannot be saved or loaded");
  }
  return {kind, shard->kind(), shard->state_names()};
}

// Every parameter is in the optimizer's param groups (the state is keyed by
// the tensor).
void check_in_optimizer(const Model& m, ::torch::optim::Optimizer& opt, const std::string& who) {
  std::unordered_set<const void*> in;
  for (const auto& g : opt.param_groups()) {
    for (const auto& p : g.params()) in.insert(p.unsafeGetTensorImpl());
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (!in.count(m.params[i].unsafeGetTensorImpl())) {
      detail::invalid(who + ": parameter " + m.names[i] + " is not in the optimizer's param "
                      "groups (an optimizer over other tensors, e.g. fp32 copies, or built "
                      "before the module's parameters were replaced?)");
    }
  }
}

// The flat float32 values of a state tensor of parameter i, checked.
::torch::Tensor flat_state(const ::torch::Tensor& t, const Model& m, size_t i,
                           const std::string& state, const std::string& who) {
  if (!t.defined() || t.numel() != m.params[i].numel()) {
    detail::invalid(who + ": the optimizer's " + state + " of parameter " + m.names[i] +
                    (t.defined() ? " has " + std::to_string(t.numel()) + " elements"
                                 : std::string(" is undefined")) +
                    ", the parameter " + std::to_string(m.params[i].numel()));
  }
  return t.detach().to(::torch::kCPU, ::torch::kFloat).contiguous().reshape({-1});
}

// The optimizer's state of every parameter: per parameter, its state
// tensors in `map.states` order (empty when the optimizer has taken no
// step); and the step.
std::vector<std::vector<::torch::Tensor>> torch_state(const Model& m,
                                                      ::torch::optim::Optimizer& opt,
                                                      const Mapping& map, uint64_t ckpt_step,
                                                      uint64_t& step, const std::string& who) {
  auto& st = opt.state();
  std::vector<std::vector<::torch::Tensor>> out(m.params.size());
  std::optional<int64_t> seen;  // Adam: the first parameter's step (-1: no state)
  for (size_t i = 0; i < m.params.size(); ++i) {
    auto it = st.find(m.params[i].unsafeGetTensorImpl());
    const bool has = it != st.end() && it->second;
    int64_t this_step = -1;
    if (map.kind == Kind::Sgd) {
      if (map.states.empty()) continue;
      this_step = has ? 1 : -1;
      if (has) {
        const auto& s = static_cast<const ::torch::optim::SGDParamState&>(*it->second);
        out[i].push_back(flat_state(s.momentum_buffer(), m, i, "momentum_buffer", who));
      }
    } else if (map.kind == Kind::Adam) {
      if (has) {
        const auto& s = static_cast<const ::torch::optim::AdamParamState&>(*it->second);
        this_step = s.step();
        out[i].push_back(flat_state(s.exp_avg(), m, i, "exp_avg", who));
        out[i].push_back(flat_state(s.exp_avg_sq(), m, i, "exp_avg_sq", who));
      }
    } else {
      if (has) {
        const auto& s = static_cast<const ::torch::optim::AdamWParamState&>(*it->second);
        this_step = s.step();
        out[i].push_back(flat_state(s.exp_avg(), m, i, "exp_avg", who));
        out[i].push_back(flat_state(s.exp_avg_sq(), m, i, "exp_avg_sq", who));
      }
    }
    if (seen && *seen != this_step) {
      detail::invalid(who + ": parameter " + m.names[i] + " is at optimizer step " +
                      std::to_string(std::max<int64_t>(this_step, 0)) + " and " + m.names[0] +
                      " at " + std::to_string(std::max<int64_t>(*seen, 0)) +
                      "; the sharded engine keeps one step for every parameter (a parameter "
                      "that got no gradient in some step?)");
    }
    seen = this_step;
  }
  const int64_t s = seen.value_or(-1);
  if (map.kind == Kind::Sgd) {
    // SGD counts no steps (Note [torch optimizer state in sharded checkpoints]).
    step = map.states.empty() ? ckpt_step : (s < 0 ? 0 : std::max<uint64_t>(ckpt_step, 1));
  } else {
    step = s < 0 ? 0 : uint64_t(s);
  }
  return out;
}

// Note [every rank raises the same error], for the adapter: one allgather of
// every rank's outcome (failed or not, and the start of its message); if
// any failed, every rank throws the first failure.
void agree(Communicator& comm, std::exception_ptr failure, const std::string& phase) {
  constexpr size_t kMsg = 480;
  struct Record {
    int32_t code = -1;
    char message[kMsg] = {};
  } mine;
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      mine.code = int32_t(e.code());
      std::strncpy(mine.message, e.message().c_str(), kMsg - 1);
    } catch (const std::exception& e) {
      mine.code = int32_t(ErrorCode::Internal);
      std::strncpy(mine.message, e.what(), kMsg - 1);
    }
  }
  std::vector<Record> all(size_t(comm.size()));
  comm.allgather(&mine, all.data(), sizeof(Record) * all.size(), DataType::UInt8).wait();
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].code < 0) continue;
    if (failure) std::rethrow_exception(failure);  // this rank's own, whole
    throw Error(ErrorCode(all[r].code), "rank " + std::to_string(comm.rank()) + ": " + phase +
                                            " failed on rank " + std::to_string(r) + ": " +
                                            std::string(all[r].message));
  }
}

std::string where(Communicator& comm, const char* what) {
  return "rank " + std::to_string(comm.rank()) + ": " + what;
}

}  // namespace

std::string parameter_manifest(const ::torch::nn::Module& module) {
  const Model m = model_of(module);
  std::string out;
  for (size_t i = 0; i < m.params.size(); ++i) {
    out += m.names[i] + " " + c10::str(m.params[i].sizes()) + "\n";
  }
  return out;
}

void check_parameter_manifest(const std::map<std::string, std::string>& meta,
                              const ::torch::nn::Module& module, const std::string& who) {
  const auto names = meta.find(kParameterManifestKey);
  if (names == meta.end()) return;
  const std::string ours = parameter_manifest(module);
  if (names->second == ours) return;
  size_t at = 0;  // the first differing line
  while (at < ours.size() && at < names->second.size() && ours[at] == names->second[at]) ++at;
  const size_t begin = ours.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t b = begin == std::string::npos || at == 0 ? 0 : begin + 1;
  auto line = [&](const std::string& s) {
    if (b >= s.size()) return std::string("(nothing)");
    return s.substr(b, s.find('\n', b) - b);
  };
  detail::invalid(who + " is a checkpoint of another model: it has parameter '" +
                  line(names->second) + "' where this module has '" + line(ours) + "'");
}

void save_unsharded_checkpoint(Communicator& comm, const std::string& dir, uint64_t step,
                               const ::torch::nn::Module& module,
                               ::torch::optim::Optimizer& optimizer,
                               const CheckpointOptions& options) {
  const std::string who = where(comm, "save_unsharded_checkpoint");
  ShardedState s;
  CheckpointOptions o = options;
  std::exception_ptr failure;
  try {
    const Model m = model_of(module);
    const Mapping map = mapping_of(optimizer, who);
    check_in_optimizer(m, optimizer, who);
    uint64_t opt_step = 0;
    const auto states = torch_state(m, optimizer, map, step, opt_step, who);
    s.fingerprint = parameter_list_fingerprint(m.sharded);
    s.stage = 0;
    s.world = comm.size();
    s.rank = comm.rank();
    s.optimizer = map.name;
    s.state_names = map.states;
    s.step = opt_step;
    for (const auto& p : m.sharded) s.dtypes.push_back(p.dtype);
    // This rank's slice of each parameter (Note [unsharded checkpoints]).
    const auto r = uint64_t(comm.rank()), n_ranks = uint64_t(comm.size());
    for (size_t i = 0; i < m.params.size(); ++i) {
      const uint64_t n = m.sharded[i].elements;
      const uint64_t lo = n * r / n_ranks, hi = n * (r + 1) / n_ranks;
      if (hi == lo) continue;
      const ::torch::Tensor v = m.params[i].detach().to(::torch::kCPU).contiguous().reshape({-1});
      const size_t es = element_size(m.sharded[i].dtype);
      ShardedState::Record rec;
      rec.parameter = i;
      rec.offset = lo;
      rec.count = hi - lo;
      const auto* bytes = static_cast<const std::byte*>(v.data_ptr());
      rec.values.assign(bytes + lo * es, bytes + hi * es);
      const ::torch::Tensor master =
          v.slice(0, int64_t(lo), int64_t(hi)).to(::torch::kFloat).contiguous();
      rec.master.assign(master.data_ptr<float>(), master.data_ptr<float>() + rec.count);
      for (size_t k = 0; k < map.states.size(); ++k) {
        if (states[i].empty()) {
          rec.state.emplace_back(rec.count, 0.0f);  // no step yet: zeros, as the engine's
          continue;
        }
        const ::torch::Tensor t = states[i][k].slice(0, int64_t(lo), int64_t(hi)).contiguous();
        rec.state.emplace_back(t.data_ptr<float>(), t.data_ptr<float>() + rec.count);
      }
      s.records.push_back(std::move(rec));
    }
    o.meta[kParameterManifestKey] = parameter_manifest(module);
  } catch (...) {
    failure = std::current_exception();
  }
  agree(comm, failure, "saving an unsharded checkpoint");
  save_sharded_state(comm, dir, step, s, o);
}

std::optional<uint64_t> load_unsharded_checkpoint(Communicator& comm, const std::string& dir,
                                                  ::torch::nn::Module& module,
                                                  ::torch::optim::Optimizer& optimizer) {
  const std::string who = where(comm, "load_unsharded_checkpoint");
  Model m;
  Mapping map;
  std::exception_ptr failure;
  try {
    m = model_of(module);
    map = mapping_of(optimizer, who);
    check_in_optimizer(m, optimizer, who);
  } catch (...) {
    failure = std::current_exception();
  }
  agree(comm, failure, "loading an unsharded checkpoint");
  // Every rank reads every shard (agreeing on errors there).
  auto full = load_full_sharded_checkpoint(comm, dir, m.sharded);
  if (!full) return std::nullopt;
  const std::string from = who + ": " + full->path;
  // The rest is decided by the same bytes on every rank: every rank raises
  // the same error without another collective.
  check_parameter_manifest(full->meta, module, from);
  const ShardedState& st = full->state;
  if (st.optimizer != map.name || st.state_names != map.states) {
    detail::invalid(from + " holds the state of optimizer '" +
                    (st.optimizer.empty() ? std::string("none") : st.optimizer) +
                    "' and this optimizer is '" + map.name + "'" +
                    (st.optimizer.empty() ? " (written by a job whose optimizer state is its "
                                            "own, e.g. ShardedDataParallel's torch_optimizer)"
                                          : ""));
  }
  // Built aside, then installed: a failure leaves everything unchanged.
  std::vector<::torch::Tensor> values(m.params.size());
  std::vector<std::vector<::torch::Tensor>> states(m.params.size());
  for (const auto& rec : st.records) {
    const size_t i = rec.parameter;
    const auto& p = m.params[i];
    values[i] = ::torch::from_blob(const_cast<std::byte*>(rec.values.data()), p.sizes(),
                                   ::torch::TensorOptions().dtype(p.scalar_type()))
                    .to(::torch::TensorOptions().device(p.device()), /*non_blocking=*/false,
                        /*copy=*/true);
    for (const auto& a : rec.state) {
      states[i].push_back(::torch::from_blob(const_cast<float*>(a.data()), p.sizes(),
                                             ::torch::kFloat)
                              .to(p.device(), p.scalar_type(), false, /*copy=*/true));
    }
  }
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < m.params.size(); ++i) {
      if (values[i].defined()) m.params[i].copy_(values[i]);
    }
  }
  auto& torch_states = optimizer.state();
  for (size_t i = 0; i < m.params.size(); ++i) {
    void* key = m.params[i].unsafeGetTensorImpl();
    torch_states.erase(key);
    if (st.step == 0 || map.states.empty()) continue;  // as before the first step
    auto state_k = [&](size_t k) {
      return states[i].empty() ? ::torch::zeros_like(m.params[i]) : states[i][k];
    };
    if (map.kind == Kind::Sgd) {
      auto s = std::make_unique<::torch::optim::SGDParamState>();
      s->momentum_buffer(state_k(0));
      torch_states[key] = std::move(s);
    } else if (map.kind == Kind::Adam) {
      auto s = std::make_unique<::torch::optim::AdamParamState>();
      s->step(int64_t(st.step));
      s->exp_avg(state_k(0));
      s->exp_avg_sq(state_k(1));
      torch_states[key] = std::move(s);
    } else {
      auto s = std::make_unique<::torch::optim::AdamWParamState>();
      s->step(int64_t(st.step));
      s->exp_avg(state_k(0));
      s->exp_avg_sq(state_k(1));
      torch_states[key] = std::move(s);
    }
  }
  return full->step;
}

}  // namespace gradwire::torch
