// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The ShardedEngine's state. Split over engine.cpp (construction, gradients:
// mark_ready, the in-order launch, finalize), step.cpp (the optimizer step:
// unscaling, clipping, loss scale, casts), parameters.cpp (the parameters'
// exchange: allgathers after a step, stage-3 units) and state.cpp
// (state(), full_state(), load_state()).
//
// Note [bounded gradient buffers]: in stages 2 and 3 a rank keeps only its
// shard of each gradient Bucket, but a Bucket must exist whole while its
// gradients are copied in and while its reduce_scatter reads it. Those
// full-size buffers come from a pool of at most
// ShardedOptions::max_buckets_in_flight: a Bucket takes one when its first
// gradient arrives and gives it back when its reduce_scatter completes
// (a Work::then callback; the reduction writes straight into the
// persistent shard, so nothing is copied out). A Bucket that finds the
// pool empty waits for a launched Bucket's reduction to finish (bounded by
// the communicator's deadline). If no Bucket holding a buffer has been
// launched, waiting could never end (they all wait for gradients this very
// thread has not produced yet, e.g. an order that differs from the plan's),
// so the pool grows by one instead and memory() counts it: the bound holds
// whenever gradients arrive in about the planned order, and the rare
// excess is visible rather than a deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/quantized_layout.h"
#include "gradwire/sharded.h"
#include "reducer/in_order.h"

namespace gradwire {

// Zero-initialised host memory that is returned to the system when freed.
struct HostBuffer {
  std::unique_ptr<std::byte[]> data;
  size_t bytes = 0;
  HostBuffer() = default;
  explicit HostBuffer(size_t n) : data(n ? new std::byte[n]() : nullptr), bytes(n) {}
  std::byte* get() const { return data.get(); }
};

class __attribute__((visibility("hidden"))) ShardedEngine::Impl {
 public:
  Impl(Communicator& comm, std::vector<ShardedParameter> parameters,
       std::shared_ptr<ShardOptimizer> optimizer, ShardedOptions options,
       const std::vector<const void*>& initial);
  ~Impl();

  const ShardPlan& plan() const { return plan_; }
  const ShardedOptions& options() const { return options_; }
  size_t size() const { return params_.size(); }
  const std::vector<ShardedParameter>& parameters() const { return params_; }

  // parameters.cpp
  void* parameter(size_t i);
  void* wait_parameter(size_t i);
  void wait_bucket(size_t b);
  void wait_parameters();
  void prefetch(size_t unit);
  void gather(size_t unit);
  void release(size_t unit);
  bool gathered(size_t unit) const;
  size_t units() const { return units_.size(); }

  // engine.cpp
  void mark_ready(size_t i, const void* grad);
  void mark_unused(size_t i);
  void finalize();
  void* gradient(size_t i);
  bool will_sync() const { return no_sync_depth_.load() == 0; }
  void enter_no_sync();
  void leave_no_sync() { no_sync_depth_.fetch_sub(1); }

  // step.cpp
  bool step();
  bool begin_step();
  ShardView gradient_view(size_t b);
  float* master(size_t b);
  void end_step();
  uint64_t optimizer_steps() const { return steps_; }
  double last_grad_norm() const { return last_norm_; }
  float loss_scale() const { return scale_; }
  uint64_t skipped_steps() const { return skipped_; }

  // state.cpp
  ShardedState state();
  ShardedState full_state();
  void load_state(const std::vector<const ShardedState*>& sources);

  ShardedMemory memory() const;

 private:
  enum : uint8_t { kUnmarked = 0, kReady = 1, kUnused = 2 };
  enum class UnitState : uint8_t { Released, InFlight, Gathered };
  enum class Phase : uint8_t { Idle, Reduced, Stepping };

  struct Bucket {
    const ShardedBucket* planned = nullptr;
    DataType dtype = DataType::Float32;   // the parameters'
    DataType rdtype = DataType::Float32;  // the reduction's
    size_t shard_offset = 0;              // rank * shard
    // Parameters: the full Bucket (stages 1, 2) or this rank's shard (3).
    HostBuffer params;
    HostBuffer gathered;  // stage 3, while the unit is gathered
    Work exchange;        // stages 1, 2: the allgather after a step; 3: the gather
    // fp32 master shard: its own, or the parameters' own shard (float32).
    HostBuffer master_memory;
    float* master = nullptr;
    std::vector<std::vector<float>> state;  // the optimizer's arrays
    // Gradients: the full Bucket (stage 1) or this rank's shard (2, 3).
    HostBuffer grads;
    std::byte* filling = nullptr;  // stages 2, 3: the pool buffer being filled
    size_t pool_slot = 0;
    // Gradient compression (compressed.cpp): the quantized exchange's
    // layout over the padded Bucket, this rank's error-feedback buffer
    // (padded float32; empty without error feedback) and, stage 1 only,
    // the send and receive wire buffers (stages 2, 3: in the pool buffer).
    collectives::QuantizedLayout quant;
    std::vector<float> error;
    HostBuffer wire;
    // Parameter compression, stage 3 (Note [compressed parameter
    // allgather]): the gather's layout over the padded Bucket and, while
    // the unit is gathered or in flight, its wire buffer (world segments).
    collectives::QuantizedLayout param_quant;
    HostBuffer param_wire;
    // Per step:
    std::atomic<size_t> pending{0};
    Work reduction;
    std::exception_ptr launch_error;
  };

