// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Reducer across real ranks: random gradients per rank, marked ready in
// random orders from several threads; after finalize() every gradient must
// equal the average over ranks, which every rank computes locally from every
// rank's seed. Launched by ctest through gwlaunch -n N (tests/ranks/CMakeLists.txt).
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "harness.h"

namespace gwtest {
namespace {

using gradwire::BucketCaps;
using gradwire::DataType;
using gradwire::Device;
using gradwire::GradientInfo;
using gradwire::Reducer;
using gradwire::ReducerOptions;
namespace k = gradwire::kernels;

using Grads = std::vector<std::vector<std::byte>>;

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void store(DataType dt, std::byte* p, size_t i, double v) {
  const float f = float(v);
  const uint16_t h = dt == DataType::Float16 ? k::float_to_half(f) : k::float_to_bf16(f);
  if (dt == DataType::Float32) std::memcpy(p + 4 * i, &f, 4);
  else if (dt == DataType::Float64) std::memcpy(p + 8 * i, &v, 8);
  else std::memcpy(p + 2 * i, &h, 2);
}

// Gradient i of rank `rank` at step `step`: values in [-1, 1), in dtype.
std::vector<std::byte> make_grad(const GradientInfo& g, size_t i, uint64_t seed, int rank,
                                 uint64_t step) {
  std::vector<std::byte> out(g.elements * gradwire::element_size(g.dtype));
  const uint64_t base = mix(seed ^ mix(uint64_t(rank) * 1000003u ^ mix(step * 7919u ^ i)));
  for (size_t e = 0; e < g.elements; ++e) {
    store(g.dtype, out.data(), e, double(mix(base + e) >> 11) * 0x1.0p-52 - 1.0);
  }
  return out;
}

Grads make_grads(const std::vector<GradientInfo>& gs, uint64_t seed, int rank, uint64_t step) {
  Grads out;
  for (size_t i = 0; i < gs.size(); ++i) out.push_back(make_grad(gs[i], i, seed, rank, step));
  return out;
}

// The average over ranks of the sum over `steps` of gradient i, counting
// only ranks for which used(rank) holds.
std::vector<double> expected(const GradientInfo& g, size_t i, uint64_t seed, int world,
                             const std::vector<uint64_t>& steps,
                             const std::function<bool(int)>& used = [](int) { return true; }) {
  std::vector<double> acc(g.elements, 0.0);
  for (int r = 0; r < world; ++r) {
    if (!used(r)) continue;
    for (uint64_t s : steps) {
      auto v = make_grad(g, i, seed, r, s);
      for (size_t e = 0; e < g.elements; ++e) acc[e] += element_as_double(g.dtype, v.data(), e);
    }
  }
  for (double& a : acc) a /= world;
  return acc;
}

// Error bound for values of magnitude <= `magnitude` (see the hooks' header
// comment): the division and each of the world-1 additions round once.
double tolerance(DataType dt, int world, double magnitude = 1.0) {
  const double eps = dt == DataType::Float64   ? 0x1.0p-52
                     : dt == DataType::Float32 ? 0x1.0p-23
                     : dt == DataType::Float16 ? 0x1.0p-10
                                               : 0x1.0p-7;
  return 2.0 * (world + 1) * eps * magnitude;
}

::testing::AssertionResult close_to(DataType dt, const void* got, const std::vector<double>& want,
                                    double tol, size_t first = 0, size_t count = SIZE_MAX) {
  count = std::min(count, want.size() - std::min(first, want.size()));
  for (size_t e = 0; e < count; ++e) {
    const double g = element_as_double(dt, static_cast<const std::byte*>(got), e);
    if (!(std::fabs(g - want[first + e]) <= tol)) {
      return ::testing::AssertionFailure() << "element " << first + e << ": got " << g
                                           << ", expected " << want[first + e] << " +- " << tol;
    }
  }
  return ::testing::AssertionSuccess();
}

// Every gradient i, at at(i), equals the average over ranks of its sum over
// `steps` (values of magnitude <= `magnitude`).
void expect_averages(const std::vector<GradientInfo>& gs,
                     const std::function<const void*(size_t)>& at, uint64_t seed,
                     const std::vector<uint64_t>& steps, double magnitude = 1.0) {
  const int n = world().size();
  for (size_t i = 0; i < gs.size(); ++i) {
    EXPECT_TRUE(close_to(gs[i].dtype, at(i), expected(gs[i], i, seed, n, steps),
                         tolerance(gs[i].dtype, n, magnitude)))
        << gs[i].name << " (" << gs[i].elements << " x " << gradwire::to_string(gs[i].dtype)
        << ") step " << steps.back();
  }
}

// Calls mark(i) for every index of `order` from `threads` threads, like
// autograd's worker threads; rethrows the first exception on this thread.
void mark_from_threads(const std::vector<size_t>& order, int threads,
                       const std::function<void(size_t)>& mark) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex mu;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < order.size();) {
        try {
          mark(order[k]);
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu);
          if (!failure) failure = std::current_exception();
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<size_t> shuffled(size_t n, uint64_t seed, const std::set<size_t>& skip = {}) {
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) if (!skip.count(i)) order.push_back(i);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::vector<uint64_t> serialize(const gradwire::BucketPlan& plan) {
  std::vector<uint64_t> out;
  for (const auto& b : plan.buckets) {
    out.push_back(b.gradients.size());
    out.insert(out.end(), b.gradients.begin(), b.gradients.end());
    out.insert(out.end(), b.offsets.begin(), b.offsets.end());
  }
  return out;
}

// Every rank must hold the same plan (compared by allgather).
::testing::AssertionResult same_plan_everywhere(const gradwire::BucketPlan& plan) {
  auto bytes = serialize(plan);
  return identical_on_all_ranks(world(), bytes.data(), bytes.size() * sizeof(uint64_t));
}

const size_t kSizes[] = {0, 1, 3, 17, 1000, 4099, 0, 70001, 5, 300000, 2, 12345, 64, 0, 9999};

std::vector<GradientInfo> mixed_model(bool floats_only = false) {
  const DataType cycle[] = {DataType::Float32, DataType::Float32, DataType::Float64,
                            DataType::BFloat16, DataType::Float32, DataType::Float16};
  std::vector<GradientInfo> gs;
  for (size_t i = 0; i < std::size(kSizes); ++i) {
    gs.push_back({kSizes[i], floats_only ? DataType::Float32 : cycle[i % 6], Device::host(),
                  "layer" + std::to_string(i)});
  }
  return gs;
}

// Small caps so many Buckets form and 300000 floats exceed the cap.
const BucketCaps kSmallCaps{4096, 65536};

TEST(Reducer, AveragesManySizesFromManyThreads) {
  auto& w = world();
  const auto gs = mixed_model();
  ReducerOptions opt;
  opt.caps = kSmallCaps;
  Reducer r(w, gs, opt);
  EXPECT_GT(r.plan().buckets.size(), 8u);
  const uint64_t seed = 11;
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    Grads grads = make_grads(gs, seed, w.rank(), step);
    mark_from_threads(shuffled(gs.size(), mix(step * 31 + w.rank())), 4,
                      [&](size_t i) { r.mark_ready(i, grads[i].data()); });
    r.finalize();
    EXPECT_EQ(r.step(), step + 1);
    expect_averages(gs, [&](size_t i) { return grads[i].data(); }, seed, {step});
    EXPECT_TRUE(same_plan_everywhere(r.plan()));
    const auto& st = r.last_step_stats();
    EXPECT_EQ(st.step, step);
    // (Timestamps are per Bucket of the plan the step ran with.)
    ASSERT_EQ(st.bucket_launch.size(), st.bucket_done.size());
    EXPECT_GT(st.bucket_launch.size(), 8u);
    for (size_t b = 0; b < st.bucket_launch.size(); ++b) {
      EXPECT_LE(st.first_ready, st.bucket_launch[b]);
      EXPECT_LE(st.bucket_launch[b], st.bucket_done[b]);
      EXPECT_LE(st.bucket_done[b], st.finalize_end);
    }
    EXPECT_GE(st.hidden_fraction(), 0.0);
    EXPECT_LE(st.hidden_fraction(), 1.0);
  }
}

// Reassembles every Bucket from the shards (allgather) and checks it.
void check_sharded(Reducer& r, const std::vector<GradientInfo>& gs, const Grads& grads,
                   uint64_t seed, uint64_t step,
                   const std::function<double(DataType)>& tol = [](DataType dt) {
                     return tolerance(dt, world().size());
                   }) {
  auto& w = world();
  const auto& plan = r.plan();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& pb = plan.buckets[b];
    const size_t es = gradwire::element_size(pb.dtype);
    Reducer::Shard s = r.shard(b);
    EXPECT_EQ(s.offset, gradwire::shard_offset(pb.elements, w.size(), w.rank()));
    EXPECT_EQ(s.count, gradwire::shard_count(pb.elements, w.size(), w.rank()));
    std::vector<std::byte> full(pb.elements * es);
    w.allgather(s.data, full.data(), pb.elements, pb.dtype).wait();
    for (size_t k = 0; k < pb.gradients.size(); ++k) {
      const size_t i = pb.gradients[k];
      EXPECT_TRUE(close_to(pb.dtype, full.data() + pb.offsets[k] * es,
                           expected(gs[i], i, seed, w.size(), {step}),
                           tol(pb.dtype)))
          << "bucket " << b << " " << gs[i].name;
    }
    // finalize() wrote this rank's pieces back into the gradients.
    for (const auto& p : s.pieces) {
      const auto want = expected(gs[p.gradient], p.gradient, seed, w.size(), {step});
      EXPECT_TRUE(close_to(pb.dtype, grads[p.gradient].data() + p.offset * es, want,
                           tol(pb.dtype), p.offset, p.count));
    }
  }
}

