// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Reducer's checkpointable state (Reducer::save_state in
// include/gradwire/reducer.h): the plan as the gradient order plus the
// number of gradients per Bucket, whether the one-time rebuild happened, and
// the step counters.
#include <cstring>

#include "base/state_io.h"
#include "base/raise.h"
#include "base/logging.h"
#include "reducer/reducer_impl.h"

namespace gradwire {

uint64_t gradient_list_fingerprint(const std::vector<GradientSpec>& specs) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (elements, dtype)
  for (const auto& s : specs) {
    for (uint64_t v : {uint64_t(s.elements), uint64_t(s.dtype)}) h = (h ^ v) * 1099511628211ull;
  }
  return h;
}

namespace {

std::string_view as_bytes(const std::vector<uint64_t>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint64_t)};
}

}  // namespace

std::string Reducer::Impl::save_state() const {
  compress::StateWriter w("Reducer");
  w.u64("gradients", gradients_.size());
  w.u64("fingerprint", gradient_list_fingerprint(specs_));
  std::vector<uint64_t> order, per_bucket;
  for (const PlannedBucket& b : plan_.buckets) {
    per_bucket.push_back(b.gradients.size());
    for (size_t g : b.gradients) order.push_back(g);
  }
  const auto o = as_bytes(order), p = as_bytes(per_bucket);
  w.bytes("order", o.data(), o.size());
  w.bytes("per_bucket", p.data(), p.size());
  w.u64("rebuilt", rebuilt_);
  w.u64("step", step_);
  w.u64("micro_step", micro_step_);
  return w.finish();
}

void Reducer::Impl::load_state(std::string_view state) {
  const std::string what = fmt::format("rank {}: Reducer::load_state", rank_);
  compress::StateReader r(state, "Reducer", what);
  const uint64_t n = r.u64("gradients");
  const uint64_t fp = r.u64("fingerprint");
  if (n != gradients_.size() || fp != gradient_list_fingerprint(specs_)) {
    raise(ErrorCode::InvalidArgument, "{}: the state is for {} gradients with other sizes or "
          "dtypes than this Reducer's {}: a checkpoint of a different model", what, n,
          gradients_.size());
  }
  auto u64s = [&](std::string_view name) {
    const std::string_view b = r.bytes(name);
    if (b.size() % sizeof(uint64_t)) {
      raise(ErrorCode::InvalidArgument, "{}: field {} has {} bytes", what, name, b.size());
    }
    std::vector<uint64_t> v(b.size() / sizeof(uint64_t));
    if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  const std::vector<uint64_t> order64 = u64s("order"), per_bucket = u64s("per_bucket");
  const bool rebuilt = r.u64("rebuilt") != 0;
  const uint64_t step = r.u64("step"), micro_step = r.u64("micro_step");
  r.done();

  // The order must be a permutation of the gradients.
  std::vector<size_t> order(order64.size());
  std::vector<bool> seen(gradients_.size(), false);
  bool permutation = order64.size() == gradients_.size();
  for (size_t k = 0; permutation && k < order64.size(); ++k) {
    permutation = order64[k] < gradients_.size() && !seen[order64[k]];
    if (permutation) seen[order64[k]] = true;
    order[k] = size_t(order64[k]);
  }
  if (!permutation) {
    raise(ErrorCode::InvalidArgument, "{}: the saved gradient order is not a permutation of "
          "the {} gradients (corrupt state)", what, gradients_.size());
  }
  BucketPlan next = plan_buckets(specs_, options_.caps, order);
  bool same_buckets = next.buckets.size() == per_bucket.size();
  for (size_t b = 0; same_buckets && b < per_bucket.size(); ++b) {
    same_buckets = next.buckets[b].gradients.size() == per_bucket[b];
  }
  if (!same_buckets) {
    raise(ErrorCode::InvalidArgument, "{}: the saved plan has {} Buckets that these bucket caps "
          "({} / {} bytes) do not reproduce ({} Buckets): resume with the caps of the saved run",
          what, per_bucket.size(), options_.caps.first_bucket_bytes, options_.caps.bucket_bytes,
          next.buckets.size());
  }
  if (!(next == plan_)) {
    wait_launched_quietly();
    retired_ = std::move(buckets_);  // stale views stay valid one more step
    allocate(next);
    ++plan_generation_;
  }
  rebuilt_ = rebuilt;
  step_ = step;
  micro_step_ = micro_step;
  reset_step();
  log().info("{}: restored the plan ({} Buckets) at step {}", what, plan_.buckets.size(), step_);
}

std::string Reducer::save_state() const { return impl_->save_state(); }
void Reducer::load_state(std::string_view state) { impl_->load_state(state); }

}  // namespace gradwire
