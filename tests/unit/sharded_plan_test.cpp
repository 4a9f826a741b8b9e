// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Shard planning as a pure function (no ranks): padding, alignment, the
// pieces every rank's shard holds, the inverse map, units; and the
// ShardedState byte format.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "gradwire/error.h"
#include "gradwire/sharded.h"

namespace {

using gradwire::BucketCaps;
using gradwire::DataType;
using gradwire::ShardedParameter;
using gradwire::ShardPlan;
using gradwire::plan_shards;

ShardedParameter param(size_t elements, DataType dt = DataType::Float32, size_t unit = 0) {
  ShardedParameter p;
  p.elements = elements;
  p.dtype = dt;
  p.unit = unit;
  p.name = "p" + std::to_string(elements);
  return p;
}

std::vector<ShardedParameter> random_params(std::mt19937_64& rng, size_t n, size_t units = 1) {
  std::vector<ShardedParameter> out;
  const DataType dts[] = {DataType::Float32, DataType::BFloat16, DataType::Float16};
  for (size_t i = 0; i < n; ++i) {
    size_t e = rng() % 4 == 0 ? 0 : rng() % 5000;  // 0-element parameters too
    if (rng() % 7 == 0) e = 1 + rng() % 3;
    out.push_back(param(e, dts[rng() % 3], units > 1 ? std::min(units - 1, i * units / n) : 0));
  }
  return out;
}

// Everything a plan promises, checked element by element.
void check_plan(const std::vector<ShardedParameter>& ps, const ShardPlan& plan, int world,
                size_t align, const BucketCaps& caps) {
  ASSERT_EQ(plan.world, world);
  ASSERT_EQ(plan.location.size(), ps.size());
  // Per parameter element: which rank/shard position holds it (exactly once).
  std::vector<std::vector<int>> covered(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) covered[i].assign(ps[i].elements, 0);
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& bk = plan.buckets[b];
    SCOPED_TRACE("bucket " + std::to_string(b));
    EXPECT_EQ(bk.padded % (size_t(world) * align), 0u);
    EXPECT_GE(bk.padded, bk.elements);
    EXPECT_LT(bk.padded - bk.elements, size_t(world) * align);
    EXPECT_EQ(bk.shard * size_t(world), bk.padded);
    EXPECT_EQ(bk.shard % align, 0u);
    ASSERT_EQ(bk.pieces.size(), size_t(world));
    size_t at = 0, bytes = 0;
    for (size_t k = 0; k < bk.parameters.size(); ++k) {
      const size_t i = bk.parameters[k];
      EXPECT_EQ(bk.offsets[k], at);
      EXPECT_EQ(ps[i].dtype, bk.dtype);
      EXPECT_EQ(ps[i].unit, bk.unit);
      EXPECT_EQ(plan.location[i].bucket, b);
      EXPECT_EQ(plan.location[i].offset, at);
      at += ps[i].elements;
      bytes += ps[i].elements * gradwire::element_size(ps[i].dtype);
    }
    EXPECT_EQ(at, bk.elements);
    const size_t cap = std::max(caps.first_bucket_bytes, caps.bucket_bytes);
    if (bk.parameters.size() > 1) EXPECT_LE(bytes, cap);
    for (int r = 0; r < world; ++r) {
      size_t prev_end = 0;
      for (const auto& pc : bk.pieces[size_t(r)]) {
        EXPECT_GE(pc.shard_offset, prev_end);  // in shard order, not overlapping
        prev_end = pc.shard_offset + pc.count;
        EXPECT_LE(prev_end, bk.shard);
        EXPECT_GT(pc.count, 0u);
        ASSERT_LE(pc.offset + pc.count, ps[pc.parameter].elements);
        // The piece is where the Bucket layout says it is.
        EXPECT_EQ(plan.location[pc.parameter].offset + pc.offset,
                  size_t(r) * bk.shard + pc.shard_offset);
        for (size_t e = pc.offset; e < pc.offset + pc.count; ++e) ++covered[pc.parameter][e];
        // The inverse map says the same.
        const auto owners = plan.owners(pc.parameter, pc.offset, pc.count);
        ASSERT_EQ(owners.size(), 1u);
        EXPECT_EQ(owners[0], (ShardPlan::Owner{r, b, pc.offset, pc.shard_offset, pc.count}));
      }
    }
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    for (size_t e = 0; e < ps[i].elements; ++e) {
      ASSERT_EQ(covered[i][e], 1) << "parameter " << i << " element " << e;
    }
    // owners() of the whole parameter tiles it in order.
    size_t at = 0;
    for (const auto& o : plan.owners(i, 0, ps[i].elements)) {
      EXPECT_EQ(o.offset, at);
      at += o.count;
    }
    EXPECT_EQ(at, ps[i].elements);
  }
}

