// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The in-process store (gradwire/rendezvous.h): ranks that are threads of
// one process rendezvous through a map in memory, so a test can run a whole
// job, faults included, inside one GoogleTest binary (Note [explicit
// rendezvous] in environment.cpp).
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "bootstrap/store.h"
#include "base/raise.h"
#include "gradwire/rendezvous.h"

namespace gradwire {

class InProcessStore {
 public:
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, std::string> values;
};

std::shared_ptr<InProcessStore> make_in_process_store() {
  return std::make_shared<InProcessStore>();
}

namespace bootstrap {

namespace {

class SharedStore final : public Store {
 public:
  explicit SharedStore(std::shared_ptr<InProcessStore> s) : s_(std::move(s)) {}

  void set(const std::string& key, const std::string& value) override {
    count_store_request();
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      s_->values[key] = value;
    }
    s_->changed.notify_all();
  }

  std::string get(const std::string& key, Deadline deadline,
                  const std::string& waiting_for) override {
    count_store_request();
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lk(s_->mu);
    if (!s_->changed.wait_until(lk, deadline.at(), [&] { return s_->values.count(key) > 0; })) {
      raise(ErrorCode::Timeout,
            "in-process store: timed out after {} ms waiting for {} (key '{}'); has that rank "
            "started, with the same store?",
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(),
            waiting_for, key);
    }
    return s_->values[key];
  }

  std::optional<std::string> try_get(const std::string& key) override {
    count_store_request();
    std::lock_guard<std::mutex> lk(s_->mu);
    auto it = s_->values.find(key);
    if (it == s_->values.end()) return std::nullopt;
    return it->second;
  }

  bool set_if_absent(const std::string& key, const std::string& value) override {
    count_store_request();
    {
      std::lock_guard<std::mutex> lk(s_->mu);
      if (!s_->values.emplace(key, value).second) return false;
    }
    s_->changed.notify_all();
    return true;
  }

  std::string describe() const override { return "in-process store"; }

 private:
  std::shared_ptr<InProcessStore> s_;
};

}  // namespace

std::unique_ptr<Store> share_in_process_store(std::shared_ptr<InProcessStore> store) {
  return std::make_unique<SharedStore>(std::move(store));
}

}  // namespace bootstrap
}  // namespace gradwire
