// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [quantized exchange below both users]: the quantized reduce-scatter
// has two users in two layers: the public QuantizedReduceScatter (compress)
// and the sharded engine's compressed gradient reduce-scatter (sharded,
// which sits below compress and may not include it). Rather than a second
// copy of the layout in the engine, or the engine calling the public class
// (whose run() is synchronous and allocates its own buffers and error
// buffer, where the engine needs an asynchronous exchange in its bounded
// buffer pool), the layout and the two element passes live here, below
// both, as pure functions over caller-owned buffers; each user runs the
// exchange between them its own way. So a gradient shard the engine
// reduces is bit for bit what QuantizedReduceScatter would produce from
// the same inputs and error buffers.
#include "collectives/quantized_layout.h"

#include <algorithm>

#include "kernels/cpu/quantize.h"

namespace gradwire::collectives {

bool quantizable(DataType dtype) {
  return dtype == DataType::Float32 || dtype == DataType::Float16 ||
         dtype == DataType::BFloat16;
}

kernels::QuantType quant_type(DataType dtype) {
  switch (dtype) {
    case DataType::Float16: return kernels::QuantType::Float16;
    case DataType::BFloat16: return kernels::QuantType::BFloat16;
    default: return kernels::QuantType::Float32;
  }
}

QuantizedLayout QuantizedLayout::make(size_t world, size_t rank, size_t count, size_t block,
                                      DataType dtype) {
  QuantizedLayout l;
  l.world = world;
  l.rank = rank;
  l.count = count;
  l.block = block;
  l.dtype = dtype;
  l.type = quant_type(dtype);
  l.element = element_size(dtype);
  const size_t nmax = l.shard(0);  // the first shards are the largest
  l.nbmax = kernels::quant_blocks(nmax, block);
  l.segment = (l.nbmax * sizeof(float) + nmax + 3) / 4 * 4;
  return l;
}

void quantize_shards(const QuantizedLayout& l, const void* send, float* error, std::byte* wire) {
  const auto* src = static_cast<const std::byte*>(send);
  for (size_t j = 0; j < l.world; ++j) {
    const size_t off = l.offset(j);
    kernels::quantize_int8_blocks(src + off * l.element, l.type, l.shard(j), l.block,
                                  error ? error + off : nullptr, l.scales(wire, j),
                                  l.values(wire, j));
  }
}

void reduce_segments(const QuantizedLayout& l, const std::byte* wire, float* acc, float factor,
                     void* recv) {
  const size_t mine = l.shard(l.rank);
  std::fill(acc, acc + mine, 0.0f);
  for (size_t i = 0; i < l.world; ++i) {  // in rank order: Note [quantized collective layout]
    kernels::accumulate_int8_blocks(l.values(wire, i), l.scales(wire, i), mine, l.block, acc);
  }
  kernels::store_scaled(acc, factor, mine, l.type, recv);
}

}  // namespace gradwire::collectives
