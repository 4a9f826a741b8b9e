// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Shard planning: a pure function of the parameter list, the world size,
// the caps, the alignment and an order (rules in include/gradwire/sharded.h,
// at plan_shards).
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "base/raise.h"
#include "gradwire/sharded.h"
#include "sharded/plan_internal.h"

namespace gradwire {

namespace {

void check_order(const std::vector<size_t>& order, size_t n) {
  if (order.size() != n) {
    raise(ErrorCode::InvalidArgument, "shard plan: the order lists {} parameters but there are "
          "{}; it must list every parameter index exactly once", order.size(), n);
  }
  std::vector<bool> seen(n, false);
  for (size_t i : order) {
    if (i >= n) {
      raise(ErrorCode::InvalidArgument, "shard plan: order names parameter {}, but there are {}",
            i, n);
    }
    if (seen[i]) raise(ErrorCode::InvalidArgument, "shard plan: order names parameter {} twice", i);
    seen[i] = true;
  }
}

// One (unit, dtype, device) group's Bucket being filled.
struct Open {
  ShardedBucket bucket;
  size_t bytes = 0;
  size_t last_position = 0;
  bool first = true;  // the group's first Bucket (the small cap)
};

// Which parts of the Bucket's parameters fall into each rank's shard.
void split(ShardedBucket& b, int world) {
  b.pieces.assign(size_t(world), {});
  for (size_t k = 0; k < b.parameters.size(); ++k) {
    const size_t start = b.offsets[k];
    // The parameters' elements, not this loop's: a Bucket's parameters
    // are contiguous in fill order.
    const size_t end = k + 1 < b.parameters.size() ? b.offsets[k + 1] : b.elements;
    if (start == end) continue;
    for (size_t r = start / b.shard; r < size_t(world) && r * b.shard < end; ++r) {
      const size_t lo = r * b.shard, hi = lo + b.shard;
      const size_t from = std::max(start, lo), to = std::min(end, hi);
      if (from < to) b.pieces[r].push_back({b.parameters[k], from - start, from - lo, to - from});
    }
  }
}

}  // namespace

ShardPlan plan_shards(const std::vector<ShardedParameter>& parameters, int world,
                      const BucketCaps& caps, size_t alignment, const std::vector<size_t>& order_in) {
  if (world < 1) raise(ErrorCode::InvalidArgument, "shard plan: world size {} (must be >= 1)", world);
  if (alignment < 1) raise(ErrorCode::InvalidArgument, "shard plan: alignment must be >= 1 element");
  const size_t n = parameters.size();
  std::vector<size_t> order = order_in;
  if (order.empty()) {
    order.resize(n);
    for (size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
  }
  check_order(order, n);
  if (alignment > SIZE_MAX / size_t(world)) {
    raise(ErrorCode::InvalidArgument, "shard plan: alignment {} x world {} overflows", alignment,
          world);
  }
  const size_t quantum = alignment * size_t(world);

  size_t unit_count = 0;
  for (size_t i = 0; i < n; ++i) {
    const ShardedParameter& p = parameters[i];
    if (p.unit >= std::max<size_t>(1, n)) {
      raise(ErrorCode::InvalidArgument, "shard plan: parameter {} ({}) has unit {}; units are "
            "numbered from 0 and there cannot be more than parameters ({})", i, p.name, p.unit, n);
    }
    unit_count = std::max(unit_count, p.unit + 1);
    const size_t es = element_size(p.dtype);
    if (p.elements > (SIZE_MAX / 2) / es) {
      raise(ErrorCode::InvalidArgument, "shard plan: parameter {} ({}) has {} elements, more than "
            "the address space holds", i, p.name, p.elements);
    }
  }

  std::vector<std::pair<size_t, ShardedBucket>> closed;
  std::map<std::tuple<size_t, DataType, int>, Open> open;
  auto close = [&](Open& ob) {
    if (!ob.bucket.parameters.empty()) closed.emplace_back(ob.last_position, std::move(ob.bucket));
    ShardedBucket next;
    next.dtype = ob.bucket.dtype;
    next.device = ob.bucket.device;
    next.unit = ob.bucket.unit;
    ob.bucket = std::move(next);
    ob.bytes = 0;
    ob.first = false;
  };
  for (size_t pos = 0; pos < n; ++pos) {
    const size_t i = order[pos];
    const ShardedParameter& p = parameters[i];
    const size_t bytes = p.elements * element_size(p.dtype);
    auto [it, inserted] = open.try_emplace({p.unit, p.dtype, p.device.index()});
    Open& ob = it->second;
    if (inserted) {
      ob.bucket.dtype = p.dtype;
      ob.bucket.device = p.device;
      ob.bucket.unit = p.unit;
    }
    const size_t cap = ob.first ? caps.first_bucket_bytes : caps.bucket_bytes;
    if (!ob.bucket.parameters.empty() && bytes > cap - std::min(cap, ob.bytes)) close(ob);
    ob.bucket.parameters.push_back(i);
    ob.bucket.offsets.push_back(ob.bucket.elements);
    ob.bucket.elements += p.elements;
    ob.bytes += bytes;
    ob.last_position = pos;
    if (ob.bytes > 0 && ob.bytes >= (ob.first ? caps.first_bucket_bytes : caps.bucket_bytes)) {
      close(ob);
    }
  }
  for (auto& [key, ob] : open) close(ob);
  std::stable_sort(closed.begin(), closed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  ShardPlan plan;
  plan.world = world;
  plan.alignment = alignment;
  plan.location.resize(n);
  plan.units.resize(unit_count);
  for (auto& [pos, bucket] : closed) {
    const size_t b = plan.buckets.size();
    if (bucket.elements > SIZE_MAX - quantum) {
      raise(ErrorCode::InvalidArgument, "shard plan: a Bucket of {} elements cannot be padded",
            bucket.elements);
    }
    bucket.padded = (bucket.elements + quantum - 1) / quantum * quantum;
    bucket.shard = bucket.padded / size_t(world);
    if (bucket.shard > 0) split(bucket, world);
    else bucket.pieces.assign(size_t(world), {});
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      plan.location[bucket.parameters[k]] = {b, bucket.offsets[k]};
    }
    plan.units[bucket.unit].push_back(b);
    plan.buckets.push_back(std::move(bucket));
  }
  return plan;
}

std::vector<ShardPlan::Owner> ShardPlan::owners(size_t parameter, size_t offset,
                                                size_t count) const {
  if (parameter >= location.size()) {
    raise(ErrorCode::InvalidArgument, "shard plan: owners of parameter {}, but there are {}",
          parameter, location.size());
  }
  const Location& loc = location[parameter];
  const ShardedBucket& b = buckets[loc.bucket];
  size_t k = 0;
  while (b.parameters[k] != parameter) ++k;
  const size_t elements =
      (k + 1 < b.parameters.size() ? b.offsets[k + 1] : b.elements) - b.offsets[k];
  if (offset > elements || count > elements - offset) {
    raise(ErrorCode::InvalidArgument, "shard plan: elements [{}, {}) of parameter {}, which has "
          "{}", offset, offset + count, parameter, elements);
  }
  std::vector<Owner> out;
  size_t at = loc.offset + offset;
  const size_t end = at + count;
  while (at < end) {
    const size_t r = at / b.shard;
    const size_t hi = std::min(end, (r + 1) * b.shard);
    out.push_back({int(r), loc.bucket, at - loc.offset, at - r * b.shard, hi - at});
    at = hi;
  }
  return out;
}

uint64_t parameter_list_fingerprint(const std::vector<ShardedParameter>& parameters) {
  Fnv1a h;
  h.add(uint64_t(parameters.size()));
  for (const ShardedParameter& p : parameters) {
    h.add(uint64_t(p.elements));
    h.add(uint64_t(p.dtype));
    h.add(uint64_t(p.device.is_cuda()));
  }
  return h.value();
}

namespace sharded {

uint64_t plan_fingerprint(const ShardPlan& plan, const ShardedOptions& options) {
  Fnv1a h;
  h.add(uint64_t(plan.world));
  h.add(uint64_t(plan.alignment));
  h.add(uint64_t(plan.buckets.size()));
  for (const ShardedBucket& b : plan.buckets) {
    h.add(uint64_t(b.parameters.size()));
    for (size_t k = 0; k < b.parameters.size(); ++k) {
      h.add(uint64_t(b.parameters[k]));
      h.add(uint64_t(b.offsets[k]));
    }
    h.add(uint64_t(b.elements));
    h.add(uint64_t(b.padded));
    h.add(uint64_t(b.dtype));
    h.add(uint64_t(b.device.is_cuda()));
    h.add(uint64_t(b.unit));
  }
  h.add(uint64_t(options.stage));
  h.add(uint64_t(options.reduce_dtype ? int(*options.reduce_dtype) : -1));
  h.add(uint64_t(options.find_unused_parameters));
  h.add(uint64_t(options.loss_scaling.enabled));
  h.add_double(options.max_grad_norm);
  return h.value();
}

}  // namespace sharded

}  // namespace gradwire
