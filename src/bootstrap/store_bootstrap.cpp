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

  // Note [an allgather in two store requests]: round n, every rank
  // writes "ag/<n>/<rank>"; rank 0 reads the others' keys and writes them
  // all as one value, "ag/<n>/all", which every other rank reads. A rank
  // other than 0 then makes 2 store requests a round whatever the world
  // size (it made 1 + (size - 1) when every rank read every key: at a
  // thousand ranks a million requests on rank 0's store per round); rank 0
  // makes size of them, on its own store when it serves it. The price: one
  // more store hop before the others have the result. Every rank makes the
  // same sequence of calls, so the round number alone keeps rounds apart
  // and no key is ever overwritten. Keys are never deleted: a bootstrap
  // does a handful of rounds of a few hundred bytes per rank. Above
  // kMaxCombined bytes rank 0 writes "ag/<n>/all" empty and every rank
  // reads every key, as before.
  std::vector<std::string> allgather(const std::string& mine, Deadline deadline) override {
    const uint64_t round = round_++;
    std::vector<std::string> all(size_);
    all[rank_] = mine;
    if (size_ == 1) return all;
    auto t0 = Clock::now();
    if (rank_ != 0) store_->set(key(round, rank_), mine);
    if (rank_ == 0) {
      read_every_rank(round, all, t0, deadline);
      size_t bytes = 0;
      for (const auto& v : all) bytes += v.size() + 12;
      if (bytes > kMaxCombined) store_->set(key(round, 0), mine);  // read like the others'
      store_->set(all_key(round), bytes <= kMaxCombined ? combine(all) : std::string());
      return all;
    }
    std::string combined;
    try {
      combined = store_->get(all_key(round), deadline, "rank 0 (every rank's start-up values)");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
      timed_out(round, 0, all, t0, e);
    }
    if (combined.empty()) {  // too large to combine: every key
      read_every_rank(round, all, t0, deadline);
      return all;
    }
    if (!split(combined, all)) {
      raise(ErrorCode::Protocol,
            "bootstrap allgather round {} over {}: rank {}: rank 0's combined values are "
            "malformed ({} bytes); is every rank running the same gradwire?",
            round, store_->describe(), rank_, combined.size());
    }
    return all;
  }

 private:
  static constexpr size_t kMaxCombined = size_t(8) << 20;  // half the store's value limit

  static std::string key(uint64_t round, int rank) { return fmt::format("ag/{}/{}", round, rank); }
  static std::string all_key(uint64_t round) { return fmt::format("ag/{}/all", round); }

  // Every value as "<bytes>:<value>".
  static std::string combine(const std::vector<std::string>& all) {
    std::string out;
    for (const auto& v : all) out += fmt::format("{}:", v.size()) + v;
    return out;
  }
  static bool split(std::string_view text, std::vector<std::string>& all) {
    for (auto& v : all) {
      const size_t colon = text.find(':');
      if (colon == std::string_view::npos || colon == 0 || colon > 12) return false;
      size_t n = 0;
      for (char c : text.substr(0, colon)) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + size_t(c - '0');
      }
      text.remove_prefix(colon + 1);
      if (n > text.size()) return false;
      v.assign(text.substr(0, n));
      text.remove_prefix(n);
    }
    return text.empty();
  }

  void read_every_rank(uint64_t round, std::vector<std::string>& all, Clock::time_point t0,
                       Deadline deadline) {
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
  }

  // The deadline passed while waiting on the i-th rank after ours (i = 0:
  // on rank 0's combined values): check the rest without waiting, so the
  // error names every missing rank, not just the one we happened to wait
  // for.
  [[noreturn]] void timed_out(uint64_t round, int i, std::vector<std::string>& all,
                              Clock::time_point t0, const Error& first) {
    std::vector<int> missing;
    if (i > 0) missing.push_back((rank_ + i) % size_);
    for (int j = i + 1; j < size_; ++j) {
      int r = (rank_ + j) % size_;
      // Waiting for rank 0's combined values (i = 0), rank 0 is late only
      // if every other rank arrived: it waits for them itself.
      if (r == rank_ || (i == 0 && r == 0)) continue;
      if (auto v = store_->try_get(key(round, r))) {
        all[r] = std::move(*v);
      } else {
        missing.push_back(r);
      }
    }
    if (missing.empty()) missing.push_back(0);
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

namespace {
thread_local uint64_t store_requests = 0;
}  // namespace

uint64_t store_requests_on_this_thread() { return store_requests; }
void count_store_request() { ++store_requests; }

std::unique_ptr<Bootstrap> single_process() { return std::make_unique<SingleProcess>(); }

}  // namespace gradwire::bootstrap
