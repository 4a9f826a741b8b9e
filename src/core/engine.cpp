// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "core/engine.h"

#include "core/logging.h"

namespace gradwire {

Engine::Engine(std::string name) : name_(std::move(name)), thread_([this] { loop(); }) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::submit(std::shared_ptr<detail::WorkState> state, Task task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.emplace_back(std::move(state), std::move(task));
  }
  cv_.notify_one();
}

void Engine::loop() {
  for (;;) {
    std::pair<std::shared_ptr<detail::WorkState>, Task> item;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item.first->mark_started();
    std::exception_ptr err;
    try {
      item.second(*item.first);
    } catch (...) {
      err = std::current_exception();
    }
    item.first->finish(err);
  }
}

}  // namespace gradwire
