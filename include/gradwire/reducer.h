// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The gradient-bucketing engine (framework-agnostic; the libtorch adapter
// drives it from autograd hooks). Two halves:
//
//  * plan_buckets: a pure function from gradient sizes, dtypes and devices to
//    Buckets (flat buffers of gradients). Testable with no ranks at all.
//  * Reducer: executes a plan each step. mark_ready(i) copies gradient i into
//    its Bucket, already divided by the world size; a complete Bucket is
//    launched at once (strictly in bucket order, Note [in-order launch]) as
//    an allreduce of sums (or a reduce_scatter in sharded mode) through a
//    comm hook; finalize() waits for every Bucket and writes the averages
//    back.
#pragma once

#include "gradwire/export.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/device_stream.h"
#include "gradwire/types.h"
#include "gradwire/work.h"

namespace gradwire {

// ---------------------------------------------------------------- planning

// What the planner needs to know about one gradient.
struct GRADWIRE_API GradientSpec {
  size_t elements = 0;
  DataType dtype = DataType::Float32;
  Device device;  // host memory, or a CUDA device
};

struct GRADWIRE_API BucketCaps {
  // c10d's defaults: a small first Bucket so communication starts early in
  // backward, then large ones so per-collective latency is amortised. Each
  // (dtype, device) group starts with its own first Bucket.
  size_t first_bucket_bytes = size_t(1) << 20;
  size_t bucket_bytes = size_t(25) << 20;
};

struct GRADWIRE_API PlannedBucket {
  std::vector<size_t> gradients;  // gradient indices, in fill order
  std::vector<size_t> offsets;    // element offset of each in the flat Bucket
  size_t elements = 0;            // total elements of the Bucket
  DataType dtype = DataType::Float32;
  Device device;
};

struct GRADWIRE_API BucketPlan {
  struct Location {
    size_t bucket = 0;
    size_t offset = 0;  // elements into the Bucket
  };
  std::vector<PlannedBucket> buckets;  // in launch order
  std::vector<Location> location;      // by gradient index: the inverse map

  bool operator==(const BucketPlan& other) const;
};

// Assigns gradients to Buckets. `order` lists every gradient index once, in
// the order the gradients are expected to become ready; empty means 0..n-1
// (i.e. `gradients` is already given in reverse registration order, the
// order autograd usually produces). Rules:
//  * a Bucket holds one dtype and one device; each (dtype, device) group
//    fills its own open Bucket, so interleaved groups do not fragment;
//  * a Bucket never exceeds its cap (first_bucket_bytes for the first
//    Bucket of a group, bucket_bytes after), except that a gradient larger
//    than the cap gets a Bucket of its own (c10d instead lets the gradient
//    that crosses the cap overflow the Bucket; we keep caps as upper bounds);
//  * gradients keep `order` inside a Bucket, and Buckets are ordered by the
//    position of their last gradient in `order`, i.e. by when they are
//    expected to complete. (c10d orders by the first gradient; with several
//    groups that makes a Bucket which opened early but completes late block
//    the in-order launch of the Buckets behind it.)
// Throws InvalidArgument if `order` is not a permutation of 0..n-1.
GRADWIRE_API BucketPlan plan_buckets(const std::vector<GradientSpec>& gradients, const BucketCaps& caps = {},
                        const std::vector<size_t>& order = {});

// The order for a rebuilt plan: `observed` (gradient indices in the order
// they became ready, each at most once, possibly missing some) followed by
// the missing ones in reverse index order (the default autograd order).
GRADWIRE_API std::vector<size_t> complete_ready_order(const std::vector<size_t>& observed, size_t n);

// ---------------------------------------------------------------- comm hooks

// Everything a comm hook needs to reduce one Bucket. `buffer` holds `count`
// elements of `dtype`: this rank's gradients, already divided by the world
// size, so a sum over ranks yields the average. The hook must start the
// reduction and return a Work that completes only once the reduced values
// are in `result` (result_count elements: the whole Bucket, or this rank's
// shard in sharded mode). Post-processing (e.g. widening 16-bit values back)
// belongs in a Work::then callback, which runs before the Work reads as done.
// Hooks run on whichever thread launches the Bucket (a mark_ready caller or
// finalize), one at a time, in bucket order; they must not call back into the
// Reducer. Buffers stay valid until the returned Work completes.
class GRADWIRE_API BucketContext {
 public:
  Communicator& comm;
  const uint64_t step;   // synchronised step (0-based)
  const size_t index;    // Bucket index in the plan
  const DataType dtype;
  const size_t count;    // elements in the Bucket
  void* const buffer;
  void* const result;        // buffer + result_offset elements
  const size_t result_offset;
  const size_t result_count;
  const bool sharded;
  const std::vector<size_t>& gradients;  // gradient indices in this Bucket

