// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The ShardedEngine: construction (the agreement check, allocation, the
// initial parameters) and the gradients' half of a step: mark_ready, the
// in-order launch of complete Buckets, finalize.
#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "base/logging.h"
#include "base/raise.h"
#include "sharded/agree.h"
#include "sharded/elements.h"
#include "sharded/engine_impl.h"
#include "sharded/plan_internal.h"

namespace gradwire {

ShardedEngine::Impl::Impl(Communicator& comm, std::vector<ShardedParameter> parameters,
                          std::shared_ptr<ShardOptimizer> optimizer, ShardedOptions options,
                          const std::vector<const void*>& initial)
    : comm_(comm), rank_(comm.rank()), world_(comm.size()), options_(std::move(options)),
      optimizer_(std::move(optimizer)), params_(std::move(parameters)) {
  const std::string who = fmt::format("rank {}: ShardedEngine", rank_);
  if (options_.stage < 1 || options_.stage > 3) {
    raise(ErrorCode::InvalidArgument, "{}: stage {} (1: optimizer state, 2: + gradients, 3: + "
          "parameters)", who, options_.stage);
  }
  if (options_.max_buckets_in_flight < 1) {
    raise(ErrorCode::InvalidArgument, "{}: max_buckets_in_flight must be >= 1", who);
  }
  const LossScaling& ls = options_.loss_scaling;
  if (ls.enabled && !(ls.initial > 0 && ls.growth >= 1 && ls.backoff > 0 && ls.backoff < 1 &&
                      ls.growth_interval >= 1 && ls.min_scale > 0)) {
    raise(ErrorCode::InvalidArgument, "{}: loss scaling needs initial > 0, growth >= 1, backoff "
          "in (0, 1), growth_interval >= 1 and min_scale > 0", who);
  }
  if (!initial.empty() && initial.size() != params_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: {} initial values for {} parameters", who,
          initial.size(), params_.size());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const ShardedParameter& p = params_[i];
    const std::string name = name_of(i);
    if (p.dtype != DataType::Float32 && p.dtype != DataType::BFloat16 &&
        p.dtype != DataType::Float16) {
      raise(ErrorCode::InvalidArgument, "{}: parameter {} is {}; the sharded engine keeps float32 "
            "master weights of float32, bfloat16 or float16 parameters", who, name,
            to_string(p.dtype));
    }
    if (p.device.is_cuda()) {
      raise(ErrorCode::InvalidArgument, "{}: parameter {} is on CUDA device {}; the sharded engine "
            "takes host parameters only (CUDA is not implemented yet)", who, name,
            p.device.index());
    }
    if (options_.reduce_dtype && !sharded::can_reduce_in(p.dtype, *options_.reduce_dtype)) {
      raise(ErrorCode::InvalidArgument, "{}: parameter {} is {}, which cannot be reduced in {} "
            "(the same dtype, or float32 for 16-bit parameters)", who, name, to_string(p.dtype),
            to_string(*options_.reduce_dtype));
    }
  }
  std::vector<ShardedParameter> planned = params_;
  if (options_.stage < 3) {
    for (auto& p : planned) p.unit = 0;  // one unit: Buckets may mix modules
  }
  plan_ = plan_shards(planned, world_, options_.caps, options_.alignment, options_.order);
  if (options_.stage < 3) {
    for (auto& p : params_) p.unit = 0;
  }
  if (optimizer_) state_names_ = optimizer_->state_names();
  scale_ = ls.enabled ? ls.initial : 1.0f;
  check_agreement();
  allocate();
  initialise(initial);
  reset_step();
}

ShardedEngine::Impl::~Impl() {
  wait_reductions_quietly();
  wait_exchanges_quietly();
}

