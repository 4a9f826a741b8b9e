// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Compression across real ranks: the 1-bit allreduce's error-feedback
// invariant, 1-bit Adam/LAMB (exact warm-up, convergence, identical
// replicas, wire bytes), PowerSGD through the Reducer (exact at full rank,
// identical replicas), and save/load/continue giving bit-identical results
// (and different ones when the error buffers are dropped, so the check can
// fail). Launched by ctest through gwlaunch -n N.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "base/state_io.h"
#include "gradwire/compress.h"
#include "harness.h"

namespace gwtest {
namespace {

using gradwire::DataType;
using gradwire::GradientInfo;
using gradwire::OneBitAdam;
using gradwire::OneBitAdamOptions;
using gradwire::OneBitAllreduce;
using gradwire::OneBitLamb;
using gradwire::OneBitLambOptions;
using gradwire::PowerSGDOptions;
using gradwire::PowerSGDState;
using gradwire::Reducer;
using gradwire::ReducerOptions;
using gradwire::ReduceOp;

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), reproducible from (seed, rank, step, i).
float value(uint64_t seed, int rank, uint64_t step, size_t i) {
  return float(double(mix(seed ^ mix(uint64_t(rank) * 1000003u ^ mix(step * 7919u + i))) >> 11) *
                   0x1.0p-52 - 1.0);
}

std::vector<float> input(uint64_t seed, int rank, uint64_t step, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(seed, rank, step, i);
  return v;
}

// True if every rank holds the same bytes.
bool same_on_every_rank(const void* data, size_t bytes) {
  auto& w = world();
  const uint64_t h = gradwire::compress::fnv1a64(
      std::string_view(static_cast<const char*>(data), bytes));
  std::vector<uint64_t> all(size_t(w.size()));
  w.allgather(&h, all.data(), all.size(), DataType::Int64).wait();
  for (uint64_t x : all) {
    if (x != h) return false;
  }
  return true;
}

// Replaces the nested 1-bit allreduce state (the error buffers) of a saved
// OneBitAdam state with a fresh one: "the same run with the error buffers
// dropped", which must end elsewhere.
std::string drop_adam_errors(const std::string& state, size_t n) {
  gradwire::compress::StateReader r(state, "OneBitAdam", "test");
  gradwire::compress::StateWriter w("OneBitAdam");
  w.u64("count", r.u64("count"));
  w.u64("preconditioned", r.u64("preconditioned"));
  w.u64("step", r.u64("step"));
  w.u64("freeze_step", r.u64("freeze_step"));
  w.floats("exp_avg", r.floats("exp_avg", n));
  w.floats("exp_avg_sq", r.floats("exp_avg_sq", n));
  const std::string fresh = OneBitAllreduce(world(), n).save_state();
  w.bytes("allreduce", fresh.data(), fresh.size());
  return w.finish();
}

TEST(OneBitAllreduce, ErrorFeedbackInvariantAndIdenticalResults) {
  auto& w = world();
  const size_t W = size_t(w.size());
  for (size_t n : {1, 7, 8, 13, 100, 4099}) {
    SCOPED_TRACE(::testing::Message() << "count " << n);
    OneBitAllreduce ar(w, n);
    std::vector<double> sum_in(n, 0.0), sum_out(n, 0.0);
    const uint64_t steps = 25;
    for (uint64_t t = 0; t < steps; ++t) {
      auto data = input(31, w.rank(), t, n);
      for (int r = 0; r < w.size(); ++r) {
        const auto x = input(31, r, t, n);
        for (size_t i = 0; i < n; ++i) sum_in[i] += double(x[i]) / double(W);
      }
      ar.run(data.data());
      ASSERT_TRUE(same_on_every_rank(data.data(), n * sizeof(float))) << "step " << t;
      for (size_t i = 0; i < n; ++i) sum_out[i] += data[i];
      if (W == 1) {
        ASSERT_EQ(data, input(31, w.rank(), t, n));  // nothing to exchange
      }
    }
    // sum_in - sum_out == mean_i(worker_error_i) + server_error (placed at
    // its chunk): gather both with one float64 allreduce.
    const size_t chunk = ((n + W - 1) / W + 7) / 8 * 8;
    std::vector<double> residual(n, 0.0);
    for (size_t i = 0; i < n; ++i) residual[i] = double(ar.worker_error()[i]) / double(W);
    const auto& se = ar.server_error();
    for (size_t i = 0; i < se.size(); ++i) residual[size_t(w.rank()) * chunk + i] += se[i];
    w.allreduce(residual.data(), residual.data(), n, DataType::Float64, ReduceOp::Sum).wait();
    double worst = 0, biggest = 0;
    for (size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs((sum_in[i] - sum_out[i]) - residual[i]));
      biggest = std::max(biggest, std::fabs(residual[i]));
    }
    EXPECT_LT(worst, 1e-4) << "the running sums drifted apart by more than rounding";
    // Bounded: inputs are in [-1, 1); the residual stays of that order and
    // does not grow with the number of steps.
    EXPECT_LT(biggest, 4.0);
  }
}

