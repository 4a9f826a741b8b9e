// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The libtorch adapter: autograd hooks drive the Reducer (Note [ddp hooks]
// in gradwire/torch/distributed_data_parallel.h).
#include "gradwire/torch/distributed_data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <torch/types.h>

#include <atomic>
#include <optional>
#include <utility>

#include "consistency.h"
#include "grad_hooks.h"
#include "gradwire/error.h"
#include "gradwire/torch/unsharded_checkpoint.h"

namespace gradwire::torch {

using detail::TensorEntry;

struct DistributedDataParallel::State {
  State(Communicator& c, DDPOptions o) : comm(c), options(std::move(o)) {}

  Communicator& comm;
  DDPOptions options;
  std::vector<std::string> names;      // parameters in the reduction
  std::vector<::torch::Tensor> params;
  std::vector<TensorEntry> buffers;
  std::unique_ptr<detail::AccumulatorHooks> hooks;  // Note [ddp hooks]
  std::unique_ptr<Reducer> reducer;
  // gradient_as_bucket_view: parameter i's Bucket memory as a tensor, for
  // the plan generation `views_generation`.
  std::vector<::torch::Tensor> views;
  uint64_t views_generation = 0;
  // Per backward pass: which parameters' hooks fired. Hooks may run on
  // autograd worker threads.
  std::unique_ptr<std::atomic<bool>[]> marked;
  // The CUDA device of the parameters, if any: finalize() writes the
  // averages back on PyTorch's current stream there.
  std::optional<c10::Device> cuda_device;

  void on_gradient(size_t i);
  void on_backward_done();
  void hand_over(size_t i, ::torch::Tensor& grad);
  void refresh_views();
  std::string where() const {
    return "rank " + std::to_string(comm.rank()) + ": DistributedDataParallel";
  }
};

namespace {

::torch::Tensor view_of(Reducer& reducer, size_t i, const ::torch::Tensor& param) {
  // Non-owning: the Reducer owns Bucket memory and keeps it valid until the
  // next synchronised finalize() after a rebuild (refresh_views runs first).
  return ::torch::from_blob(reducer.bucket_view(i), param.sizes(),
                            ::torch::TensorOptions().dtype(param.scalar_type())
                                .device(param.device()));
}

}  // namespace

// ---------------------------------------------------------------- construction

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<::torch::nn::Module> module,
                                                 Communicator& comm, DDPOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>(comm, std::move(options))) {
  if (!module_) {
    throw Error(ErrorCode::InvalidArgument, state_->where() + ": the module is null");
  }
  State& s = *state_;
  size_t n_params = 0;
  const std::vector<TensorEntry> entries = detail::module_entries(*module_, n_params);
  s.buffers.assign(entries.begin() + ptrdiff_t(n_params), entries.end());
  detail::check_same_entries(comm, entries);  // Note [parameter check]
  if (s.options.broadcast_from_rank0) {
    detail::broadcast_tensors(comm, entries, 0);
  } else {
    for (const auto& e : entries) detail::check_supported_device(comm, e);
  }

  std::vector<GradientInfo> infos;
  for (size_t k = 0; k < n_params; ++k) {
    const TensorEntry& e = entries[k];
    if (!e.tensor.requires_grad()) continue;  // frozen: broadcast, not reduced
    if (e.tensor.layout() != ::torch::kStrided) {
      throw Error(ErrorCode::InvalidArgument,
                  s.where() + ": " + detail::describe(e) + " is not a dense tensor");
    }
    GradientInfo info;
    info.elements = size_t(e.tensor.numel());
    info.dtype = detail::gradient_dtype(e.tensor, e.name);
    info.name = e.name;
    // CUDA parameters get device Buckets (Note [device Buckets]).
    info.device = detail::device_of(e.tensor);
    if (e.tensor.is_cuda()) s.cuda_device = e.tensor.device();
    for (int64_t d : e.tensor.sizes()) info.shape.push_back(size_t(d));  // for PowerSGD
    infos.push_back(std::move(info));
    s.names.push_back(e.name);
    s.params.push_back(e.tensor);
  }
  ReducerOptions ro;
  ro.caps = s.options.caps;
  ro.rebuild_buckets = s.options.rebuild_buckets;
  ro.gradient_as_bucket_view = s.options.gradient_as_bucket_view;
  ro.find_unused_parameters = s.options.find_unused_parameters;
  ro.sharded = s.options.sharded;
  ro.sync_every_k_steps = s.options.sync_every_k_steps;
  ro.comm_hook = s.options.comm_hook;
  s.reducer = std::make_unique<Reducer>(comm, std::move(infos), std::move(ro));
  s.marked = std::make_unique<std::atomic<bool>[]>(s.params.size());
  for (size_t i = 0; i < s.params.size(); ++i) s.marked[i] = false;
  if (s.options.gradient_as_bucket_view) s.refresh_views();

  State* raw = state_.get();  // the hooks are removed in the destructor
  s.hooks = std::make_unique<detail::AccumulatorHooks>(
      s.params, s.names, s.where(), [raw](size_t i) { raw->on_gradient(i); },
      [raw] { raw->on_backward_done(); });
}

DistributedDataParallel::~DistributedDataParallel() {
  State& s = *state_;
  s.hooks.reset();
  if (s.options.gradient_as_bucket_view) {
    // .grad must not outlive the Bucket memory it aliases.
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < s.params.size(); ++i) {
      ::torch::Tensor& g = s.params[i].mutable_grad();
      if (g.defined() && g.data_ptr() == s.views[i].data_ptr()) g = g.clone();
    }
  }
}

