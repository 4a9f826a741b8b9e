// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Gradient-accumulator post hooks, shared by DistributedDataParallel and
// ShardedDataParallel (Note [ddp hooks], Note [sharded hooks]).
#pragma once

#include <torch/csrc/autograd/variable.h>
#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace gradwire::torch::detail {

// Calls on_gradient(i) on an autograd thread each time AccumulateGrad has
// written params[i]'s .grad, and queues on_backward_done() as the autograd
// engine's final callback at the first such hook of a backward pass (it
// runs on the thread that called backward(), which throws what it throws).
// The hooks follow the parameter to whatever accumulator autograd uses
// (Note [hooks survive set_]). Destruction removes them; it must not
// overlap a backward pass.
class AccumulatorHooks {
 public:
  // InvalidArgument (prefixed with `where`) for a parameter without a
  // gradient accumulator (not a leaf that requires grad).
  AccumulatorHooks(std::vector<::torch::Tensor> params, const std::vector<std::string>& names,
                   const std::string& where, std::function<void(size_t)> on_gradient,
                   std::function<void()> on_backward_done);
  ~AccumulatorHooks();
  AccumulatorHooks(const AccumulatorHooks&) = delete;
  AccumulatorHooks& operator=(const AccumulatorHooks&) = delete;

 private:
  using NodePtr =
      decltype(::torch::autograd::impl::grad_accumulator(std::declval<const ::torch::Tensor&>()));
  void attach(size_t i);
  void fire(size_t i);

  std::vector<::torch::Tensor> params_;
  std::function<void(size_t)> on_gradient_;
  std::function<void()> on_backward_done_;
  // The Variable holds its gradient accumulator only weakly; keeping it
  // alive keeps our hook on the node autograd will use (as c10d does).
  std::vector<NodePtr> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::vector<unsigned> tensor_hooks_;
  std::mutex mu_;  // accumulators_, hook_keys_
  std::atomic<bool> callback_queued_{false};
};

}  // namespace gradwire::torch::detail