TEST(Reducer, ShardedReassemblesToTheAverage) {
  auto& w = world();
  const auto gs = mixed_model();
  ReducerOptions opt;
  opt.caps = kSmallCaps;
  opt.sharded = true;
  Reducer r(w, gs, opt);
  const uint64_t seed = 12;
  for (uint64_t step = 0; step < 2; ++step) {
    Grads grads = make_grads(gs, seed, w.rank(), step);
    mark_from_threads(shuffled(gs.size(), mix(step + 100 * w.rank())), 3,
                      [&](size_t i) { r.mark_ready(i, grads[i].data()); });
    r.finalize();
    check_sharded(r, gs, grads, seed, step);
  }
}

TEST(Reducer, GradientViews) {
  auto& w = world();
  const auto gs = mixed_model();
  ReducerOptions opt;
  opt.caps = kSmallCaps;
  opt.gradient_as_bucket_view = true;
  Reducer r(w, gs, opt);
  const uint64_t seed = 13;
  std::vector<void*> views;
  uint64_t generation = ~0ull;
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    if (r.plan_generation() != generation) {  // the adapter re-aliases its gradients
      generation = r.plan_generation();
      views.clear();
      for (size_t i = 0; i < gs.size(); ++i) views.push_back(r.bucket_view(i));
    }
    if (step >= 1) EXPECT_LE(r.plan_generation(), 1u) << "the plan may change once, after step 0";
    // Backward writes the gradients straight into the Buckets.
    Grads grads = make_grads(gs, seed, w.rank(), step);
    for (size_t i = 0; i < gs.size(); ++i) {
      if (!grads[i].empty()) std::memcpy(views[i], grads[i].data(), grads[i].size());
    }
    mark_from_threads(shuffled(gs.size(), mix(step + 7 * w.rank())), 4,
                      [&](size_t i) { r.mark_ready(i); });
    r.finalize();
    expect_averages(gs, [&](size_t i) { return views[i]; }, seed, {step});
    // After a rebuild the results are carried over to the new views.
    expect_averages(gs, [&](size_t i) { return r.bucket_view(i); }, seed, {step});
  }
}

