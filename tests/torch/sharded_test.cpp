// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire::torch::ShardedDataParallel across real ranks (gwlaunch; see
// CMakeLists.txt): stages 1-3 train a small MLP as
// gradwire::torch::DistributedDataParallel with the same torch::optim
// optimizer does, on the same per-rank batches, and end with the same
// parameters (bit for bit or within a stated tolerance, see kTolerance).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <random>

#include "tests/torch/world.h"
#include "gradwire/gradwire.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "gradwire/torch/sharded_data_parallel.h"

namespace {

using gradwire::torch::DistributedDataParallel;
using gradwire::torch::ShardedDataParallel;
using gradwire::torch::ShardedDataParallelOptions;

using gwtorchtest::world;

// Parameter counts (6*13+13, 13*13+13, 13*3+3) are not divisible by 2, 3 or
// 4, so every shard boundary splits a parameter and the last shard pads.
struct NetImpl : ::torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", ::torch::nn::Linear(6, 13));
    fc2 = register_module("fc2", ::torch::nn::Linear(13, 13));
    fc3 = register_module("fc3", ::torch::nn::Linear(13, 3));
  }
  // `sdp`: use() each submodule before it computes (stage 3 gathers it).
  ::torch::Tensor forward(const ::torch::Tensor& x, ShardedDataParallel* sdp = nullptr) {
    if (sdp) sdp->use(fc1);
    auto h = ::torch::tanh(fc1(x));
    if (sdp) sdp->use(fc2);
    h = ::torch::tanh(fc2(h));
    if (sdp) sdp->use(fc3);
    return fc3(h);
  }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Net);