// Note [one plan on every rank]: a rank whose parameter list differs (a
// shape, the order, a dtype) or whose options do would pair different
// Buckets in one collective: wrong sums or a hang. Every rank allgathers
// the fingerprints of its parameter list, its whole plan and options and
// its optimizer, once, before anything else is communicated; every rank
// sees every rank's values, so all raise the same Mismatch together. The
// gradient compression options travel as values beside the fingerprints,
// so that a bad one on any rank (an InvalidArgument) or one that differs
// (a Mismatch) is named, with the ranks, on every rank (compressed.cpp).
void ShardedEngine::Impl::check_agreement() {
  Fnv1a opt;
  opt.add(optimizer_ ? compress::fnv1a64(optimizer_->kind()) : 0);
  for (const auto& s : state_names_) opt.add(compress::fnv1a64(s));
  const GradientCompressionOptions& gc = options_.gradient_compression;
  const ParameterCompressionOptions& pc = options_.parameter_compression;
  constexpr size_t kStride = 11;
  const uint64_t mine[kStride] = {parameter_list_fingerprint(params_),
                                  sharded::plan_fingerprint(plan_, options_), opt.value(),
                                  uint64_t(gc.kind), gc.block_size, gc.error_feedback ? 1u : 0u,
                                  gc.start_step, uint64_t(pc.kind), pc.block_size, pc.start_step,
                                  uint64_t(options_.stage)};
  std::vector<uint64_t> all(kStride * size_t(world_));
  try {
    comm_.allgather(mine, all.data(), all.size(), DataType::Int64).wait();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("rank {}: ShardedEngine: comparing the ranks' parameter "
                                      "lists failed: {}", rank_, e.message()));
  }
  check_compression(all, kStride, 3);
  check_parameter_compression(all, kStride, 7);
  static constexpr const char* kWhat[3] = {
      "parameter lists (number, sizes, dtypes or order of the parameters)",
      "shard plans or options (stage, caps, alignment, order, units, reduce dtype, clipping, "
      "loss scaling, unused parameters)",
      "optimizers (kind)"};
  for (int k = 0; k < 3; ++k) {
    std::vector<int> differ;
    for (int r = 1; r < world_; ++r) {
      if (all[kStride * size_t(r) + size_t(k)] != all[size_t(k)]) differ.push_back(r);
    }
    if (differ.empty()) continue;
    raise(ErrorCode::Mismatch, "rank {}: ShardedEngine: rank(s) {} have other {} than rank 0 ({} "
          "parameters here); every rank must build the engine over the same model and options",
          rank_, fmt::join(differ, ", "), kWhat[k], params_.size());
  }
}

void ShardedEngine::Impl::allocate() {
  const bool stage3 = options_.stage == 3;
  units_.assign(plan_.units.size(), Unit{});
  size_t max_shard = 0, max_bucket_bytes = 0;
  for (const ShardedBucket& pb : plan_.buckets) {
    auto b = std::make_unique<Bucket>();
    b->planned = &pb;
    b->dtype = pb.dtype;
    b->rdtype = options_.reduce_dtype.value_or(pb.dtype);
    b->shard_offset = size_t(rank_) * pb.shard;
    const size_t pes = element_size(b->dtype), res = element_size(b->rdtype);
    b->params = HostBuffer((stage3 ? pb.shard : pb.padded) * pes);
    if (b->dtype != DataType::Float32) {
      b->master_memory = HostBuffer(pb.shard * 4);
      b->master = reinterpret_cast<float*>(b->master_memory.get());
    }
    b->state.assign(state_names_.size(), std::vector<float>(pb.shard, 0.0f));
    b->grads = HostBuffer((options_.stage == 1 ? pb.padded : pb.shard) * res);
    max_shard = std::max(max_shard, pb.shard);
    max_bucket_bytes = std::max(max_bucket_bytes, pb.padded * res);
    buckets_.push_back(std::move(b));
  }
  // Float32 parameters need no copy: their own shard is the master.
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b]->dtype == DataType::Float32) {
      buckets_[b]->master = reinterpret_cast<float*>(own_params(b));
    }
  }
  scratch_.assign(max_shard, 0.0f);
  marks_ = std::make_unique<std::atomic<uint8_t>[]>(params_.size());
  pool_buffer_bytes_ = options_.stage == 1 ? 0 : max_bucket_bytes;
  allocate_compression(max_shard);
}

// Every rank's parameters become rank 0's (broadcast_parameters), Bucket by
// Bucket; stage 3 builds each full Bucket once, keeps its shard and frees
// it, so at most one full Bucket exists at a time.
void ShardedEngine::Impl::initialise(const std::vector<const void*>& initial) {
  const bool stage3 = options_.stage == 3;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    const ShardedBucket& pb = *bk.planned;
    const size_t es = element_size(bk.dtype);
    HostBuffer full_temp;
    std::byte* full = bk.params.get();
    if (stage3) {
      full_temp = HostBuffer(pb.padded * es);
      full = full_temp.get();
    }
    for (size_t k = 0; k < pb.parameters.size(); ++k) {
      const size_t i = pb.parameters[k];
      const void* src = initial.empty() ? nullptr : initial[i];
      if (src && params_[i].elements) {
        std::memcpy(full + pb.offsets[k] * es, src, params_[i].elements * es);
      }
    }
    if (options_.broadcast_parameters && world_ > 1 && pb.padded > 0) {
      try {
        comm_.broadcast(full, full, pb.padded, bk.dtype, 0).wait();
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: broadcasting rank 0's parameters ({}) failed: {}",
                                          where(), describe_bucket(b), e.message()));
      }
    }
    if (stage3 && pb.shard) std::memcpy(bk.params.get(), full + bk.shard_offset * es, pb.shard * es);
    if (bk.dtype != DataType::Float32) {
      sharded::widen_scaled(bk.master, own_params(b), bk.dtype, pb.shard, 1.0f);
    }
  }
}