TEST(Reducer, RebuildAgreesOnRankZerosOrder) {
  auto& w = world();
  std::vector<GradientInfo> gs;
  for (int i = 0; i < 12; ++i) gs.push_back({100, DataType::Float32, Device::host(), "p" + std::to_string(i)});
  ReducerOptions opt;
  opt.caps = BucketCaps{800, 800};  // two gradients per Bucket
  Reducer r(w, gs, opt);
  const auto initial = r.plan();
  std::vector<gradwire::GradientSpec> specs;
  for (const auto& g : gs) specs.push_back({g.elements, g.dtype, g.device});
  // Each rank marks in its own order, from one thread so the order is known.
  auto order_of = [&](int rank) { return shuffled(gs.size(), 1234 + uint64_t(rank)); };
  const auto want = gradwire::plan_buckets(
      specs, opt.caps, gradwire::complete_ready_order(order_of(0), gs.size()));
  ASSERT_FALSE(want == initial);
  const uint64_t seed = 14;
  for (uint64_t step = 0; step < 3; ++step) {
    Grads grads = make_grads(gs, seed, w.rank(), step);
    for (size_t i : order_of(w.rank())) r.mark_ready(i, grads[i].data());
    r.finalize();
    expect_averages(gs, [&](size_t i) { return grads[i].data(); }, seed, {step});
    EXPECT_TRUE(r.plan() == want) << "step " << step;
    EXPECT_EQ(r.plan_generation(), 1u);
    EXPECT_TRUE(same_plan_everywhere(r.plan()));
  }
}