// Rank r's rows of the global batch of step `step` (B rows per rank).
std::pair<::torch::Tensor, ::torch::Tensor> batch(int step, int64_t b) {
  const int n = world().size(), r = world().rank();
  std::mt19937 rng(1234 + step);
  std::normal_distribution<float> normal;
  auto x = ::torch::empty({n * b, 6});
  auto y = ::torch::empty({n * b, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_ptr<float>()[i] = normal(rng);
  for (int64_t i = 0; i < y.numel(); ++i) y.data_ptr<float>()[i] = normal(rng);
  return {x.narrow(0, r * b, b), y.narrow(0, r * b, b)};
}

enum class Opt { Sgd, Adam };

std::unique_ptr<::torch::optim::Optimizer> make_torch(Opt o, std::vector<::torch::Tensor> p) {
  if (o == Opt::Sgd) {
    return std::make_unique<::torch::optim::SGD>(
        p, ::torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
  }
  return std::make_unique<::torch::optim::Adam>(
      p, ::torch::optim::AdamOptions(1e-2).weight_decay(1e-3));
}

// Largest |a - b| over the parameters.
double max_diff(Net& a, Net& b) {
  double worst = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
  }
  return worst;
}

// Trains `steps` steps both ways and returns the largest parameter difference.
double train_against_ddp(int stage, Opt opt, bool torch_optimizer, int steps = 4) {
  ::torch::manual_seed(3);
  Net reference;
  ::torch::manual_seed(3);
  Net sharded;
  DistributedDataParallel ddp(reference, world());
  auto ref_opt = make_torch(opt, reference->parameters());
  ShardedDataParallelOptions o;
  o.stage = stage;
  o.caps.first_bucket_bytes = 256;  // several Buckets, so per-Bucket waits and units matter
  o.caps.bucket_bytes = 512;
  if (torch_optimizer) {
    o.torch_optimizer = [opt](std::vector<::torch::Tensor> p) { return make_torch(opt, p); };
  } else if (opt == Opt::Sgd) {
    o.optimizer = gradwire::torch::shard_optimizer(
        ::torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
  } else {
    o.optimizer =
        gradwire::torch::shard_optimizer(::torch::optim::AdamOptions(1e-2).weight_decay(1e-3));
  }
  o.overlap_parameter_gather = true;  // the forward's use() calls wait per Bucket
  ShardedDataParallel sdp(sharded, world(), o);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch(step, 3);
    ref_opt->zero_grad();
    ::torch::mse_loss(reference->forward(x), y).backward();
    ref_opt->step();
    ::torch::mse_loss(sharded->forward(x, &sdp), y).backward();
    EXPECT_TRUE(sdp.step());
  }
  sdp.use_all();
  const double d = max_diff(sharded, reference);
  if (world().rank() == 0) {
    std::printf("stage %d %s (%s): max |sharded - ddp| = %g\n", stage,
                opt == Opt::Sgd ? "sgd-momentum" : "adam",
                torch_optimizer ? "torch::optim on shards" : "built-in", d);
  }
  return d;
}

// Tolerance: the gradients are the same (each rank divides by N, then
// sums; the sum of two terms is exact in any order, so at 1 and 2 ranks the
// averages are bit for bit and at 3 ranks may differ in the last bit from
// the summation order of reduce-scatter vs allreduce). The built-in
// optimizers compute torch's formulas with float32 roundings in a
// different order, so a few ulps of the update (lr ~ 1e-2) per step.
constexpr double kTolerance = 1e-5;

class Stages : public ::testing::TestWithParam<int> {};

TEST_P(Stages, TorchSgdMomentumOnShardsMatchesDdp) {
  const double d = train_against_ddp(GetParam(), Opt::Sgd, true);
  if (world().size() <= 2) EXPECT_EQ(d, 0.0) << "not bit for bit";
  EXPECT_LE(d, kTolerance);
}
TEST_P(Stages, TorchAdamOnShardsMatchesDdp) {
  const double d = train_against_ddp(GetParam(), Opt::Adam, true);
  if (world().size() <= 2) EXPECT_EQ(d, 0.0) << "not bit for bit";
  EXPECT_LE(d, kTolerance);
}
TEST_P(Stages, BuiltinSgdMomentumMatchesDdp) {
  EXPECT_LE(train_against_ddp(GetParam(), Opt::Sgd, false), kTolerance);
}
TEST_P(Stages, BuiltinAdamMatchesDdp) {
  EXPECT_LE(train_against_ddp(GetParam(), Opt::Adam, false), kTolerance);
}
INSTANTIATE_TEST_SUITE_P(Sharded, Stages, ::testing::Values(1, 2, 3));

// Gradient accumulation: a backward under no_sync() keeps .grad locally,
// the next one hands over the sum, as DistributedDataParallel::no_sync().
TEST_P(Stages, NoSyncAccumulatesLikeDdp) {
  const int stage = GetParam();
  ::torch::manual_seed(5);
  Net reference;
  ::torch::manual_seed(5);
  Net sharded;
  DistributedDataParallel ddp(reference, world());
  auto ref_opt = make_torch(Opt::Adam, reference->parameters());
  ShardedDataParallelOptions o;
  o.stage = stage;
  o.caps.first_bucket_bytes = 256;
  o.caps.bucket_bytes = 512;
  o.torch_optimizer = [](std::vector<::torch::Tensor> p) { return make_torch(Opt::Adam, p); };
  ShardedDataParallel sdp(sharded, world(), o);
  for (int step = 0; step < 3; ++step) {
    auto [x0, y0] = batch(2 * step, 2);
    auto [x1, y1] = batch(2 * step + 1, 2);
    ref_opt->zero_grad();
    {
      auto guard = ddp.no_sync();
      ::torch::mse_loss(reference->forward(x0), y0).backward();
    }
    ::torch::mse_loss(reference->forward(x1), y1).backward();
    ref_opt->step();
    {
      auto guard = sdp.no_sync();
      ::torch::mse_loss(sharded->forward(x0, &sdp), y0).backward();
    }
    ::torch::mse_loss(sharded->forward(x1, &sdp), y1).backward();
    EXPECT_TRUE(sdp.step());
  }
  sdp.use_all();
  const double d = max_diff(sharded, reference);
  if (world().size() <= 2) EXPECT_EQ(d, 0.0) << "not bit for bit";
  EXPECT_LE(d, kTolerance);
}

// bfloat16 parameters (fp32 master weights and Adam state on the shard):
// every stage computes the same bits.
TEST(ShardedBFloat16, StagesAgreeBitForBit) {
  std::vector<std::vector<::torch::Tensor>> finals;
  for (int stage : {1, 2, 3}) {
    ::torch::manual_seed(9);
    Net model;
    model->to(::torch::kBFloat16);
    ShardedDataParallelOptions o;
    o.stage = stage;
    o.caps.first_bucket_bytes = 128;
    o.caps.bucket_bytes = 256;
    o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::AdamOptions(1e-2));
    ShardedDataParallel sdp(model, world(), o);
    for (int step = 0; step < 3; ++step) {
      auto [x, y] = batch(step, 3);
      ::torch::mse_loss(model->forward(x.to(::torch::kBFloat16), &sdp),
                        y.to(::torch::kBFloat16))
          .backward();
      EXPECT_TRUE(sdp.step());
    }
    sdp.use_all();
    std::vector<::torch::Tensor> p;
    for (auto& t : model->parameters()) {
      EXPECT_EQ(t.scalar_type(), ::torch::kBFloat16);
      p.push_back(t.detach().clone());
    }
    finals.push_back(p);
  }
  for (size_t s = 1; s < finals.size(); ++s) {
    for (size_t i = 0; i < finals[0].size(); ++i) {
      EXPECT_TRUE(finals[s][i].equal(finals[0][i])) << "stage " << s + 1 << " parameter " << i;
    }
  }
}

// A full state taken at stage 2 loads into a fresh module at stage 3 (or
// 1), and training continues with the same bits as without the move.
TEST(ShardedState, FullStateMovesBetweenStages) {
  auto train = [](Net& model, ShardedDataParallel& sdp, int from, int to) {
    for (int step = from; step < to; ++step) {
      auto [x, y] = batch(step, 3);
      ::torch::mse_loss(model->forward(x, &sdp), y).backward();
      EXPECT_TRUE(sdp.step());
    }
  };
  auto options = [](int stage) {
    ShardedDataParallelOptions o;
    o.stage = stage;
    o.caps.first_bucket_bytes = 256;
    o.caps.bucket_bytes = 512;
    o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::AdamOptions(1e-2));
    return o;
  };
  ::torch::manual_seed(11);
  Net straight;
  ShardedDataParallel a(straight, world(), options(2));
  train(straight, a, 0, 4);
  a.use_all();
  for (int stage : {3, 1}) {
    ::torch::manual_seed(11);
    Net first;
    ShardedDataParallel b(first, world(), options(2));
    train(first, b, 0, 2);
    const gradwire::ShardedState full = b.full_state();
    ::torch::manual_seed(99);  // other weights: the state must overwrite them
    Net moved;
    ShardedDataParallel c(moved, world(), options(stage));
    c.load_state({&full});
    train(moved, c, 2, 4);
    c.use_all();
    EXPECT_EQ(max_diff(moved, straight), 0.0) << "stage 2 -> " << stage;
  }
}

