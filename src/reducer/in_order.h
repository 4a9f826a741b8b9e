// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [in-order launch] (reducer_impl.h) as a small state machine, shared
// by the Reducer and the sharded engine (src/sharded/engine.cpp).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace gradwire {

// Guarded by its owner's mutex: complete() takes the owner's lock, held on
// entry and on return and released around each launch, so a launch never
// blocks other threads' mark_ready.
class InOrderLaunch {
 public:
  // A new backward pass over `buckets` Buckets, none complete.
  void reset(size_t buckets) {
    complete_.assign(buckets, false);
    next_ = 0;
    launching_ = false;
  }

  // Bucket `bucket` is complete; launches (launch(b), which must not
  // throw) every Bucket that is launchable now, in order, unless another
  // thread is the launcher: it will see this one.
  template <typename Launch>
  void complete(std::unique_lock<std::mutex>& lk, size_t bucket, Launch&& launch) {
    complete_[bucket] = true;
    if (launching_) return;
    launching_ = true;
    while (next_ < complete_.size() && complete_[next_]) {
      const size_t b = next_;
      lk.unlock();
      launch(b);
      lk.lock();
      ++next_;
    }
    launching_ = false;
  }

  size_t next() const { return next_; }  // the first Bucket not launched
  bool all_launched() const { return next_ == complete_.size() && !launching_; }

 private:
  std::vector<bool> complete_;
  size_t next_ = 0;
  bool launching_ = false;
};

}  // namespace gradwire