// A quadratic per rank: loss_r(p) = 1/2 |p - target_r|^2, so the averaged
// gradient is p - mean(target) and the optimum is the mean target.
float target(int rank, size_t i) { return value(77, rank, 0, i) * 2.0f; }

// Mean |p - optimum| over the coordinates.
double mean_distance(const std::vector<float>& p) {
  auto& w = world();
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    double mean = 0;
    for (int r = 0; r < w.size(); ++r) mean += target(r, i) / double(w.size());
    sum += std::fabs(p[i] - mean);
  }
  std::printf("[rank %d] mean distance to the optimum: %.4f\n", w.rank(), sum / double(p.size()));
  return sum / double(p.size());
}

std::vector<float> local_grad(const std::vector<float>& p, int rank, uint64_t step) {
  std::vector<float> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    g[i] = p[i] - target(rank, i) + 0.05f * value(5, rank, step, i);  // a little noise
  }
  return g;
}

TEST(OneBitAdam, WarmupIsExactAdam) {
  auto& w = world();
  const size_t n = 257;
  OneBitAdamOptions o;
  o.lr = 0.01f;
  o.freeze_step = 100;
  o.weight_decay = 0.01f;
  OneBitAdam opt(w, n, o);
  std::vector<float> p(n, 0.5f), ref(n, 0.5f), m(n, 0), v(n, 0);
  for (uint64_t t = 1; t <= 5; ++t) {
    auto g = local_grad(p, w.rank(), t);
    // Reference: the average gradient (every rank's, computed locally).
    std::vector<double> avg(n, 0.0);
    for (int r = 0; r < w.size(); ++r) {
      const auto gr = local_grad(ref, r, t);
      for (size_t i = 0; i < n; ++i) avg[i] += gr[i] / double(w.size());
    }
    for (size_t i = 0; i < n; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * avg[i];
      v[i] = 0.999 * v[i] + 0.001 * avg[i] * avg[i];
      const double mh = m[i] / (1 - std::pow(0.9, double(t)));
      const double vh = v[i] / (1 - std::pow(0.999, double(t)));
      ref[i] -= float(0.01 * (mh / (std::sqrt(vh) + 1e-8) + 0.01 * ref[i]));
    }
    opt.step(p.data(), g.data());
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref[i], 2e-5) << "step " << t << " [" << i << "]";
  }
  EXPECT_FALSE(opt.compressing());
}

TEST(OneBitAdam, CompressesConvergesAndKeepsReplicasIdentical) {
  auto& w = world();
  const size_t n = 20000;
  // Both variants: the momentum compressed as in the paper, and (the
  // default) preconditioned (Note [preconditioned 1-bit compression]).
  for (bool preconditioned : {false, true}) {
    SCOPED_TRACE(preconditioned ? "preconditioned" : "momentum");
    OneBitAdamOptions o;
    o.lr = 0.02f;
    o.freeze_step = 20;
    o.precondition_compression = preconditioned;
    OneBitAdam opt(w, n, o);
    std::vector<float> p(n, 0.0f);
    size_t warm_bytes = 0;
    for (uint64_t t = 0; t < 400; ++t) {
      auto g = local_grad(p, w.rank(), t);
      opt.step(p.data(), g.data());
      if (t == 0) warm_bytes = opt.last_wire_bytes();
    }
    EXPECT_TRUE(opt.compressing());
    ASSERT_TRUE(same_on_every_rank(p.data(), n * sizeof(float)));
    // Mean distance to the optimum (it starts at ~0.7): 1-bit steps leave
    // single coordinates oscillating around it, by about the momentum's rms
    // (paper variant) or about lr (preconditioned), so the maximum is not a
    // fair measure. A numpy model of the paper variant gives 0.025 after 400
    // steps at 2 ranks; measured here: 0.024 and 0.084 (2 ranks), 0.036 and
    // 0.147 (3 ranks): the preconditioned floor is ~lr-sized.
    EXPECT_LT(mean_distance(p), preconditioned ? 0.25 : 0.06);
    if (w.size() > 1) {
      // The target: >= 25x fewer bytes than float32 averaging.
      const double ratio = double(warm_bytes) / double(opt.last_wire_bytes());
      EXPECT_GE(ratio, 25.0) << warm_bytes << " vs " << opt.last_wire_bytes();
    }
  }
}