// A submodule that forward never uses: with find_unused_parameters its
// gradient counts as zero (Adam with zero gradients leaves it unchanged);
// without, backward() names it.
TEST(ShardedUnused, WithOptionCompletesWithoutNamesTheParameter) {
  for (bool find_unused : {true, false}) {
    ::torch::manual_seed(4);
    Net model;
    auto extra = model->register_module("extra", ::torch::nn::Linear(6, 3));
    const ::torch::Tensor before = extra->weight.detach().clone();
    ShardedDataParallelOptions o;
    o.stage = 2;
    o.find_unused_parameters = find_unused;
    o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::AdamOptions(1e-2));
    ShardedDataParallel sdp(model, world(), o);
    auto [x, y] = batch(0, 3);
    try {
      ::torch::mse_loss(model->forward(x, &sdp), y).backward();
      EXPECT_TRUE(find_unused) << "no error without find_unused_parameters";
      EXPECT_TRUE(sdp.step());
      EXPECT_TRUE(extra->weight.equal(before));
    } catch (const gradwire::Error& e) {
      EXPECT_FALSE(find_unused) << e.what();
      EXPECT_NE(std::string(e.what()).find("extra.weight"), std::string::npos) << e.what();
    }
  }
}

// After the wrapper is gone the module keeps the trained values, in memory
// of its own (the engine's is freed).
TEST(ShardedConstruction, ModuleKeepsItsValuesAfterDestruction) {
  for (int stage : {1, 3}) {
    ::torch::manual_seed(8);
    Net model;
    std::vector<::torch::Tensor> trained;
    {
      ShardedDataParallelOptions o;
      o.stage = stage;
      o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.1));
      ShardedDataParallel sdp(model, world(), o);
      auto [x, y] = batch(0, 3);
      ::torch::mse_loss(model->forward(x, &sdp), y).backward();
      sdp.step();
      sdp.use_all();
      for (auto& p : model->parameters()) trained.push_back(p.detach().clone());
    }
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(params[i].equal(trained[i])) << "stage " << stage << " parameter " << i;
    }
    auto [x, y] = batch(1, 3);
    ::torch::mse_loss(model->forward(x), y).backward();  // plain libtorch again
  }
}