  // Where each gradient of the Bucket lies (same order as `gradients`), and
  // its matrix view: rows = shape[0] (elements for a 1-D tensor), cols =
  // elements / rows.
  struct Tensor {
    size_t offset = 0;  // elements into the Bucket
    size_t elements = 0;
    size_t rows = 0, cols = 0;
  };
  const std::vector<Tensor>& tensors;

  // Where the Bucket lives: host memory, or a CUDA device (Note [device
  // Buckets] in src/reducer/device.h). For a device Bucket, `buffer` and
  // `result` are device pointers, the hook runs under
  // DeviceStreamScope(stream), and `stream` is where the Bucket's contents
  // become ready: device work of the hook goes there.
  const Device device;
  const Stream stream;

  // Host memory that belongs to this Bucket, kept across steps (grown as
  // needed), valid until the Work completes: where compression hooks put
  // 16-bit data.
  void* scratch(size_t bytes);
  // The same in the device memory of a device Bucket (InvalidArgument for
  // a host Bucket).
  void* device_scratch(size_t bytes);

  // What the Reducer (or an adapter running a hook on buckets of its own)
  // fills in, by name: BucketContext({.comm = &comm, .count = n, ...}).
  struct Args {
    Communicator* comm = nullptr;
    uint64_t step = 0;
    size_t index = 0;
    DataType dtype = DataType::Float32;
    size_t count = 0;
    void* buffer = nullptr;
    size_t result_offset = 0;  // the result: the whole Bucket (0, count) or the shard
    size_t result_count = 0;
    bool sharded = false;
    const std::vector<size_t>* gradients = nullptr;  // required
    const std::vector<Tensor>* tensors = nullptr;    // required
    std::vector<std::byte>* scratch = nullptr;       // backs scratch(); required
    Device device;
    Stream stream;
    std::function<void*(size_t)> device_scratch;  // backs device_scratch() on a device
  };
  // InvalidArgument if a required pointer is null.
  explicit BucketContext(const Args& args);