void ShardedEngine::Impl::reset_step() {
  for (size_t i = 0; i < params_.size(); ++i) marks_[i].store(kUnmarked, std::memory_order_relaxed);
  marked_.store(0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    bk.pending.store(bk.planned->parameters.size(), std::memory_order_relaxed);
    bk.reduction = Work();
    bk.launch_error = nullptr;
  }
  std::lock_guard<std::mutex> lk(launch_mu_);
  order_.reset(buckets_.size());
}

std::string ShardedEngine::Impl::where() const {
  return fmt::format("rank {}: ShardedEngine (stage {}) step {}", rank_, options_.stage, steps_);
}

std::string ShardedEngine::Impl::name_of(size_t i) const {
  const std::string& n = params_[i].name;
  return n.empty() ? fmt::format("#{}", i) : n;
}

std::string ShardedEngine::Impl::describe_bucket(size_t b) const {
  const ShardedBucket& pb = plan_.buckets[b];
  std::string names;
  const size_t shown = std::min<size_t>(pb.parameters.size(), 6);
  for (size_t k = 0; k < shown; ++k) names += (k ? ", " : "") + name_of(pb.parameters[k]);
  if (shown < pb.parameters.size()) names += fmt::format(" and {} more", pb.parameters.size() - shown);
  return fmt::format("bucket {} ({} of {} x {}: {})", b, pb.elements, pb.padded,
                     to_string(pb.dtype), names);
}

void ShardedEngine::Impl::check_index(size_t i, const char* what) const {
  if (i >= params_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: {}({}) but there are {} parameters", where(), what, i,
          params_.size());
  }
}

void ShardedEngine::Impl::enter_no_sync() {
  if (marked_.load() != 0) {
    raise(ErrorCode::InvalidArgument, "{}: no_sync() entered in the middle of a backward pass ({} "
          "gradients already marked); enter it before backward", where(), marked_.load());
  }
  no_sync_depth_.fetch_add(1);
}

// ---------------------------------------------------------------- gradients

void ShardedEngine::Impl::claim(size_t i, uint8_t state) {
  if (phase_ == Phase::Reduced) {
    raise(ErrorCode::InvalidArgument, "{}: parameter {} marked {} after finalize() and before the "
          "optimizer step; call step() (or begin_step/end_step) first", where(), name_of(i),
          state == kReady ? "ready" : "unused");
  }
  uint8_t expected = kUnmarked;
  if (!marks_[i].compare_exchange_strong(expected, state)) {
    raise(ErrorCode::InvalidArgument, "{}: parameter {} was marked {} and then {} in one backward "
          "pass; call finalize() between passes", where(), name_of(i),
          expected == kReady ? "ready" : "unused", state == kReady ? "ready" : "unused");
  }
  marked_.fetch_add(1);
}

// Stage 1: the persistent Bucket. Stages 2, 3: a pool buffer, taken by the
// Bucket's first gradient (Note [bounded gradient buffers]).
std::byte* ShardedEngine::Impl::slot(size_t i) {
  if (params_[i].elements == 0) return nullptr;  // takes no buffer
  const auto& loc = plan_.location[i];
  Bucket& bk = *buckets_[loc.bucket];
  std::byte* base = options_.stage == 1 ? bk.grads.get() : acquire_filling(loc.bucket);
  return base + loc.offset * element_size(bk.rdtype);
}

