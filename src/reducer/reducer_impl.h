// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Reducer's state. Split over reducer.cpp (construction, mark_ready,
// launch) and finalize.cpp (the end of a step, write-back, rebuild).
//
// Note [in-order launch]: every rank launches Bucket k before k+1, because
// the communicator runs collectives in submission order and ranks must
// submit the same sequence. A Bucket that completes early (its gradients
// came first on this rank) waits until every Bucket before it launched.
// Whoever completes the next Bucket becomes the launcher and launches every Bucket that is launchable in a row, with
// mu_ released around each launch, so the hook's work (e.g. a cast to
// float16) never blocks other threads' mark_ready; a Bucket completed by
// another thread meanwhile is picked up by the launcher's next check
// (InOrderLaunch, reducer/in_order.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <vector>

#include "base/deadline.h"
#include "gradwire/reducer.h"
#include "reducer/device.h"
#include "reducer/in_order.h"
#include "reducer/stall.h"

namespace gradwire {

// FNV-1a over every gradient's (elements, dtype): what ranks compare before
// adopting rank 0's rebuilt order, and what a saved Reducer state must match
// (state.cpp).
uint64_t gradient_list_fingerprint(const std::vector<GradientSpec>& specs);

// Hidden: a nested class of an exported class is exported too (Note [hidden
// symbols] in include/gradwire/export.h), and the Impl is no API.
class __attribute__((visibility("hidden"))) Reducer::Impl {
 public:
  Impl(Communicator& comm, std::vector<GradientInfo> gradients, ReducerOptions options);
  ~Impl();

  void set_gradient_buffer(size_t i, void* grad);
  void mark_ready(size_t i, void* grad, bool explicit_pointer, void* stream);
  void mark_unused(size_t i);
  void finalize(void* stream);
  bool will_sync() const;
  void enter_no_sync();
  void leave_no_sync() { no_sync_depth_.fetch_sub(1); }
  void* bucket_view(size_t i);
  Reducer::Shard shard(size_t bucket);

  std::string save_state() const;
  void load_state(std::string_view state);
  uint64_t step() const { return step_; }
  uint64_t plan_generation() const { return plan_generation_; }
  const BucketPlan& plan() const { return plan_; }
  const StepStats& last_stats() const { return last_stats_; }
  size_t size() const { return gradients_.size(); }

 private:
  enum : uint8_t { kUnmarked = 0, kReady = 1, kUnused = 2 };

  struct Gradient {
    GradientInfo info;
    void* buffer = nullptr;     // set_gradient_buffer: persistent
    void* step_dest = nullptr;  // mark_ready(i, grad): this step only
    std::atomic<uint8_t> state{kUnmarked};
  };

  struct Bucket {
    SharedBuffer memory;            // what `data` points into, if shared_buckets
    std::vector<std::byte> owned;   // ... or this
    reducer::DeviceMemory on_device;  // ... or this, for a device Bucket
    int device = -1;
    std::span<std::byte> data;      // device memory if device >= 0: never dereference
    std::vector<std::byte> scratch;  // for comm hooks (BucketContext::scratch)
    reducer::DeviceMemory device_scratch;  // ... (BucketContext::device_scratch)
    size_t device_scratch_bytes = 0;
    size_t elements = 0;
    DataType dtype = DataType::Float32;
    size_t shard_offset = 0, shard_count = 0;  // this rank's shard
    std::vector<Reducer::ShardPiece> pieces;   // sharded mode
    std::vector<BucketContext::Tensor> tensors;  // for comm hooks
    // Per step:
    std::atomic<size_t> pending{0};  // gradients not yet ready
    Work work;                       // from the comm hook
    std::exception_ptr launch_error;
    StepStats::TimePoint launched_at{}, done_at{};
    StepStats::TimePoint ready_at{};  // its last gradient arrived (timeline)
  };

  std::byte* slot(size_t i);  // gradient i's place in its Bucket
  std::string where() const;  // "rank 1: Reducer step 3"
  std::string name_of(size_t i) const;
  std::string describe_bucket(size_t b) const;
  void check_index(size_t i, const char* what) const;
  void claim(size_t i, uint8_t state);  // unmarked -> state, or throw

  void allocate(const BucketPlan& plan);
  void reset_step();
  void gradient_done(size_t i);
  void launch_in_order(size_t completed_bucket);
  void launch(size_t b);
  void wait_launched_quietly();
  [[noreturn]] void raise_unmarked(const std::vector<size_t>& unmarked);
  void write_back(bool full_results, void* stream);
  // dst = src (bytes) for gradient memory on `device`: memcpy, or an
  // asynchronous copy on `stream` for device memory.
  void copy_bytes(int device, void* dst, const void* src, size_t bytes, void* stream);
  bool rebuild(void* stream);

  Communicator& comm_;
  const int rank_, world_;
  ReducerOptions options_;
  CommHook hook_;
  std::vector<Gradient> gradients_;
  std::vector<GradientSpec> specs_;

  // Streams and events of device Buckets (Note [device Buckets]); null if
  // every gradient is in host memory. Declared before the Buckets so it
  // outlives their device memory.
  std::unique_ptr<reducer::DeviceBuckets> device_;

  BucketPlan plan_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  // The Buckets before a rebuild, kept until the next step ends so a stale
  // bucket view (the adapter has not re-fetched yet) never dangles.
  std::vector<std::unique_ptr<Bucket>> retired_;
  uint64_t plan_generation_ = 0;
  bool rebuilt_ = false;

  // Launch state (Note [in-order launch]); guarded by mu_.
  std::mutex mu_;
  InOrderLaunch order_;  // guarded by mu_

  // Per step, written by mark_ready threads.
  std::vector<size_t> ready_order_;  // gradient indices by ready position
  std::atomic<size_t> ready_count_{0};
  std::atomic<int64_t> first_ready_ns_{0};  // steady_clock ticks; 0 = none yet

  std::atomic<int> no_sync_depth_{0};
  uint64_t micro_step_ = 0;  // backward passes, for sync_every_k_steps
  uint64_t step_ = 0;        // synchronised steps completed
  StepStats last_stats_;
  // Last member: destroyed first, it reads gradients_ from its thread.
  std::unique_ptr<StallInspector> stall_;
};

}  // namespace gradwire