TEST(Reducer, UnusedParametersWithTheOption) {
  auto& w = world();
  std::vector<GradientInfo> gs;
  for (int i = 0; i < 8; ++i)
    gs.push_back({size_t(50 + 300 * i), DataType::Float32, Device::host(), "p" + std::to_string(i)});
  ReducerOptions opt;
  opt.caps = BucketCaps{2048, 4096};
  opt.find_unused_parameters = true;
  Reducer r(w, gs, opt);
  const uint64_t seed = 15;
  // p2: unused on rank 0 only; p5: unused everywhere (left to finalize);
  // p6: unused everywhere, reported early with mark_unused.
  auto used = [](size_t i, int rank) { return !(i == 2 && rank == 0) && i != 5 && i != 6; };
  for (uint64_t step = 0; step < 2; ++step) {
    Grads grads = make_grads(gs, seed, w.rank(), step);
    for (size_t i = 0; i < gs.size(); ++i) {
      if (!used(i, w.rank())) std::fill(grads[i].begin(), grads[i].end(), std::byte{0x7f});
      r.set_gradient_buffer(i, grads[i].data());
    }
    r.mark_unused(6);
    std::set<size_t> skip = {5, 6};
    if (w.rank() == 0) skip.insert(2);
    mark_from_threads(shuffled(gs.size(), mix(step + 3 * w.rank()), skip), 3,
                      [&](size_t i) { r.mark_ready(i); });
    r.finalize();
    for (size_t i = 0; i < gs.size(); ++i) {
      const auto want = expected(gs[i], i, seed, w.size(), {step},
                                 [&](int rank) { return used(i, rank); });
      EXPECT_TRUE(close_to(DataType::Float32, grads[i].data(), want,
                           tolerance(DataType::Float32, w.size())))
          << gs[i].name << " step " << step;
    }
  }
}