TEST(ShardPlan, RandomListsAtEveryWorldSize) {
  std::mt19937_64 rng(43);
  const BucketCaps caps{size_t(4) << 10, size_t(16) << 10};
  for (int trial = 0; trial < 40; ++trial) {
    const auto ps = random_params(rng, 1 + rng() % 40, 1 + rng() % 4);
    for (size_t align : {size_t(1), size_t(4), size_t(32)}) {
      const ShardPlan one = plan_shards(ps, 1, caps, align);
      for (int world = 1; world <= 8; ++world) {
        SCOPED_TRACE("trial " + std::to_string(trial) + " world " + std::to_string(world) +
                     " alignment " + std::to_string(align));
        const ShardPlan plan = plan_shards(ps, world, caps, align);
        check_plan(ps, plan, world, align, caps);
        // The same inputs give the same plan (every rank computes it alone).
        EXPECT_EQ(plan, plan_shards(ps, world, caps, align));
        // Only padding and shard boundaries depend on the world size.
        ASSERT_EQ(plan.buckets.size(), one.buckets.size());
        for (size_t b = 0; b < plan.buckets.size(); ++b) {
          EXPECT_EQ(plan.buckets[b].parameters, one.buckets[b].parameters);
          EXPECT_EQ(plan.buckets[b].offsets, one.buckets[b].offsets);
        }
        EXPECT_EQ(plan.units, one.units);
      }
    }
  }
}

TEST(ShardPlan, CountsNotDivisibleByTheWorld) {
  // 10 elements over 3 ranks, alignment 1: 12 padded, shards of 4; rank 2
  // holds 2 elements and 2 of padding.
  const std::vector<ShardedParameter> ps = {param(7), param(3)};
  const ShardPlan plan = plan_shards(ps, 3, {}, 1, {0, 1});
  ASSERT_EQ(plan.buckets.size(), 1u);
  const auto& b = plan.buckets[0];
  EXPECT_EQ(b.elements, 10u);
  EXPECT_EQ(b.padded, 12u);
  EXPECT_EQ(b.shard, 4u);
  using P = gradwire::ShardPiece;
  EXPECT_EQ(b.pieces[0], (std::vector<P>{{0, 0, 0, 4}}));
  EXPECT_EQ(b.pieces[1], (std::vector<P>{{0, 4, 0, 3}, {1, 0, 3, 1}}));
  EXPECT_EQ(b.pieces[2], (std::vector<P>{{1, 1, 0, 2}}));
  // Alignment 32 at world 3: 96 padded, rank 0 holds everything.
  const ShardPlan aligned = plan_shards(ps, 3, {}, 32, {0, 1});
  EXPECT_EQ(aligned.buckets[0].padded, 96u);
  EXPECT_EQ(aligned.buckets[0].shard, 32u);
  EXPECT_TRUE(aligned.buckets[0].pieces[1].empty());
  EXPECT_TRUE(aligned.buckets[0].pieces[2].empty());
  // owners() of a range across a shard boundary.
  const auto o = plan.owners(0, 2, 5);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0], (ShardPlan::Owner{0, 0, 2, 2, 2}));
  EXPECT_EQ(o[1], (ShardPlan::Owner{1, 0, 4, 0, 3}));
}

TEST(ShardPlan, ZeroElementParameters) {
  const std::vector<ShardedParameter> ps = {param(0), param(0), param(5), param(0)};
  for (int world = 1; world <= 4; ++world) {
    const ShardPlan plan = plan_shards(ps, world, {}, 1);
    check_plan(ps, plan, world, 1, {});
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_LT(plan.location[i].bucket, plan.buckets.size());
  }
  // Only empty parameters: a Bucket with nothing to reduce.
  const ShardPlan empty = plan_shards({param(0), param(0)}, 3, {}, 8);
  ASSERT_EQ(empty.buckets.size(), 1u);
  EXPECT_EQ(empty.buckets[0].padded, 0u);
  EXPECT_EQ(empty.buckets[0].shard, 0u);
  EXPECT_TRUE(plan_shards({}, 2).buckets.empty());
}

TEST(ShardPlan, UnitsNeverShareABucket) {
  std::vector<ShardedParameter> ps;
  for (size_t u = 0; u < 4; ++u) {
    for (int k = 0; k < 3; ++k) ps.push_back(param(100 + 10 * u, DataType::BFloat16, u));
  }
  const ShardPlan plan = plan_shards(ps, 3, {}, 4);
  check_plan(ps, plan, 3, 4, {});
  ASSERT_EQ(plan.units.size(), 4u);
  for (size_t u = 0; u < 4; ++u) {
    ASSERT_EQ(plan.units[u].size(), 1u);
    EXPECT_EQ(plan.buckets[plan.units[u][0]].unit, u);
  }
  // Reverse registration order: the last unit's Bucket completes first.
  EXPECT_EQ(plan.buckets[0].unit, 3u);
  ps[0].unit = ps.size();
  EXPECT_THROW(plan_shards(ps, 2), gradwire::Error);
}

