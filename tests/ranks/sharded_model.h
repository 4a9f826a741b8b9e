// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A small model for the sharded engine's multi-rank tests: parameters of
// sizes not divisible by the world size (0-element ones too) in three
// units, dyadic initial values, and per-rank gradients whose average over
// the ranks is exact and does not depend on the world size.
//
// Note [gradients with an exact average]: the tests compare the sharded
// engine with the unsharded computation bit for bit, and a sum of
// rounded terms depends on its order, which differs between collectives
// and paths (ring, recursive doubling, shared memory) at 3 ranks or more.
// So the gradients are chosen so that no step rounds: rank r sends
// g_r = world * h_r where the h_r are small multiples of 2^-8 with
// sum_r h_r = G(step, parameter, element, p) (h_0 takes what the others'
// noise leaves). Dividing by the world size gives h_r exactly, every
// partial sum is a multiple of 2^-8 below 2^8 in magnitude, so float32,
// bfloat16 and float16 hold it exactly in any order, and the average is G
// whatever the world size. G depends on the parameter value p (through
// floor(16 p)), so a wrongly gathered parameter changes the next step's
// gradients. With these gradients every configuration must reproduce the
// unsharded trajectory bit for bit, and a run re-sharded to another world
// size continues the same trajectory.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"
#include "kernels/reduce_math.h"

namespace gwtest::sharded {

inline uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline const std::vector<size_t>& model_sizes() {
  static const std::vector<size_t> sizes = {37, 0, 129, 5, 300, 3, 64, 257, 1, 90, 0, 211};
  return sizes;
}

inline std::vector<gradwire::ShardedParameter> model(gradwire::DataType dt) {
  std::vector<gradwire::ShardedParameter> out;
  const auto& sizes = model_sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    gradwire::ShardedParameter p;
    p.elements = sizes[i];
    p.dtype = dt;
    p.name = "layer" + std::to_string(i * 3 / sizes.size()) + ".p" + std::to_string(i);
    p.unit = i * 3 / sizes.size();
    out.push_back(p);
  }
  return out;
}

// Small Buckets, so the model spans several at every world size.
inline gradwire::BucketCaps small_caps() { return {256, 1024}; }

inline float load(gradwire::DataType dt, const void* p, size_t e) {
  namespace k = gradwire::kernels;
  if (dt == gradwire::DataType::Float32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(p) + 4 * e, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(p) + 2 * e, 2);
  return dt == gradwire::DataType::BFloat16 ? k::bf16_to_float(h) : k::half_to_float(h);
}

inline void store(gradwire::DataType dt, void* p, size_t e, float v) {
  namespace k = gradwire::kernels;
  if (dt == gradwire::DataType::Float32) {
    std::memcpy(static_cast<char*>(p) + 4 * e, &v, 4);
    return;
  }
  const uint16_t h = dt == gradwire::DataType::BFloat16 ? k::float_to_bf16(v) : k::float_to_half(v);
  std::memcpy(static_cast<char*>(p) + 2 * e, &h, 2);
}

// Initial values: multiples of 2^-8 in [-1, 1), exact in every dtype.
inline std::vector<std::vector<std::byte>> initial_values(
    const std::vector<gradwire::ShardedParameter>& ps) {
  std::vector<std::vector<std::byte>> out;
  for (size_t i = 0; i < ps.size(); ++i) {
    out.emplace_back(ps[i].elements * gradwire::element_size(ps[i].dtype));
    for (size_t e = 0; e < ps[i].elements; ++e) {
      const int k = int(mix(i * 7919 + e) % 511) - 255;
      store(ps[i].dtype, out.back().data(), e, float(k) / 256.0f);
    }
  }
  return out;
}

// Rank r's gradient of parameter i at `step`, given the parameter's
// current values (Note [gradients with an exact average]); `scale`
// multiplies it (a power of two: a loss scale).
inline std::vector<std::byte> gradient(const gradwire::ShardedParameter& p, size_t i, int rank,
                                       int world, uint64_t step, const void* values,
                                       float scale = 1.0f) {
  std::vector<std::byte> out(p.elements * gradwire::element_size(p.dtype));
  for (size_t e = 0; e < p.elements; ++e) {
    const float v = load(p.dtype, values, e);
    const int q = std::clamp(int(std::floor(v * 16.0f)), -8, 8);
    const int g = int(mix(step * 1000003 + i * 10007 + e) % 17) - 8 + q;  // G in 2^-8 units
    auto noise = [&](int r) { return int(mix(step * 31 + i * 131 + e * 7 + uint64_t(r)) % 17) - 8; };
    int h = 0;
    if (rank == 0) {
      h = g;
      for (int r = 1; r < world; ++r) h -= noise(r);
    } else {
      h = noise(rank);
    }
    store(p.dtype, out.data(), e, float(world * h) / 256.0f * scale);
  }
  return out;
}

}  // namespace gwtest::sharded
