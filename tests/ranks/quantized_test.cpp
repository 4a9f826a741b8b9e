// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The quantized collectives (include/gradwire/quantized.h) across real
// ranks: every rank simulates the whole exchange with the CPU kernels from
// every rank's input (each rank can compute every other's) and must find
// the collective's bytes exactly, for every shard, so a result depends only
// on the wire bytes and not on which rank computed it; the allgather leaves
// identical bytes everywhere; error feedback keeps the running sum within a
// quantization step per rank of the true one (and without it the sum
// drifts); bad or differing options fail on every rank naming the option;
// the error buffer's state round-trips. Launched by ctest through gwlaunch.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gradwire/quantized.h"
#include "harness.h"
#include "kernels/cpu/quantize.h"

namespace gwtest {
namespace {

using gradwire::DataType;
using gradwire::ErrorCode;
using gradwire::QuantizedAllgather;
using gradwire::QuantizedOptions;
using gradwire::QuantizedReduceScatter;
using gradwire::ReduceOp;
using gradwire::shard_count;
using gradwire::shard_offset;
namespace k = gradwire::kernels;

const DataType kTypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16};
// Counts not divisible by 2, 3 or 4 (and smaller than the world).
const size_t kCounts[] = {0, 1, 5, 1001, 4099};
const size_t kBlocks[] = {1, 64, 1000};

k::QuantType qtype(DataType dt) {
  return dt == DataType::Float16    ? k::QuantType::Float16
         : dt == DataType::BFloat16 ? k::QuantType::BFloat16
                                    : k::QuantType::Float32;
}

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s input at `step`, count elements of dt: uniform in [-1, 1),
// every third run of 50 elements 100 times larger (blocks of other scales).
std::vector<std::byte> input(DataType dt, size_t count, int rank, uint64_t step, uint64_t seed) {
  std::vector<std::byte> out(count * gradwire::element_size(dt));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = mix(seed ^ mix(uint64_t(rank) * 1000003u ^ mix(step * 7919u + i)));
    float v = float(double(h >> 11) * 0x1.0p-52 - 1.0);
    if ((i / 50) % 3 == 2) v *= 100.0f;
    k::quant_store(out.data(), qtype(dt), i, v);
  }
  return out;
}

// The reduce-scatter of Note [quantized collective layout], simulated for
// every shard from every rank's input, with one error buffer per rank.
struct Simulation {
  Simulation(DataType dt, size_t count, int world, size_t block)
      : dt(dt), count(count), world(world), block(block),
        errors(size_t(world), std::vector<float>(count, 0.0f)) {}

  // The whole reduced vector (every shard) and, per element, the sum over
  // ranks of its block's scale (the bound on what quantization changed).
  std::vector<std::byte> step(uint64_t s, uint64_t seed, ReduceOp op, std::vector<double>& bound) {
    const size_t w = gradwire::element_size(dt);
    std::vector<float> acc(count, 0.0f);
    bound.assign(count, 0.0);
    for (int i = 0; i < world; ++i) {
      const auto x = input(dt, count, i, s, seed);
      for (int j = 0; j < world; ++j) {
        const size_t off = shard_offset(count, world, j), n = shard_count(count, world, j);
        std::vector<float> scales(k::quant_blocks(n, block));
        std::vector<int8_t> q(n);
        k::quantize_int8_blocks(x.data() + off * w, qtype(dt), n, block,
                                errors[size_t(i)].data() + off, scales.data(), q.data());
        k::accumulate_int8_blocks(q.data(), scales.data(), n, block, acc.data() + off);
        for (size_t e = 0; e < n; ++e) bound[off + e] += scales[e / block];
      }
    }
    std::vector<std::byte> out(count * w);
    const float factor = op == ReduceOp::Avg ? 1.0f / float(world) : 1.0f;
    k::store_scaled(acc.data(), factor, count, qtype(dt), out.data());
    return out;
  }

  DataType dt;
  size_t count;
  int world;
  size_t block;
  std::vector<std::vector<float>> errors;
};