std::byte* ShardedEngine::Impl::acquire_filling(size_t b) {
  Bucket& bk = *buckets_[b];
  std::unique_lock<std::mutex> lk(pool_mu_);
  if (bk.filling) return bk.filling;
  const auto deadline = std::chrono::steady_clock::now() + comm_.options().timeout;
  // Another thread marking a gradient of the same Bucket may have taken
  // its buffer while this one waited: recheck after every wait, or the
  // Bucket would take a second buffer and lose what was copied into the
  // first.
  while (!bk.filling && free_slots_.empty()) {
    if (pool_.size() < options_.max_buckets_in_flight || in_reduction_ == 0) {
      if (pool_.size() >= options_.max_buckets_in_flight) {
        log().debug("{}: {} needs a gradient buffer while all {} are filling; allocating one more "
                    "(Note [bounded gradient buffers])", where(), describe_bucket(b), pool_.size());
      }
      pool_.emplace_back(pool_buffer_bytes_);
      free_slots_.push_back(pool_.size() - 1);
      break;
    }
    if (pool_cv_.wait_until(lk, deadline) == std::cv_status::timeout && !bk.filling &&
        free_slots_.empty()) {
      raise(ErrorCode::Timeout, "{}: {} waited {} ms for a gradient buffer: {} Buckets still "
            "being reduced (max_buckets_in_flight {})", where(), describe_bucket(b),
            comm_.options().timeout.count(), in_reduction_, options_.max_buckets_in_flight);
    }
  }
  if (bk.filling) return bk.filling;
  bk.pool_slot = free_slots_.back();
  free_slots_.pop_back();
  bk.filling = pool_[bk.pool_slot].get();
  const ShardedBucket& pb = *bk.planned;
  const size_t es = element_size(bk.rdtype);
  // A reused buffer holds another Bucket's values: the padding must be 0.
  std::memset(bk.filling + pb.elements * es, 0, (pb.padded - pb.elements) * es);
  return bk.filling;
}

void ShardedEngine::Impl::mark_ready(size_t i, const void* grad) {
  check_index(i, "mark_ready");
  if (!will_sync()) return;
  const ShardedParameter& p = params_[i];
  if (grad == nullptr && p.elements > 0) {
    raise(ErrorCode::InvalidArgument, "{}: mark_ready({}) for parameter {} without a gradient",
          where(), i, name_of(i));
  }
  claim(i, kReady);
  Bucket& bk = bucket_of(i);
  sharded::copy_divided_into(slot(i), bk.rdtype, grad, p.dtype, p.elements, world_);
  gradient_done(i);
}

void ShardedEngine::Impl::mark_unused(size_t i) {
  check_index(i, "mark_unused");
  if (!options_.find_unused_parameters) {
    raise(ErrorCode::InvalidArgument, "{}: mark_unused({}) for parameter {} needs "
          "find_unused_parameters", where(), i, name_of(i));
  }
  if (!will_sync()) return;
  claim(i, kUnused);
  if (std::byte* dst = slot(i)) {
    std::memset(dst, 0, params_[i].elements * element_size(bucket_of(i).rdtype));
  }
  gradient_done(i);
}

void ShardedEngine::Impl::gradient_done(size_t i) {
  const size_t b = plan_.location[i].bucket;
  if (buckets_[b]->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) launch_in_order(b);
}

void ShardedEngine::Impl::launch_in_order(size_t completed) {
  std::unique_lock<std::mutex> lk(launch_mu_);
  order_.complete(lk, completed, [this](size_t b) { launch(b); });
}

// Never throws (the launcher is whichever autograd thread completed a
// Bucket); finalize() reports a failure with its Bucket.
void ShardedEngine::Impl::launch(size_t b) {
  Bucket& bk = *buckets_[b];
  const ShardedBucket& pb = *bk.planned;
  try {
    if (options_.stage == 1) {
      if (pb.padded) {
        bk.reduction = compressing() ? launch_compressed(b, bk.grads.get())
                                     : comm_.allreduce(bk.grads.get(), bk.grads.get(), pb.padded,
                                                       bk.rdtype, ReduceOp::Sum);
      }
      return;
    }
    if (pb.padded == 0) return;  // only 0-element parameters: nothing to reduce
    // Every gradient of the Bucket was copied in (or zeroed), so it holds a
    // buffer: a Bucket with elements has a parameter with elements.
    std::byte* full = bk.filling;
    GW_CHECK(full != nullptr, "{}: {} complete without a gradient buffer", where(),
             describe_bucket(b));
    const size_t slot = bk.pool_slot;
    bk.filling = nullptr;
    {
      std::lock_guard<std::mutex> lk(pool_mu_);
      ++in_reduction_;
    }
    auto give_back = [this, slot] {
      {
        std::lock_guard<std::mutex> lk(pool_mu_);
        free_slots_.push_back(slot);
        --in_reduction_;
      }
      pool_cv_.notify_all();
    };
    Work w;
    try {
      w = compressing()
              ? launch_compressed(b, full)
              : comm_.reduce_scatter(full, bk.grads.get(), pb.padded, bk.rdtype, ReduceOp::Sum);
    } catch (...) {
      give_back();
      throw;
    }
    // The reduction writes straight into the shard: the buffer is free
    // once it completes, successfully or not.
    w.then([give_back](std::exception_ptr) { give_back(); });
    bk.reduction = std::move(w);
  } catch (...) {
    bk.launch_error = std::current_exception();
    log().error("{}: launching {} failed; finalize() will report it", where(), describe_bucket(b));
  }
}

