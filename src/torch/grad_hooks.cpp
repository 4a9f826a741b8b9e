// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "grad_hooks.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <utility>

#include "tensors.h"

namespace gradwire::torch::detail {

namespace autograd = ::torch::autograd;

AccumulatorHooks::AccumulatorHooks(std::vector<::torch::Tensor> params,
                                   const std::vector<std::string>& names, const std::string& where,
                                   std::function<void(size_t)> on_gradient,
                                   std::function<void()> on_backward_done)
    : params_(std::move(params)),
      on_gradient_(std::move(on_gradient)),
      on_backward_done_(std::move(on_backward_done)) {
  accumulators_.resize(params_.size());
  hook_keys_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!autograd::impl::grad_accumulator(params_[i])) {
      invalid(where + ": parameter " + names[i] +
              " has no gradient accumulator (is it a leaf tensor that requires grad?)");
    }
    attach(i);
    tensor_hooks_.push_back(
        params_[i].register_hook([this, i](const ::torch::Tensor&) { attach(i); }));
  }
}

AccumulatorHooks::~AccumulatorHooks() {
  for (size_t i = 0; i < tensor_hooks_.size(); ++i) params_[i].remove_hook(tensor_hooks_[i]);
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    if (accumulators_[i]) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
}

// Note [hooks survive set_]: our hook sits on the parameter's gradient
// accumulator, which the parameter holds only weakly, and in-place ops that
// may change a tensor's metadata drop it: Tensor::set_ does, and
// torch::load (Module::load) loads parameters with set_. The next backward
// then makes a fresh accumulator without our hook, and the step would
// silently average nothing. A tensor hook lives on the parameter itself
// and runs before the accumulator on every backward, so it re-attaches our
// hook to whichever accumulator autograd is about to run.
void AccumulatorHooks::attach(size_t i) {
  NodePtr acc = autograd::impl::grad_accumulator(params_[i]);
  std::lock_guard<std::mutex> lk(mu_);
  if (!acc || acc == accumulators_[i]) return;
  if (accumulators_[i]) accumulators_[i]->del_post_hook(hook_keys_[i]);
  hook_keys_[i] = acc->add_post_hook(std::make_unique<autograd::utils::LambdaPostHook>(
      [this, i](const autograd::variable_list& outputs, const autograd::variable_list&) {
        fire(i);
        return outputs;
      }));
  accumulators_[i] = std::move(acc);
}

void AccumulatorHooks::fire(size_t i) {
  if (!callback_queued_.exchange(true)) {
    autograd::Engine::get_default_engine().queue_callback([this] {
      callback_queued_.store(false);
      on_backward_done_();
    });
  }
  try {
    on_gradient_(i);
  } catch (...) {
    // backward() fails with this; autograd then drops the final callback,
    // so let the next backward queue its own.
    callback_queued_.store(false);
    throw;
  }
}

}  // namespace gradwire::torch::detail