// The full vector of every rank's shard (an exact allgather).
std::vector<std::byte> gather_shards(DataType dt, size_t count, const std::vector<std::byte>& mine) {
  std::vector<std::byte> all(count * gradwire::element_size(dt));
  if (count) world().allgather(mine.data(), all.data(), count, dt).wait();
  return all;
}

TEST(Quantized, ReduceScatterIsTheSameBytesForEveryShardOnEveryRank) {
  auto& w = world();
  const int n_ranks = w.size(), me = w.rank();
  for (DataType dt : kTypes) {
    for (size_t count : kCounts) {
      for (size_t block : kBlocks) {
        SCOPED_TRACE(testing::Message() << to_string(dt) << " count " << count << " block " << block);
        const uint64_t seed = count * 131 + block;
        QuantizedReduceScatter rs(w, count, dt, QuantizedOptions{block, true});
        Simulation sim(dt, count, n_ranks, block);
        const size_t esz = gradwire::element_size(dt);
        std::vector<double> bound, last_bound(count, 0.0);
        for (uint64_t s = 0; s < 3; ++s) {
          const ReduceOp op = s == 2 ? ReduceOp::Avg : ReduceOp::Sum;
          std::vector<std::vector<std::byte>> xs;
          for (int r = 0; r < n_ranks; ++r) xs.push_back(input(dt, count, r, s, seed));
          std::vector<std::byte> mine(shard_count(count, n_ranks, me) * esz);
          rs.run(xs[size_t(me)].data(), mine.data(), op);
          const auto got = gather_shards(dt, count, mine);
          const auto want = sim.step(s, seed, op, bound);
          ASSERT_TRUE(same_bytes(got.data(), want.data(), got.size())) << "step " << s;
          // And near the exact reduction: error feedback moves each rank's
          // contribution by at most half of this step's scale (the error
          // left now) plus half of the last one's (the error added), then
          // the result is rounded to dt.
          const double rel = dt == DataType::Float32 ? 1e-6 : (dt == DataType::Float16 ? 1e-3 : 8e-3);
          for (size_t i = 0; i < count; ++i) {
            double exact = 0;
            for (const auto& x : xs) exact += double(k::quant_load(x.data(), qtype(dt), i));
            const double moved = (bound[i] + last_bound[i]) / 2 * (1 + 1e-5);
            double tol = moved + rel * (std::fabs(exact) + moved) + 1e-6;
            if (op == ReduceOp::Avg) exact /= n_ranks, tol /= n_ranks;
            ASSERT_LE(std::fabs(double(k::quant_load(got.data(), qtype(dt), i)) - exact), tol)
                << "step " << s << " element " << i;
          }
          last_bound = bound;
        }
        EXPECT_EQ(rs.error(), sim.errors[size_t(me)]);
      }
    }
  }
}

TEST(Quantized, AllgatherLeavesTheSameBytesOnEveryRank) {
  auto& w = world();
  const int n_ranks = w.size(), me = w.rank();
  for (DataType dt : kTypes) {
    for (size_t count : kCounts) {
      for (size_t block : kBlocks) {
        SCOPED_TRACE(testing::Message() << to_string(dt) << " count " << count << " block " << block);
        const size_t esz = gradwire::element_size(dt);
        QuantizedAllgather ag(w, count, dt, QuantizedOptions{block, false});
        // Every rank's shard of one full vector; what every rank must get.
        const auto full = input(dt, count, 0, 0, count * 7 + block);
        std::vector<std::byte> want(full.size());
        for (int r = 0; r < n_ranks; ++r) {
          const size_t off = shard_offset(count, n_ranks, r), n = shard_count(count, n_ranks, r);
          std::vector<float> scales(k::quant_blocks(n, block));
          std::vector<int8_t> q(n);
          k::quantize_int8_blocks(full.data() + off * esz, qtype(dt), n, block, nullptr,
                                  scales.data(), q.data());
          k::dequantize_int8_blocks(q.data(), scales.data(), n, block, qtype(dt),
                                    want.data() + off * esz);
        }
        const size_t off = shard_offset(count, n_ranks, me);
        std::vector<std::byte> got(full.size());
        ag.run(full.data() + off * esz, got.data());
        ASSERT_TRUE(same_bytes(got.data(), want.data(), got.size()));
        ASSERT_TRUE(identical_on_all_ranks(w, got.data(), got.size()));
        // In place: send is this rank's shard inside recv.
        std::vector<std::byte> inplace = full;
        ag.run(inplace.data() + off * esz, inplace.data());
        ASSERT_TRUE(same_bytes(inplace.data(), want.data(), inplace.size()));
        EXPECT_EQ(ag.wire_bytes(), count == 0 ? 0 : size_t(n_ranks - 1) *
                  ((k::quant_blocks(shard_count(count, n_ranks, 0), block) * 4 +
                    shard_count(count, n_ranks, 0) + 3) / 4 * 4));
      }
    }
  }
}

