// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bucket planning: a pure function of sizes, dtypes, devices, caps and an
// order (rules in include/gradwire/reducer.h, at plan_buckets).
#include <algorithm>
#include <map>
#include <utility>

#include "base/raise.h"
#include "gradwire/reducer.h"

namespace gradwire {

bool BucketPlan::operator==(const BucketPlan& other) const {
  if (buckets.size() != other.buckets.size() || location.size() != other.location.size())
    return false;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const auto &x = buckets[b], &y = other.buckets[b];
    if (x.gradients != y.gradients || x.offsets != y.offsets || x.elements != y.elements ||
        x.dtype != y.dtype || x.device != y.device)
      return false;
  }
  for (size_t i = 0; i < location.size(); ++i) {
    if (location[i].bucket != other.location[i].bucket ||
        location[i].offset != other.location[i].offset)
      return false;
  }
  return true;
}

namespace {

void check_order(const std::vector<size_t>& order, size_t n) {
  if (order.size() != n) {
    raise(ErrorCode::InvalidArgument,
          "bucket plan: the order lists {} gradients but there are {}; it must list every "
          "gradient index exactly once", order.size(), n);
  }
  std::vector<bool> seen(n, false);
  for (size_t i : order) {
    if (i >= n) {
      raise(ErrorCode::InvalidArgument, "bucket plan: order names gradient {}, but there are {}",
            i, n);
    }
    if (seen[i]) raise(ErrorCode::InvalidArgument, "bucket plan: order names gradient {} twice", i);
    seen[i] = true;
  }
}

// One (dtype, device) group's Bucket being filled.
struct OpenBucket {
  PlannedBucket bucket;
  size_t bytes = 0;
  size_t last_position = 0;  // position in `order` of its last gradient
  bool first = true;         // the group's first Bucket (uses the small cap)
};

}  // namespace

BucketPlan plan_buckets(const std::vector<GradientSpec>& gradients, const BucketCaps& caps,
                        const std::vector<size_t>& order_in) {
  const size_t n = gradients.size();
  std::vector<size_t> order = order_in;
  if (order.empty()) {
    order.resize(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
  }
  check_order(order, n);

  // Closed Buckets with the position of their last gradient, sorted at the
  // end (Buckets launch in expected completion order).
  std::vector<std::pair<size_t, PlannedBucket>> closed;
  std::map<std::pair<DataType, int>, OpenBucket> open;
  auto close = [&](OpenBucket& ob) {
    if (!ob.bucket.gradients.empty()) closed.emplace_back(ob.last_position, std::move(ob.bucket));
    const DataType dt = ob.bucket.dtype;
    const Device dev = ob.bucket.device;
    ob.bucket = PlannedBucket{};
    ob.bucket.dtype = dt;
    ob.bucket.device = dev;
    ob.bytes = 0;
    ob.first = false;
  };

  for (size_t pos = 0; pos < n; ++pos) {
    const size_t g = order[pos];
    const GradientSpec& spec = gradients[g];
    const size_t es = element_size(spec.dtype);
    if (spec.elements > SIZE_MAX / es) {
      raise(ErrorCode::InvalidArgument, "bucket plan: gradient {} has {} elements of {}, more "
            "than the address space holds", g, spec.elements, to_string(spec.dtype));
    }
    const size_t bytes = spec.elements * es;
    auto [it, inserted] = open.try_emplace({spec.dtype, spec.device.index()});
    OpenBucket& ob = it->second;
    if (inserted) {
      ob.bucket.dtype = spec.dtype;
      ob.bucket.device = spec.device;
    }
    const size_t cap = ob.first ? caps.first_bucket_bytes : caps.bucket_bytes;
    // Caps are upper bounds: close the Bucket rather than overflow it.
    if (!ob.bucket.gradients.empty() && bytes > cap - std::min(cap, ob.bytes)) close(ob);
    ob.bucket.gradients.push_back(g);
    ob.bucket.offsets.push_back(ob.bucket.elements);
    ob.bucket.elements += spec.elements;
    ob.bytes += bytes;
    ob.last_position = pos;
    // Full (or an oversize gradient alone): close now, so the next gradient
    // starts a new Bucket under the next cap.
    if (ob.bytes >= (ob.first ? caps.first_bucket_bytes : caps.bucket_bytes) && ob.bytes > 0)
      close(ob);
  }
  for (auto& [key, ob] : open) close(ob);

  std::sort(closed.begin(), closed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  BucketPlan plan;
  plan.location.resize(n);
  plan.buckets.reserve(closed.size());
  for (auto& [pos, bucket] : closed) {
    const size_t b = plan.buckets.size();
    for (size_t k = 0; k < bucket.gradients.size(); ++k)
      plan.location[bucket.gradients[k]] = {b, bucket.offsets[k]};
    plan.buckets.push_back(std::move(bucket));
  }
  return plan;
}

std::vector<size_t> complete_ready_order(const std::vector<size_t>& observed, size_t n) {
  std::vector<bool> seen(n, false);
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t i : observed) {
    if (i >= n || seen[i]) {
      raise(ErrorCode::InvalidArgument, "ready order: gradient {} is {}", i,
            i >= n ? fmt::format("out of range (there are {})", n) : std::string("listed twice"));
    }
    seen[i] = true;
    order.push_back(i);
  }
  for (size_t i = n; i-- > 0;) {
    if (!seen[i]) order.push_back(i);
  }
  return order;
}

}  // namespace gradwire
