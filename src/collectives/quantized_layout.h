// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The layout of the quantized reduce-scatter and allgather (Note [quantized
// collective layout]) and the element passes on either side of their one
// exchange, shared by the two places that run it: the public collectives
// (src/compress/quantized.cpp, the exchange a Communicator's alltoall or
// allgather) and the sharded engine's compressed gradient reduce-scatter
// (src/sharded/compressed.cpp, the exchange inside a composite operation).
// Written once here so that both send the same bytes and compute every
// result by the same code (Note [quantized exchange below both users]).
// Pure: no ranks, no I/O; the caller moves the wire bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gradwire/types.h"
#include "kernels/quantize_math.h"

namespace gradwire::collectives {

// float32, float16, bfloat16: the dtypes the int8 quantizer reads and writes.
bool quantizable(DataType dtype);
kernels::QuantType quant_type(DataType dtype);

// Note [quantized collective layout]: the count elements are split into
// shards as Communicator::reduce_scatter splits them (shard_count /
// shard_offset). Shard j travels as one segment of S bytes,
//   [nbmax float32 scales][shard_count(j) int8][zero padding],
// where nbmax is the number of blocks of the largest shard and S is rounded
// up to 4 bytes, so every segment has the same size (one alltoall or one
// allgather of S bytes per rank) and its scales are 4-byte aligned. Unused
// scales and padding are zeroed once (the caller's wire buffers start
// zeroed) and never written, so the wire is defined bytes. Reduce-scatter:
// each rank quantizes every shard of its input into segment j of its send
// buffer (its own shard too: the result must not depend on which rank
// reduces it) with that shard's slice of its error buffer; after the
// alltoall, the owner of shard j sums the ranks' dequantized segments into
// float32 in rank order 0, 1, ..., then converts once to the dtype.
// Allgather: each rank quantizes its shard into its segment of the gather
// buffer, and after the allgather every rank dequantizes every segment, its
// own included. Either way a result is a function of the wire bytes alone,
// computed by the same code everywhere.
struct QuantizedLayout {
  size_t world = 1, rank = 0, count = 0, block = 1, element = 4;
  DataType dtype = DataType::Float32;
  kernels::QuantType type = kernels::QuantType::Float32;
  size_t nbmax = 0, segment = 0;

  // The caller has checked: quantizable(dtype), 1 <= block <= kMaxQuantBlock.
  static QuantizedLayout make(size_t world, size_t rank, size_t count, size_t block,
                              DataType dtype);

  size_t shard(size_t r) const { return shard_count(count, int(world), int(r)); }
  size_t offset(size_t r) const { return shard_offset(count, int(world), int(r)); }
  // Bytes of one rank's wire buffer: world segments.
  size_t wire_bytes() const { return segment * world; }
  float* scales(std::byte* wire, size_t r) const {
    return reinterpret_cast<float*>(wire + r * segment);
  }
  const float* scales(const std::byte* wire, size_t r) const {
    return reinterpret_cast<const float*>(wire + r * segment);
  }
  int8_t* values(std::byte* wire, size_t r) const {
    return reinterpret_cast<int8_t*>(wire + r * segment + nbmax * sizeof(float));
  }
  const int8_t* values(const std::byte* wire, size_t r) const {
    return reinterpret_cast<const int8_t*>(wire + r * segment + nbmax * sizeof(float));
  }
};

// Reduce-scatter, before the alltoall: every shard of `send` (count
// elements of the dtype) into its segment of `wire` (wire_bytes()), with
// error feedback from `error` (count float32, or nullptr).
void quantize_shards(const QuantizedLayout& l, const void* send, float* error, std::byte* wire);

// Reduce-scatter, after the alltoall (`wire`: segment i from rank i): the
// sum over ranks, in rank order, of this rank's shard into `acc`
// (shard(rank) float32, overwritten), times `factor`, stored to `recv`
// (shard(rank) elements of the dtype).
void reduce_segments(const QuantizedLayout& l, const std::byte* wire, float* acc, float factor,
                     void* recv);

}  // namespace gradwire::collectives