TEST(ShardedConstruction, MismatchedModelsNameTheParameter) {
  const int n = world().size(), rank = world().rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  auto model = std::make_shared<::torch::nn::Module>();
  model->register_module("a", ::torch::nn::Linear(4, 4));
  model->register_module("b", ::torch::nn::Linear(4, rank == n - 1 ? 5 : 4));
  ShardedDataParallelOptions o;
  o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.1));
  try {
    ShardedDataParallel sdp(model, world(), o);
    FAIL() << "no Mismatch";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::Mismatch) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("b.weight [5, 4]"), std::string::npos) << what;
    EXPECT_NE(what.find("rank " + std::to_string(n - 1) + " has"), std::string::npos) << what;
  }
}

// The same model but another stage on one rank: the engine's collective
// check fails on every rank, naming the rank that differs.
TEST(ShardedConstruction, MismatchedStagesAreAMismatchEverywhere) {
  const int n = world().size(), rank = world().rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  Net model;
  ShardedDataParallelOptions o;
  o.stage = rank == n - 1 ? 1 : 2;
  o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.1));
  try {
    ShardedDataParallel sdp(model, world(), o);
    FAIL() << "no Mismatch";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::Mismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(n - 1)), std::string::npos) << e.what();
  }
}

TEST(ShardedConstruction, NeedsExactlyOneOptimizer) {
  Net model;
  try {
    ShardedDataParallel sdp(model, world(), {});
    FAIL() << "no error";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument) << e.what();
  }
}

// Stage 3: a forward that skips use() reads NaN, and backward names the
// parameter whose unit was not gathered.
TEST(ShardedStage3, ForwardWithoutUseIsAnError) {
  Net model;
  ShardedDataParallelOptions o;
  o.stage = 3;
  o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.1));
  ShardedDataParallel sdp(model, world(), o);
  auto [x, y] = batch(0, 2);
  try {
    ::torch::mse_loss(model->forward(x), y).backward();
    FAIL() << "no error";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("was not gathered"), std::string::npos) << what;
  }
}

// Int8 gradients (ShardedOptions::gradient_compression through the
// module's options): the warm-up steps are the uncompressed run's bits, the
// step after is not, and after 8 steps the loss on a fixed batch is within
// 5 % of the uncompressed run's, at every stage.
TEST(ShardedCompression, Int8GradientsAfterAWarmUp) {
  for (int stage : {1, 2, 3}) {
    std::vector<std::vector<::torch::Tensor>> at2, at3;
    double loss[2] = {0, 0};
    for (int c = 0; c < 2; ++c) {
      ::torch::manual_seed(5);
      Net model;
      ShardedDataParallelOptions o;
      o.stage = stage;
      o.caps.first_bucket_bytes = 256;
      o.caps.bucket_bytes = 512;
      o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.05).momentum(0.9));
      if (c) {
        o.gradient_compression.kind = gradwire::GradientCompression::Int8;
        o.gradient_compression.block_size = 32;
        o.gradient_compression.start_step = 2;
      }
      ShardedDataParallel sdp(model, world(), o);
      auto snap = [&] {
        sdp.use_all();
        std::vector<::torch::Tensor> p;
        for (auto& t : model->parameters()) p.push_back(t.detach().clone());
        return p;
      };
      auto [x, y] = batch(0, 8);  // one fixed batch: the loss must fall
      for (int step = 0; step < 8; ++step) {
        ::torch::mse_loss(model->forward(x, &sdp), y).backward();
        EXPECT_TRUE(sdp.step());
        if (step == 1) at2.push_back(snap());
        if (step == 2) at3.push_back(snap());
      }
      sdp.use_all();
      ::torch::NoGradGuard no_grad;
      loss[c] = ::torch::mse_loss(model->forward(x), y).item<double>();
    }
    if (world().rank() == 0) {
      std::printf("stage %d: loss after 8 steps uncompressed %.6f, int8 %.6f\n", stage, loss[0],
                  loss[1]);
    }
    bool same2 = true, same3 = true;
    for (size_t i = 0; i < at2[0].size(); ++i) {
      same2 = same2 && at2[0][i].equal(at2[1][i]);
      same3 = same3 && at3[0][i].equal(at3[1][i]);
    }
    EXPECT_TRUE(same2) << "stage " << stage << ": the warm-up was not the uncompressed run";
    EXPECT_FALSE(same3) << "stage " << stage << ": the step after the warm-up was not compressed";
    EXPECT_NEAR(loss[1], loss[0], 0.05 * loss[0]) << "stage " << stage;
  }
}