 private:
  std::vector<std::byte>* scratch_;
  std::function<void*(size_t)> device_scratch_;
};

using CommHook = std::function<Work(BucketContext&)>;

// allreduce(sum) in place, or reduce_scatter(sum) into the shard in place.
// What the Reducer does when ReducerOptions::comm_hook is empty. Host and
// device Buckets.
GRADWIRE_API CommHook allreduce_hook();
// Float32 Buckets travel as float16 / bfloat16: cast into scratch, reduce in
// 16-bit, widen into `result`. Other dtypes fall back to allreduce_hook().
// On a device Bucket the casts are CUDA kernels with the CPU casts' bits
// (kernels/cuda/cast.cu): the narrowing on the Bucket's stream, the widening
// once the collective is done, on a private stream that the Work waits for.
// Error: 16-bit rounding of the pre-divided values plus n-1 roundings of the
// partial sums (every reduction step computes in float32 and rounds once), so
// about n * 2^-11 (fp16) or n * 2^-8 (bf16) relative to the largest
// magnitude; fp16 flushes values below ~6e-8 (after division by the world
// size) to zero and saturates above 65504.
GRADWIRE_API CommHook fp16_compress_hook();
GRADWIRE_API CommHook bf16_compress_hook();

// ---------------------------------------------------------------- the Reducer

struct GRADWIRE_API GradientInfo {
  size_t elements = 0;
  DataType dtype = DataType::Float32;  // a floating dtype; integers: InvalidArgument
  // Host memory, or a CUDA device (Note [device Buckets] in
  // src/reducer/device.h; all device gradients of a Reducer on one device).
  Device device;
  std::string name;                    // used in error messages
  // The tensor's shape (product == elements), for hooks that treat
  // gradients as matrices (PowerSGD views one as shape[0] x the rest).
  // Empty: a 1-D tensor of `elements`.
  std::vector<size_t> shape;
};

struct GRADWIRE_API ReducerOptions {
  BucketCaps caps;
  // After the first synchronised step, re-plan the Buckets from the order in
  // which gradients became ready on rank 0 (broadcast, so every rank agrees).
  bool rebuild_buckets = true;
  // Gradients live in the Buckets: bucket_view(i) is where the framework
  // should store gradient i, so mark_ready(i) scales in place (no copy) and
  // finalize() writes nothing back.
  bool gradient_as_bucket_view = false;
  // At finalize(), gradients that were not marked ready this step count as
  // zeros (on this rank) so every Bucket still launches. Without it, such
  // gradients are an error that names them.
  bool find_unused_parameters = false;
  // reduce_scatter instead of allreduce: after finalize() this rank holds only
  // its shard of each Bucket (see Reducer::shard).
  bool sharded = false;
  // Buckets come from Communicator::allocate_shared(), so when every rank
  // shares one host the default hook's allreduce / reduce_scatter runs the
  // direct path (Note [the direct path] in src/shm/direct.cpp); on
  // several hosts the allocation is private memory and nothing changes.
  bool shared_buckets = true;
  // Synchronise only every k-th backward pass (1 = every one); the passes in
  // between behave as under no_sync().
  int sync_every_k_steps = 1;
  // Empty: allreduce_hook().
  CommHook comm_hook;
  // Stall inspector (Note [stall inspector] in src/reducer/stall.h): once a
  // step has waited this long for a Bucket (not launched on some rank, or
  // not complete), log which ranks miss which Bucket and the parameters it
  // holds, again every stall_warn; after stall_shutdown, abort the job with
  // that message. 0 turns either off. GRADWIRE_STALL_WARN_S and
  // GRADWIRE_STALL_SHUTDOWN_S (seconds) override them.
  std::chrono::milliseconds stall_warn{std::chrono::seconds(60)};
  std::chrono::milliseconds stall_shutdown{std::chrono::minutes(30)};
};

// Timestamps of one synchronised step, for overlap measurements.
struct GRADWIRE_API StepStats {
  using TimePoint = std::chrono::steady_clock::time_point;
  uint64_t step = 0;
  TimePoint first_ready{};     // first mark_ready (or finalize, if none)
  TimePoint finalize_start{};
  TimePoint finalize_end{};
  std::vector<TimePoint> bucket_launch;  // per Bucket
  std::vector<TimePoint> bucket_done;    // per Bucket: its Work completed
  std::vector<size_t> bucket_bytes;