TEST(Reducer, UnusedParametersWithoutTheOptionNameThem) {
  auto& w = world();
  const std::vector<GradientInfo> gs = {{300, DataType::Float32, Device::host(), "fc1.weight"},
                                        {20, DataType::Float32, Device::host(), "fc1.bias"},
                                        {400, DataType::Float32, Device::host(), "fc2.weight"},
                                        {20, DataType::Float32, Device::host(), "fc2.bias"},
                                        {500, DataType::Float32, Device::host(), "out.weight"}};
  ReducerOptions opt;
  opt.caps = BucketCaps{1024, 2048};
  Reducer r(w, gs, opt);
  const uint64_t seed = 16;
  Grads grads = make_grads(gs, seed, w.rank(), 0);
  // Every rank omits the same parameters, so nobody waits for a Bucket that
  // some rank never launches.
  for (size_t i : {4, 1, 0}) r.mark_ready(i, grads[i].data());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.finalize();
    ADD_FAILURE() << "finalize() should have failed";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument) << e.what();
    const std::string m = e.what();
    for (const char* needle : {"fc2.weight", "fc2.bias", "step 0", "find_unused_parameters"})
      EXPECT_NE(m.find(needle), std::string::npos) << "missing '" << needle << "' in: " << m;
    EXPECT_NE(m.find("rank " + std::to_string(w.rank())), std::string::npos) << m;
    EXPECT_EQ(m.find("fc1.weight"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << "not a timeout";
  // Misuse is reported at once, naming the parameter.
  EXPECT_THROW(r.mark_unused(0), gradwire::Error);
  // The Reducer (and the communicator) still work for the next step.
  grads = make_grads(gs, seed, w.rank(), 1);
  for (size_t i : shuffled(gs.size(), 5 + w.rank())) r.mark_ready(i, grads[i].data());
  try {
    r.mark_ready(2, grads[2].data());
    ADD_FAILURE() << "a second mark_ready of one gradient in a step must fail";
  } catch (const gradwire::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc2.weight"), std::string::npos) << e.what();
  }
  r.finalize();
  expect_averages(gs, [&](size_t i) { return grads[i].data(); }, seed, {1});
}

TEST(Reducer, NoSyncAccumulation) {
  auto& w = world();
  const auto gs = mixed_model(/*floats_only=*/true);
  const uint64_t seed = 17;
  for (bool every_k : {false, true}) {
    SCOPED_TRACE(every_k ? "sync_every_k_steps=3" : "no_sync guard");
    ReducerOptions opt;
    opt.caps = kSmallCaps;
    opt.sync_every_k_steps = every_k ? 3 : 1;
    Reducer r(w, gs, opt);
    Grads acc;  // what the framework accumulates into
    for (const auto& g : gs) acc.emplace_back(g.elements * 4, std::byte{0});
    auto backward = [&](uint64_t micro) {
      Grads g = make_grads(gs, seed, w.rank(), micro);
      for (size_t i = 0; i < gs.size(); ++i) {
        auto* a = reinterpret_cast<float*>(acc[i].data());
        auto* x = reinterpret_cast<const float*>(g[i].data());
        for (size_t e = 0; e < gs[i].elements; ++e) a[e] += x[e];
      }
      mark_from_threads(shuffled(gs.size(), micro + w.rank()), 2,
                        [&](size_t i) { r.mark_ready(i, acc[i].data()); });
      r.finalize();
    };
    for (uint64_t micro = 0; micro < 2; ++micro) {
      if (every_k) {
        EXPECT_FALSE(r.will_sync());
        backward(micro);
      } else {
        auto guard = r.no_sync();
        EXPECT_FALSE(r.will_sync());
        backward(micro);
      }
      EXPECT_EQ(r.step(), 0u) << "no synchronised step yet";
    }
    EXPECT_TRUE(r.will_sync());
    backward(2);
    EXPECT_EQ(r.step(), 1u);
    expect_averages(gs, [&](size_t i) { return acc[i].data(); }, seed, {0, 1, 2}, 3.0);
  }
}

bool representable16(DataType wire, float v) {
  return wire == DataType::Float16 ? k::half_to_float(k::float_to_half(v)) == v
                                   : k::bf16_to_float(k::float_to_bf16(v)) == v;
}

TEST(Reducer, CompressionHooks) {
  auto& w = world();
  auto gs = mixed_model(/*floats_only=*/true);
  gs.push_back({777, DataType::Float64, Device::host(), "double"});  // not compressed
  const uint64_t seed = 18;
  for (DataType wire : {DataType::Float16, DataType::BFloat16}) {
    for (bool sharded : {false, true}) {
      SCOPED_TRACE(::testing::Message() << to_string(wire) << (sharded ? " sharded" : ""));
      ReducerOptions opt;
      opt.caps = kSmallCaps;
      opt.sharded = sharded;
      opt.comm_hook = wire == DataType::Float16 ? gradwire::fp16_compress_hook()
                                                : gradwire::bf16_compress_hook();
      Reducer r(w, gs, opt);
      Grads grads = make_grads(gs, seed, w.rank(), 0);
      mark_from_threads(shuffled(gs.size(), 9 + w.rank()), 3,
                        [&](size_t i) { r.mark_ready(i, grads[i].data()); });
      r.finalize();
      if (sharded) {
        // Float64 is not compressed; float32 within the 16-bit bound.
        check_sharded(r, gs, grads, seed, 0, [&](DataType dt) {
          return tolerance(dt == DataType::Float64 ? dt : wire, w.size());
        });
        continue;
      }
      for (size_t i = 0; i < gs.size(); ++i) {
        const DataType dt = gs[i].dtype;
        const auto want = expected(gs[i], i, seed, w.size(), {0});
        EXPECT_TRUE(close_to(dt, grads[i].data(), want,
                             tolerance(dt == DataType::Float64 ? dt : wire, w.size())))
            << gs[i].name;
        if (dt != DataType::Float32) continue;
        // It really travelled in 16 bits: every result is a 16-bit value.
        const auto* f = reinterpret_cast<const float*>(grads[i].data());
        for (size_t e = 0; e < gs[i].elements; ++e) {
          if (!representable16(wire, f[e])) {
            ADD_FAILURE() << gs[i].name << "[" << e << "] = " << f[e] << " is not a 16-bit value";
            break;
          }
        }
      }
    }
  }
}

TEST(Reducer, CustomHookRunsPerBucketInOrder) {
  auto& w = world();
  const auto gs = mixed_model();
  std::vector<size_t> calls;  // Bucket indices; hooks run one at a time
  ReducerOptions opt;
  opt.caps = kSmallCaps;
  opt.rebuild_buckets = false;
  opt.comm_hook = [&](gradwire::BucketContext& c) {
    calls.push_back(c.index);
    EXPECT_EQ(c.result, c.buffer);
    EXPECT_EQ(c.result_count, c.count);
    return c.comm.allreduce(c.buffer, c.buffer, c.count, c.dtype, gradwire::ReduceOp::Sum);
  };
  Reducer r(w, gs, opt);
  const size_t nb = r.plan().buckets.size();
  std::vector<size_t> in_order(nb);
  std::iota(in_order.begin(), in_order.end(), 0);
  const uint64_t seed = 19;
  for (uint64_t step = 0; step < 2; ++step) {
    calls.clear();
    Grads grads = make_grads(gs, seed, w.rank(), step);
    // Random orders from 4 threads: Buckets complete out of order but must
    // launch in order.
    mark_from_threads(shuffled(gs.size(), mix(step + w.rank())), 4,
                      [&](size_t i) { r.mark_ready(i, grads[i].data()); });
    r.finalize();
    EXPECT_EQ(calls, in_order) << "step " << step;
    expect_averages(gs, [&](size_t i) { return grads[i].data(); }, seed, {step});
  }
  // A hook that returns no Work is reported with its Bucket.
  ReducerOptions bad = opt;
  bad.comm_hook = [](gradwire::BucketContext&) { return gradwire::Work(); };
  Reducer rb(w, {{4, DataType::Float32, Device::host(), "w"}}, bad);
  float x[4] = {1, 2, 3, 4};
  rb.mark_ready(0, x);
  try {
    rb.finalize();
    ADD_FAILURE() << "expected an error";
  } catch (const gradwire::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bucket 0"), std::string::npos) << e.what();
  }
}

TEST(Reducer, RejectsWhatItCannotAverage) {
  auto& w = world();
  auto expect_invalid = [](auto&& fn, const char* needle) {
    expect_error(fn, gradwire::ErrorCode::InvalidArgument, needle);
  };
  expect_invalid([&] { Reducer(w, {{4, DataType::Int64, Device::host(), "steps"}}); }, "steps");
  // Device 64 exists nowhere (a build without CUDA refuses any device).
  expect_invalid([&] { Reducer(w, {{4, DataType::Float32, Device::cuda(64), "gpu.w"}}); }, "gpu.w");
  expect_invalid([&] { Reducer(w, {{4, DataType::Float32, Device::cuda(64), "gpu.w"}}); }, "CUDA device 64");
  Reducer r(w, {{4, DataType::Float32, Device::host(), "w"}});
  expect_invalid([&] { r.mark_ready(1); }, "mark_ready(1)");
  expect_invalid([&] { r.mark_ready(0); }, "set_gradient_buffer");
  expect_invalid([&] { r.shard(0); }, "sharded");
  Reducer empty(w, {});
  empty.finalize();  // nothing to do, but a step all the same
  EXPECT_EQ(empty.step(), 1u);
}

// Only under the ctest entry ranks.reducer.unused_on_one_rank (it aborts the
// world communicator): rank 1 omits a parameter the other ranks mark.
// Nobody hangs: rank 1 reports the parameter at once; the others fail at the
// communicator's deadline waiting for the Bucket rank 1 never launched.
TEST(ReducerFault, ParameterUnusedOnOneRankOnly) {
  if (!std::getenv("GW_REDUCER_FAULT_TEST")) GTEST_SKIP() << "run by its own ctest entry";
  auto& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::vector<GradientInfo> gs = {{1000, DataType::Float32, Device::host(), "a"},
                                        {1000, DataType::Float32, Device::host(), "b"},
                                        {1000, DataType::Float32, Device::host(), "c"}};
  ReducerOptions opt;
  opt.caps = BucketCaps{4000, 4000};  // one gradient per Bucket: c, b, a
  Reducer r(w, gs, opt);
  Grads grads = make_grads(gs, 20, w.rank(), 0);
  for (size_t i : {2, 1, 0}) {
    if (w.rank() == 1 && i == 1) continue;
    r.mark_ready(i, grads[i].data());
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.finalize();
    ADD_FAILURE() << "finalize() should have failed";
  } catch (const gradwire::Error& e) {
    const std::string m = e.what();
    std::fprintf(stderr, "(expected) %s\n", m.c_str());
    if (w.rank() == 1) {
      EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument) << m;
      EXPECT_NE(m.find("1 parameter got no gradient: b;"), std::string::npos) << m;
    } else {
      EXPECT_TRUE(e.code() == gradwire::ErrorCode::Timeout ||
                  e.code() == gradwire::ErrorCode::PeerLost) << m;
      EXPECT_NE(m.find("bucket 1 (1000 x float32: b)"), std::string::npos) << m;
    }
  }
  const auto limit = 3 * w.options().timeout + std::chrono::seconds(5);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, limit) << "a deadline must end the wait";
}

}  // namespace
}  // namespace gwtest

int main(int argc, char** argv) { return gwtest::run_rank_tests(argc, argv); }
