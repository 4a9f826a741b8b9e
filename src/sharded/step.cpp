// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The optimizer's half of a step: the gradient shards checked, unscaled and
// clipped (Note [one allreduce for norm and overflow]), the optimizer on
// each Bucket's shard, the master weights cast back to the parameters, and
// the dynamic loss scale.
#include <cmath>
#include <cstring>

#include "base/logging.h"
#include "base/raise.h"
#include "sharded/elements.h"
#include "sharded/engine_impl.h"

namespace gradwire {

bool ShardedEngine::Impl::step() {
  if (!optimizer_) {
    raise(ErrorCode::InvalidArgument, "{}: step() without a ShardOptimizer; pass one to the "
          "constructor or drive the step with begin_step / gradient_view / end_step", where());
  }
  const bool ok = begin_step();
  if (ok) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const ShardView v = gradient_view(b);
      if (v.count) optimizer_->step(v);
    }
  }
  end_step();
  return ok;
}

// Note [one allreduce for norm and overflow]: clipping needs the global
// norm, the sum over ranks of each shard's sum of squares; loss scaling
// needs to know whether any element on any rank is inf or NaN. Both come
// from one allreduce of one double: a sum with a non-finite term is not
// finite, and a finite float32 squared always fits a double, so "the sum
// is not finite" is exactly "some gradient is". Every rank receives the
// same sum, so every rank skips (or clips) alike. In stage 1 every rank
// holds the whole averaged gradient but sums only its shard, so no element
// is counted twice.
bool ShardedEngine::Impl::begin_step() {
  if (phase_ != Phase::Reduced) {
    raise(ErrorCode::InvalidArgument, "{}: begin_step()/step() before finalize() reduced the "
          "gradients of a synchronised backward pass", where());
  }
  wait_exchanges_quietly();
  phase_ = Phase::Stepping;
  skip_ = false;
  factor_ = 1.0f;
  last_norm_ = std::nan("");
  const bool scaling = options_.loss_scaling.enabled;
  if (!scaling && options_.max_grad_norm <= 0) return true;
  double sum = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bk = *buckets_[b];
    const std::byte* g = bk.grads.get();
    if (options_.stage == 1) g += bk.shard_offset * element_size(bk.rdtype);
    sum += sharded::sum_squares(g, bk.rdtype, bk.planned->shard);
  }
  if (world_ > 1) {
    try {
      comm_.allreduce(&sum, &sum, 1, DataType::Float64, ReduceOp::Sum).wait();
    } catch (const Error& e) {
      phase_ = Phase::Reduced;
      throw Error(e.code(), fmt::format("{}: the gradient norm's allreduce failed: {}", where(),
                                        e.message()));
    }
  }
  if (!std::isfinite(sum)) {
    if (scaling) {
      skip_ = true;
      return false;
    }
    // As torch's clip_grad_norm_ without error_if_nonfinite: the step goes
    // on and the non-finite values reach the weights.
  }
  const double unscale = scaling ? 1.0 / double(scale_) : 1.0;
  last_norm_ = std::sqrt(sum) * unscale;
  double factor = unscale;
  if (options_.max_grad_norm > 0 && last_norm_ > options_.max_grad_norm) {
    factor *= options_.max_grad_norm / (last_norm_ + 1e-6);  // torch's clip coefficient
  }
  factor_ = float(factor);
  return true;
}

ShardView ShardedEngine::Impl::gradient_view(size_t b) {
  if (phase_ != Phase::Stepping || skip_) {
    raise(ErrorCode::InvalidArgument, "{}: gradient_view({}) outside a step (after a begin_step() "
          "that returned true, before end_step())", where(), b);
  }
  if (b >= buckets_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: gradient_view({}) but there are {} Buckets", where(), b,
          buckets_.size());
  }
  Bucket& bk = *buckets_[b];
  const size_t n = bk.planned->shard;
  std::byte* g = bk.grads.get();
  if (options_.stage == 1) g += bk.shard_offset * element_size(bk.rdtype);
  ShardView v;
  v.bucket = b;
  v.count = n;
  v.master = bk.master;
  if (bk.rdtype == DataType::Float32 && factor_ == 1.0f) {
    v.grad = reinterpret_cast<const float*>(g);
  } else {
    sharded::widen_scaled(scratch_.data(), g, bk.rdtype, n, factor_);
    v.grad = scratch_.data();
  }
  for (auto& s : bk.state) v.state.push_back(s.data());
  v.pieces = &bk.planned->pieces[size_t(rank_)];
  v.step = steps_ + 1;
  return v;
}

float* ShardedEngine::Impl::master(size_t b) {
  if (b >= buckets_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: master({}) but there are {} Buckets", where(), b,
          buckets_.size());
  }
  return buckets_[b]->master;
}

void ShardedEngine::Impl::cast_master_to_params(size_t b) {
  Bucket& bk = *buckets_[b];
  if (bk.dtype == DataType::Float32) return;  // the master is the parameters' shard
  sharded::narrow(own_params(b), bk.dtype, bk.master, bk.planned->shard);
}

void ShardedEngine::Impl::update_loss_scale(bool overflow) {
  const LossScaling& ls = options_.loss_scaling;
  if (!ls.enabled) return;
  if (overflow) {
    const float before = scale_;
    scale_ = std::max(ls.min_scale, scale_ * ls.backoff);
    good_steps_ = 0;
    log().info("{}: gradient overflow (inf or NaN): step skipped on every rank, loss scale {} -> "
               "{}", where(), before, scale_);
    return;
  }
  if (++good_steps_ >= ls.growth_interval) {
    scale_ *= ls.growth;
    good_steps_ = 0;
  }
}

void ShardedEngine::Impl::end_step() {
  if (phase_ != Phase::Stepping) {
    raise(ErrorCode::InvalidArgument, "{}: end_step() without begin_step()", where());
  }
  phase_ = Phase::Idle;
  if (skip_) {
    // Nothing changed: every rank skipped, the parameters are as they were.
    ++skipped_;
    update_loss_scale(true);
    return;
  }
  ++steps_;
  update_loss_scale(false);
  if (options_.stage == 3) {
    // Gathered copies are stale now; the next forward gathers again.
    release_all_units();
    for (size_t b = 0; b < buckets_.size(); ++b) cast_master_to_params(b);
    return;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) cast_master_to_params(b);
  start_exchange();
}

}  // namespace gradwire