void ShardedEngine::Impl::wait_reductions_quietly() {
  for (auto& b : buckets_) {
    if (!b->reduction.valid()) continue;
    try {
      b->reduction.wait();
    } catch (const std::exception&) {
    }
  }
}

// As Note [unused parameters] in src/reducer/finalize.cpp: ranks that
// marked every gradient wait at the deadline for the Buckets this rank
// never launched; this rank names the parameters, the root cause.
void ShardedEngine::Impl::raise_unmarked(const std::vector<size_t>& unmarked) {
  size_t first_unlaunched;
  {
    std::lock_guard<std::mutex> lk(launch_mu_);
    first_unlaunched = order_.next();
  }
  wait_reductions_quietly();
  std::vector<std::string> names;
  for (size_t i : unmarked) names.push_back(name_of(i));
  if (names.size() > 20) {
    names.resize(20);
    names.push_back("...");
  }
  const std::string w = where();
  // Give the pool buffers of Buckets that never launched back.
  {
    std::lock_guard<std::mutex> lk(pool_mu_);
    for (auto& b : buckets_) {
      if (!b->filling) continue;
      free_slots_.push_back(b->pool_slot);
      b->filling = nullptr;
    }
  }
  reset_step();
  raise(ErrorCode::InvalidArgument, "{}: {} parameter(s) got no gradient: {}; pass "
        "find_unused_parameters if the model does not use every parameter each step (Buckets "
        "{}..{} were not launched on this rank; ranks that marked every gradient will time out "
        "waiting for them)", w, unmarked.size(), fmt::join(names, ", "), first_unlaunched,
        buckets_.size() - 1);
}

void ShardedEngine::Impl::finalize() {
  if (!will_sync()) return;
  if (phase_ == Phase::Reduced) {
    raise(ErrorCode::InvalidArgument, "{}: finalize() twice without an optimizer step between",
          where());
  }
  std::vector<size_t> unmarked;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (marks_[i].load(std::memory_order_acquire) == kUnmarked) unmarked.push_back(i);
  }
  if (!unmarked.empty()) {
    if (!options_.find_unused_parameters) raise_unmarked(unmarked);
    for (size_t i : unmarked) mark_unused(i);
  }
  {
    std::lock_guard<std::mutex> lk(launch_mu_);
    GW_CHECK(order_.all_launched(),
             "{}: {} of {} Buckets launched after every gradient was marked (finalize() while "
             "mark_ready was still running?)", where(), order_.next(), buckets_.size());
  }
  std::exception_ptr failure;
  size_t failed = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    std::exception_ptr err = bk.launch_error;
    if (!err && bk.reduction.valid()) {
      try {
        bk.reduction.wait();
      } catch (...) {
        err = std::current_exception();
      }
    }
    if (err && !failure) {
      failure = err;
      failed = b;
    }
  }
  if (failure) {
    const std::string what = fmt::format("{}: reducing {}", where(), describe_bucket(failed));
    reset_step();
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{} failed: {}", what, e.message()));
    } catch (const std::exception& e) {
      raise(ErrorCode::Internal, "{} failed: {}", what, e.what());
    }
  }
  reset_step();
  ++syncs_;
  phase_ = Phase::Reduced;
}

void* ShardedEngine::Impl::gradient(size_t i) {
  check_index(i, "gradient");
  if (options_.stage != 1) {
    raise(ErrorCode::InvalidArgument, "{}: gradient({}): in stage {} a rank holds only its shards "
          "of the gradients (gradient_view)", where(), i, options_.stage);
  }
  const auto& loc = plan_.location[i];
  Bucket& bk = *buckets_[loc.bucket];
  return bk.grads.get() + loc.offset * element_size(bk.rdtype);
}

