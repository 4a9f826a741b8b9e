// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Reducer: construction, mark_ready and the in-order launch of Buckets
// (Note [in-order launch] in reducer_impl.h). The end of a step is in
// finalize.cpp.
#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "base/raise.h"
#include "base/logging.h"
#include "gradwire/device_stream.h"
#include "reducer/reducer_impl.h"
#include "reducer/scale.h"

namespace gradwire {

// ---------------------------------------------------------------- Impl

Reducer::Impl::Impl(Communicator& comm, std::vector<GradientInfo> gradients,
                     ReducerOptions options)
    : comm_(comm), rank_(comm.rank()), world_(comm.size()), options_(std::move(options)),
      gradients_(gradients.size()) {
  hook_ = options_.comm_hook ? options_.comm_hook : allreduce_hook();
  apply_stall_env(options_);
  stall_ = std::make_unique<StallInspector>(
      rank_, options_.stall_warn, options_.stall_shutdown,
      [this](size_t i) { return gradients_[i].state.load() != kUnmarked; });
  if (options_.sync_every_k_steps < 1) {
    raise(ErrorCode::InvalidArgument, "rank {}: Reducer: sync_every_k_steps must be >= 1, not {}",
          rank_, options_.sync_every_k_steps);
  }
  specs_.reserve(gradients.size());
  for (size_t i = 0; i < gradients.size(); ++i) {
    GradientInfo& g = gradients[i];
    const std::string name = g.name.empty() ? fmt::format("#{}", i) : g.name;
    if (!is_floating(g.dtype)) {
      // The averaging is a division folded into the copy; integer
      // gradients would silently truncate, so refuse them.
      raise(ErrorCode::InvalidArgument, "rank {}: Reducer: parameter {} has a {} gradient; only "
            "floating gradients (float32, float64, float16, bfloat16) can be averaged",
            rank_, name, to_string(g.dtype));
    }
    if (g.device.is_cuda()) {
      if (!device_) {
        device_ = std::make_unique<reducer::DeviceBuckets>(
            g.device.index(), gradients.size(), fmt::format("rank {}: Reducer", rank_), name);
      } else if (device_->device() != g.device.index()) {
        raise(ErrorCode::InvalidArgument, "rank {}: Reducer: parameter {} is on CUDA device {} "
              "but earlier ones are on device {}; one Reducer (like one communicator) serves one "
              "device", rank_, name, g.device.index(), device_->device());
      }
    }
    if (!g.shape.empty()) {
      size_t product = 1;
      for (size_t d : g.shape) product *= d;
      if (product != g.elements) {
        raise(ErrorCode::InvalidArgument, "rank {}: Reducer: parameter {} has shape [{}] ({} "
              "elements) but elements = {}", rank_, name, fmt::join(g.shape, ", "), product,
              g.elements);
      }
    }
    specs_.push_back({g.elements, g.dtype, g.device});
    gradients_[i].info = std::move(g);
  }
  // Registration order in, reverse registration order for the first plan:
  // autograd produces the last layer's gradients first.
  std::vector<size_t> order(specs_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = order.size() - 1 - k;
  allocate(plan_buckets(specs_, options_.caps, order));
  ready_order_.resize(gradients_.size());
  reset_step();
}

Reducer::Impl::~Impl() {
  stall_.reset();
  // A step abandoned mid-way (an exception between mark_ready and finalize)
  // may still have collectives writing into the Buckets.
  wait_launched_quietly();
}

void Reducer::Impl::allocate(const BucketPlan& plan) {
  plan_ = plan;
  buckets_.clear();
  for (const PlannedBucket& pb : plan_.buckets) {
    auto b = std::make_unique<Bucket>();
    b->elements = pb.elements;
    b->dtype = pb.dtype;
    const size_t bytes = pb.elements * element_size(pb.dtype);
    b->device = pb.device.index();
    if (pb.device.is_cuda()) {
      b->on_device = device_->allocate(bytes);
      b->data = {static_cast<std::byte*>(b->on_device.get()), bytes};
    } else if (options_.shared_buckets) {
      b->memory = comm_.allocate_shared(bytes);  // collective: every rank allocates the same plan
      b->data = {b->memory.as<std::byte>(), bytes};
    } else {
      b->owned.resize(bytes);
      b->data = b->owned;
    }
    b->shard_offset = shard_offset(pb.elements, world_, rank_);
    b->shard_count = shard_count(pb.elements, world_, rank_);
    // The parts of gradients that fall into this rank's shard.
    const size_t lo = b->shard_offset, hi = lo + b->shard_count;
    for (size_t k = 0; k < pb.gradients.size(); ++k) {
      const size_t g = pb.gradients[k];
      const size_t start = pb.offsets[k], end = start + gradients_[g].info.elements;
      const size_t from = std::max(start, lo), to = std::min(end, hi);
      if (from < to) b->pieces.push_back({g, from - start, from - lo, to - from});
      const GradientInfo& info = gradients_[g].info;
      const size_t rows = info.shape.empty() ? info.elements : info.shape[0];
      b->tensors.push_back({start, info.elements, rows, rows ? info.elements / rows : 0});
    }
    buckets_.push_back(std::move(b));
  }
  order_.reset(buckets_.size());
  std::vector<StallInspector::Bucket> named(plan_.buckets.size());
  for (size_t b = 0; b < named.size(); ++b) {
    named[b].description = describe_bucket(b);
    named[b].gradients = plan_.buckets[b].gradients;
    for (size_t g : named[b].gradients) named[b].names.push_back(name_of(g));
  }
  stall_->set_plan(std::move(named));
}

void Reducer::Impl::reset_step() {
  for (auto& g : gradients_) {
    g.state.store(kUnmarked, std::memory_order_relaxed);
    g.step_dest = nullptr;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    bk.pending.store(plan_.buckets[b].gradients.size(), std::memory_order_relaxed);
    bk.work = Work();
    bk.launch_error = nullptr;
  }
  std::lock_guard<std::mutex> lk(mu_);
  order_.reset(buckets_.size());
  ready_count_.store(0);
  first_ready_ns_.store(0);
  stall_->step_ended();
}

std::byte* Reducer::Impl::slot(size_t i) {
  const auto& loc = plan_.location[i];
  Bucket& b = *buckets_[loc.bucket];
  return b.data.data() + loc.offset * element_size(b.dtype);
}

std::string Reducer::Impl::where() const {
  return fmt::format("rank {}: Reducer step {}", rank_, step_);
}

std::string Reducer::Impl::name_of(size_t i) const {
  const std::string& n = gradients_[i].info.name;
  return n.empty() ? fmt::format("#{}", i) : n;
}

std::string Reducer::Impl::describe_bucket(size_t b) const {
  const PlannedBucket& pb = plan_.buckets[b];
  std::string names;
  const size_t shown = std::min<size_t>(pb.gradients.size(), 8);
  for (size_t k = 0; k < shown; ++k) names += (k ? ", " : "") + name_of(pb.gradients[k]);
  if (shown < pb.gradients.size()) {
    names += fmt::format(" and {} more", pb.gradients.size() - shown);
  }
  return fmt::format("bucket {} ({} x {}: {})", b, pb.elements, to_string(pb.dtype), names);
}

void Reducer::Impl::check_index(size_t i, const char* what) const {
  if (i >= gradients_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: {}({}) but there are only {} gradients", where(), what,
          i, gradients_.size());
  }
}

void Reducer::Impl::set_gradient_buffer(size_t i, void* grad) {
  check_index(i, "set_gradient_buffer");
  gradients_[i].buffer = grad;
}

void* Reducer::Impl::bucket_view(size_t i) {
  check_index(i, "bucket_view");
  return slot(i);
}

bool Reducer::Impl::will_sync() const {
  const auto k = uint64_t(options_.sync_every_k_steps);
  return no_sync_depth_.load() == 0 && micro_step_ % k == k - 1;
}

void Reducer::Impl::enter_no_sync() {
  if (ready_count_.load() != 0) {
    raise(ErrorCode::InvalidArgument, "{}: no_sync() entered in the middle of a step ({} "
          "gradients already marked ready); enter it before backward", where(),
          ready_count_.load());
  }
  no_sync_depth_.fetch_add(1);
}

// Records gradient i as ready (or unused) exactly once per step.
void Reducer::Impl::claim(size_t i, uint8_t state) {
  uint8_t expected = kUnmarked;
  if (!gradients_[i].state.compare_exchange_strong(expected, state)) {
    raise(ErrorCode::InvalidArgument, "{}: parameter {} was marked {} and then {} in the same "
          "step; each gradient becomes ready once per backward pass (call finalize() between "
          "steps)", where(), name_of(i), expected == kReady ? "ready" : "unused",
          state == kReady ? "ready" : "unused");
  }
  // The step's first timestamp is read before the claim: read after it, a
  // thread preempted between the two could stamp "first ready" after
  // another thread had completed a Bucket and launched it (StepStats said a
  // Bucket launched before any gradient was ready; seen under ASan). Only a
  // thread that may be first pays for the clock.
  const int64_t now = ready_count_.load() == 0
                          ? StepStats::TimePoint::clock::now().time_since_epoch().count()
                          : 0;
  const size_t pos = ready_count_.fetch_add(1);
  ready_order_[pos] = i;
  if (pos == 0) {
    first_ready_ns_.store(now);
    stall_->step_started(step_);
  }
}

void Reducer::Impl::mark_ready(size_t i, void* grad, bool explicit_pointer, void* stream) {
  check_index(i, "mark_ready");
  if (!will_sync()) return;  // the framework accumulates locally
  Gradient& g = gradients_[i];
  std::byte* dst = slot(i);
  const void* src = grad;
  if (!explicit_pointer) {
    src = g.buffer ? g.buffer : (options_.gradient_as_bucket_view ? dst : nullptr);
  }
  if (src == nullptr && g.info.elements > 0) {
    raise(ErrorCode::InvalidArgument, "{}: mark_ready({}) for parameter {} has no gradient: "
          "pass a pointer, call set_gradient_buffer, or enable gradient_as_bucket_view",
          where(), i, name_of(i));
  }
  claim(i, kReady);
  if (explicit_pointer) g.step_dest = grad;
  // The averaging folded into the copy; in place when the framework's
  // gradient already is the bucket view.
  if (g.info.device.is_cuda()) {
    device_->copy_in(i, dst, src, g.info.elements, g.info.dtype, world_, stream);
  } else {
    reducer::copy_divided(dst, src, g.info.elements, g.info.dtype, world_);
  }
  gradient_done(i);
}

void Reducer::Impl::mark_unused(size_t i) {
  check_index(i, "mark_unused");
  if (!options_.find_unused_parameters) {
    raise(ErrorCode::InvalidArgument, "{}: mark_unused({}) for parameter {} needs "
          "find_unused_parameters=true", where(), i, name_of(i));
  }
  if (!will_sync()) return;
  claim(i, kUnused);
  // Zeros: this rank contributes nothing; ranks that used it still do.
  const size_t bytes = gradients_[i].info.elements * element_size(gradients_[i].info.dtype);
  if (gradients_[i].info.device.is_cuda()) {
    device_->zero(i, slot(i), bytes);
  } else {
    std::memset(slot(i), 0, bytes);
  }
  gradient_done(i);
}

void Reducer::Impl::gradient_done(size_t i) {
  const size_t b = plan_.location[i].bucket;
  // acq_rel: the thread that sees the count reach zero launches the Bucket,
  // so it must see every other thread's copy into it.
  if (buckets_[b]->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    buckets_[b]->ready_at = StepStats::TimePoint::clock::now();
    launch_in_order(b);
  }
}

void Reducer::Impl::launch_in_order(size_t completed_bucket) {
  std::unique_lock<std::mutex> lk(mu_);
  order_.complete(lk, completed_bucket, [this](size_t b) { launch(b); });
}

// Never throws: a failure is kept for finalize(), which reports it with its
// step and Bucket. (Throwing here would hit whichever autograd thread happened
// to be the launcher, for some other gradient's Bucket.)
void Reducer::Impl::launch(size_t b) {
  Bucket& bk = *buckets_[b];
  bk.launched_at = StepStats::TimePoint::clock::now();
  try {
    // A device Bucket's collective starts once its gradients' copies are
    // done (Note [device Buckets]).
    const Stream stream(bk.device >= 0 ? device_->bucket_ready(plan_.buckets[b].gradients)
                                       : nullptr);
    DeviceStreamScope scope(stream);
    BucketContext::Args args;
    args.comm = &comm_;
    args.step = step_;
    args.index = b;
    args.dtype = bk.dtype;
    args.count = bk.elements;
    args.buffer = bk.data.data();
    args.result_offset = options_.sharded ? bk.shard_offset : 0;
    args.result_count = options_.sharded ? bk.shard_count : bk.elements;
    args.sharded = options_.sharded;
    args.gradients = &plan_.buckets[b].gradients;
    args.tensors = &bk.tensors;
    args.scratch = &bk.scratch;
    args.device = Device::cuda(bk.device);
    args.stream = stream;
    if (bk.device >= 0) {
      args.device_scratch = [this, &bk](size_t bytes) {
        if (bk.device_scratch_bytes < bytes) {  // grows once, on the first step
          bk.device_scratch = device_->allocate(bytes);
          bk.device_scratch_bytes = bytes;
        }
        return bk.device_scratch.get();
      };
    }
    BucketContext ctx(args);
    Work w = hook_(ctx);
    if (!w.valid()) {
      raise(ErrorCode::InvalidArgument, "{}: the comm hook returned an empty Work for {}",
            where(), describe_bucket(b));
    }
    Bucket* p = &bk;
    w.then([p](std::exception_ptr) { p->done_at = StepStats::TimePoint::clock::now(); });
    stall_->launched(b, w);
    bk.work = std::move(w);
  } catch (...) {
    bk.launch_error = std::current_exception();
    bk.done_at = bk.launched_at;
    log().error("{}: launching {} failed; finalize() will report it", where(), describe_bucket(b));
  }
}

void Reducer::Impl::wait_launched_quietly() {
  for (auto& b : buckets_) {
    if (!b->work.valid()) continue;
    try {
      b->work.wait();
    } catch (const std::exception&) {
      // The caller is already reporting an error of its own.
    }
  }
}

Reducer::Shard Reducer::Impl::shard(size_t b) {
  if (!options_.sharded) {
    raise(ErrorCode::InvalidArgument, "{}: shard({}) needs ReducerOptions::sharded", where(), b);
  }
  if (b >= buckets_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: shard({}) but there are {} Buckets", where(), b,
          buckets_.size());
  }
  Bucket& bk = *buckets_[b];
  return {b, bk.shard_offset, bk.shard_count, bk.dtype,
          bk.data.data() + bk.shard_offset * element_size(bk.dtype), bk.pieces};
}