// A parameter that gets no gradient through the warm-up (v = 0) and one
// afterwards: without the momentum clip its steps would be lr * m / eps and
// the shared 1-bit scale would spread that to every element (NaN within a
// few dozen steps on the Fashion-MNIST CNN). With it, training stays finite.
TEST(OneBitAdam, SilentDuringWarmupStaysFinite) {
  auto& w = world();
  const size_t n = 5000;
  OneBitAdamOptions o;
  o.lr = 0.01f;
  o.freeze_step = 10;
  OneBitAdam opt(w, n, o);
  std::vector<float> p(n, 0.0f);
  for (uint64_t t = 0; t < 100; ++t) {
    auto g = local_grad(p, w.rank(), t);
    for (size_t i = 0; i < n; i += 7) {
      if (t < 10) g[i] = 0.0f;  // silent through the warm-up
    }
    opt.step(p.data(), g.data());
  }
  for (float x : p) ASSERT_TRUE(std::isfinite(x) && std::fabs(x) < 10.0f) << x;
}

TEST(OneBitLamb, CompressesConvergesAndKeepsReplicasIdentical) {
  auto& w = world();
  // The default (preconditioned compression, live coefficients) and the
  // paper's variant (the momentum compressed, coefficients frozen).
  for (bool paper : {false, true}) {
    SCOPED_TRACE(paper ? "the paper's variant" : "the default");
    OneBitLambOptions o;
    o.lr = 0.01f;
    o.freeze_step = 30;
    o.precondition_compression = !paper;
    o.weight_decay = 0.001f;
    OneBitLamb opt(w, {1000, 37, 4000}, o);
    std::vector<float> p(opt.count(), 1.0f);  // LAMB scales by ||p||: start away from 0
    const double start = mean_distance(p);
    for (uint64_t t = 0; t < 800; ++t) {
      auto g = local_grad(p, w.rank(), t);
      opt.step(p.data(), g.data());
    }
    EXPECT_TRUE(opt.compressing());
    ASSERT_TRUE(same_on_every_rank(p.data(), p.size() * sizeof(float)));
    for (float c : opt.last_coefficients()) EXPECT_TRUE(std::isfinite(c) && c > 0) << c;
    // LAMB's layer-wise steps keep a floor of about lr * ||p|| per layer, so
    // ask for a large decrease, not for the optimum. Live coefficients end
    // further away on this quadratic (0.23-0.28 of the start at 2-4 ranks,
    // against 0.05-0.08 frozen): near the optimum the sign noise makes up
    // most of ||u||, so the steps of LAMB's length point less at the optimum.
    EXPECT_LT(mean_distance(p), (paper ? 0.15 : 0.35) * start);
  }
}

// Note [live LAMB coefficients]: in the compression stage every layer's step
// has LAMB's length, lr * ||p||, whatever the compressed update's size. The
// frozen coefficients (times the variance-drift factor) fail this: their
// steps shrink and grow with ||update||, which is what made 1-bit LAMB
// drift away from LAMB on the Fashion-MNIST CNN.
TEST(OneBitLamb, CompressedStepsHaveLambsLength) {
  auto& w = world();
  OneBitLambOptions o;
  o.lr = 0.01f;
  o.freeze_step = 10;
  o.min_coeff = 1e-6f;  // no clipping: the ratio itself is checked
  o.max_coeff = 1e6f;
  const std::vector<size_t> layers = {1000, 37, 4000};
  OneBitLamb opt(w, layers, o);
  std::vector<float> p(opt.count(), 1.0f);
  for (uint64_t t = 0; t < 40; ++t) {
    auto g = local_grad(p, w.rank(), t);
    const std::vector<float> before = p;
    opt.step(p.data(), g.data());
    if (t < o.freeze_step) continue;  // a warm-up step: LAMB itself
    size_t first = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      double step_sq = 0, weight_sq = 0;
      for (size_t i = first; i < first + layers[l]; ++i) {
        step_sq += double(p[i] - before[i]) * (p[i] - before[i]);
        weight_sq += double(before[i]) * before[i];
      }
      EXPECT_NEAR(std::sqrt(step_sq) / (o.lr * std::sqrt(weight_sq)), 1.0, 1e-3)
          << "layer " << l << " at step " << t;
      first += layers[l];
    }
  }
  ASSERT_TRUE(same_on_every_rank(p.data(), p.size() * sizeof(float)));
}