  struct Unit {
    UnitState state = UnitState::Released;
  };

  std::string where() const;  // "rank 1: ShardedEngine (stage 2) step 3"
  std::string name_of(size_t i) const;
  std::string describe_bucket(size_t b) const;
  void check_index(size_t i, const char* what) const;
  Bucket& bucket_of(size_t i) { return *buckets_[plan_.location[i].bucket]; }

  // engine.cpp
  void check_agreement();
  void allocate();
  void initialise(const std::vector<const void*>& initial);
  void reset_step();
  void claim(size_t i, uint8_t state);
  std::byte* slot(size_t i);  // gradient i's place in its (filling) Bucket
  std::byte* acquire_filling(size_t b);
  void gradient_done(size_t i);
  void launch_in_order(size_t completed);
  void launch(size_t b);
  void wait_reductions_quietly();
  [[noreturn]] void raise_unmarked(const std::vector<size_t>& unmarked);

  // compressed.cpp (Note [compressed gradient reduce-scatter])
  void check_compression(const std::vector<uint64_t>& all, size_t stride, size_t first) const;
  void allocate_compression(size_t max_shard);
  bool compressing() const;
  // The Bucket's reduction as one composite operation; full: its gradients
  // (stage 1: grads; 2, 3: the pool buffer, whose wire part follows).
  Work launch_compressed(size_t b, std::byte* full);
  void reset_error_feedback();
  uint64_t error_feedback_layout() const;
  void save_error_feedback(ShardedState& s) const;
  void load_error_feedback(const std::vector<const ShardedState*>& sources);
  size_t compression_bytes() const;
  // Parameter compression (Note [compressed parameter allgather]): the
  // options' checks (values at [first, first + 4): kind, block_size,
  // start_step, stage), the layouts, and one Bucket's gather into
  // bk.gathered (a Work; invalid where nothing was communicated).
  void check_parameter_compression(const std::vector<uint64_t>& all, size_t stride,
                                   size_t first) const;
  bool compressing_parameters() const;
  Work gather_compressed(size_t b);

  // parameters.cpp
  std::byte* own_params(size_t b);  // this rank's shard of the parameters, P dtype
  void start_exchange();            // stages 1, 2: after a step
  void wait_exchanges_quietly();
  void release_all_units();
  void note_gathered(ptrdiff_t bytes);

  // step.cpp
  void cast_master_to_params(size_t b);
  void update_loss_scale(bool overflow);

  Communicator& comm_;
  const int rank_, world_;
  ShardedOptions options_;
  std::shared_ptr<ShardOptimizer> optimizer_;
  std::vector<std::string> state_names_;
  std::vector<ShardedParameter> params_;
  ShardPlan plan_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<Unit> units_;

  // Gradient state per parameter, per step.
  std::unique_ptr<std::atomic<uint8_t>[]> marks_;
  std::atomic<size_t> marked_{0};
  std::atomic<int> no_sync_depth_{0};

  // Note [in-order launch] in src/reducer/reducer_impl.h, the same rule.
  std::mutex launch_mu_;
  InOrderLaunch order_;  // guarded by launch_mu_

  // Note [bounded gradient buffers]; guarded by pool_mu_.
  mutable std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<HostBuffer> pool_;
  std::vector<size_t> free_slots_;
  size_t in_reduction_ = 0;  // pool buffers held by launched Buckets
  size_t pool_buffer_bytes_ = 0;
  // Stages 2, 3 with compression: a pool buffer is [gradients: wire_at_
  // bytes][send wire][receive wire], each wire wire_bytes_ long.
  size_t wire_at_ = 0, wire_bytes_ = 0;
  // The quantized reduction's float32 sums: touched only inside the
  // composite operations, which run one at a time on the communicator's
  // engine (Note [composite operations]), so one serves every Bucket.
  std::vector<float> quant_acc_;

  // Step state.
  Phase phase_ = Phase::Idle;
  bool skip_ = false;
  float factor_ = 1.0f;  // applied to the gradients: 1 / loss scale x clip coefficient
  std::vector<float> scratch_;
  uint64_t steps_ = 0;
  uint64_t skipped_ = 0;
  uint64_t syncs_ = 0;  // synchronised backward passes
  double last_norm_ = 0.0 / 0.0;
  float scale_ = 1.0f;
  uint64_t good_steps_ = 0;

  size_t gathered_bytes_ = 0, peak_gathered_ = 0;
};

}  // namespace gradwire