// ---------------------------------------------------------------- Reducer

Reducer::Reducer(Communicator& comm, std::vector<GradientInfo> gradients, ReducerOptions options)
    : impl_(std::make_unique<Impl>(comm, std::move(gradients), std::move(options))) {}
Reducer::~Reducer() = default;

void Reducer::set_gradient_buffer(size_t i, void* grad) { impl_->set_gradient_buffer(i, grad); }
void Reducer::mark_ready(size_t i, void* grad) { impl_->mark_ready(i, grad, true, nullptr); }
void Reducer::mark_ready(size_t i) { impl_->mark_ready(i, nullptr, false, nullptr); }
void Reducer::mark_ready(size_t i, void* grad, Stream stream) {
  impl_->mark_ready(i, grad, grad != nullptr, stream.native());
}
void Reducer::mark_unused(size_t i) { impl_->mark_unused(i); }
void Reducer::finalize() { impl_->finalize(nullptr); }
void Reducer::finalize(Stream stream) { impl_->finalize(stream.native()); }
bool Reducer::will_sync() const { return impl_->will_sync(); }
void* Reducer::bucket_view(size_t i) { return impl_->bucket_view(i); }
uint64_t Reducer::plan_generation() const { return impl_->plan_generation(); }
const BucketPlan& Reducer::plan() const { return impl_->plan(); }
Reducer::Shard Reducer::shard(size_t bucket) { return impl_->shard(bucket); }
uint64_t Reducer::step() const { return impl_->step(); }
const StepStats& Reducer::last_step_stats() const { return impl_->last_stats(); }
size_t Reducer::size() const { return impl_->size(); }

Reducer::NoSync::NoSync(Reducer& r) : reducer_(&r) { r.impl_->enter_no_sync(); }
Reducer::NoSync::~NoSync() {
  if (reducer_) reducer_->impl_->leave_no_sync();
}
Reducer::NoSync::NoSync(NoSync&& other) noexcept : reducer_(other.reducer_) {
  other.reducer_ = nullptr;
}

}  // namespace gradwire