  // Total time during which some Bucket was in flight (the union of the
  // [launch, done] intervals), and the part of it before finalize_start,
  // i.e. hidden behind the rest of backward.
  std::chrono::duration<double> communication_time() const;
  std::chrono::duration<double> hidden_time() const;
  // hidden_time / communication_time (1 when there was no communication).
  double hidden_fraction() const;
};

// Threading contract:
//  * mark_ready / mark_unused may run concurrently with each other from any
//    threads (autograd worker threads), for distinct gradients.
//  * Everything else (finalize, no_sync, set_gradient_buffer, bucket_view,
//    shard, stats, destruction) must not overlap a mark_ready: the caller
//    orders them, as autograd does by finishing backward before the engine's
//    final callback runs.
//  * Every rank must use the same gradient list and options, and mark the
//    same set of gradients each step (or use find_unused_parameters).
//  * The Reducer must be destroyed before its Communicator; the destructor
//    waits (within the deadline) for Buckets still in flight.
class GRADWIRE_API Reducer {
 public:
  // Not collective: nothing is communicated until the first launch.
  // `gradients` in registration order (model.parameters()); the initial plan
  // fills Buckets in reverse registration order.
  Reducer(Communicator& comm, std::vector<GradientInfo> gradients, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Where finalize() writes gradient i's average (unless views are in use),
  // and what mark_ready(i) reads; kept across steps. nullptr unregisters.
  void set_gradient_buffer(size_t i, void* grad);

  // Gradient i is final for this backward pass. The first form reads `grad`
  // now and writes the average back to it at finalize() (this step only;
  // hence not a const pointer);
  // the second reads the registered gradient buffer, or the bucket view.
  // Copies (or, when `grad` is the bucket view, scales in place) the
  // gradient divided by the world size into its Bucket, and launches every
  // Bucket that became launchable. Does nothing while no_sync() is active or
  // on passes skipped by sync_every_k_steps.
  void mark_ready(size_t i, void* grad);
  void mark_ready(size_t i);
  // For device gradients: `stream` (Stream{}: the legacy default stream) is
  // the stream `grad` was produced on, e.g. autograd's current stream in the
  // hook; the copy into the Bucket is enqueued there and the host does not
  // wait for it. grad == nullptr reads the registered buffer or the bucket
  // view, like mark_ready(i). Host gradients ignore `stream`.
  void mark_ready(size_t i, void* grad, Stream stream);
  // Gradient i got no gradient on this rank this step: it contributes zeros
  // (requires find_unused_parameters). finalize() does this for every
  // gradient left unmarked; an adapter that finds unused parameters early
  // (after forward) should call it then, so their Buckets need not wait for
  // finalize(). Not for a gradient that holds values accumulated under
  // no_sync(): mark_ready it instead, or they are lost.
  void mark_unused(size_t i);

  // Ends the backward pass: treats unmarked gradients as described above,
  // waits for every Bucket (each bounded by the communicator's deadline),
  // writes the averages back, and on the first synchronised step rebuilds
  // the plan. Throws gradwire::Error naming rank, step, Bucket and
  // parameters. A no-op on passes that do not synchronise.
  void finalize();
  // For device Buckets: the write-back of the averages is enqueued on
  // `stream` (Stream{}: the legacy default stream), so work later enqueued
  // there (the optimizer) reads finished gradients. finalize() is
  // finalize(Stream{}).
  void finalize(Stream stream);

  // RAII: while alive, backward passes accumulate locally (mark_ready does
  // nothing, finalize() returns at once); the next synchronised step reduces
  // the accumulated gradients. Must be created between steps.
  class NoSync {
   public:
    explicit NoSync(Reducer& r);
    ~NoSync();
    NoSync(NoSync&& other) noexcept;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    Reducer* reducer_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  // True if the current (or next) backward pass will communicate.
  bool will_sync() const;

  // Where gradient i lives in its Bucket (its result after finalize()). With
  // gradient_as_bucket_view the framework should make gradient i alias it.
  // Valid until the plan changes: a rebuild at the end of the first
  // synchronised step moves every Bucket, so the adapter must fetch the views
  // again after step 1 (plan_generation() tells it when; values are carried
  // over to the new location), before the next backward pass. The old memory
  // stays valid until the next synchronised finalize(), so the optimizer step
  // may still read through stale views; writes through them are lost.
  void* bucket_view(size_t i);
  uint64_t plan_generation() const;
  const BucketPlan& plan() const;

  // Checkpointing (include/gradwire/checkpoint.h): the plan (the rebuilt
  // Bucket order decides which elements are summed in which collective, so
  // it must survive a restart for a resumed run to be bit-for-bit), whether
  // the one-time rebuild happened, and the step counters. Between steps
  // only. load_state() checks that the gradient list is the same
  // (InvalidArgument otherwise) and moves the Buckets if the plan differs,
  // like a rebuild: fetch the bucket views again when plan_generation()
  // changed. Gradient values are not part of it (the optimizer owns them).
  std::string save_state() const;
  void load_state(std::string_view state);

  // Sharded mode: this rank's part of Bucket b after finalize(), in the
  // Bucket's own memory. `pieces` says which parts of which gradients it
  // covers. finalize() writes these pieces back to the gradients; their
  // other elements are unspecified.
  struct ShardPiece {
    size_t gradient;      // gradient index
    size_t offset;        // elements into the gradient
    size_t shard_offset;  // elements into the shard
    size_t count;
  };
  struct Shard {
    size_t bucket;
    size_t offset;  // elements into the Bucket (shard_offset(elements, size, rank))
    size_t count;   // shard_count(elements, size, rank)
    DataType dtype;
    void* data;
    std::vector<ShardPiece> pieces;
  };
  Shard shard(size_t bucket);

  // Synchronised steps completed so far, and the last one's timestamps.
  uint64_t step() const;
  const StepStats& last_step_stats() const;
  size_t size() const;  // number of gradients

 private:
  class Impl;  // src/reducer/reducer_impl.h
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradwire
