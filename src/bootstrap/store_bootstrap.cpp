// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bootstrap over a Store (torchrun's TCP store or a file store), and the
// world of one rank.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bootstrap/store.h"
#include "base/raise.h"

namespace gradwire::bootstrap {

namespace {

class StoreBootstrap final : public Bootstrap {
 public:
  StoreBootstrap(std::unique_ptr<Store> store, int rank, int size, int local_rank)
      : store_(std::move(store)), rank_(rank), size_(size), local_rank_(local_rank) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string describe() const override { return store_->describe(); }
  Store* store() override { return store_.get(); }

  // Round n writes "ag/<n>/<rank>". Every rank makes the same sequence of
  // calls, so the round number alone keeps rounds apart and no key is ever
  // overwritten. Keys are never deleted: a bootstrap does a handful of
  // rounds of a few hundred bytes each.
  std::vector<std::string> allgather(const std::string& mine, Deadline deadline) override {
    const uint64_t round = round_++;
    std::vector<std::string> all(size_);
    all[rank_] = mine;
    if (size_ == 1) return all;
    auto t0 = Clock::now();
    store_->set(key(round, rank_), mine);
    for (int i = 1; i < size_; ++i) {
      // Start after our own rank so that ranks do not all wait on rank 0
      // first; the order does not change the total wait.
      int r = (rank_ + i) % size_;
      try {
        all[r] = store_->get(key(round, r), deadline, fmt::format("rank {}", r));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout) throw;
        timed_out(round, i, all, t0, e);
      }
    }
    return all;
  }

 private:
  static std::string key(uint64_t round, int rank) { return fmt::format("ag/{}/{}", round, rank); }

  // The deadline passed while waiting on the i-th rank after ours: check
  // the rest without waiting, so the error names every missing rank, not
  // just the first one we happened to wait for.
  [[noreturn]] void timed_out(uint64_t round, int i, std::vector<std::string>& all,
                              Clock::time_point t0, const Error& first) {
    std::vector<int> missing{(rank_ + i) % size_};
    for (int j = i + 1; j < size_; ++j) {
      int r = (rank_ + j) % size_;
      if (auto v = store_->try_get(key(round, r))) {
        all[r] = std::move(*v);
      } else {
        missing.push_back(r);
      }
    }
    std::sort(missing.begin(), missing.end());
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    raise(ErrorCode::Timeout,
          "bootstrap allgather round {} over {}: {} {} did not arrive within {} ms (rank {} of "
          "{} waiting, {} of {} arrived); are they running, and started with the same "
          "WORLD_SIZE and store address? ({})",
          round, store_->describe(), missing.size() == 1 ? "rank" : "ranks",
          fmt::join(missing, ", "), waited.count(), rank_, size_, size_ - int(missing.size()),
          size_, first.what());
  }

  std::unique_ptr<Store> store_;
  int rank_;
  int size_;
  int local_rank_;
  uint64_t round_ = 0;
};

class SingleProcess final : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::vector<std::string> allgather(const std::string& mine, Deadline) override {
    return {mine};
  }
  std::string describe() const override { return "single process"; }
};

}  // namespace

std::unique_ptr<Bootstrap> make_store_bootstrap(std::unique_ptr<Store> store, int rank, int size,
                                                int local_rank) {
  if (!store) raise(ErrorCode::InvalidArgument, "store bootstrap: null store");
  if (size < 1 || rank < 0 || rank >= size) {
    raise(ErrorCode::InvalidArgument,
          "store bootstrap over {}: rank {} / size {} (expected size >= 1 and 0 <= rank < size)",
          store->describe(), rank, size);
  }
  if (local_rank < -1 || local_rank >= size) {
    raise(ErrorCode::InvalidArgument,
          "store bootstrap over {}: local rank {} (expected -1 or 0 <= local rank < {})",
          store->describe(), local_rank, size);
  }
  return std::make_unique<StoreBootstrap>(std::move(store), rank, size, local_rank);
}

std::unique_ptr<Bootstrap> single_process() { return std::make_unique<SingleProcess>(); }

}  // namespace gradwire::bootstrap
