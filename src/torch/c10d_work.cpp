// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The c10d::Work of the gradwire backend: a gradwire Work, the copy-out of a
// staging buffer, and the torch future DDP and comm hooks chain on.
#include <ATen/ThreadLocalState.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "c10d_helpers.h"
#include "gradwire/error.h"
#include "gradwire/torch/process_group.h"

namespace gradwire::torch {

namespace {
// set_wait_interrupt(): the Python extension's check for signals (Note
// [interruptible wait] in python/src/common.cpp), run between the slices of
// a wait.
std::atomic<WaitInterrupt> g_wait_interrupt{nullptr};
}  // namespace

void set_wait_interrupt(WaitInterrupt check) { g_wait_interrupt.store(check); }

namespace detail {

namespace {

// Note [CUDA tensors in the backend]: a CUDA tensor's collective goes to
// the Communicator's GPU path (NCCL, or staged: GRADWIRE_DEVICE_PATH) after
// the work on PyTorch's current stream (a DeviceStreamScope, Note [producer
// stream]); the gradwire Work completes once the GPU is done, so the
// future, made with the tensors' device, can be completed from the poller
// or engine thread, and its callbacks and waiters need no further sync.
// Copies out of a staging buffer (`finish`) are synchronised before the
// Work completes, so wait() returns readable results on any stream.
std::optional<c10::Device> cuda_device_of(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (t.defined() && t.is_cuda()) return t.device();
  }
  return std::nullopt;
}

// A c10d Work over a gradwire Work. `finish` (copying results out of a
// staging buffer) runs on gradwire's engine thread as the Work completes,
// before wait() returns.
//
// Note [future callbacks on the engine thread]: the future is completed
// there too, so its callbacks (DDP's bucket handling, a
// comm hook's `then`, taking the GIL for Python ones) run inline, as gloo's
// run on its worker threads. Handing them to torch's inter-op pool instead
// cost a thread hop per bucket: DDP steps 1.3-1.9x slower on a loaded 2-core
// host. The price: a callback must not wait for another collective of the
// same group (the engine thread would wait for itself, until the deadline).
//
// Note [copy-out in the caller's mode]: `finish` runs on the engine thread
// under the calling thread's ThreadLocalState (grad mode, inference mode,
// dispatch keys), as at::launch and the autograd engine do: outputs made
// under torch.inference_mode() are inference tensors, and copying into them
// outside inference mode raised, so all_gather/all_to_all under
// inference_mode left stale outputs. The Work is one thing to its user:
// wait(), isSuccess(), exception() and the future all report the first
// failure of the collective or of the copy-out, never one without the
// other (the copy-out's error used to reach only the future).
class GradwireWork : public c10d::Work {
 public:
  GradwireWork(int rank, c10d::OpType type, gradwire::Work work, std::vector<at::Tensor> outputs,
               std::vector<at::Tensor> keep_alive, std::function<void()> finish = {})
      : c10d::Work(rank, type), work_(std::move(work)), outputs_(std::move(outputs)) {
    // CPU futures need no stream synchronisation; CUDA ones name their
    // device (Note [CUDA tensors in the backend]).
    std::optional<c10::Device> device = cuda_device_of(outputs_);
    if (!device) device = cuda_device_of(keep_alive);
    std::vector<c10::Device> devices;
    if (device) devices.push_back(*device);
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), std::move(devices));
    // Only Works with a copy-out pay for capturing the caller's state.
    std::optional<at::ThreadLocalState> caller;
    if (finish) caller.emplace();
    work_.then([fut = future_, outputs = outputs_, keep_alive = std::move(keep_alive),
                finish = std::move(finish), device,
                caller = std::move(caller)](std::exception_ptr error) {
      if (!error && finish) {
        try {
          at::ThreadLocalStateGuard mode(*caller);
          finish();
          if (device) {
            // The copies were enqueued on this thread's current stream.
            c10::impl::getDeviceGuardImpl(device->type())->getStream(*device).synchronize();
          }
        } catch (...) {
          error = std::current_exception();
        }
      }
      if (error) {
        fut->setError(error);
      } else {
        fut->markCompleted(c10::IValue(outputs));
      }
    });
  }

  // Complete once the collective and the copy-out are (the future is
  // completed last, Note [copy-out in the caller's mode]).
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    if (future_->completed() && future_->hasError()) return future_->exception_ptr();
    return work_.error();
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  // A receive from any source: the sender, once complete.
  int sourceRank() const override {
    if (!source_) return c10d::Work::sourceRank();
    return *source_;
  }
  void set_source(std::shared_ptr<int> source) { source_ = std::move(source); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  bool wait(std::chrono::milliseconds timeout) override {
    using clock = std::chrono::steady_clock;
    const bool bounded = timeout.count() > 0;  // kNoTimeout (0): the collective's deadline
    const auto deadline = clock::now() + timeout;
    while (!work_.test()) {
      auto slice = std::chrono::milliseconds(50);
      if (bounded) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
        if (left.count() <= 0) {
          throw Error(ErrorCode::Timeout, work_.describe() + ": Timed out in Work.wait(timeout=" +
                                              std::to_string(timeout.count()) +
                                              " ms) before the collective finished");
        }
        slice = std::min(slice, left);
      }
      try {
        work_.wait(slice);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout || work_.test()) break;
      }
      if (const WaitInterrupt check = g_wait_interrupt.load()) check();
    }
    work_.wait();  // rethrows the collective's gradwire::Error
    // The engine thread completes the future right after the collective,
    // once the copy-out ran: a short wait, never for another collective.
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }

 private:
  gradwire::Work work_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<int> source_;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> make_work(int rank, c10d::OpType type, gradwire::Work work,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> keep_alive,
                                         std::function<void()> finish) {
  return c10::make_intrusive<GradwireWork>(rank, type, std::move(work), std::move(outputs),
                                           std::move(keep_alive), std::move(finish));
}

c10::intrusive_ptr<c10d::Work> make_recv_any_work(int rank, gradwire::Work work,
                                                  std::vector<at::Tensor> outputs,
                                                  std::shared_ptr<int> source,
                                                  std::function<void()> finish) {
  auto w = c10::make_intrusive<GradwireWork>(rank, c10d::OpType::RECVANYSOURCE, std::move(work),
                                             outputs, outputs, std::move(finish));
  w->set_source(std::move(source));
  return w;
}

}  // namespace detail
}  // namespace gradwire::torch
