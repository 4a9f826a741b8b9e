// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/work_state.h"

namespace gradwire {

// One thread that runs a communicator's operations strictly in submission
// order (Note [in-order launch] in DESIGN.md: every rank runs collective k
// before k+1, so ranks never need to negotiate).
class Engine {
 public:
  using Task = std::function<void(detail::WorkState&)>;

  explicit Engine(std::string name);
  // Runs what is queued (each bounded by its deadline), then stops.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void submit(std::shared_ptr<detail::WorkState> state, Task task);

 private:
  void loop();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<detail::WorkState>, Task>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gradwire
