// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// sharded_step: per-step training time of a small transformer language
// model with gradwire's unsharded DistributedDataParallel (--mode ddp) and
// with ShardedDataParallel at ZeRO stage 1, 2 or 3 (--mode stage1|2|3).
// benchmarks/sharded_step.py is the torch FSDP2 (fully_shard, gloo) twin on
// the same model; benchmarks/sharded-compare runs everything in one go and
// prints the table with the ratios.
//
//   sharded_step --mode ddp|stage1|stage2|stage3 [--vocab V] [--model D]
//                [--heads H] [--layers L] [--seq S] [--batch B]
//                [--warmup W] [--steps T]
//
// Launched with the torchrun convention (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), as benchmarks/link_bench. The model: token embedding plus a
// learned position table, L post-norm encoder layers (4x MLP, no dropout)
// under a causal mask, a linear head; float32 parameters on both sides (the
// torch twin uses no mixed precision either: bf16 matmuls on this CPU
// would time the CPU, not the exchange). Adam (lr 1e-3) in both: torch's
// for DDP, the engine's on the shard for the stages. Stage 3: each direct
// child is a unit, gathered by use() in forward and held until its
// gradients are done in backward (no after_forward(), Note [reshard after
// forward]): close to what FSDP2 does with reshard_after_forward=False. Random tokens from a fixed seed per rank.
// Timed step = forward + backward (+ the exchange) + optimizer step
// (+ zero_grad for DDP); median over the timed steps per rank, maximum over
// ranks. One intra-op thread per rank.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "gradwire/torch/sharded_data_parallel.h"

namespace {

struct Shape {
  int64_t vocab = 8192, model = 256, heads = 4, layers = 4, seq = 128, batch = 8;
};

struct LmImpl : ::torch::nn::Module {
  explicit LmImpl(const Shape& s) {
    embed = register_module("embed", ::torch::nn::Embedding(s.vocab, s.model));
    pos = register_parameter("pos", ::torch::randn({s.seq, 1, s.model}) * 0.02);
    for (int64_t l = 0; l < s.layers; ++l) {
      layers.push_back(register_module(
          "layer" + std::to_string(l),
          ::torch::nn::TransformerEncoderLayer(
              ::torch::nn::TransformerEncoderLayerOptions(s.model, s.heads)
                  .dim_feedforward(4 * s.model)
                  .dropout(0.0))));
    }
    head = register_module("head", ::torch::nn::Linear(s.model, s.vocab));
  }
  // tokens [seq, batch] -> logits [seq, batch, vocab]; sdp: stage 3's use().
  ::torch::Tensor forward(const ::torch::Tensor& tokens, gradwire::torch::ShardedDataParallel* sdp) {
    const int64_t s = tokens.size(0);
    auto mask = ::torch::triu(::torch::full({s, s}, -INFINITY), 1);
    if (sdp) sdp->use(embed);  // pos lives in unit 0 with the embedding
    auto h = embed(tokens) + pos.narrow(0, 0, s);
    for (auto& layer : layers) {
      if (sdp) sdp->use(layer);
      h = layer(h, mask);
    }
    if (sdp) sdp->use(head);
    return head(h);
  }
  ::torch::nn::Embedding embed{nullptr};
  ::torch::Tensor pos;
  std::vector<::torch::nn::TransformerEncoderLayer> layers;
  ::torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Lm);

}  // namespace

int main(int argc, char** argv) try {
  std::string mode = "stage2";
  Shape s;
  int warmup = 5, steps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "sharded_step: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--mode") mode = v;
    else if (a == "--vocab") s.vocab = std::stoll(v);
    else if (a == "--model") s.model = std::stoll(v);
    else if (a == "--heads") s.heads = std::stoll(v);
    else if (a == "--layers") s.layers = std::stoll(v);
    else if (a == "--seq") s.seq = std::stoll(v);
    else if (a == "--batch") s.batch = std::stoll(v);
    else if (a == "--warmup") warmup = std::stoi(v);
    else if (a == "--steps") steps = std::stoi(v);
    else {
      std::fprintf(stderr, "sharded_step: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  ::torch::set_num_threads(1);
  auto comm = gradwire::Communicator::create();
  const int rank = comm->rank(), world = comm->size();
  ::torch::manual_seed(1234);
  Lm net(s);
  std::shared_ptr<::torch::nn::Module> module = net.ptr();
  std::unique_ptr<gradwire::torch::DistributedDataParallel> ddp;
  std::unique_ptr<::torch::optim::Optimizer> opt;
  std::unique_ptr<gradwire::torch::ShardedDataParallel> sdp;
  int stage = 0;
  if (mode == "ddp") {
    ddp = std::make_unique<gradwire::torch::DistributedDataParallel>(module, *comm);
    opt = std::make_unique<::torch::optim::Adam>(module->parameters(),
                                                 ::torch::optim::AdamOptions(1e-3));
  } else if (mode == "stage1" || mode == "stage2" || mode == "stage3") {
    stage = mode.back() - '0';
    gradwire::torch::ShardedDataParallelOptions o;
    o.stage = stage;
    o.optimizer = gradwire::torch::shard_optimizer(::torch::optim::AdamOptions(1e-3));
    sdp = std::make_unique<gradwire::torch::ShardedDataParallel>(module, *comm, o);
  } else {
    std::fprintf(stderr, "sharded_step: unknown mode %s\n", mode.c_str());
    return 2;
  }
  int64_t params = 0;
  for (const auto& p : module->parameters()) params += p.numel();

  auto gen = ::torch::make_generator<at::CPUGeneratorImpl>(uint64_t(7 + rank));
  std::vector<double> times;
  for (int step = 0; step < warmup + steps; ++step) {
    auto seq = ::torch::randint(s.vocab, {s.seq + 1, s.batch}, gen, ::torch::kLong);
    auto input = seq.narrow(0, 0, s.seq), target = seq.narrow(0, 1, s.seq);
    const auto t0 = std::chrono::steady_clock::now();
    if (opt) opt->zero_grad();
    auto logits = net->forward(input, stage == 3 ? sdp.get() : nullptr);
    auto loss = ::torch::nn::functional::cross_entropy(logits.reshape({-1, s.vocab}),
                                                        target.reshape({-1}));
    loss.backward();
    if (opt) opt->step();
    else sdp->step();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step >= warmup) times.push_back(dt);
  }
  std::sort(times.begin(), times.end());
  double median = times.empty() ? 0 : times[times.size() / 2];
  comm->allreduce(&median, &median, 1, gradwire::DataType::Float64, gradwire::ReduceOp::Max).wait();
  if (rank == 0) {
    std::printf("RESULT impl=gradwire mode=%s world=%d params=%lld step_ms=%.2f provider=%s\n",
                mode.c_str(), world, (long long)params, median * 1e3, comm->provider().c_str());
    std::fflush(stdout);
  }
  comm->barrier().wait();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sharded_step: %s\n", e.what());
  return 1;
}
