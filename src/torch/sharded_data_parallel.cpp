// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The libtorch adapter over the ShardedEngine (Note [sharded hooks] in
// gradwire/torch/sharded_data_parallel.h).
#include "gradwire/torch/sharded_data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <torch/types.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "consistency.h"
#include "grad_hooks.h"
#include "gradwire/error.h"
#include "gradwire/torch/unsharded_checkpoint.h"

namespace gradwire::torch {

using detail::TensorEntry;

// ---------------------------------------------------------------- optimizers

std::shared_ptr<ShardOptimizer> shard_optimizer(const ::torch::optim::AdamOptions& o) {
  if (o.amsgrad()) detail::invalid("shard_optimizer: amsgrad is not supported on shards");
  return ShardAdam::make({.lr = o.lr(), .beta1 = std::get<0>(o.betas()),
                          .beta2 = std::get<1>(o.betas()), .eps = o.eps(),
                          .weight_decay = o.weight_decay(), .decoupled = false});
}

std::shared_ptr<ShardOptimizer> shard_optimizer(const ::torch::optim::AdamWOptions& o) {
  if (o.amsgrad()) detail::invalid("shard_optimizer: amsgrad is not supported on shards");
  return ShardAdam::make({.lr = o.lr(), .beta1 = std::get<0>(o.betas()),
                          .beta2 = std::get<1>(o.betas()), .eps = o.eps(),
                          .weight_decay = o.weight_decay(), .decoupled = true});
}

std::shared_ptr<ShardOptimizer> shard_optimizer(const ::torch::optim::SGDOptions& o) {
  return ShardSgd::make({.lr = o.lr(), .momentum = o.momentum(), .dampening = o.dampening(),
                         .weight_decay = o.weight_decay(), .nesterov = o.nesterov()});
}

// ---------------------------------------------------------------- state

struct ShardedDataParallel::State {
  State(Communicator& c, ShardedDataParallelOptions o) : comm(c), options(std::move(o)) {
    // Note [reshard after forward]: with unused parameters the ranks'
    // backward graphs may differ, and a gather that one rank's graph calls
    // for would wait for a gather no other rank calls: units stay gathered.
    if (options.find_unused_parameters) options.reshard_after_forward = false;
  }

  Communicator& comm;
  ShardedDataParallelOptions options;
  std::vector<std::string> names;  // engine parameter i
  std::vector<::torch::Tensor> params;
  std::vector<size_t> unit_of;            // stage 3
  std::vector<std::string> unit_names;    // stage 3, for messages
  std::vector<std::vector<size_t>> unit_params;
  std::vector<const void*> pointed;       // where params[i] points now (stage 3)
  // Stage 3: the storage params[i] sits on while its unit is gathered, kept
  // for all of training (Note [reshard after forward]).
  std::vector<::torch::Tensor> full;
  // Stage 3, one backward: how many of a unit's parameters handed their
  // gradient over; guarded by `units_mutex` with the unit changes of hooks.
  std::vector<size_t> unit_marked;
  std::mutex units_mutex;
  std::unordered_map<const c10::TensorImpl*, size_t> index_of;
  std::unique_ptr<ShardedEngine> engine;
  std::unique_ptr<detail::AccumulatorHooks> hooks;  // Note [sharded hooks]
  std::unique_ptr<std::atomic<bool>[]> marked;
  // options.torch_optimizer: one flat master tensor per Bucket, with a
  // gradient tensor of its own (the engine's view is scratch memory).
  std::vector<::torch::Tensor> masters;
  std::unique_ptr<::torch::optim::Optimizer> torch_opt;

