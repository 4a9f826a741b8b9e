// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire::torch::DistributedDataParallel across real ranks (launched by
// gwlaunch; see CMakeLists.txt). Each test compares N ranks with per-rank
// batch B against one model trained on batch N*B, which every rank computes
// locally from the same data, so no rank needs another's result.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include "tests/torch/world.h"
#include "gradwire/gradwire.h"
#include "gradwire/torch/distributed_data_parallel.h"

namespace {

using gradwire::torch::DDPOptions;
using gradwire::torch::DistributedDataParallel;

using gwtorchtest::world;

// A small MLP. `reverse_registration` registers the layers in the opposite
// of the order forward uses them, so the initial bucket plan (reverse
// registration order) guesses the ready order wrong and the rebuild must
// change it. `extra` (if present) is used only where forward is told to.
struct NetImpl : ::torch::nn::Module {
  NetImpl(::torch::Dtype dtype, bool reverse_registration = false, bool with_extra = false) {
    const int64_t width = 16;
    if (reverse_registration) {
      fc3 = register_module("fc3", ::torch::nn::Linear(width, 3));
      fc2 = register_module("fc2", ::torch::nn::Linear(width, width));
      fc1 = register_module("fc1", ::torch::nn::Linear(6, width));
    } else {
      fc1 = register_module("fc1", ::torch::nn::Linear(6, width));
      fc2 = register_module("fc2", ::torch::nn::Linear(width, width));
      fc3 = register_module("fc3", ::torch::nn::Linear(width, 3));
    }
    if (with_extra) extra = register_module("extra", ::torch::nn::Linear(6, 3));
    to(dtype);
  }
  ::torch::Tensor forward(const ::torch::Tensor& x, bool use_extra = false) {
    auto y = fc3(::torch::tanh(fc2(::torch::tanh(fc1(x)))));
    return use_extra ? y + extra(x) : y;
  }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, extra{nullptr};
};
TORCH_MODULE(Net);

// Global batch of step `step`: N*B rows; rank r owns rows [r*B, (r+1)*B).
std::pair<::torch::Tensor, ::torch::Tensor> global_batch(int step, int64_t rows,
                                                         ::torch::Dtype dtype) {
  std::mt19937 rng(1234 + step);
  std::normal_distribution<float> normal;
  auto x = ::torch::empty({rows, 6});
  auto y = ::torch::empty({rows, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_ptr<float>()[i] = normal(rng);
  for (int64_t i = 0; i < y.numel(); ++i) y.data_ptr<float>()[i] = normal(rng);
  return {x.to(dtype), y.to(dtype)};
}

void copy_parameters(Net& to, const Net& from) {
  ::torch::NoGradGuard no_grad;
  auto dst = to->parameters();
  auto src = from->parameters();
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
}

// Largest |a - b| - rtol*|b| over all parameters (<= atol means close).
::testing::AssertionResult close(const std::vector<::torch::Tensor>& got,
                                 const std::vector<::torch::Tensor>& want,
                                 const std::vector<std::string>& names, double rtol,
                                 double atol) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].defined() || !want[i].defined()) {
      return ::testing::AssertionFailure() << names[i] << ": undefined tensor";
    }
    auto diff = (got[i] - want[i]).abs() - rtol * want[i].abs();
    double worst = diff.max().item<double>();
    if (worst > atol) {
      return ::testing::AssertionFailure()
             << "rank " << world().rank() << ": " << names[i] << " differs by "
             << (got[i] - want[i]).abs().max().item<double>() << " (atol " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<::torch::Tensor> grads(const Net& net) {
  std::vector<::torch::Tensor> g;
  for (auto& p : net->parameters()) g.push_back(p.grad());
  return g;
}
std::vector<std::string> names(const Net& net) {
  std::vector<std::string> n;
  for (auto& item : net->named_parameters()) n.push_back(item.key());
  return n;
}

// True if every rank holds the same bytes.
bool identical_on_all_ranks(const void* data, size_t bytes) {
  std::vector<uint8_t> all(bytes * size_t(world().size()));
  world().allgather(data, all.data(), all.size(), gradwire::DataType::UInt8).wait();
  for (int r = 1; r < world().size(); ++r) {
    if (std::memcmp(all.data(), all.data() + size_t(r) * bytes, bytes) != 0) return false;
  }
  return true;
}

// Note [equivalence tolerance]: each rank's gradient is a mean over B rows,
// divided by N and summed over ranks, while the reference takes one mean
// over N*B rows: the same real number, rounded in a different order, i.e. a
// relative difference of a few units in the last place per element per
// step. After K = 5 steps (lr 0.05 with momentum, or Adam 0.01; parameters
// and gradients O(1)) the parameters differ by at most 3e-8 in float32 and
// 1e-16 in float64 (measured for N = 2, 3, 4). The tolerances, |a - b| <=
// 1e-6 + 1e-6 |b| (float32) and 1e-12 (1 + |b|) (float64), leave 30x and
// 10^4x headroom, while a real bug (a missing 1/N, a Bucket not reduced, a
// gradient at a wrong offset, a rank keeping its own initial values) moves
// parameters by 1e-3 or more (3e-2 .. 1e-1 measured when the broadcast is
// skipped).
struct Case {
  ::torch::Dtype dtype = ::torch::kFloat;
  bool adam = false;
  DDPOptions options;
  bool reverse_registration = false;
  ::torch::Device device = ::torch::kCPU;  // CUDA: device Buckets through NCCL
};

void run_equivalence(const Case& c, int steps = 5, int64_t per_rank = 4) {
  const int n = world().size(), rank = world().rank();
  ::torch::manual_seed(100 + rank);  // different initial values: the broadcast must fix them
  Net model(c.dtype, c.reverse_registration);
  model->to(c.device);
  DistributedDataParallel ddp(model, world(), c.options);
  Net reference(c.dtype, c.reverse_registration);
  reference->to(c.device);
  copy_parameters(reference, model);  // rank 0's values, after the broadcast

  auto make_opt = [&](Net& m) -> std::unique_ptr<::torch::optim::Optimizer> {
    if (c.adam) return std::make_unique<::torch::optim::Adam>(m->parameters(), 0.01);
    return std::make_unique<::torch::optim::SGD>(
        m->parameters(), ::torch::optim::SGDOptions(0.05).momentum(0.9));
  };
  auto opt = make_opt(model);
  auto ref_opt = make_opt(reference);
  for (int step = 0; step < steps; ++step) {
    auto [x_host, y_host] = global_batch(step, n * per_rank, c.dtype);
    auto x = x_host.to(c.device), y = y_host.to(c.device);
    // zero_grad(false) keeps bucket views aliased (zero-copy); alternate
    // with set_to_none to exercise the re-aliasing path too.
    opt->zero_grad(step % 2 == 0);
    auto loss = ::torch::mse_loss(model->forward(x.narrow(0, rank * per_rank, per_rank)),
                                  y.narrow(0, rank * per_rank, per_rank));
    loss.backward();
    opt->step();

    ref_opt->zero_grad();
    ::torch::mse_loss(reference->forward(x), y).backward();
    ref_opt->step();
  }
  const bool f64 = c.dtype == ::torch::kDouble;
  EXPECT_TRUE(close(model->parameters(), reference->parameters(), names(model),
                    f64 ? 1e-12 : 1e-6, f64 ? 1e-12 : 1e-6));
  EXPECT_EQ(ddp.reducer().step(), uint64_t(steps));
  // The replicas are bitwise identical (every rank applied the same average).
  for (auto& p : model->parameters()) {
    auto t = p.contiguous().cpu();
    EXPECT_TRUE(identical_on_all_ranks(t.data_ptr(), t.numel() * t.element_size()));
  }
}

// The GPU this rank trains on, or why the CUDA tests cannot run here (the
// same answer on every rank, so they skip together).
std::string cuda_skip_reason() {
  // This binary links libtorch_cpu only (Note [finding libtorch]); PyTorch's
  // CUDA half registers itself when libtorch_cuda is loaded, as `import
  // torch` does. It finds its CUDA libraries through its own RUNPATH.
  static const std::string load_error = [] {
    if (dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL) != nullptr) return std::string();
    const char* e = dlerror();
    return std::string(e ? e : "unknown error");
  }();
  if (!load_error.empty()) return "libtorch_cuda.so did not load: " + load_error;
  if (!::torch::cuda::is_available()) return "no CUDA device (torch::cuda::is_available() is false)";
  const auto devices = ::torch::cuda::device_count();
  if (size_t(world().size()) > devices) {
    return "world size " + std::to_string(world().size()) + " needs one CUDA device per rank "
           "(NCCL); this machine has " + std::to_string(devices);
  }
  return "";
}
::torch::Device rank_device() {
  return {::torch::kCUDA, static_cast<c10::DeviceIndex>(world().rank() %
                                                         ::torch::cuda::device_count())};
}

TEST(DDPEquivalence, SgdFloat32DefaultBuckets) { run_equivalence({}); }

TEST(DDPEquivalence, SgdFloat32SmallBucketsViews) {
  Case c;
  c.options.caps = {64, 256};  // many Buckets, launched in order during backward
  c.options.gradient_as_bucket_view = true;
  run_equivalence(c);
}

TEST(DDPEquivalence, AdamFloat64SmallBuckets) {
  Case c;
  c.dtype = ::torch::kDouble;
  c.adam = true;
  c.options.caps = {128, 512};
  run_equivalence(c);
}

// A rebuild after step 1 re-plans the Buckets from rank 0's ready order; every
// rank must end with the same plan, and views must follow the move.
// Note [device Buckets]: parameters on the GPU, Buckets in device memory,
// the averaging in a kernel on autograd's stream, NCCL for the collectives.
TEST(DDPCuda, SgdFloat32DefaultBuckets) {
  const std::string skip = cuda_skip_reason();
  if (!skip.empty()) GTEST_SKIP() << skip;
  Case c;
  c.device = rank_device();
  run_equivalence(c);
}

TEST(DDPCuda, AdamFloat64SmallBucketsViewsRebuilt) {
  const std::string skip = cuda_skip_reason();
  if (!skip.empty()) GTEST_SKIP() << skip;
  Case c;
  c.device = rank_device();
  c.dtype = ::torch::kDouble;
  c.adam = true;
  c.reverse_registration = true;
  c.options.caps = gradwire::BucketCaps{512, 1024};
  c.options.gradient_as_bucket_view = true;
  run_equivalence(c);
}

TEST(DDPRebuild, AllRanksAgreeAndViewsFollow) {
  Case c;
  c.reverse_registration = true;  // the initial guess of the ready order is wrong
  c.options.caps = {64, 256};
  c.options.gradient_as_bucket_view = true;
  run_equivalence(c, 4);

  ::torch::manual_seed(7);
  Net model(::torch::kFloat, true);
  DistributedDataParallel ddp(model, world(), c.options);
  const gradwire::BucketPlan before = ddp.reducer().plan();
  auto [x, y] = global_batch(0, 4, ::torch::kFloat);
  ::torch::mse_loss(model->forward(x), y).backward();
  EXPECT_EQ(ddp.reducer().plan_generation(), 1u);
  EXPECT_FALSE(ddp.reducer().plan() == before) << "the rebuild did not change the plan";
  std::vector<int64_t> flat;
  for (const auto& b : ddp.reducer().plan().buckets) {
    flat.push_back(-1);
    for (size_t g : b.gradients) flat.push_back(int64_t(g));
  }
  int64_t count = int64_t(flat.size());
  EXPECT_TRUE(identical_on_all_ranks(&count, sizeof count));
  if (identical_on_all_ranks(&count, sizeof count)) {
    EXPECT_TRUE(identical_on_all_ranks(flat.data(), flat.size() * sizeof(int64_t)));
  }
  // .grad aliases the new Bucket memory.
  for (size_t i = 0; i < ddp.parameter_names().size(); ++i) {
    auto p = model->named_parameters()[ddp.parameter_names()[i]];
    EXPECT_EQ(p.grad().data_ptr(), ddp.reducer().bucket_view(i)) << ddp.parameter_names()[i];
  }
}

// no_sync: two local backward passes, then a synchronised one, average the
// sum of all three.
TEST(DDPNoSync, AccumulatesThenAveragesTheSum) {
  const int n = world().size(), rank = world().rank();
  const int64_t b = 3;
  for (bool views : {false, true}) {
    ::torch::manual_seed(1);
    Net model(::torch::kFloat);
    DDPOptions o;
    o.gradient_as_bucket_view = views;
    DistributedDataParallel ddp(model, world(), o);
    Net reference(::torch::kFloat);
    copy_parameters(reference, model);
    for (int micro = 0; micro < 3; ++micro) {
      auto [x, y] = global_batch(micro, n * b, ::torch::kFloat);
      auto local = [&] {
        ::torch::mse_loss(model->forward(x.narrow(0, rank * b, b)), y.narrow(0, rank * b, b))
            .backward();
      };
      if (micro < 2) {
        auto guard = ddp.no_sync();
        local();
      } else {
        local();
      }
      ::torch::mse_loss(reference->forward(x), y).backward();
      EXPECT_EQ(ddp.reducer().step(), micro < 2 ? 0u : 1u);
    }
    std::vector<::torch::Tensor> got = grads(model), want = grads(reference);
    EXPECT_TRUE(close(got, want, names(model), 1e-6, 1e-6)) << "views=" << views;
  }
}

// sync_every_k_steps = 3: the same accumulation as no_sync, driven by the
// option instead of a guard: passes 1 and 2 stay local, pass 3 averages the
// sum of all three; then the cycle starts again.
TEST(DDPSyncEveryK, AccumulatesKPassesThenAverages) {
  const int n = world().size(), rank = world().rank();
  const int64_t b = 3;
  ::torch::manual_seed(1);
  Net model(::torch::kFloat);
  DDPOptions o;
  o.sync_every_k_steps = 3;
  DistributedDataParallel ddp(model, world(), o);
  Net reference(::torch::kFloat);
  copy_parameters(reference, model);
  for (int pass = 0; pass < 6; ++pass) {
    if (pass == 3) {  // a new accumulation cycle
      for (auto& p : model->parameters()) p.mutable_grad() = ::torch::Tensor();
      for (auto& p : reference->parameters()) p.mutable_grad() = ::torch::Tensor();
    }
    auto [x, y] = global_batch(pass, n * b, ::torch::kFloat);
    ::torch::mse_loss(model->forward(x.narrow(0, rank * b, b)), y.narrow(0, rank * b, b))
        .backward();
    ::torch::mse_loss(reference->forward(x), y).backward();
    EXPECT_EQ(ddp.reducer().step(), uint64_t((pass + 1) / 3)) << "pass " << pass;
    if (pass % 3 == 2) {
      std::vector<::torch::Tensor> got = grads(model), want = grads(reference);
      EXPECT_TRUE(close(got, want, names(model), 1e-6, 1e-6)) << "after pass " << pass;
    }
  }
}

TEST(DDPUnused, WithOptionCompletesAndAverages) {
  const int rank = world().rank();
  ::torch::manual_seed(3);
  Net model(::torch::kFloat, false, true);
  DDPOptions o;
  o.find_unused_parameters = true;
  o.caps = {64, 256};
  DistributedDataParallel ddp(model, world(), o);
  auto [x, y] = global_batch(0, 4, ::torch::kFloat);
  // Step 1: nobody uses `extra`: its gradient is the average of zeros.
  ::torch::mse_loss(model->forward(x), y).backward();
  ASSERT_TRUE(model->extra->weight.grad().defined());
  EXPECT_EQ(model->extra->weight.grad().abs().max().item<float>(), 0.0f);
  // Step 2: only rank 0 uses it: every rank gets rank 0's gradient / N.
  for (auto& p : model->parameters()) p.mutable_grad() = ::torch::Tensor();
  ::torch::mse_loss(model->forward(x, rank == 0), y).backward();
  auto g = model->extra->weight.grad().contiguous();
  EXPECT_TRUE(identical_on_all_ranks(g.data_ptr(), g.numel() * sizeof(float)));
  // Rank 0's local gradient, recomputed without DDP on a copy.
  Net local(::torch::kFloat, false, true);
  copy_parameters(local, model);
  ::torch::mse_loss(local->forward(x, true), y).backward();
  auto want = local->extra->weight.grad() / world().size();
  EXPECT_TRUE(close({g}, {want}, {"extra.weight"}, 1e-5, 1e-6));
  EXPECT_EQ(ddp.reducer().step(), 2u);
}

TEST(DDPUnused, WithoutOptionNamesTheParameter) {
  ::torch::manual_seed(3);
  Net model(::torch::kFloat, false, true);
  DistributedDataParallel ddp(model, world());
  auto [x, y] = global_batch(0, 4, ::torch::kFloat);
  try {
    ::torch::mse_loss(model->forward(x), y).backward();
    FAIL() << "backward() did not report the unused parameters";
  } catch (const gradwire::Error& e) {  // autograd rethrows the callback's exception as is
    EXPECT_EQ(e.code(), gradwire::ErrorCode::InvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("extra.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("extra.bias"), std::string::npos) << what;
    EXPECT_NE(what.find("find_unused_parameters"), std::string::npos) << what;
  }
  // The next step works once the model uses every parameter.
  ::torch::mse_loss(model->forward(x, true), y).backward();
  EXPECT_EQ(ddp.reducer().step(), 1u);
}

TEST(DDPSharded, ShardsHoldTheAverageAndCoverEverything) {
  const int n = world().size(), rank = world().rank();
  const int64_t b = 4;
  ::torch::manual_seed(5);
  Net model(::torch::kFloat);
  DDPOptions o;
  o.sharded = true;
  o.rebuild_buckets = false;  // the rebuild would make the first step's results complete
  o.caps = {64, 256};
  DistributedDataParallel ddp(model, world(), o);
  Net reference(::torch::kFloat);
  copy_parameters(reference, model);
  auto [x, y] = global_batch(0, n * b, ::torch::kFloat);
  ::torch::mse_loss(model->forward(x.narrow(0, rank * b, b)), y.narrow(0, rank * b, b))
      .backward();
  ::torch::mse_loss(reference->forward(x), y).backward();

  auto params = model->parameters();
  auto want = grads(reference);
  int64_t covered = 0;
  for (size_t bucket = 0; bucket < ddp.reducer().plan().buckets.size(); ++bucket) {
    auto shard = ddp.reducer().shard(bucket);
    for (const auto& piece : shard.pieces) {
      const float* s = static_cast<const float*>(shard.data) + piece.shard_offset;
      auto got = ::torch::from_blob(const_cast<float*>(s), {int64_t(piece.count)}).clone();
      auto grad_piece = params[piece.gradient].grad().view(-1).narrow(
          0, int64_t(piece.offset), int64_t(piece.count));
      auto want_piece =
          want[piece.gradient].view(-1).narrow(0, int64_t(piece.offset), int64_t(piece.count));
      EXPECT_TRUE(close({got, grad_piece}, {want_piece, want_piece},
                        {"shard", "grad piece"}, 1e-5, 2e-6));
      covered += int64_t(piece.count);
    }
  }
  world().allreduce(&covered, &covered, 1, gradwire::DataType::Int64,
                    gradwire::ReduceOp::Sum).wait();
  int64_t total = 0;
  for (auto& p : params) total += p.numel();
  EXPECT_EQ(covered, total) << "the shards do not reassemble to every gradient element";
}

TEST(DDPConstruction, MismatchedShapesNameTheParameter) {
  const int n = world().size(), rank = world().rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  auto model = std::make_shared<::torch::nn::Module>();
  model->register_module("a", ::torch::nn::Linear(4, 4));
  model->register_module("b", ::torch::nn::Linear(4, rank == n - 1 ? 5 : 4));
  try {
    DistributedDataParallel ddp(model, world());
    FAIL() << "no Mismatch";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::Mismatch) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("b.weight [5, 4]"), std::string::npos) << what;
    EXPECT_NE(what.find("b.weight [4, 4]"), std::string::npos) << what;
    EXPECT_NE(what.find("rank " + std::to_string(n - 1) + " has"), std::string::npos) << what;
  }
}

// Resuming from a checkpoint after wrapping: torch::load re-points every
// parameter at new storage (Tensor::set_) under the DDP module's hooks. The
// next step must still average, with views or without.
TEST(DDPConstruction, SurvivesTorchLoadAfterConstruction) {
  const int n = world().size(), rank = world().rank();
  const int64_t b = 3;
  for (bool views : {false, true}) {
    ::torch::manual_seed(1);
    Net model(::torch::kFloat);
    DDPOptions o;
    o.gradient_as_bucket_view = views;
    DistributedDataParallel ddp(model, world(), o);
    ::torch::manual_seed(7);  // other weights, the same on every rank
    Net saved(::torch::kFloat);
    std::stringstream checkpoint;
    ::torch::save(saved, checkpoint);
    ::torch::load(model, checkpoint);
    Net reference(::torch::kFloat);
    copy_parameters(reference, model);
    EXPECT_TRUE(close(model->parameters(), saved->parameters(), names(model), 0, 0));
    for (int step = 0; step < 2; ++step) {
      for (auto& p : model->parameters()) p.mutable_grad() = ::torch::Tensor();
      for (auto& p : reference->parameters()) p.mutable_grad() = ::torch::Tensor();
      auto [x, y] = global_batch(step, n * b, ::torch::kFloat);
      ::torch::mse_loss(model->forward(x.narrow(0, rank * b, b)), y.narrow(0, rank * b, b))
          .backward();
      ::torch::mse_loss(reference->forward(x), y).backward();
      EXPECT_EQ(ddp.reducer().step(), uint64_t(step + 1));
      EXPECT_TRUE(close(grads(model), grads(reference), names(model), 1e-6, 1e-6))
          << "views=" << views << " step " << step;
    }
  }
}

TEST(DDPConstruction, BroadcastsBuffersFromRankZero) {
  auto model = std::make_shared<::torch::nn::Module>();
  auto bn = model->register_module("bn", ::torch::nn::BatchNorm1d(5));
  {
    ::torch::NoGradGuard no_grad;
    bn->running_mean.fill_(float(world().rank() + 1));
  }
  DistributedDataParallel ddp(model, world());
  EXPECT_EQ(bn->running_mean.max().item<float>(), 1.0f);
  EXPECT_EQ(bn->running_mean.min().item<float>(), 1.0f);
}

}  // namespace