// ---------------------------------------------------------------- hooks

// On an autograd thread, right after AccumulateGrad wrote .grad.
void DistributedDataParallel::State::on_gradient(size_t i) {
  marked[i].store(true, std::memory_order_relaxed);
  if (!reducer->will_sync()) return;  // no_sync(): .grad accumulates locally
  ::torch::Tensor& grad = params[i].mutable_grad();
  if (!grad.defined()) return;  // finalize() treats it as unused
  // An error fails backward() (the step is lost: after an error from
  // backward(), rebuild the DistributedDataParallel).
  hand_over(i, grad);
}

// Gives gradient i (in `grad`, which is params[i]'s .grad) to the Reducer.
void DistributedDataParallel::State::hand_over(size_t i, ::torch::Tensor& grad) {
  at::NoGradGuard no_grad;
  if (grad.layout() != ::torch::kStrided || grad.scalar_type() != params[i].scalar_type() ||
      grad.device() != params[i].device()) {
    throw Error(ErrorCode::InvalidArgument,
                where() + ": parameter " + names[i] + " (on " + params[i].device().str() +
                    ") got a " + std::string(c10::toString(grad.scalar_type())) +
                    " gradient on " + grad.device().str() + (grad.is_sparse() ? " (sparse)" : "") +
                    "; only dense gradients of the parameter's dtype and device can be reduced");
  }
  // The stream autograd produced the gradient on (Note [device Buckets]).
  const Stream stream = detail::current_stream(grad.device());
  if (options.gradient_as_bucket_view) {
    ::torch::Tensor& view = views[i];
    if (grad.data_ptr() != view.data_ptr()) {
      // First step, or zero_grad() set .grad to none: copy once, then
      // alias, so later backward passes accumulate straight into the Bucket.
      view.copy_(grad);
      grad = view;
    }
    reducer->mark_ready(i, nullptr, stream);  // scales in place
    return;
  }
  if (!grad.is_contiguous()) grad = grad.contiguous();
  // finalize() writes the average back into this memory.
  reducer->mark_ready(i, grad.data_ptr(), stream);
}

// The autograd engine's final callback, on the thread that called backward().
void DistributedDataParallel::State::on_backward_done() {
  std::vector<size_t> unmarked;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!marked[i].exchange(false, std::memory_order_relaxed)) unmarked.push_back(i);
  }
  if (options.find_unused_parameters && reducer->will_sync()) {
    // Note [unused parameters] in src/reducer/finalize.cpp: every rank must
    // launch every Bucket. Handing over a zero gradient (or what .grad holds,
    // e.g. values accumulated under no_sync) also gives the parameter the
    // average over ranks, which the Reducer's own zero-filling would not
    // write anywhere.
    at::NoGradGuard no_grad;
    for (size_t i : unmarked) {
      ::torch::Tensor& grad = params[i].mutable_grad();
      if (!grad.defined()) {
        grad = options.gradient_as_bucket_view ? views[i].zero_()
                                               : ::torch::zeros_like(params[i]);
      }
      hand_over(i, grad);
    }
  }
  reducer->finalize(cuda_device ? detail::current_stream(*cuda_device) : Stream());
  if (options.gradient_as_bucket_view && reducer->plan_generation() != views_generation) {
    refresh_views();
  }
}

// After a rebuild every Bucket moved; the Reducer carried the values over.
void DistributedDataParallel::State::refresh_views() {
  at::NoGradGuard no_grad;
  const bool first = views.empty();
  views.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ::torch::Tensor old = views[i];
    views[i] = view_of(*reducer, i, params[i]);
    ::torch::Tensor& grad = params[i].mutable_grad();
    if (first) {
      // A gradient the parameter already holds moves into its Bucket now.
      if (grad.defined()) {
        views[i].copy_(grad);
        grad = views[i];
      }
    } else if (grad.defined() && old.defined() && grad.data_ptr() == old.data_ptr()) {
      grad = views[i];
    }
  }
  views_generation = reducer->plan_generation();
}

// ---------------------------------------------------------------- accessors

Reducer::NoSync DistributedDataParallel::no_sync() { return state_->reducer->no_sync(); }

void DistributedDataParallel::broadcast_buffers(int root) {
  detail::broadcast_tensors(state_->comm, state_->buffers, root);
}

Reducer& DistributedDataParallel::reducer() { return *state_->reducer; }

std::string DistributedDataParallel::save_state() const { return state_->reducer->save_state(); }
void DistributedDataParallel::save_checkpoint(const std::string& dir, uint64_t step,
                                              ::torch::optim::Optimizer& optimizer,
                                              const CheckpointOptions& options) {
  save_unsharded_checkpoint(state_->comm, dir, step, *module_, optimizer, options);
}
std::optional<uint64_t> DistributedDataParallel::load_checkpoint(
    const std::string& dir, ::torch::optim::Optimizer& optimizer) {
  return load_unsharded_checkpoint(state_->comm, dir, *module_, optimizer);
}

void DistributedDataParallel::load_state(std::string_view state) {
  state_->reducer->load_state(state);
  if (state_->options.gradient_as_bucket_view &&
      state_->reducer->plan_generation() != state_->views_generation) {
    state_->refresh_views();
  }
}

const StepStats& DistributedDataParallel::last_step_stats() const {
  return state_->reducer->last_step_stats();
}

const std::vector<std::string>& DistributedDataParallel::parameter_names() const {
  return state_->names;
}

}  // namespace gradwire::torch