// ---------------------------------------------------------------- memory

ShardedMemory ShardedEngine::Impl::memory() const {
  ShardedMemory m;
  for (const auto& b : buckets_) {
    m.parameters += b->params.bytes;
    m.master += b->master_memory.bytes;
    for (const auto& s : b->state) m.optimizer_state += s.size() * sizeof(float);
    m.gradients += b->grads.bytes;
  }
  m.gathered = gathered_bytes_;
  m.peak_gathered = peak_gathered_;
  {
    std::lock_guard<std::mutex> lk(pool_mu_);
    m.bucket_buffer_count = pool_.size();
    for (const auto& p : pool_) m.bucket_buffers += p.bytes;
  }
  m.scratch = scratch_.size() * sizeof(float);
  m.compression = compression_bytes();
  return m;
}

// ---------------------------------------------------------------- ShardedEngine

ShardedEngine::ShardedEngine(Communicator& comm, std::vector<ShardedParameter> parameters,
                             std::shared_ptr<ShardOptimizer> optimizer, ShardedOptions options,
                             const std::vector<const void*>& initial)
    : impl_(std::make_unique<Impl>(comm, std::move(parameters), std::move(optimizer),
                                   std::move(options), initial)) {}
ShardedEngine::~ShardedEngine() = default;

const ShardPlan& ShardedEngine::plan() const { return impl_->plan(); }
const ShardedOptions& ShardedEngine::options() const { return impl_->options(); }
int ShardedEngine::stage() const { return impl_->options().stage; }
size_t ShardedEngine::size() const { return impl_->size(); }
const std::vector<ShardedParameter>& ShardedEngine::parameters() const {
  return impl_->parameters();
}
void* ShardedEngine::parameter(size_t i) { return impl_->parameter(i); }
void* ShardedEngine::wait_parameter(size_t i) { return impl_->wait_parameter(i); }
void ShardedEngine::wait_bucket(size_t b) { impl_->wait_bucket(b); }
void ShardedEngine::wait_parameters() { impl_->wait_parameters(); }
void ShardedEngine::prefetch(size_t unit) { impl_->prefetch(unit); }
void ShardedEngine::gather(size_t unit) { impl_->gather(unit); }
void ShardedEngine::release(size_t unit) { impl_->release(unit); }
bool ShardedEngine::gathered(size_t unit) const { return impl_->gathered(unit); }
size_t ShardedEngine::units() const { return impl_->units(); }
void ShardedEngine::mark_ready(size_t i, const void* grad) { impl_->mark_ready(i, grad); }
void ShardedEngine::mark_unused(size_t i) { impl_->mark_unused(i); }
void ShardedEngine::finalize() { impl_->finalize(); }
void* ShardedEngine::gradient(size_t i) { return impl_->gradient(i); }
bool ShardedEngine::will_sync() const { return impl_->will_sync(); }
bool ShardedEngine::step() { return impl_->step(); }
bool ShardedEngine::begin_step() { return impl_->begin_step(); }
ShardView ShardedEngine::gradient_view(size_t b) { return impl_->gradient_view(b); }
float* ShardedEngine::master(size_t b) { return impl_->master(b); }
void ShardedEngine::end_step() { impl_->end_step(); }
uint64_t ShardedEngine::optimizer_steps() const { return impl_->optimizer_steps(); }
double ShardedEngine::last_grad_norm() const { return impl_->last_grad_norm(); }
float ShardedEngine::loss_scale() const { return impl_->loss_scale(); }
uint64_t ShardedEngine::skipped_steps() const { return impl_->skipped_steps(); }
ShardedState ShardedEngine::state() const { return impl_->state(); }
ShardedState ShardedEngine::full_state() { return impl_->full_state(); }
void ShardedEngine::load_state(const std::vector<const ShardedState*>& sources) {
  impl_->load_state(sources);
}
ShardedMemory ShardedEngine::memory() const { return impl_->memory(); }

ShardedEngine::NoSync::NoSync(ShardedEngine& e) : engine_(&e) { e.impl_->enter_no_sync(); }
ShardedEngine::NoSync::~NoSync() {
  if (engine_) engine_->impl_->leave_no_sync();
}
ShardedEngine::NoSync::NoSync(NoSync&& other) noexcept : engine_(other.engine_) {
  other.engine_ = nullptr;
}

}  // namespace gradwire
