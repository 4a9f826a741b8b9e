// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "collectives/algorithm.h"

#include <algorithm>

#include "collectives/context.h"

namespace gradwire::collectives {

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Local: return "local";
    case Algorithm::Ring: return "ring";
    case Algorithm::RecursiveDoubling: return "recursive doubling";
    case Algorithm::BinomialTree: return "binomial tree";
    case Algorithm::Chain: return "pipelined chain";
    case Algorithm::Pairwise: return "pairwise exchange";
    case Algorithm::Dissemination: return "dissemination";
  }
  return "?";
}

Algorithm choose_allreduce(size_t bytes, int world, const Options& options) {
  if (world == 1) return Algorithm::Local;
  // Recursive doubling moves the whole buffer log2(n) times but needs only
  // log2(n) (+2) latencies; the ring moves 2(n-1)/n of it in 2(n-1) steps.
  if (bytes <= options.collectives.small_message_bytes) return Algorithm::RecursiveDoubling;
  return Algorithm::Ring;
}

Algorithm choose_broadcast(size_t bytes, int world, const Options& options) {
  if (world == 1) return Algorithm::Local;
  if (bytes <= options.collectives.small_message_bytes || world == 2) return Algorithm::BinomialTree;
  return Algorithm::Chain;
}

Blocks shard_blocks(size_t count, int world) {
  Blocks b;
  b.offset.resize(world);
  b.count.resize(world);
  for (int r = 0; r < world; ++r) {
    b.offset[r] = shard_offset(count, world, r);
    b.count[r] = shard_count(count, world, r);
    b.max_count = std::max(b.max_count, b.count[r]);
  }
  return b;
}

Segmentation segment(size_t max_block_elems, size_t elem_size, size_t segment_bytes,
                     size_t messages_per_segment) {
  Segmentation s;
  s.seg_elems = std::max<size_t>(1, segment_bytes / std::max<size_t>(1, elem_size));
  // Never longer than the largest block: the ring sizes its receive window
  // (at least four slots) by the segment, so a segment option far above the
  // data (GRADWIRE_SEGMENT_BYTES=1G for an 8 MiB allreduce) would allocate
  // and zero gigabytes per collective (issue 17, item 2: it stalled the
  // engine past the deadline).
  s.seg_elems = std::min(s.seg_elems, std::max<size_t>(1, max_block_elems));
  s.nseg = std::max<size_t>(1, (max_block_elems + s.seg_elems - 1) / s.seg_elems);
  // Keep the slot space: grow the segment until the messages fit.
  const size_t budget = (kMaxSlots - 64) / std::max<size_t>(1, messages_per_segment);
  if (s.nseg > budget) {
    s.nseg = budget;
    s.seg_elems = (max_block_elems + s.nseg - 1) / s.nseg;
  }
  return s;
}

Range segment_range(size_t block_count, const Segmentation& seg, size_t k) {
  Range r;
  r.first = std::min(block_count, k * seg.seg_elems);
  r.len = std::min(seg.seg_elems, block_count - r.first);
  return r;
}

CopyPlan copy_plan(size_t count, int world, size_t elem_size, size_t stage_bytes, size_t parts) {
  CopyPlan plan;
  plan.blocks = shard_blocks(count, world);
  size_t per_part = stage_bytes / std::max<size_t>(1, parts);
  if (per_part >= 64) per_part = per_part / 64 * 64;  // pieces start on cache lines
  plan.chunk = std::max<size_t>(1, per_part / std::max<size_t>(1, elem_size));
  plan.rounds = (plan.blocks.max_count + plan.chunk - 1) / plan.chunk;
  return plan;
}

}  // namespace gradwire::collectives