// Save at step k, load into a fresh optimizer, continue: bit-identical to the
// uninterrupted run. With the error buffers dropped: different.
TEST(OneBitAdam, SaveLoadContinuesBitForBit) {
  auto& w = world();
  const size_t n = 3001;
  OneBitAdamOptions o;
  o.lr = 0.02f;
  o.freeze_step = 10;
  auto run = [&](uint64_t from, uint64_t to, OneBitAdam& opt, std::vector<float>& p) {
    for (uint64_t t = from; t < to; ++t) {
      auto g = local_grad(p, w.rank(), t);
      opt.step(p.data(), g.data());
    }
  };
  std::vector<float> straight(n, 0.0f);
  OneBitAdam a(w, n, o);
  run(0, 40, a, straight);

  std::vector<float> resumed(n, 0.0f);
  OneBitAdam b(w, n, o);
  run(0, 25, b, resumed);
  const std::string saved = b.save_state();
  const std::vector<float> saved_params = resumed;
  OneBitAdam c(w, n, OneBitAdamOptions{});  // options from the state where it matters
  c.options() = o;
  c.load_state(saved);
  EXPECT_EQ(c.steps(), 25u);
  run(25, 40, c, resumed);
  EXPECT_EQ(0, std::memcmp(resumed.data(), straight.data(), n * sizeof(float)));

  if (w.size() > 1) {
    std::vector<float> dropped = saved_params;
    OneBitAdam d(w, n, o);
    d.load_state(drop_adam_errors(saved, n));
    run(25, 40, d, dropped);
    EXPECT_NE(0, std::memcmp(dropped.data(), straight.data(), n * sizeof(float)))
        << "dropping the error buffers changed nothing: the resume check could not fail";
  }
  // A state for another size is refused, naming both sizes.
  OneBitAdam other(w, n + 1, o);
  expect_error([&] { other.load_state(saved); }, gradwire::ErrorCode::InvalidArgument,
               "3001 parameters");
}

// Elastic training (Note [1-bit optimizers under elastic generations]): the
// replicated state is the whole state but the error feedback; loading it,
// or rebind(), zeroes the error feedback and nothing else.
TEST(OneBitAdam, ReplicatedStateAndRebindDropOnlyTheErrorFeedback) {
  auto& w = world();
  const size_t n = 3001;
  OneBitAdamOptions o;
  o.lr = 0.02f;
  o.freeze_step = 10;
  std::vector<float> p(n, 0.0f);
  OneBitAdam a(w, n, o);
  for (uint64_t t = 0; t < 25; ++t) {
    auto g = local_grad(p, w.rank(), t);
    a.step(p.data(), g.data());
  }
  const std::string replicated = a.save_replicated_state();
  OneBitAdam b(w, n, o);
  b.load_state(replicated);
  EXPECT_EQ(b.steps(), 25u);
  EXPECT_TRUE(b.compressing());
  EXPECT_EQ(b.save_replicated_state(), replicated);
  const std::string full = a.save_state();
  a.rebind(w);
  EXPECT_EQ(a.save_replicated_state(), replicated);  // moments, variance, step: kept
  if (w.size() > 1) EXPECT_NE(a.save_state(), full) << "the error feedback was zero already";
  EXPECT_EQ(a.save_state(), b.save_state());  // both with zero error feedback
  auto pa = p, pb = p;
  auto ga = local_grad(p, w.rank(), 25), gb = ga;
  a.step(pa.data(), ga.data());
  b.step(pb.data(), gb.data());
  EXPECT_EQ(0, std::memcmp(pa.data(), pb.data(), n * sizeof(float)));
}