// Int8 parameter gathers at stage 3 (ShardedOptions::parameter_compression
// through the module's options): the loss on a fixed batch after 8 steps is
// within 10 % of the plain run's, the parameters differ from it, every rank
// holds the same parameter bits, and stage 2 refuses the option.
TEST(ShardedCompression, Int8ParameterGathersAtStage3) {
  double loss[2] = {0, 0};
  std::vector<::torch::Tensor> params[2];
  for (int c = 0; c < 2; ++c) {
    ::torch::manual_seed(5);
    Net model;
    ShardedDataParallelOptions o;
    o.stage = 3;
    o.caps.first_bucket_bytes = 256;
    o.caps.bucket_bytes = 512;
    o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.05).momentum(0.9));
    if (c) {
      o.parameter_compression.kind = gradwire::ParameterCompression::Int8;
      o.parameter_compression.block_size = 32;
    }
    ShardedDataParallel sdp(model, world(), o);
    auto [x, y] = batch(0, 8);
    for (int step = 0; step < 8; ++step) {
      ::torch::mse_loss(model->forward(x, &sdp), y).backward();
      EXPECT_TRUE(sdp.step());
    }
    sdp.use_all();
    for (auto& t : model->parameters()) params[c].push_back(t.detach().clone());
    ::torch::NoGradGuard no_grad;
    loss[c] = ::torch::mse_loss(model->forward(x), y).item<double>();
  }
  if (world().rank() == 0) {
    std::printf("stage 3: loss after 8 steps plain %.6f, int8 parameter gathers %.6f\n", loss[0],
                loss[1]);
  }
  EXPECT_NEAR(loss[1], loss[0], 0.10 * loss[0]);
  bool same = true;
  for (size_t i = 0; i < params[0].size(); ++i) same = same && params[0][i].equal(params[1][i]);
  EXPECT_FALSE(same) << "the gathers were not compressed";
  // Every rank's parameter bits equal rank 0's.
  auto flat = ::torch::cat([&] {
    std::vector<::torch::Tensor> v;
    for (auto& t : params[1]) v.push_back(t.reshape({-1}).to(::torch::kFloat32));
    return v;
  }());
  auto zero = flat.clone();
  world().broadcast(flat.data_ptr(), zero.data_ptr(), size_t(flat.numel()),
                    gradwire::DataType::Float32, 0).wait();
  EXPECT_TRUE(flat.equal(zero)) << "parameters differ from rank 0's";

  Net model;
  ShardedDataParallelOptions o;
  o.stage = 2;
  o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.1));
  o.parameter_compression.kind = gradwire::ParameterCompression::Int8;
  try {
    ShardedDataParallel sdp(model, world(), o);
    FAIL() << "no error";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("parameter_compression.kind int8 at stage 2"),
              std::string::npos) << e.what();
  }
}

