// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Checkpoints between unsharded DDP (gradwire::torch::DistributedDataParallel
// with a torch::optim optimizer) and ShardedDataParallel, both ways
// (gradwire/torch/unsharded_checkpoint.h), linked into the sharded test
// binary:
//  * UnshardedCheckpoint.RoundTrip*: at one world size, DDP -> checkpoint ->
//    ShardedDataParallel and back move the parameters, the fp32 master
//    weights and the optimizer state (Adam, AdamW, SGD with momentum;
//    float32 and bfloat16) bit for bit;
//  * UnshardedCheckpoint.Pair: two ctest entries share a directory
//    (GW_DDP_CKPT_DIR): the writer trains at N ranks and saves, the reader
//    loads at M ranks, continues, and ends within kTolerance of one
//    uninterrupted run;
//  * UnshardedCheckpoint.BadInput: each bad input is its typed error on
//    every rank, leaving the module and optimizer as they were;
//  * ShardedCheckpoint.OtherNamesOrShapes: ShardedDataParallel's own
//    load_checkpoint refuses a model with the same fingerprint but other
//    parameter names or shapes (the manifest check both loaders share).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/torch/world.h"
#include "gradwire/gradwire.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "gradwire/torch/sharded_data_parallel.h"
#include "gradwire/torch/unsharded_checkpoint.h"