TEST(OneBitLamb, SaveLoadContinuesBitForBit) {
  auto& w = world();
  OneBitLambOptions o;
  o.lr = 0.01f;
  o.freeze_step = 10;
  const std::vector<size_t> layers = {500, 9, 1200};
  auto run = [&](uint64_t from, uint64_t to, OneBitLamb& opt, std::vector<float>& p) {
    for (uint64_t t = from; t < to; ++t) {
      auto g = local_grad(p, w.rank(), t);
      opt.step(p.data(), g.data());
    }
  };
  OneBitLamb a(w, layers, o);
  std::vector<float> straight(a.count(), 1.0f);
  run(0, 30, a, straight);
  OneBitLamb b(w, layers, o);
  std::vector<float> resumed(b.count(), 1.0f);
  run(0, 17, b, resumed);
  OneBitLamb c(w, layers, o);
  c.load_state(b.save_state());
  run(17, 30, c, resumed);
  EXPECT_EQ(0, std::memcmp(resumed.data(), straight.data(), resumed.size() * sizeof(float)));
  OneBitLamb other(w, {500, 9, 1201}, o);
  expect_error([&] { other.load_state(b.save_state()); }, gradwire::ErrorCode::InvalidArgument,
               "layer sizes differ");
}

// ---- PowerSGD through the Reducer

std::vector<GradientInfo> model() {
  std::vector<GradientInfo> gs;
  auto add = [&](std::vector<size_t> shape, const char* name) {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    GradientInfo g;
    g.elements = n;
    g.name = name;
    g.shape = shape;
    gs.push_back(g);
  };
  add({24, 3, 3, 3}, "conv.weight");  // 24 x 27
  add({24}, "conv.bias");             // 1-D: never compressed
  add({64, 40}, "fc1.weight");
  add({64}, "fc1.bias");
  add({10, 64}, "fc2.weight");
  add({10}, "fc2.bias");
  add({40, 40}, "square.weight");
  return gs;
}

// Runs `steps` synchronised steps of the Reducer with the PowerSGD hook and
// returns every gradient's reduced values after each step, concatenated. In
// sharded mode: after the last step only, every gradient's elements that lie
// in this rank's shards (read through Reducer::shard), NaN elsewhere.
std::vector<float> run_powersgd(const std::shared_ptr<PowerSGDState>& state, uint64_t first_step,
                                uint64_t steps, uint64_t seed, bool sharded = false) {
  auto& w = world();
  const auto gs = model();
  ReducerOptions opt;
  opt.caps.first_bucket_bytes = 4096;  // several Buckets
  opt.caps.bucket_bytes = 8192;
  opt.rebuild_buckets = false;  // the same Bucket plan in every run (state is per Bucket)
  opt.sharded = sharded;
  opt.comm_hook = gradwire::powersgd_hook(state);
  Reducer r(w, gs, opt);
  std::vector<float> out;
  for (uint64_t t = first_step; t < first_step + steps; ++t) {
    std::vector<std::vector<float>> grads;
    for (size_t i = 0; i < gs.size(); ++i) grads.push_back(input(seed + i, w.rank(), t, gs[i].elements));
    for (size_t i = gs.size(); i-- > 0;) r.mark_ready(i, grads[i].data());
    r.finalize();
    if (sharded) continue;
    for (auto& g : grads) out.insert(out.end(), g.begin(), g.end());
  }
  if (sharded) {
    std::vector<size_t> first(gs.size() + 1, 0);
    for (size_t i = 0; i < gs.size(); ++i) first[i + 1] = first[i] + gs[i].elements;
    out.assign(first.back(), std::nanf(""));
    for (size_t b = 0; b < r.plan().buckets.size(); ++b) {
      const auto sh = r.shard(b);
      const auto* data = static_cast<const float*>(sh.data);
      for (const auto& piece : sh.pieces) {
        for (size_t k = 0; k < piece.count; ++k) {
          out[first[piece.gradient] + piece.offset + k] = data[piece.shard_offset + k];
        }
      }
    }
  }
  return out;
}

