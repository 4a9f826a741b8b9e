// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace gradwire {

namespace detail {
struct WorkState;
}

// The one completion type: every asynchronous operation returns a Work.
// Copies share state. Destroying a Work does not cancel the operation.
class GRADWIRE_API Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation finished; rethrows its gradwire::Error.
  // Never blocks forever: the engine fails every collective at its deadline,
  // and wait() itself fails with Timeout if the engine stops making progress.
  void wait() const;
  // Like wait(), but fails with Timeout once `timeout` has passed (the
  // operation keeps running and can be waited for again).
  void wait(std::chrono::milliseconds timeout) const;
  // True once finished (successfully or not); never throws.
  bool test() const;
  // True if finished with an error; the error, or nullptr.
  std::exception_ptr error() const;
  // Runs `fn` once the operation has finished (on the engine thread, or
  // immediately on this thread if it has already finished). `fn` must not
  // block and must not throw; its argument is the error or nullptr. wait()
  // and test() report completion only after every callback has returned.
  void then(std::function<void(std::exception_ptr)> fn) const;
  // A short description: "allreduce #12 (1048576 x float32 sum)".
  std::string describe() const;

  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace gradwire