  int stage() const { return options.stage; }
  std::string where() const {
    return "rank " + std::to_string(comm.rank()) + ": ShardedDataParallel (stage " +
           std::to_string(options.stage) + ")";
  }
  ::torch::Tensor view(size_t i, void* data) const {
    return ::torch::from_blob(data, params[i].sizes(),
                              ::torch::TensorOptions().dtype(params[i].scalar_type()));
  }
  void point_at_rest(size_t i);
  void point_at(size_t i, void* data);
  void gather_unit(size_t u);
  void release_unit(size_t u);
  void release_units();
  void before_unit_backward(const std::vector<size_t>& units);
  void count_gradient(size_t i);
  void on_gradient(size_t i);
  void on_backward_done();
  std::vector<size_t> indices_of(const ::torch::nn::Module& m) const;
};

// At rest: no memory, the parameter's shape, NaN values (Note [stage 3
// units]); its full storage holds 0 bytes (Note [reshard after forward]).
void ShardedDataParallel::State::point_at_rest(size_t i) {
  at::NoGradGuard no_grad;
  params[i].set_data(
      ::torch::full({1}, std::numeric_limits<float>::quiet_NaN(),
                    ::torch::TensorOptions().dtype(params[i].scalar_type()))
          .expand(params[i].sizes()));
  pointed[i] = nullptr;
  if (full[i].defined()) {
    c10::StorageImpl* st = full[i].storage().unsafeGetStorageImpl();
    st->set_data_ptr_noswap(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
    st->set_nbytes(0);
  }
}

// The parameter on its full storage, whose data is now the engine's
// gathered memory at `data` (Note [reshard after forward]).
void ShardedDataParallel::State::point_at(size_t i, void* data) {
  if (!full[i].defined()) {
    full[i] = view(i, data);
  } else {
    c10::StorageImpl* st = full[i].storage().unsafeGetStorageImpl();
    st->set_data_ptr_noswap(c10::DataPtr(data, c10::Device(c10::kCPU)));
    st->set_nbytes(size_t(full[i].numel()) * full[i].element_size());
  }
  if (pointed[i] == nullptr) {
    at::NoGradGuard no_grad;
    params[i].set_data(full[i]);
  }
  pointed[i] = data;
}

void ShardedDataParallel::State::gather_unit(size_t u) {
  engine->gather(u);
  for (size_t i : unit_params[u]) point_at(i, engine->parameter(i));
}

void ShardedDataParallel::State::release_unit(size_t u) {
  if (!engine->gathered(u)) return;
  for (size_t i : unit_params[u]) point_at_rest(i);
  engine->release(u);
}

void ShardedDataParallel::State::release_units() {
  for (size_t u = 0; u < unit_params.size(); ++u) release_unit(u);
}

// From the hook on a unit's outputs' gradients: its backward is next
// (Note [reshard after forward]).
void ShardedDataParallel::State::before_unit_backward(const std::vector<size_t>& units) {
  std::lock_guard<std::mutex> lock(units_mutex);
  size_t lowest = unit_params.size();
  for (size_t u : units) {
    if (!engine->gathered(u)) gather_unit(u);
    lowest = std::min(lowest, u);
  }
  for (size_t v = lowest; v-- > 0;) {
    if (engine->gathered(v)) continue;
    engine->prefetch(v);  // the next unit in backward order
    break;
  }
}

// A gradient handed over: once all of its unit's are, the unit is released
// (Note [reshard after forward]).
void ShardedDataParallel::State::count_gradient(size_t i) {
  if (stage() != 3 || !options.reshard_after_forward) return;
  std::lock_guard<std::mutex> lock(units_mutex);
  const size_t u = unit_of[i];
  if (++unit_marked[u] == unit_params[u].size()) release_unit(u);
}

std::vector<size_t> ShardedDataParallel::State::indices_of(const ::torch::nn::Module& m) const {
  std::vector<size_t> out;
  for (const auto& p : m.parameters(/*recurse=*/true)) {
    auto it = index_of.find(p.unsafeGetTensorImpl());
    if (it != index_of.end()) out.push_back(it->second);
  }
  return out;
}

// ---------------------------------------------------------------- construction

ShardedDataParallel::ShardedDataParallel(std::shared_ptr<::torch::nn::Module> module,
                                         Communicator& comm, ShardedDataParallelOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>(comm, std::move(options))) {
  State& s = *state_;
  if (!module_) detail::invalid(s.where() + ": the module is null");
  if (s.stage() < 1 || s.stage() > 3) {
    detail::invalid(s.where() + ": stage must be 1, 2 or 3");
  }
  if (bool(s.options.optimizer) == bool(s.options.torch_optimizer)) {
    detail::invalid(s.where() + ": set exactly one of options.optimizer (shard_optimizer(...)) "
                    "and options.torch_optimizer");
  }
  size_t n_params = 0;
  const std::vector<TensorEntry> entries = detail::module_entries(*module_, n_params);
  detail::check_same_entries(comm, entries, "ShardedDataParallel");  // Note [parameter check]
  for (const auto& e : entries) {
    if (!e.tensor.device().is_cpu()) {
      detail::invalid(s.where() + ": " + detail::describe(e) +
                      " is not in host memory; the sharded engine takes host tensors only");
    }
  }
  detail::broadcast_tensors(comm, entries, 0);

  // Stage 3 units (Note [stage 3 units]): the named submodules that hold
  // trainable parameters, numbered in the given order.
  std::vector<std::string> unit_candidates = s.options.units;
  if (s.stage() == 3 && unit_candidates.empty()) {
    for (const auto& child : module_->named_children()) unit_candidates.push_back(child.key());
  }
  std::vector<ShardedParameter> sparams;
  std::vector<const void*> initial;
  std::vector<::torch::Tensor> contiguous;
  std::vector<std::string> param_unit_name;
  for (size_t k = 0; k < n_params; ++k) {
    const TensorEntry& e = entries[k];
    if (!e.tensor.requires_grad()) continue;
    ShardedParameter sp;
    sp.elements = size_t(e.tensor.numel());
    sp.dtype = detail::gradient_dtype(e.tensor, e.name);
    sp.name = e.name;
    std::string unit;
    for (const auto& c : unit_candidates) {
      if (e.name.rfind(c + ".", 0) == 0) {
        unit = c;
        break;
      }
    }
    param_unit_name.push_back(unit);
    sparams.push_back(std::move(sp));
    contiguous.push_back(e.tensor.detach().contiguous());
    initial.push_back(contiguous.back().data_ptr());
    s.names.push_back(e.name);
    s.params.push_back(e.tensor);
  }
  if (s.stage() == 3) {
    // Units in candidate order; the root's own parameters join unit 0.
    for (const auto& c : unit_candidates) {
      for (const auto& pu : param_unit_name) {
        if (pu == c) {
          s.unit_names.push_back(c);
          break;
        }
      }
    }
    if (s.unit_names.empty()) s.unit_names.push_back("");
    s.unit_params.resize(s.unit_names.size());
    for (size_t i = 0; i < sparams.size(); ++i) {
      size_t u = 0;
      for (size_t k = 0; k < s.unit_names.size(); ++k) {
        if (s.unit_names[k] == param_unit_name[i]) u = k;
      }
      sparams[i].unit = u;
      s.unit_of.push_back(u);
      s.unit_params[u].push_back(i);
    }
  }
  ShardedOptions so;
  so.stage = s.stage();
  so.caps = s.options.caps;
  so.alignment = s.options.alignment;
  so.reduce_dtype = s.options.reduce_dtype;
  so.max_grad_norm = s.options.max_grad_norm;
  so.loss_scaling = s.options.loss_scaling;
  so.find_unused_parameters = s.options.find_unused_parameters;
  so.max_buckets_in_flight = s.options.max_buckets_in_flight;
  so.gradient_compression = s.options.gradient_compression;
  so.parameter_compression = s.options.parameter_compression;
  so.broadcast_parameters = false;  // done above, with the buffers
  s.engine = std::make_unique<ShardedEngine>(comm, std::move(sparams), s.options.optimizer,
                                             std::move(so), initial);
  contiguous.clear();

  // The parameters become the engine's (Note [sharded hooks]).
  s.pointed.assign(s.params.size(), nullptr);
  s.full.resize(s.params.size());
  s.unit_marked.assign(s.unit_params.size(), 0);
  {
    at::NoGradGuard no_grad;
    if (s.stage() < 3) s.engine->wait_parameters();
    for (size_t i = 0; i < s.params.size(); ++i) {
      s.index_of[s.params[i].unsafeGetTensorImpl()] = i;
      s.params[i].mutable_grad() = ::torch::Tensor();
      if (s.stage() < 3) {
        s.params[i].set_data(s.view(i, s.engine->parameter(i)));
      } else {
        s.point_at_rest(i);
      }
    }
  }
  if (s.options.torch_optimizer) {
    for (size_t b = 0; b < s.engine->plan().buckets.size(); ++b) {
      const auto n = int64_t(s.engine->plan().buckets[b].shard);
      ::torch::Tensor m = ::torch::from_blob(s.engine->master(b), {n}, ::torch::kFloat);
      m.mutable_grad() = ::torch::zeros({n}, ::torch::kFloat);
      s.masters.push_back(m);
    }
    s.torch_opt = s.options.torch_optimizer(s.masters);
    if (!s.torch_opt) detail::invalid(s.where() + ": options.torch_optimizer returned null");
  }

  s.marked = std::make_unique<std::atomic<bool>[]>(s.params.size());
  for (size_t i = 0; i < s.params.size(); ++i) s.marked[i] = false;
  State* raw = state_.get();  // the hooks are removed in the destructor
  s.hooks = std::make_unique<detail::AccumulatorHooks>(
      s.params, s.names, s.where(), [raw](size_t i) { raw->on_gradient(i); },
      [raw] { raw->on_backward_done(); });
}

ShardedDataParallel::~ShardedDataParallel() {
  State& s = *state_;
  s.hooks.reset();
  // The parameters must not outlive the engine memory they alias.
  try {
    if (s.stage() == 3) {
      for (size_t u = 0; u < s.unit_params.size(); ++u) s.gather_unit(u);
    } else {
      s.engine->wait_parameters();
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < s.params.size(); ++i) s.params[i].set_data(s.params[i].clone());
  } catch (const std::exception&) {
    // A failed gather (a peer gone): leave the parameters empty, not dangling.
    at::NoGradGuard no_grad;
    for (auto& p : s.params) p.set_data(::torch::empty({0}, p.options()));
  }
  for (auto& f : s.full) {  // tensors autograd still holds must not dangle either
    if (!f.defined()) continue;
    c10::StorageImpl* st = f.storage().unsafeGetStorageImpl();
    st->set_data_ptr_noswap(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
    st->set_nbytes(0);
  }
}

// ---------------------------------------------------------------- hooks

void ShardedDataParallel::State::on_gradient(size_t i) {
  const bool first = !marked[i].exchange(true, std::memory_order_relaxed);
  if (!engine->will_sync() || !params[i].mutable_grad().defined()) {
    if (first) count_gradient(i);  // no_sync(): .grad accumulates locally
    return;
  }
  ::torch::Tensor& grad = params[i].mutable_grad();
  if (stage() == 3 && pointed[i] == nullptr) {
    detail::invalid(where() + ": parameter " + names[i] + " got a gradient but its unit '" +
                    unit_names[unit_of[i]] + "' was not gathered: call use() on the "
                    "submodule before its computation in forward");
  }
  if (grad.layout() != ::torch::kStrided || grad.scalar_type() != params[i].scalar_type() ||
      !grad.device().is_cpu()) {
    detail::invalid(where() + ": parameter " + names[i] + " got a " +
                    std::string(c10::toString(grad.scalar_type())) + " gradient on " +
                    grad.device().str() + "; only dense host gradients of the parameter's "
                    "dtype can be reduced");
  }
  at::NoGradGuard no_grad;
  ::torch::Tensor g = grad.contiguous();
  engine->mark_ready(i, g.data_ptr());  // copies into the Bucket
  grad = ::torch::Tensor();
  if (first) count_gradient(i);
}

void ShardedDataParallel::State::on_backward_done() {
  const bool sync = engine->will_sync();
  if (sync) {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      if (marked[i].exchange(false, std::memory_order_relaxed)) continue;
      // Unused in this pass but accumulated under no_sync: its sum counts.
      ::torch::Tensor& grad = params[i].mutable_grad();
      if (grad.defined() && options.find_unused_parameters) {
        ::torch::Tensor g = grad.contiguous();
        engine->mark_ready(i, g.data_ptr());
        grad = ::torch::Tensor();
      }
    }
  } else {
    for (size_t i = 0; i < params.size(); ++i) marked[i].store(false);
  }
  {
    std::lock_guard<std::mutex> lock(units_mutex);
    unit_marked.assign(unit_params.size(), 0);
  }
  engine->finalize();
  // Autograd is done with the gathered weights (Note [stage 3 units]).
  if (stage() == 3) release_units();
}

// ---------------------------------------------------------------- the step

bool ShardedDataParallel::step() {
  State& s = *state_;
  if (s.stage() == 3) s.release_units();  // end_step() releases them in the engine too
  bool ok = true;
  if (!s.torch_opt) {
    ok = s.engine->step();
  } else {
    ok = s.engine->begin_step();
    if (ok) {
      at::NoGradGuard no_grad;
      for (size_t b = 0; b < s.masters.size(); ++b) {
        const ShardView v = s.engine->gradient_view(b);
        if (s.masters[b].data_ptr() != v.master) {  // load_state may move the shards
          s.masters[b].set_data(
              ::torch::from_blob(v.master, {int64_t(v.count)}, ::torch::kFloat));
        }
        ::torch::Tensor& g = s.masters[b].mutable_grad();
        std::memcpy(g.data_ptr<float>(), v.grad, v.count * sizeof(float));
      }
      s.torch_opt->step();
    }
    s.engine->end_step();
  }
  if (s.stage() < 3 && !s.options.overlap_parameter_gather) s.engine->wait_parameters();
  return ok;
}

void ShardedDataParallel::use(const ::torch::nn::Module& submodule) {
  State& s = *state_;
  const std::vector<size_t> idx = s.indices_of(submodule);
  if (s.stage() < 3) {
    for (size_t i : idx) s.engine->wait_parameter(i);
    return;
  }
  std::vector<bool> want(s.unit_params.size(), false);
  for (size_t i : idx) want[s.unit_of[i]] = true;
  size_t last = 0;
  bool any = false;
  for (size_t u = 0; u < want.size(); ++u) {
    if (!want[u]) continue;
    s.gather_unit(u);
    last = u;
    any = true;
  }
  // The next unit's allgather overlaps this one's computation.
  if (any && last + 1 < s.unit_params.size()) s.engine->prefetch(last + 1);
}

::torch::Tensor ShardedDataParallel::after_forward(const ::torch::nn::Module& submodule,
                                                   const ::torch::Tensor& output) {
  return after_forward(submodule, std::vector<::torch::Tensor>{output})[0];
}

std::vector<::torch::Tensor> ShardedDataParallel::after_forward(
    const ::torch::nn::Module& submodule, const std::vector<::torch::Tensor>& outputs) {
  State& s = *state_;
  if (s.stage() < 3 || !s.options.reshard_after_forward) return outputs;
  std::vector<bool> mine(s.unit_params.size(), false);
  for (size_t i : s.indices_of(submodule)) mine[s.unit_of[i]] = true;
  std::vector<size_t> units;
  for (size_t u = 0; u < mine.size(); ++u) {
    if (mine[u]) units.push_back(u);
  }
  if (units.empty()) return outputs;
  // Before the unit's backward: gathered again (Note [reshard after forward]).
  std::weak_ptr<State> weak = state_;
  for (const auto& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    out.register_hook([weak, units](const ::torch::Tensor&) {
      if (auto st = weak.lock()) st->before_unit_backward(units);
    });
  }
  std::lock_guard<std::mutex> lock(s.units_mutex);
  for (size_t u : units) s.release_unit(u);
  return outputs;
}

void ShardedDataParallel::use_all() {
  State& s = *state_;
  if (s.stage() < 3) {
    s.engine->wait_parameters();
    return;
  }
  for (size_t u = 0; u < s.unit_params.size(); ++u) s.gather_unit(u);
}

// ---------------------------------------------------------------- accessors

ShardedEngine::NoSync ShardedDataParallel::no_sync() { return state_->engine->no_sync(); }
float ShardedDataParallel::loss_scale() const { return state_->engine->loss_scale(); }
ShardedState ShardedDataParallel::full_state() { return state_->engine->full_state(); }
void ShardedDataParallel::load_state(const std::vector<const ShardedState*>& sources) {
  if (state_->stage() == 3) state_->release_units();  // the engine releases them too
  state_->engine->load_state(sources);
}
void ShardedDataParallel::save_checkpoint(const std::string& dir, uint64_t step,
                                          const CheckpointOptions& options) {
  CheckpointOptions o = options;  // names and shapes, for an unsharded loader
  o.meta[kParameterManifestKey] = parameter_manifest(*module_);
  save_sharded_checkpoint(state_->comm, dir, step, *state_->engine, o);
}
std::optional<uint64_t> ShardedDataParallel::load_checkpoint(const std::string& dir) {
  if (state_->stage() == 3) state_->release_units();  // the engine releases them too
  // Names and shapes too, before anything is read: a model with the same
  // fingerprint (element counts, dtypes) is not the same model.
  const ::torch::nn::Module& module = *module_;
  const std::string who = state_->where() + ": load_checkpoint: ";
  return load_sharded_checkpoint(
      state_->comm, dir, *state_->engine,
      [&](const std::map<std::string, std::string>& meta, const std::string& path) {
        check_parameter_manifest(meta, module, who + path);
      });
}
ShardedEngine& ShardedDataParallel::engine() { return *state_->engine; }
const std::vector<std::string>& ShardedDataParallel::parameter_names() const {
  return state_->names;
}
::torch::optim::Optimizer* ShardedDataParallel::torch_optimizer() {
  return state_->torch_opt.get();
}

}  // namespace gradwire::torch