TEST(PowerSGD, FullRankIsTheExactAverage) {
  auto& w = world();
  PowerSGDOptions o;
  o.matrix_approximation_rank = 64;  // >= every matrix's smaller side
  o.min_compression_rate = 0;        // compress every matrix anyway
  o.start_powersgd_iter = 0;
  o.use_error_feedback = false;
  auto state = std::make_shared<PowerSGDState>(o);
  const auto got = run_powersgd(state, 0, 1, 5);
  const auto gs = model();
  size_t at = 0;
  double worst = 0;
  for (size_t i = 0; i < gs.size(); ++i) {
    for (size_t e = 0; e < gs[i].elements; ++e) {
      double mean = 0;
      for (int r = 0; r < w.size(); ++r) mean += value(5 + i, r, 0, e) / double(w.size());
      worst = std::max(worst, std::fabs(got[at + e] - mean));
    }
    at += gs[i].elements;
  }
  EXPECT_LT(worst, 2e-4) << "P Q^T with a full-rank Q must reproduce the average";
  EXPECT_GT(state->numel_after_compression(), 0u);

  // Sharded mode runs the same hook: this rank's shard holds the average.
  auto sharded_state = std::make_shared<PowerSGDState>(o);
  const auto shard = run_powersgd(sharded_state, 0, 1, 5, /*sharded=*/true);
  size_t checked = 0;
  at = 0;
  worst = 0;
  for (size_t i = 0; i < gs.size(); ++i) {
    for (size_t e = 0; e < gs[i].elements; ++e) {
      if (std::isnan(shard[at + e])) continue;
      double mean = 0;
      for (int r = 0; r < w.size(); ++r) mean += value(5 + i, r, 0, e) / double(w.size());
      worst = std::max(worst, std::fabs(shard[at + e] - mean));
      ++checked;
    }
    at += gs[i].elements;
  }
  EXPECT_GT(checked, 0u) << "this rank's shards are empty";
  EXPECT_LT(worst, 2e-4) << "sharded PowerSGD at full rank must reproduce the average";
}

TEST(PowerSGD, LowRankKeepsReplicasIdenticalAndCompresses) {
  auto& w = world();
  PowerSGDOptions o;
  o.matrix_approximation_rank = 2;
  o.start_powersgd_iter = 2;
  auto state = std::make_shared<PowerSGDState>(o);
  const auto got = run_powersgd(state, 0, 6, 9);
  ASSERT_TRUE(same_on_every_rank(got.data(), got.size() * sizeof(float)));
  for (float x : got) ASSERT_TRUE(std::isfinite(x));
  // Steps before start_powerSGD_iter are exact averages.
  const auto gs = model();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < gs.size(); ++i) {
    for (size_t e = 0; e < gs[i].elements; ++e) {
      double mean = 0;
      for (int r = 0; r < w.size(); ++r) mean += value(9 + i, r, 0, e) / double(w.size());
      worst = std::max(worst, std::fabs(got[at + e] - mean));
    }
    at += gs[i].elements;
  }
  EXPECT_LT(worst, 1e-5);
  // 4 compressed matrices of rank 2 instead of 648+2560+640+1600 elements.
  const double rate = double(state->numel_before_compression()) / double(state->numel_after_compression());
  EXPECT_GT(rate, 4.0) << state->numel_before_compression() << " / " << state->numel_after_compression();
}

TEST(PowerSGD, SaveLoadContinuesBitForBit) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = 1;
  o.start_powersgd_iter = 1;
  auto straight_state = std::make_shared<PowerSGDState>(o);
  auto straight = run_powersgd(straight_state, 0, 8, 21);

  auto first = std::make_shared<PowerSGDState>(o);
  auto part1 = run_powersgd(first, 0, 4, 21);
  auto second = std::make_shared<PowerSGDState>(o);
  second->load_state(first->save_state());
  auto part2 = run_powersgd(second, 4, 4, 21);
  part1.insert(part1.end(), part2.begin(), part2.end());
  ASSERT_EQ(part1.size(), straight.size());
  EXPECT_EQ(0, std::memcmp(part1.data(), straight.data(), straight.size() * sizeof(float)));

  // Without the saved state (error buffers and Q): different results.
  auto fresh = std::make_shared<PowerSGDState>(o);
  auto dropped = run_powersgd(fresh, 4, 4, 21);
  EXPECT_NE(0, std::memcmp(dropped.data(), straight.data() + straight.size() / 2,
                           dropped.size() * sizeof(float)));

  // A state saved with another rank is refused.
  PowerSGDOptions other = o;
  other.matrix_approximation_rank = 3;
  PowerSGDState wrong(other);
  expect_error([&] { wrong.load_state(first->save_state()); }, gradwire::ErrorCode::InvalidArgument,
               "matrix_approximation_rank 1");
}

}  // namespace
}  // namespace gwtest

int main(int argc, char** argv) { return gwtest::run_rank_tests(argc, argv); }