// Stage 3 with after_forward() (Note [reshard after forward]): the units are
// freed after their forward and gathered again for their backward, so fewer
// gathered bytes are held at once than the whole model, and training gives
// the bits of the run that keeps every unit gathered until backward ends.
struct DeepImpl : ::torch::nn::Module {
  DeepImpl() {
    for (int k = 0; k < 6; ++k) {
      layers.push_back(register_module("l" + std::to_string(k), ::torch::nn::Linear(6, 6)));
    }
  }
  ::torch::Tensor forward(::torch::Tensor h, ShardedDataParallel& sdp) {
    for (size_t k = 0; k < layers.size(); ++k) {
      sdp.use(layers[k]);
      ::torch::Tensor out = layers[k](h);
      if (k + 1 < layers.size()) out = sdp.after_forward(layers[k], out);  // not the last unit
      h = ::torch::tanh(out);
    }
    return h;
  }
  std::vector<::torch::nn::Linear> layers;
};
TORCH_MODULE(Deep);

TEST(ShardedStage3, ReshardAfterForwardLowersThePeakWithTheSameBits) {
  std::vector<std::vector<::torch::Tensor>> finals;
  std::vector<size_t> peaks;
  size_t whole = 0;
  for (bool reshard : {false, true}) {
    ::torch::manual_seed(5);
    Deep model;
    ShardedDataParallelOptions o;
    o.stage = 3;
    o.reshard_after_forward = reshard;
    o.optimizer = gradwire::torch::shard_optimizer(
        ::torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
    ShardedDataParallel sdp(model, world(), o);
    ASSERT_EQ(sdp.engine().units(), 6u);
    for (int step = 0; step < 3; ++step) {
      auto [x, y] = batch(step, 3);
      if (step == 1) {  // a micro-batch accumulated under no_sync() first
        auto guard = sdp.no_sync();
        auto [x2, y2] = batch(10 + step, 3);
        ::torch::mse_loss(model->forward(x2, sdp).narrow(1, 0, 3), y2).backward();
      }
      ::torch::Tensor out = model->forward(x, sdp);
      ::torch::mse_loss(out.narrow(1, 0, 3), y).backward();
      EXPECT_TRUE(sdp.step());
      EXPECT_EQ(sdp.engine().memory().gathered, 0u);
    }
    peaks.push_back(sdp.engine().memory().peak_gathered);
    sdp.use_all();
    whole = sdp.engine().memory().gathered;
    std::vector<::torch::Tensor> p;
    for (auto& t : model->parameters()) p.push_back(t.detach().clone());
    finals.push_back(p);
  }
  if (world().rank() == 0) {
    std::printf("stage 3, 6 units: peak gathered bytes kept %zu, resharded %zu, whole model %zu\n",
                peaks[0], peaks[1], whole);
  }
  EXPECT_EQ(peaks[0], whole);
  // Forward: a unit and the next one prefetched; backward: the last unit,
  // one gathered again and the next one prefetched.
  EXPECT_LE(peaks[1], whole / 2);
  for (size_t i = 0; i < finals[0].size(); ++i) {
    EXPECT_TRUE(finals[1][i].equal(finals[0][i])) << "parameter " << i;
  }
}

// A unit handed to after_forward() without the output its backward starts
// from has no hook to gather it again: its backward reads the freed
// storage, which torch refuses (Note [reshard after forward]), rather than
// reading freed memory.
TEST(ShardedStage3, AfterForwardWithoutTheOutputIsATorchError) {
  Net model;
  ShardedDataParallelOptions o;
  o.stage = 3;
  o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::SGDOptions(0.1));
  ShardedDataParallel sdp(model, world(), o);
  auto [x, y] = batch(0, 2);
  sdp.use(model->fc1);
  auto h = ::torch::tanh(model->fc1(x));
  sdp.use(model->fc2);
  auto h2 = ::torch::tanh(model->fc2(h));
  sdp.after_forward(model->fc2, h);  // its input, not its output
  h = h2;
  sdp.use(model->fc3);
  try {
    ::torch::mse_loss(model->fc3(h), y).backward();
    FAIL() << "no error";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    // torch's checks of a storage of 0 bytes (views, data pointers).
    EXPECT_TRUE(what.find("storage of size 0") != std::string::npos ||
                what.find("not allocated") != std::string::npos)
        << what;
  }
}

}  // namespace