namespace {

using gradwire::torch::DistributedDataParallel;
using gradwire::torch::ShardedDataParallel;
using gradwire::torch::ShardedDataParallelOptions;
using gwtorchtest::world;

// Parameter counts (6*13+13, 13*13+13, 13*3+3) divisible by none of 2, 3, 4.
struct NetImpl : ::torch::nn::Module {
  explicit NetImpl(int64_t hidden = 13) {
    fc1 = register_module("fc1", ::torch::nn::Linear(6, hidden));
    fc2 = register_module("fc2", ::torch::nn::Linear(hidden, 13));
    fc3 = register_module("fc3", ::torch::nn::Linear(13, 3));
  }
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

// The global batch of step `step` is kRows rows at every world size; rank r
// of n takes rows [r kRows / n, (r+1) kRows / n) (equal parts at 1-4 ranks,
// so the average of the ranks' mean losses is the global mean loss).
constexpr int64_t kRows = 12;
std::pair<::torch::Tensor, ::torch::Tensor> global_batch(int step) {
  std::mt19937 rng(777 + step);
  std::normal_distribution<float> normal;
  auto x = ::torch::empty({kRows, 6});
  auto y = ::torch::empty({kRows, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_ptr<float>()[i] = normal(rng);
  for (int64_t i = 0; i < y.numel(); ++i) y.data_ptr<float>()[i] = normal(rng);
  return {x, y};
}
std::pair<::torch::Tensor, ::torch::Tensor> batch(int step) {
  const int64_t n = world().size(), r = world().rank();
  auto [x, y] = global_batch(step);
  const int64_t lo = r * kRows / n, hi = (r + 1) * kRows / n;
  return {x.narrow(0, lo, hi - lo), y.narrow(0, lo, hi - lo)};
}

::torch::optim::AdamOptions adam_options() {
  return ::torch::optim::AdamOptions(1e-2).weight_decay(1e-3);
}

// This step's rows in the model's dtype.
std::pair<::torch::Tensor, ::torch::Tensor> batch_for(Net& model, int step) {
  auto [x, y] = batch(step);
  const auto dt = model->parameters()[0].scalar_type();
  return {x.to(dt), y.to(dt)};
}

void ddp_steps(Net& model, ::torch::optim::Optimizer& opt, int from, int to) {
  for (int step = from; step < to; ++step) {
    auto [x, y] = batch_for(model, step);
    opt.zero_grad();
    ::torch::mse_loss(model->forward(x), y).backward();
    opt.step();
  }
}
void sdp_steps(Net& model, ShardedDataParallel& sdp, int from, int to) {
  for (int step = from; step < to; ++step) {
    auto [x, y] = batch_for(model, step);
    ::torch::mse_loss(model->forward(x, &sdp), y).backward();
    EXPECT_TRUE(sdp.step());
  }
}

// One process, the whole global batch, torch::optim::Adam: the
// uninterrupted run that the re-sharded ones are compared with.
Net reference(int steps) {
  ::torch::manual_seed(5);
  Net model;
  ::torch::optim::Adam opt(model->parameters(), adam_options());
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = global_batch(step);
    opt.zero_grad();
    ::torch::mse_loss(model->forward(x), y).backward();
    opt.step();
  }
  return model;
}

double max_diff(Net& a, Net& b) {
  double worst = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
  }
  return worst;
}

// A fresh directory, the same path on every rank (rank 0 makes it).
std::string shared_temp_dir() {
  auto& w = world();
  char path[256] = {};
  if (w.rank() == 0) {
    std::snprintf(path, sizeof path, "%s/gw-unsharded-XXXXXX",
                  std::filesystem::temp_directory_path().c_str());
    if (!mkdtemp(path)) path[0] = 0;
  }
  w.broadcast(path, path, sizeof path, gradwire::DataType::UInt8, 0).wait();
  return path;
}

bool same_bits(const ::torch::Tensor& a, const ::torch::Tensor& b) {
  auto x = a.detach().contiguous(), y = b.detach().contiguous();
  return x.scalar_type() == y.scalar_type() && x.numel() == y.numel() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * x.element_size()) == 0;
}

// The optimizer's state tensors of `p` in the engine's order, float32.
std::vector<::torch::Tensor> torch_state(::torch::optim::Optimizer& opt, const ::torch::Tensor& p) {
  auto it = opt.state().find(p.unsafeGetTensorImpl());
  if (it == opt.state().end()) return {};
  if (auto* s = dynamic_cast<::torch::optim::AdamParamState*>(it->second.get())) {
    return {s->exp_avg(), s->exp_avg_sq()};
  }
  if (auto* s = dynamic_cast<::torch::optim::AdamWParamState*>(it->second.get())) {
    return {s->exp_avg(), s->exp_avg_sq()};
  }
  auto& s = dynamic_cast<::torch::optim::SGDParamState&>(*it->second);
  return {s.momentum_buffer()};
}

// `full` (an engine's full state) holds exactly `model`'s parameters and
// `opt`'s state: values bit for bit, master = the values widened, state =
// the torch state widened (bit for bit for float32).
void expect_same_state(const gradwire::ShardedState& full, Net& model,
                       ::torch::optim::Optimizer& opt, const std::string& what) {
  auto params = model->parameters();
  ASSERT_EQ(full.records.size(), params.size()) << what;
  for (const auto& r : full.records) {
    const auto& p = params[r.parameter];
    auto values = ::torch::from_blob(const_cast<std::byte*>(r.values.data()), p.sizes(),
                                     ::torch::TensorOptions().dtype(p.scalar_type()));
    EXPECT_TRUE(same_bits(values, p)) << what << ": parameter " << r.parameter;
    auto master = ::torch::from_blob(const_cast<float*>(r.master.data()), p.sizes(), ::torch::kFloat);
    EXPECT_TRUE(same_bits(master, p.to(::torch::kFloat))) << what << ": master " << r.parameter;
    const auto st = torch_state(opt, p);
    ASSERT_EQ(st.size(), r.state.size()) << what << ": parameter " << r.parameter;
    for (size_t k = 0; k < st.size(); ++k) {
      auto mine = ::torch::from_blob(const_cast<float*>(r.state[k].data()), p.sizes(), ::torch::kFloat);
      // torch keeps a bf16 parameter's state in bf16: compare in that dtype.
      EXPECT_TRUE(same_bits(mine.to(st[k].scalar_type()), st[k]))
          << what << ": state " << full.state_names[k] << " of parameter " << r.parameter;
    }
  }
}

struct OptCase {
  const char* name;
  std::function<std::unique_ptr<::torch::optim::Optimizer>(std::vector<::torch::Tensor>)> make;
  std::function<std::shared_ptr<gradwire::ShardOptimizer>()> shard;
};

std::vector<OptCase> opt_cases() {
  return {
      {"adam",
       [](auto p) { return std::make_unique<::torch::optim::Adam>(p, adam_options()); },
       [] { return gradwire::torch::shard_optimizer(adam_options()); }},
      {"adamw",
       [](auto p) {
         return std::make_unique<::torch::optim::AdamW>(p, ::torch::optim::AdamWOptions(1e-2));
       },
       [] { return gradwire::torch::shard_optimizer(::torch::optim::AdamWOptions(1e-2)); }},
      {"sgd_momentum",
       [](auto p) {
         return std::make_unique<::torch::optim::SGD>(
             p, ::torch::optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
       },
       [] {
         return gradwire::torch::shard_optimizer(
             ::torch::optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
       }},
  };
}

// At this world size: DDP trains two steps and saves; ShardedDataParallel
// (stage 2) loads it and holds the same bits; it trains one more step and
// saves; a fresh DDP module and optimizer load that and hold its bits.
void round_trip(::torch::Dtype dtype) {
  const std::string dir = shared_temp_dir();
  ASSERT_FALSE(dir.empty());
  for (const OptCase& c : opt_cases()) {
    SCOPED_TRACE(c.name);
    const std::string a = dir + "/" + c.name + "-ddp", b = dir + "/" + c.name + "-sdp";
    ::torch::manual_seed(5);
    Net model;
    model->to(dtype);
    DistributedDataParallel ddp(model, world());
    auto opt = c.make(model->parameters());
    ddp_steps(model, *opt, 0, 2);
    ddp.save_checkpoint(a, 2, *opt);

    ::torch::manual_seed(6);  // other weights: the checkpoint must replace them
    Net sharded;
    sharded->to(dtype);
    ShardedDataParallelOptions o;
    o.stage = 2;
    o.caps.first_bucket_bytes = 256;
    o.caps.bucket_bytes = 512;
    o.optimizer = c.shard();
    ShardedDataParallel sdp(sharded, world(), o);
    ASSERT_EQ(sdp.load_checkpoint(a), std::optional<uint64_t>(2));
    EXPECT_EQ(sdp.engine().optimizer_steps(), 2u);
    expect_same_state(sdp.full_state(), model, *opt, "DDP -> sharded");

    sdp_steps(sharded, sdp, 2, 3);
    sdp.save_checkpoint(b, 3);
    const gradwire::ShardedState after = sdp.full_state();
    ::torch::manual_seed(7);
    Net back;
    back->to(dtype);
    DistributedDataParallel ddp2(back, world());
    auto opt2 = c.make(back->parameters());
    ddp_steps(back, *opt2, 0, 1);  // some state of its own, to be replaced
    ASSERT_EQ(ddp2.load_checkpoint(b, *opt2), std::optional<uint64_t>(3));
    if (dtype == ::torch::kFloat) {
      expect_same_state(after, back, *opt2, "sharded -> DDP");
    } else {
      // bf16: the parameters are the engine's values; the master's extra
      // bits are dropped (Note [torch optimizer state in sharded checkpoints]).
      auto params = back->parameters();
      for (const auto& r : after.records) {
        const auto& p = params[r.parameter];
        auto values = ::torch::from_blob(const_cast<std::byte*>(r.values.data()), p.sizes(),
                                         ::torch::TensorOptions().dtype(p.scalar_type()));
        EXPECT_TRUE(same_bits(values, p)) << "parameter " << r.parameter;
        const auto st = torch_state(*opt2, p);
        ASSERT_EQ(st.size(), r.state.size());
        for (size_t k = 0; k < st.size(); ++k) {
          auto mine = ::torch::from_blob(const_cast<float*>(r.state[k].data()), p.sizes(),
                                         ::torch::kFloat);
          EXPECT_TRUE(same_bits(mine.to(p.scalar_type()), st[k])) << "state " << k;
        }
      }
    }
    if (auto* adam = dynamic_cast<::torch::optim::Adam*>(opt2.get())) {
      auto& s = static_cast<::torch::optim::AdamParamState&>(
          *adam->state().at(back->parameters()[0].unsafeGetTensorImpl()));
      EXPECT_EQ(s.step(), 3);
    }
    ddp_steps(back, *opt2, 3, 4);  // and it trains on
  }
  world().barrier().wait();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST(UnshardedCheckpoint, RoundTripFloat32BitForBit) { round_trip(::torch::kFloat); }
TEST(UnshardedCheckpoint, RoundTripBFloat16BitForBit) { round_trip(::torch::kBFloat16); }

// Tolerance of Pair against the uninterrupted run (one process, the whole
// batch, torch::optim::Adam), after 6 steps with lr 1e-2: the gradients
// differ in the last bits (a mean of 12 rows against the average of the
// ranks' means, and the reduction order of 2 or 3 ranks), and the sharded
// engine's Adam rounds torch's formula in another order (a few ulps of each
// update, Note [1-bit element math]); both are far below 1e-5.
constexpr double kTolerance = 1e-5;
constexpr int kFirst = 3, kTotal = 6;

// GW_DDP_CKPT_MODE: write_ddp (DDP + torch::optim::Adam trains kFirst steps,
// saves), read_sdp (ShardedDataParallel at GW_DDP_CKPT_STAGE loads it and
// trains to kTotal), write_sdp (stage GW_DDP_CKPT_STAGE trains, saves) or
// read_ddp (DDP + torch::optim::Adam loads and trains on).
TEST(UnshardedCheckpoint, Pair) {
  const char* dir = std::getenv("GW_DDP_CKPT_DIR");
  const char* mode_env = std::getenv("GW_DDP_CKPT_MODE");
  if (!dir || !mode_env) GTEST_SKIP() << "GW_DDP_CKPT_DIR and _MODE unset (a ctest pair sets them)";
  const std::string mode = mode_env;
  const char* stage_env = std::getenv("GW_DDP_CKPT_STAGE");
  auto& w = world();
  ShardedDataParallelOptions o;
  o.stage = stage_env ? std::atoi(stage_env) : 2;
  o.caps.first_bucket_bytes = 256;
  o.caps.bucket_bytes = 512;
  o.optimizer = gradwire::torch::shard_optimizer(adam_options());
  ::torch::manual_seed(mode.rfind("write", 0) == 0 ? 5 : 9);  // a reader's weights are replaced
  Net model;
  if (mode == "write_ddp" || mode == "write_sdp") {
    if (w.rank() == 0) std::filesystem::remove_all(dir);
    w.barrier().wait();
  }
  if (mode == "write_ddp") {
    DistributedDataParallel ddp(model, w);
    ::torch::optim::Adam opt(model->parameters(), adam_options());
    ddp_steps(model, opt, 0, kFirst);
    ddp.save_checkpoint(dir, kFirst, opt);
  } else if (mode == "write_sdp") {
    ShardedDataParallel sdp(model, w, o);
    sdp_steps(model, sdp, 0, kFirst);
    sdp.save_checkpoint(dir, kFirst);
  } else if (mode == "read_sdp") {
    ShardedDataParallel sdp(model, w, o);
    ASSERT_EQ(sdp.load_checkpoint(dir), std::optional<uint64_t>(kFirst));
    sdp_steps(model, sdp, kFirst, kTotal);
    sdp.use_all();
    Net ref = reference(kTotal);
    const double d = max_diff(model, ref);
    if (w.rank() == 0) {
      std::printf("DDP -> stage %d at %d ranks: max |resumed - uninterrupted| = %g\n", o.stage,
                  w.size(), d);
    }
    EXPECT_LE(d, kTolerance);
  } else if (mode == "read_ddp") {
    DistributedDataParallel ddp(model, w);
    ::torch::optim::Adam opt(model->parameters(), adam_options());
    ASSERT_EQ(ddp.load_checkpoint(dir, opt), std::optional<uint64_t>(kFirst));
    ddp_steps(model, opt, kFirst, kTotal);
    Net ref = reference(kTotal);
    const double d = max_diff(model, ref);
    if (w.rank() == 0) {
      std::printf("sharded -> DDP at %d ranks: max |resumed - uninterrupted| = %g\n", w.size(), d);
    }
    EXPECT_LE(d, kTolerance);
  } else {
    FAIL() << "unknown GW_DDP_CKPT_MODE " << mode;
  }
}

template <typename Fn>
void expect_error(Fn&& fn, gradwire::ErrorCode code, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error (expected '" << needle << "')";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<::torch::Tensor> snapshot(Net& m) {
  std::vector<::torch::Tensor> out;
  for (auto& p : m->parameters()) out.push_back(p.detach().clone());
  return out;
}

// Every bad input raises its typed error on every rank (each rank checks
// its own), and a failed load leaves the module and optimizer unchanged.
TEST(UnshardedCheckpoint, BadInput) {
  auto& w = world();
  const std::string dir = shared_temp_dir();
  ASSERT_FALSE(dir.empty());
  ::torch::manual_seed(5);
  Net model;
  DistributedDataParallel ddp(model, w);
  ::torch::optim::Adam opt(model->parameters(), adam_options());
  ddp_steps(model, opt, 0, 1);
  const std::string ckpt = dir + "/ckpt";
  ddp.save_checkpoint(ckpt, 1, opt);
  const auto before = snapshot(model);

  // Another model: other sizes (the fingerprint), or the same sizes under
  // other names (the parameter manifest).
  Net wider(14);
  ::torch::optim::Adam wider_opt(wider->parameters(), adam_options());
  expect_error([&] { gradwire::torch::load_unsharded_checkpoint(w, ckpt, *wider, wider_opt); },
               gradwire::ErrorCode::InvalidArgument, "a checkpoint of another model");
  auto renamed = std::make_shared<::torch::nn::Module>();
  renamed->register_module("fc1", ::torch::nn::Linear(6, 13));
  renamed->register_module("second", ::torch::nn::Linear(13, 13));
  renamed->register_module("fc3", ::torch::nn::Linear(13, 3));
  ::torch::optim::Adam renamed_opt(renamed->parameters(), adam_options());
  expect_error([&] { gradwire::torch::load_unsharded_checkpoint(w, ckpt, *renamed, renamed_opt); },
               gradwire::ErrorCode::InvalidArgument, "'fc2.weight [13, 13]' where this module has "
               "'second.weight [13, 13]'");

  // Another optimizer kind; an unsupported optimizer; amsgrad; an
  // optimizer over other tensors.
  ::torch::optim::SGD sgd(model->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  expect_error([&] { ddp.load_checkpoint(ckpt, sgd); }, gradwire::ErrorCode::InvalidArgument,
               "holds the state of optimizer 'adam' and this optimizer is 'sgd_momentum'");
  ::torch::optim::RMSprop rms(model->parameters(), ::torch::optim::RMSpropOptions(0.1));
  expect_error([&] { ddp.load_checkpoint(ckpt, rms); }, gradwire::ErrorCode::InvalidArgument,
               "is not torch::optim::Adam, AdamW or SGD");
  expect_error([&] { ddp.save_checkpoint(dir + "/rms", 1, rms); },
               gradwire::ErrorCode::InvalidArgument, "is not torch::optim::Adam, AdamW or SGD");
  ::torch::optim::Adam ams(model->parameters(), adam_options().amsgrad(true));
  expect_error([&] { ddp.save_checkpoint(dir + "/ams", 1, ams); },
               gradwire::ErrorCode::InvalidArgument, "amsgrad");
  std::vector<::torch::Tensor> copies;
  for (auto& p : model->parameters()) copies.push_back(p.detach().clone().requires_grad_());
  ::torch::optim::Adam other(copies, adam_options());
  expect_error([&] { ddp.load_checkpoint(ckpt, other); }, gradwire::ErrorCode::InvalidArgument,
               "parameter fc1.weight is not in the optimizer's param groups");

  // A sharded engine's checkpoint whose optimizer state is the torch
  // optimizer's own (not in the checkpoint): refused, not loaded as zeros.
  {
    ::torch::manual_seed(5);
    Net m2;
    ShardedDataParallelOptions o;
    o.torch_optimizer = [](std::vector<::torch::Tensor> p) {
      return std::make_unique<::torch::optim::Adam>(p, adam_options());
    };
    ShardedDataParallel sdp(m2, w, o);
    sdp.save_checkpoint(dir + "/torch-opt", 1);
  }
  expect_error([&] { ddp.load_checkpoint(dir + "/torch-opt", opt); },
               gradwire::ErrorCode::InvalidArgument, "holds the state of optimizer 'none'");

  // A checkpoint of save_checkpoint, not a sharded one.
  gradwire::save_checkpoint(w, dir + "/plain", 1, {{"x", "y"}});
  expect_error([&] { ddp.load_checkpoint(dir + "/plain", opt); },
               gradwire::ErrorCode::InvalidArgument, "not a sharded engine's checkpoint");

  // A corrupt shard (a byte flipped), then a truncated one: Protocol on
  // every rank, whichever rank's shard it is (every rank reads all).
  w.barrier().wait();
  const std::string shard = ckpt + "/step-000000000001/shard-0000" +
                            std::to_string(w.size() - 1) + ".bin";
  if (w.rank() == 0) {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(60);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(60);
    f.write(&c, 1);
  }
  w.barrier().wait();
  expect_error([&] { ddp.load_checkpoint(ckpt, opt); }, gradwire::ErrorCode::Protocol,
               "is corrupt");
  w.barrier().wait();
  if (w.rank() == 0) std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 5);
  w.barrier().wait();
  expect_error([&] { ddp.load_checkpoint(ckpt, opt); }, gradwire::ErrorCode::Protocol,
               "truncated");

  // Nothing was changed by the failed loads.
  const auto after = snapshot(model);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(same_bits(before[i], after[i])) << i;
  EXPECT_EQ(static_cast<::torch::optim::AdamParamState&>(
                *opt.state().at(model->parameters()[0].unsafeGetTensorImpl()))
                .step(),
            1);
  w.barrier().wait();
  if (w.rank() == 0) std::filesystem::remove_all(dir);
}

// ShardedDataParallel::load_checkpoint of a model with the same element
// counts and dtypes (so the engine's fingerprint matches) under other
// names, or other shapes: InvalidArgument on every rank naming the
// parameter, the module unchanged; the same model still loads.
TEST(ShardedCheckpoint, OtherNamesOrShapes) {
  auto& w = world();
  const std::string dir = shared_temp_dir();
  ASSERT_FALSE(dir.empty());
  auto options = [](int stage) {
    ShardedDataParallelOptions o;
    o.stage = stage;
    o.optimizer = gradwire::torch::shard_optimizer(adam_options());
    return o;
  };
  const std::string ckpt = dir + "/ckpt";
  ::torch::manual_seed(5);
  Net model;
  {
    ShardedDataParallel sdp(model, w, options(2));
    sdp_steps(model, sdp, 0, 1);
    sdp.save_checkpoint(ckpt, 1);
    sdp.use_all();
  }
  // fc2 renamed "second"; fc1's weight [6, 13] where the checkpoint's is
  // [13, 6]. At stage 2 (the checkpoint's: another stage is refused by
  // load_state, after the manifest check) and stage 3 (whose parameters
  // are at rest when the manifest is compared).
  auto renamed = std::make_shared<::torch::nn::Module>();
  renamed->register_module("fc1", ::torch::nn::Linear(6, 13));
  renamed->register_module("second", ::torch::nn::Linear(13, 13));
  renamed->register_module("fc3", ::torch::nn::Linear(13, 3));
  auto transposed = std::make_shared<::torch::nn::Module>();
  auto fc1 = std::make_shared<::torch::nn::Module>();
  fc1->register_parameter("weight", ::torch::randn({6, 13}));
  fc1->register_parameter("bias", ::torch::randn({13}));
  transposed->register_module("fc1", fc1);
  transposed->register_module("fc2", ::torch::nn::Linear(13, 13));
  transposed->register_module("fc3", ::torch::nn::Linear(13, 3));
  struct Case {
    std::shared_ptr<::torch::nn::Module> module;
    int stage;
    std::string needle;
  };
  for (const Case& c : {Case{renamed, 2, "another model: it has parameter 'fc2.weight [13, 13]' "
                                         "where this module has 'second.weight [13, 13]'"},
                        Case{transposed, 3, "'fc1.weight [13, 6]' where this module has "
                                            "'fc1.weight [6, 13]'"}}) {
    ShardedDataParallel sdp(c.module, w, options(c.stage));
    sdp.use_all();
    std::vector<::torch::Tensor> before;
    for (auto& p : c.module->parameters()) before.push_back(p.detach().clone());
    expect_error([&] { sdp.load_checkpoint(ckpt); }, gradwire::ErrorCode::InvalidArgument,
                 c.needle);
    sdp.use_all();
    const auto after = c.module->parameters();
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_TRUE(same_bits(before[i], after[i])) << "stage " << c.stage << " parameter " << i;
    }
  }
  ::torch::manual_seed(99);
  Net same;
  ShardedDataParallel sdp(same, w, options(2));
  EXPECT_EQ(sdp.load_checkpoint(ckpt), std::optional<uint64_t>(1));
  sdp.use_all();
  EXPECT_EQ(max_diff(same, model), 0.0);
  w.barrier().wait();
  if (w.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