TEST(ShardPlan, CapsAndOrder) {
  std::vector<ShardedParameter> ps;
  for (int k = 0; k < 10; ++k) ps.push_back(param(256));  // 1 KiB each
  const BucketCaps caps{2048, 4096};
  const ShardPlan plan = plan_shards(ps, 2, caps, 1);
  check_plan(ps, plan, 2, 1, caps);
  ASSERT_EQ(plan.buckets.size(), 3u);  // 2 + 4 + 4 parameters
  EXPECT_EQ(plan.buckets[0].parameters, (std::vector<size_t>{9, 8}));
  std::vector<size_t> order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(plan_shards(ps, 2, caps, 1, order).buckets[0].parameters, (std::vector<size_t>{0, 1}));
  EXPECT_THROW(plan_shards(ps, 2, caps, 1, {0, 1}), gradwire::Error);
  order[3] = 0;
  EXPECT_THROW(plan_shards(ps, 2, caps, 1, order), gradwire::Error);
  EXPECT_THROW(plan_shards(ps, 0), gradwire::Error);
  EXPECT_THROW(plan_shards(ps, 2, caps, 0), gradwire::Error);
  EXPECT_THROW(plan.owners(0, 200, 100), gradwire::Error);
}

TEST(ShardPlan, Fingerprint) {
  std::vector<ShardedParameter> ps = {param(10), param(20, DataType::BFloat16)};
  const uint64_t f = gradwire::parameter_list_fingerprint(ps);
  auto renamed = ps;
  renamed[0].name = "other";
  renamed[1].unit = 1;
  EXPECT_EQ(gradwire::parameter_list_fingerprint(renamed), f);
  auto reshaped = ps;
  reshaped[0].elements = 11;
  EXPECT_NE(gradwire::parameter_list_fingerprint(reshaped), f);
  auto retyped = ps;
  retyped[1].dtype = DataType::Float16;
  EXPECT_NE(gradwire::parameter_list_fingerprint(retyped), f);
  EXPECT_NE(gradwire::parameter_list_fingerprint({ps[1], ps[0]}), f);
}

gradwire::ShardedState sample_state() {
  gradwire::ShardedState s;
  s.fingerprint = 0x1234;
  s.stage = 2;
  s.world = 3;
  s.rank = 1;
  s.optimizer = "adam";
  s.state_names = {"exp_avg", "exp_avg_sq"};
  s.step = 7;
  s.loss_scale = 1024;
  s.good_steps = 3;
  s.dtypes = {DataType::Float32, DataType::BFloat16};
  for (size_t p = 0; p < 2; ++p) {
    gradwire::ShardedState::Record r;
    r.parameter = p;
    r.offset = 2;
    r.count = 3;
    r.values.assign(3 * gradwire::element_size(s.dtypes[p]), std::byte{7});
    r.master = {1, 2, 3};
    r.state = {{4, 5, 6}, {7, 8, 9}};
    s.records.push_back(r);
  }
  return s;
}

TEST(ShardedStateFormat, RoundTripsAndRefusesEveryTruncation) {
  const std::string bytes = sample_state().encode();
  const auto back = gradwire::ShardedState::decode(bytes, "test");
  EXPECT_EQ(back.encode(), bytes);
  EXPECT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.records[1].state[1], (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(back.loss_scale, 1024.0f);
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      gradwire::ShardedState::decode(bytes.substr(0, n), "test");
      ADD_FAILURE() << "a truncation to " << n << " bytes decoded";
    } catch (const gradwire::Error& e) {
      EXPECT_EQ(e.code(), gradwire::ErrorCode::Protocol) << e.what();
    }
  }
  EXPECT_THROW(gradwire::ShardedState::decode(bytes + "x", "test"), gradwire::Error);
  auto overlapping = sample_state();
  overlapping.records[1].parameter = 0;  // [2, 5) twice
  EXPECT_THROW(gradwire::ShardedState::decode(overlapping.encode(), "test"), gradwire::Error);
}

// Version 2 adds this rank's error-feedback buffers (gradient compression);
// a state without them is still written as version 1, byte for byte as
// before, so each state has one encoding.
TEST(ShardedStateFormat, ErrorFeedbackRoundTripsAsVersion2) {
  const std::string v1 = sample_state().encode();
  EXPECT_EQ(v1.substr(8, 4), std::string("\x01\0\0\0", 4));
  auto s = sample_state();
  s.error_feedback_layout = 0xfeed;
  s.error_feedback = {{0.5f, -0.25f}, {}, {1e-3f}};
  const std::string bytes = s.encode();
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x02\0\0\0", 4));
  const auto back = gradwire::ShardedState::decode(bytes, "test");
  EXPECT_EQ(back.encode(), bytes);
  EXPECT_EQ(back.error_feedback_layout, 0xfeedu);
  EXPECT_EQ(back.error_feedback, s.error_feedback);
  for (size_t n = v1.size(); n < bytes.size(); ++n) {
    EXPECT_THROW(gradwire::ShardedState::decode(bytes.substr(0, n), "test"), gradwire::Error) << n;
  }
  // A version-2 header over an empty error-feedback part is not canonical.
  std::string empty = v1;
  empty[8] = 2;
  empty.append(16, '\0');
  EXPECT_THROW(gradwire::ShardedState::decode(empty, "test"), gradwire::Error);
}

}  // namespace
