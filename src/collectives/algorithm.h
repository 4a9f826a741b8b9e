// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Pure planning: which algorithm a collective uses and how a ring splits its
// buffer into blocks and pipeline segments. No ranks, no I/O: every rank
// computes the same plan from the same inputs, so no negotiation is needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gradwire/options.h"
#include "gradwire/types.h"

namespace gradwire::collectives {

enum class Algorithm {
  Local,              // world of one: a copy at most
  Ring,               // bandwidth-optimal: reduce-scatter + allgather around a ring
  RecursiveDoubling,  // latency-optimal: log2(n) exchanges of the whole buffer
  BinomialTree,       // broadcast, latency-optimal
  Chain,              // broadcast, pipelined along the ring
  Pairwise,           // alltoall
  Dissemination,      // barrier
};
std::string_view to_string(Algorithm algorithm);

Algorithm choose_allreduce(size_t bytes, int world, const Options& options);
Algorithm choose_broadcast(size_t bytes, int world, const Options& options);

// One block per rank: the shard layout of shard_count/shard_offset.
struct Blocks {
  std::vector<size_t> offset;  // elements
  std::vector<size_t> count;   // elements
  size_t max_count = 0;
};
Blocks shard_blocks(size_t count, int world);

// Note [ring segments]: each block is cut into `nseg` segments of at most
// `seg_elems` elements (the last ones of a smaller block may be empty, and
// an empty message is still sent, so every rank exchanges the same number
// of messages whatever its block sizes). Segments are the pipelining unit:
// segment k of step s+1 leaves as soon as segment k of step s arrived.
struct Segmentation {
  size_t seg_elems = 1;
  size_t nseg = 1;
};
// `seg_elems` is at most `max_block_elems`. `messages_per_segment` is how
// many slots each segment needs over the whole collective; the result keeps nseg * messages_per_segment below
// the tag's slot space.
Segmentation segment(size_t max_block_elems, size_t elem_size, size_t segment_bytes,
                     size_t messages_per_segment);

// Elements [first, first+len) of segment k within a block of block_count.
struct Range {
  size_t first = 0;
  size_t len = 0;
};
Range segment_range(size_t block_count, const Segmentation& seg, size_t k);

// Note [the copy path] (copy_path.cpp): the blocks of a collective walked
// in `rounds` rounds of `chunk` elements per block, `parts` pieces of a
// round fitting a staging half of `stage_bytes`.
struct CopyPlan {
  Blocks blocks;
  size_t chunk = 1;   // elements of one block per round
  size_t rounds = 0;  // ceil(blocks.max_count / chunk)
};
CopyPlan copy_plan(size_t count, int world, size_t elem_size, size_t stage_bytes, size_t parts);

}  // namespace gradwire::collectives