// Note [quantization error feedback] through the collective: a fixed
// gradient per rank, many steps; the running sum of the reduced shard stays
// within one quantization step per rank of steps * the true sum.
TEST(Quantized, ErrorFeedbackTracksTheTrueSum) {
  auto& w = world();
  const int n_ranks = w.size(), me = w.rank();
  const size_t count = 1001, block = 64, steps = 300;
  const auto x = input(DataType::Float32, count, me, 0, 99);
  // Per element: the true sum, the sum of magnitudes, and one quantization
  // step per rank (the sum over ranks of the element's block's amax / 127).
  std::vector<double> truth(count, 0.0), magnitude(count, 0.0), step(count, 0.0);
  for (int r = 0; r < n_ranks; ++r) {
    const auto xr = input(DataType::Float32, count, r, 0, 99);
    std::vector<float> v(count);
    std::memcpy(v.data(), xr.data(), xr.size());
    for (int j = 0; j < n_ranks; ++j) {  // blocks start at each shard's start
      const size_t end = shard_offset(count, n_ranks, j) + shard_count(count, n_ranks, j);
      for (size_t b0 = shard_offset(count, n_ranks, j); b0 < end; b0 += block) {
        float amax = 0;
        for (size_t i = b0; i < std::min(end, b0 + block); ++i) amax = std::max(amax, std::fabs(v[i]));
        for (size_t i = b0; i < std::min(end, b0 + block); ++i) {
          truth[i] += v[i];
          magnitude[i] += std::fabs(v[i]);
          step[i] += double(amax) / 127.0;
        }
      }
    }
  }
  const size_t off = shard_offset(count, n_ranks, me), n = shard_count(count, n_ranks, me);
  for (bool feedback : {true, false}) {
    SCOPED_TRACE(feedback ? "with error feedback" : "without");
    QuantizedReduceScatter rs(w, count, DataType::Float32, QuantizedOptions{block, feedback});
    std::vector<float> shard(n);
    std::vector<double> sent(n, 0.0);
    for (size_t s = 0; s < steps; ++s) {
      rs.run(x.data(), shard.data());
      for (size_t i = 0; i < n; ++i) sent[i] += shard[i];
    }
    double worst = 0;  // in quantization steps (of every rank together)
    for (size_t i = 0; i < n; ++i) {
      const double off_by = std::fabs(sent[i] - double(steps) * truth[off + i]);
      // float32 rounding of the per-step sums: relative 1e-6 per step.
      const double rounding = 1e-6 * double(steps) * magnitude[off + i];
      worst = std::max(worst, (off_by - rounding) / step[off + i]);
    }
    if (feedback) {
      // Each rank's error is at most half its step (its block's amax grows
      // by its error's half step at most: the 1.01).
      EXPECT_LE(worst, 0.5 * 1.01) << "the running sum left half a quantization step per rank";
    } else if (n > 0) {
      EXPECT_GT(worst, 10.0) << "without error feedback it should drift (else the check is void)";
    }
  }
}

