// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bucket planning as a pure function: no ranks, no communicator.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "gradwire/error.h"
#include "gradwire/reducer.h"

namespace {

using gradwire::BucketCaps;
using gradwire::BucketPlan;
using gradwire::DataType;
using gradwire::Device;
using gradwire::GradientSpec;
using gradwire::plan_buckets;

constexpr size_t MiB = size_t(1) << 20;

GradientSpec f32(size_t elements, int device = -1) {
  return {elements, DataType::Float32, Device::cuda(device)};
}

size_t bytes_of(const std::vector<GradientSpec>& g, const gradwire::PlannedBucket& b) {
  size_t total = 0;
  for (size_t i : b.gradients) total += g[i].elements * gradwire::element_size(g[i].dtype);
  return total;
}

// Invariants every plan must satisfy: each gradient in exactly one Bucket,
// offsets contiguous in fill order, one dtype/device per Bucket, the inverse
// map consistent, and gradients appearing in `order` order inside a Bucket.
void check_consistent(const std::vector<GradientSpec>& g, const BucketPlan& plan,
                      std::vector<size_t> order = {}) {
  if (order.empty()) {
    order.resize(g.size());
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<size_t> pos(g.size());
  for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
  ASSERT_EQ(plan.location.size(), g.size());
  std::vector<int> seen(g.size(), 0);
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& pb = plan.buckets[b];
    ASSERT_FALSE(pb.gradients.empty());
    ASSERT_EQ(pb.gradients.size(), pb.offsets.size());
    size_t offset = 0;
    for (size_t k = 0; k < pb.gradients.size(); ++k) {
      const size_t i = pb.gradients[k];
      ++seen[i];
      EXPECT_EQ(pb.offsets[k], offset);
      EXPECT_EQ(g[i].dtype, pb.dtype);
      EXPECT_EQ(g[i].device, pb.device);
      EXPECT_EQ(plan.location[i].bucket, b);
      EXPECT_EQ(plan.location[i].offset, offset);
      if (k > 0) EXPECT_LT(pos[pb.gradients[k - 1]], pos[i]) << "order not kept in bucket " << b;
      offset += g[i].elements;
    }
    EXPECT_EQ(pb.elements, offset);
    // Buckets are ordered by the position of their last gradient.
    if (b > 0) EXPECT_LT(pos[plan.buckets[b - 1].gradients.back()], pos[pb.gradients.back()]);
  }
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(seen[i], 1) << "gradient " << i;
}

TEST(ReducerPlan, EmptyList) {
  BucketPlan plan = plan_buckets({});
  EXPECT_TRUE(plan.buckets.empty());
  EXPECT_TRUE(plan.location.empty());
}

TEST(ReducerPlan, DefaultCapsFirstOneMiBThen25MiB) {
  // 100 gradients of 256 KiB (65536 float32): 4 fit the first 1 MiB Bucket,
  // then 100 per 25 MiB Bucket.
  std::vector<GradientSpec> g(130, f32(65536));
  BucketPlan plan = plan_buckets(g);
  check_consistent(g, plan);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].gradients.size(), 4u);
  EXPECT_EQ(bytes_of(g, plan.buckets[0]), 1 * MiB);
  EXPECT_EQ(plan.buckets[1].gradients.size(), 100u);
  EXPECT_EQ(bytes_of(g, plan.buckets[1]), 25 * MiB);
  EXPECT_EQ(plan.buckets[2].gradients.size(), 26u);
  EXPECT_EQ(plan.buckets[0].gradients[0], 0u);
}

TEST(ReducerPlan, CapsAreUpperBoundsAndConfigurable) {
  // 3 KiB gradients under a 4 KiB first cap and 10 KiB later caps: a Bucket
  // closes rather than overflow (1 in the first, 3 in each later one).
  std::vector<GradientSpec> g(10, f32(768));
  BucketPlan plan = plan_buckets(g, BucketCaps{4096, 10240});
  check_consistent(g, plan);
  ASSERT_EQ(plan.buckets.size(), 4u);
  EXPECT_EQ(plan.buckets[0].gradients, (std::vector<size_t>{0}));
  EXPECT_EQ(plan.buckets[1].gradients, (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(plan.buckets[3].gradients, (std::vector<size_t>{7, 8, 9}));
  for (const auto& b : plan.buckets) EXPECT_LE(bytes_of(g, b), 10240u);
}

TEST(ReducerPlan, OversizeGradientGetsItsOwnBucket) {
  std::vector<GradientSpec> g = {f32(10), f32(10), f32(5000), f32(10), f32(10)};
  BucketPlan plan = plan_buckets(g, BucketCaps{1000, 1000});
  check_consistent(g, plan);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].gradients, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan.buckets[1].gradients, (std::vector<size_t>{2}));
  EXPECT_EQ(plan.buckets[1].elements, 5000u);
  EXPECT_EQ(plan.buckets[2].gradients, (std::vector<size_t>{3, 4}));
}

