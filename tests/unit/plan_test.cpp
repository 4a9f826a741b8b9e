// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Planning is pure: tested here with no ranks at all.
#include <gtest/gtest.h>

#include "collectives/context.h"
#include "collectives/algorithm.h"
#include "collectives/hierarchy.h"
#include "runtime/setup.h"

namespace gradwire::collectives {
namespace {

TEST(Plan, AllreduceAlgorithmBySize) {
  Options o;
  o.collectives.small_message_bytes = 64 * 1024;
  EXPECT_EQ(choose_allreduce(1 << 20, 1, o), Algorithm::Local);
  EXPECT_EQ(choose_allreduce(0, 4, o), Algorithm::RecursiveDoubling);
  EXPECT_EQ(choose_allreduce(64 * 1024, 4, o), Algorithm::RecursiveDoubling);
  EXPECT_EQ(choose_allreduce(64 * 1024 + 1, 4, o), Algorithm::Ring);
  o.collectives.small_message_bytes = 0;
  EXPECT_EQ(choose_allreduce(4, 3, o), Algorithm::Ring);
}

TEST(Plan, BroadcastAlgorithmBySize) {
  Options o;
  EXPECT_EQ(choose_broadcast(1 << 20, 1, o), Algorithm::Local);
  EXPECT_EQ(choose_broadcast(100, 4, o), Algorithm::BinomialTree);
  EXPECT_EQ(choose_broadcast(1 << 20, 2, o), Algorithm::BinomialTree);
  EXPECT_EQ(choose_broadcast(1 << 20, 3, o), Algorithm::Chain);
}

TEST(Plan, BlocksCoverTheBufferInOrder) {
  for (size_t count = 0; count < 40; ++count) {
    for (int world = 1; world <= 9; ++world) {
      Blocks b = shard_blocks(count, world);
      size_t next = 0, max = 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(b.offset[r], next);
        next += b.count[r];
        max = std::max(max, b.count[r]);
        // Sizes differ by at most one element, larger ones first.
        if (r > 0) EXPECT_LE(b.count[r], b.count[r - 1]);
        EXPECT_LE(b.count[0] - b.count[r], 1u);
      }
      EXPECT_EQ(next, count);
      EXPECT_EQ(b.max_count, max);
    }
  }
}

TEST(Plan, SegmentsCoverEveryBlock) {
  const Segmentation s = segment(1000, 4, 4096, 6);
  EXPECT_EQ(s.seg_elems, 1000u);  // never longer than the largest block
  EXPECT_EQ(s.nseg, 1u);
  const Segmentation t = segment(10000, 4, 4096, 6);
  EXPECT_EQ(t.nseg, 10u);  // ceil(10000 / 1024)
  for (size_t block : {size_t(0), size_t(1), size_t(1023), size_t(1024), size_t(9999), size_t(10000)}) {
    size_t covered = 0;
    for (size_t k = 0; k < t.nseg; ++k) {
      Range r = segment_range(block, t, k);
      EXPECT_EQ(r.first, std::min(block, covered));
      covered += r.len;
    }
    EXPECT_EQ(covered, block) << "block " << block;
  }
}

// Issue 17, item 2: GRADWIRE_SEGMENT_BYTES=1G used to size the ring's
// receive window at four 1 GiB slots whatever the data; the segment now
// follows the data, so every accepted value costs no more memory than the
// default for the same collective.
TEST(Plan, SegmentsNeverExceedTheLargestBlock) {
  const size_t block = (size_t(8) << 20) / 4 / 3;  // 8 MiB of float32 on 3 ranks
  const Segmentation huge = segment(block, 4, size_t(1) << 30, 4);
  EXPECT_EQ(huge.seg_elems, block);
  EXPECT_EQ(huge.nseg, 1u);
  EXPECT_EQ(segment(0, 4, size_t(1) << 30, 4).seg_elems, 1u);
  EXPECT_EQ(segment(block, 4, 1 << 20, 4).seg_elems, size_t(1) << 18);  // default unchanged
}

TEST(Plan, SegmentsStayInsideTheTagSlotSpace) {
  // 1 TiB of float32 in 1 MiB segments on 8 ranks would need more slots
  // than a tag holds: the plan grows the segments instead.
  const size_t block = (size_t(1) << 40) / 4 / 8;
  const Segmentation s = segment(block, 4, 1 << 20, 2 * 7);
  EXPECT_LT(s.nseg * 2 * 7, size_t(kMaxSlots));
  EXPECT_GE(s.nseg * s.seg_elems, block);
}

TEST(Plan, TagsSeparateSequenceRankAndSlot) {
  EXPECT_NE(make_tag(1, 0, 0), make_tag(2, 0, 0));
  EXPECT_NE(make_tag(1, 0, 0), make_tag(1, 1, 0));
  EXPECT_NE(make_tag(1, 0, 0), make_tag(1, 0, 1));
  EXPECT_EQ(make_tag(3, 5, 7) >> 40, 3u);
  EXPECT_EQ((make_tag(3, 5, 7) >> 20) & 0xfffff, 5u);
  EXPECT_EQ(make_tag(3, 5, 7) & 0xfffff, 7u);
  // The sequence number wraps instead of spilling into the rank bits.
  EXPECT_EQ(make_tag(1u << 24, 5, 7), make_tag(0, 5, 7));
  // Every tag leaves the top bit alone (net's mem_tag_format), and
  // collectives never set the point-to-point bit.
  const uint64_t highest = make_tag(~0u, kMaxWorldSize - 1, kMaxSlots - 1);
  EXPECT_EQ(highest >> 62, 0u);
  EXPECT_EQ(make_p2p_tag(~0u, kMaxWorldSize - 1) >> 63, 0u);
  EXPECT_EQ(make_p2p_tag(~0u, kMaxWorldSize - 1) & (kPayloadBit | kClearBit), 0u);
}

TEST(Plan, FabricChoice) {
  using setup::choose_fabric;
  const std::vector<std::string> debian = {"shm", "tcp;ofi_rxm", "net", "sockets"};
  auto one = choose_fabric("", "", {"a", "a", "a"}, debian);
  EXPECT_EQ(one.provider, "shm");
  EXPECT_EQ(one.iface, "");
  // Across hosts: net where libfabric has it (Note [the provider across
  // hosts]), else tcp;ofi_rxm.
  auto many = choose_fabric("", "", {"a", "b"}, debian);
  EXPECT_EQ(many.provider, "net");
  EXPECT_EQ(many.iface, "");
  EXPECT_EQ(choose_fabric("", "", {"a", "b"}, {"shm", "tcp;ofi_rxm"}).provider, "tcp;ofi_rxm");
  // A socket provider on one host stays on loopback unless told otherwise.
  EXPECT_EQ(choose_fabric("tcp;ofi_rxm", "", {"a", "a"}, debian).iface, "lo");
  EXPECT_EQ(choose_fabric("net", "", {"a", "a"}, debian).iface, "lo");
  EXPECT_EQ(choose_fabric("tcp;ofi_rxm", "eth1", {"a", "a"}, debian).iface, "eth1");
  EXPECT_EQ(choose_fabric("efa", "", {"a", "b"}, debian).provider, "efa");
}

// Note [hierarchical allreduce]: groups by host, used only for H > 1 hosts
// of the same L > 1 ranks each.
TEST(Plan, HierarchyGroupsRanksByHost) {
  // Ranks interleaved across hosts: groups keep rank order within a host.
  const std::vector<std::string> hosts{"a", "b", "a", "b", "a", "b"};
  Hierarchy h = plan_hierarchy(hosts, 3);
  ASSERT_TRUE(h.use) << h.why_not;
  EXPECT_EQ(h.host_groups, (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_EQ(h.cross_groups, (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(h.host, 1);
  EXPECT_EQ(h.local_rank, 1);
  // Every rank computes the same groups.
  for (int r = 0; r < 6; ++r) EXPECT_EQ(plan_hierarchy(hosts, r).cross_groups, h.cross_groups);
}

TEST(Plan, HierarchyOnlyWhenItHelps) {
  EXPECT_FALSE(plan_hierarchy({"a", "a", "a"}, 0).use);  // one host
  EXPECT_FALSE(plan_hierarchy({"a", "b", "c"}, 0).use);  // one rank per host
  Hierarchy uneven = plan_hierarchy({"a", "a", "a", "b"}, 3);
  EXPECT_FALSE(uneven.use);
  EXPECT_NE(uneven.why_not.find("different numbers"), std::string::npos) << uneven.why_not;
  EXPECT_EQ(uneven.host_groups.size(), 2u);
  EXPECT_TRUE(plan_hierarchy({"x", "x", "y", "y"}, 0).use);
  EXPECT_TRUE(plan_hierarchy({}, 0).host_groups.empty());
}

// Note [the copy path]: a round's pieces fit one staging half, start on
// cache lines, and the rounds cover every block.
TEST(Plan, CopyRoundsFitTheStagingHalf) {
  const size_t half = size_t(1) << 20;
  for (int world : {2, 3, 4, 7}) {
    for (size_t es : {size_t(1), size_t(2), size_t(4), size_t(8)}) {
      for (size_t parts : {size_t(1), size_t(world)}) {
        for (size_t count : {size_t(0), size_t(1), size_t(17), size_t(1) << 20,
                             (size_t(5) << 20) / es + 3, size_t(123456789)}) {
          const CopyPlan p = copy_plan(count, world, es, half, parts);
          EXPECT_LE(p.chunk * es * parts, half);
          EXPECT_EQ(p.chunk * es % 64, 0u) << "pieces start on cache lines";
          EXPECT_GE(p.rounds * p.chunk, p.blocks.max_count) << "every element in some round";
          if (p.rounds) EXPECT_LT((p.rounds - 1) * p.chunk, p.blocks.max_count) << "no empty round";
          if (count == 0) EXPECT_EQ(p.rounds, 0u);
        }
      }
    }
  }
  // A staging half smaller than one element per part still moves one.
  EXPECT_EQ(copy_plan(10, 2, 8, 4, 2).chunk, 1u);
  EXPECT_EQ(copy_plan(10, 2, 8, 4, 2).rounds, 5u);
}

}  // namespace
}  // namespace gradwire::collectives