TEST(Quantized, StateRoundTripContinuesBitForBit) {
  auto& w = world();
  const int n_ranks = w.size(), me = w.rank();
  const size_t count = 777;
  const size_t n = shard_count(count, n_ranks, me);
  QuantizedReduceScatter a(w, count, DataType::BFloat16, QuantizedOptions{32, true});
  std::vector<std::byte> out_a(2 * n), out_b(2 * n);
  for (uint64_t s = 0; s < 2; ++s) a.run(input(DataType::BFloat16, count, me, s, 5).data(), out_a.data());
  const std::string state = a.save_state();
  QuantizedReduceScatter b(w, count, DataType::BFloat16, QuantizedOptions{32, true});
  b.load_state(state);
  EXPECT_EQ(b.error(), a.error());
  const auto x = input(DataType::BFloat16, count, me, 2, 5);
  a.run(x.data(), out_a.data());
  b.run(x.data(), out_b.data());
  EXPECT_TRUE(same_bytes(out_a.data(), out_b.data(), out_a.size()));
  QuantizedReduceScatter other(w, count, DataType::BFloat16, QuantizedOptions{64, true});
  expect_error([&] { other.load_state(state); }, ErrorCode::InvalidArgument, "block_size 32");
}

TEST(Quantized, BadInputFailsOnEveryRankNamingTheOption) {
  auto& w = world();
  const int me = w.rank(), n_ranks = w.size();
  expect_error([&] { (void)QuantizedReduceScatter(w, 10, DataType::Int32); }, ErrorCode::InvalidArgument,
               "dtype int32");
  expect_error([&] { (void)QuantizedAllgather(w, 10, DataType::Float64); }, ErrorCode::InvalidArgument,
               "float32, float16 or bfloat16");
  expect_error([&] { (void)QuantizedAllgather(w, 10, DataType::Float32, QuantizedOptions{0, true}); },
               ErrorCode::InvalidArgument, "QuantizedOptions::block_size 0");
  expect_error([&] { (void)QuantizedReduceScatter(w, 10, DataType::Float32, QuantizedOptions{70000, true}); },
               ErrorCode::InvalidArgument, "QuantizedOptions::block_size 70000");
  QuantizedReduceScatter ok(w, 10, DataType::Float32);
  std::vector<float> in(10), out(10);
  expect_error([&] { ok.run(in.data(), out.data(), ReduceOp::Max); }, ErrorCode::InvalidArgument,
               "op max");
  if (n_ranks == 1) return;
  // One rank only is wrong: every rank raises, naming it.
  const auto last = std::to_string(n_ranks - 1);
  expect_error([&] {
    (void)QuantizedReduceScatter(w, 10, me == n_ranks - 1 ? DataType::Int8 : DataType::Float32);
  }, ErrorCode::InvalidArgument, ("rank(s) " + last).c_str());
  expect_error([&] {
    (void)QuantizedReduceScatter(w, 10, DataType::Float32, QuantizedOptions{me == n_ranks - 1 ? 0u : 64u, true});
  }, ErrorCode::InvalidArgument, "QuantizedOptions::block_size 0");
  expect_error([&] {
    (void)QuantizedAllgather(w, 10, DataType::Float32, QuantizedOptions{size_t(64 + me), true});
  }, ErrorCode::Mismatch, "QuantizedOptions::block_size");
  expect_error([&] { (void)QuantizedAllgather(w, 10 + size_t(me), DataType::Float32); },
               ErrorCode::Mismatch, "passed count");
  expect_error([&] {
    (void)QuantizedReduceScatter(w, 10, DataType::Float32, QuantizedOptions{64, me == 0});
  }, ErrorCode::Mismatch, "QuantizedOptions::error_feedback");
  expect_error([&] {
    (void)QuantizedAllgather(w, 10, me == 0 ? DataType::Float16 : DataType::BFloat16);
  }, ErrorCode::Mismatch, "passed dtype");
  // The communicator is still usable after all of that.
  QuantizedAllgather after(w, 10, DataType::Float32);
  std::vector<float> full(10, 1.0f), got(10);
  after.run(full.data() + shard_offset(10, n_ranks, me), got.data());
  EXPECT_EQ(got, full);
}

}  // namespace
}  // namespace gwtest

int main(int argc, char** argv) { return gwtest::run_rank_tests(argc, argv); }