TEST(ReducerPlan, DtypesAndDevicesNeverShareABucket) {
  std::vector<GradientSpec> g = {
      f32(100), {100, DataType::Float16, Device::host()}, f32(100, 0), f32(100), {100, DataType::Float16, Device::host()},
      f32(100, 1), {100, DataType::Float64, Device::host()}, f32(100, 0)};
  BucketPlan plan = plan_buckets(g, BucketCaps{1 << 20, 1 << 20});
  check_consistent(g, plan);
  // One Bucket per (dtype, device) group: f32/cpu, f16/cpu, f32/0, f32/1, f64/cpu.
  ASSERT_EQ(plan.buckets.size(), 5u);
  EXPECT_EQ(plan.location[0].bucket, plan.location[3].bucket);
  EXPECT_EQ(plan.location[1].bucket, plan.location[4].bucket);
  EXPECT_EQ(plan.location[2].bucket, plan.location[7].bucket);
  EXPECT_NE(plan.location[0].bucket, plan.location[2].bucket);
  EXPECT_NE(plan.location[2].bucket, plan.location[5].bucket);
  EXPECT_EQ(plan.location[3].offset, 100u);
  // Ordered by expected completion: f32/cpu completes at position 3, f16 at
  // 4, f32/1 at 5, f64 at 6, f32/0 at 7.
  EXPECT_EQ(plan.buckets[0].gradients, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(plan.buckets[4].gradients, (std::vector<size_t>{2, 7}));
}

TEST(ReducerPlan, ZeroElementGradientsAreCarried) {
  std::vector<GradientSpec> g = {f32(0), f32(10), f32(0), f32(0)};
  BucketPlan plan = plan_buckets(g, BucketCaps{40, 40});
  check_consistent(g, plan);
  ASSERT_EQ(plan.buckets.size(), 2u);
  EXPECT_EQ(plan.buckets[0].gradients, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan.buckets[1].gradients, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(plan.buckets[1].elements, 0u);
}

TEST(ReducerPlan, InverseMap) {
  std::mt19937 rng(7);
  std::vector<GradientSpec> g;
  for (int i = 0; i < 200; ++i) {
    const DataType dt = (rng() % 4 == 0) ? DataType::BFloat16 : DataType::Float32;
    g.push_back({size_t(rng() % 3000), dt, Device::host()});
  }
  std::vector<size_t> order(g.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  BucketPlan plan = plan_buckets(g, BucketCaps{2048, 8192}, order);
  check_consistent(g, plan, order);
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& loc = plan.location[i];
    const auto& pb = plan.buckets[loc.bucket];
    auto it = std::find(pb.gradients.begin(), pb.gradients.end(), i);
    ASSERT_NE(it, pb.gradients.end());
    EXPECT_EQ(pb.offsets[size_t(it - pb.gradients.begin())], loc.offset);
  }
}

TEST(ReducerPlan, RebuildFromObservedReadyOrder) {
  // Registration order 0..5; the initial plan fills in reverse; the observed
  // order differs (and misses the unused gradient 2).
  std::vector<GradientSpec> g(6, f32(100));
  const std::vector<size_t> reverse = {5, 4, 3, 2, 1, 0};
  const BucketCaps caps{800, 800};  // two gradients per Bucket
  BucketPlan initial = plan_buckets(g, caps, reverse);
  ASSERT_EQ(initial.buckets.size(), 3u);
  EXPECT_EQ(initial.buckets[0].gradients, (std::vector<size_t>{5, 4}));

  const std::vector<size_t> observed = {4, 0, 5, 1, 3};
  const auto order = gradwire::complete_ready_order(observed, g.size());
  EXPECT_EQ(order, (std::vector<size_t>{4, 0, 5, 1, 3, 2}));
  BucketPlan rebuilt = plan_buckets(g, caps, order);
  check_consistent(g, rebuilt, order);
  EXPECT_EQ(rebuilt.buckets[0].gradients, (std::vector<size_t>{4, 0}));
  EXPECT_EQ(rebuilt.buckets[1].gradients, (std::vector<size_t>{5, 1}));
  EXPECT_EQ(rebuilt.buckets[2].gradients, (std::vector<size_t>{3, 2}));
  EXPECT_FALSE(rebuilt == initial);
  EXPECT_TRUE(rebuilt == plan_buckets(g, caps, order));  // pure: same input, same plan
  EXPECT_EQ(gradwire::complete_ready_order({}, 3), (std::vector<size_t>{2, 1, 0}));
}

TEST(ReducerPlan, RejectsBadOrders) {
  std::vector<GradientSpec> g(3, f32(1));
  for (const std::vector<size_t>& bad :
       {std::vector<size_t>{0, 1}, std::vector<size_t>{0, 1, 1}, std::vector<size_t>{0, 1, 3}}) {
    try {
      plan_buckets(g, {}, bad);
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const gradwire::Error& e) {
      EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument) << e.what();
    }
  }
  EXPECT_THROW(gradwire::complete_ready_order({0, 0}, 3), gradwire::Error);
  EXPECT_THROW(gradwire::complete_ready_order({3}, 3), gradwire::Error);
}

TEST(ReducerPlan, StepStatsOverlap) {
  using TP = gradwire::StepStats::TimePoint;
  using ms = std::chrono::milliseconds;
  gradwire::StepStats s;
  const TP t0{};
  s.first_ready = t0;
  s.finalize_start = t0 + ms(10);
  // [2,6] and [5,12] overlap: 10 ms in flight, 8 of them before finalize.
  s.bucket_launch = {t0 + ms(2), t0 + ms(5)};
  s.bucket_done = {t0 + ms(6), t0 + ms(12)};
  EXPECT_NEAR(s.communication_time().count(), 0.010, 1e-9);
  EXPECT_NEAR(s.hidden_time().count(), 0.008, 1e-9);
  EXPECT_NEAR(s.hidden_fraction(), 0.8, 1e-9);
  EXPECT_EQ(gradwire::StepStats{}.hidden_fraction(), 1.0);
}

}  // namespace
