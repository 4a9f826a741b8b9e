// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A small transformer language model trained with
// gradwire::torch::ShardedDataParallel (ZeRO stage 1, 2 or 3) on synthetic
// token sequences whose next token follows from the previous one, so the
// loss must fall. Each rank trains on its own sequences.
//
//   gwlaunch -n 2 -- train_sharded_lm --stage 3 --steps 60
//
// Options: --stage N (default 3), --steps N (60), --torch-adam (run
// torch::optim::Adam on the shards instead of the engine's Adam),
// --max-loss X (exit 1 unless the last loss is below X: the smoke test),
// --keep-gathered (stage 3: reshard_after_forward = false, units kept
// gathered from their forward to the end of backward).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gradwire/gradwire.h"
#include "gradwire/torch/sharded_data_parallel.h"

namespace {

constexpr int64_t kVocab = 16, kModel = 32, kHeads = 4, kLayers = 2, kSeq = 16, kBatch = 8;

// Embedding, kLayers encoder layers under a causal mask, a linear head.
// Each direct child is one stage-3 unit (gathered by use() in forward).
struct TinyLmImpl : ::torch::nn::Module {
  TinyLmImpl() {
    embed = register_module("embed", ::torch::nn::Embedding(kVocab, kModel));
    pos = register_parameter("pos", ::torch::randn({kSeq, 1, kModel}) * 0.02);
    for (int64_t l = 0; l < kLayers; ++l) {
      layers.push_back(register_module(
          "layer" + std::to_string(l),
          ::torch::nn::TransformerEncoderLayer(
              ::torch::nn::TransformerEncoderLayerOptions(kModel, kHeads)
                  .dim_feedforward(64)
                  .dropout(0.0))));
    }
    head = register_module("head", ::torch::nn::Linear(kModel, kVocab));
  }
  // tokens: [seq, batch]; returns logits [seq, batch, vocab].
  ::torch::Tensor forward(const ::torch::Tensor& tokens, gradwire::torch::ShardedDataParallel& sdp) {
    const int64_t s = tokens.size(0);
    auto mask = ::torch::triu(::torch::full({s, s}, -INFINITY), 1);
    sdp.use(embed);  // the root's own parameter (pos) lives in unit 0 too
    // after_forward: stage 3 frees the unit until its backward gathers it
    // again (Note [reshard after forward]); not for the head, whose
    // backward comes first.
    auto h = sdp.after_forward(embed, embed(tokens) + pos.narrow(0, 0, s));
    for (auto& layer : layers) {
      sdp.use(layer);  // gathers this layer, prefetches the next unit
      h = sdp.after_forward(layer, layer(h, mask));
    }
    sdp.use(head);
    return head(h);
  }
  ::torch::nn::Embedding embed{nullptr};
  ::torch::Tensor pos;
  std::vector<::torch::nn::TransformerEncoderLayer> layers;
  ::torch::nn::Linear head{nullptr};
};
TORCH_MODULE(TinyLm);

// Sequences where token k+1 = (5 * token k + 3) mod kVocab from a random start.
::torch::Tensor make_batch(::torch::Generator& gen) {
  auto start = ::torch::randint(kVocab, {kBatch}, gen, ::torch::kLong);
  auto seq = ::torch::empty({kSeq + 1, kBatch}, ::torch::kLong);
  seq[0] = start;
  for (int64_t k = 1; k <= kSeq; ++k) seq[k] = (seq[k - 1] * 5 + 3) % kVocab;
  return seq;
}

}  // namespace

int main(int argc, char** argv) {
  int stage = 3, steps = 60;
  bool torch_adam = false, keep_gathered = false;
  double max_loss = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--stage" && i + 1 < argc) stage = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--torch-adam") torch_adam = true;
    else if (a == "--keep-gathered") keep_gathered = true;
    else if (a == "--max-loss" && i + 1 < argc) max_loss = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--stage N] [--steps N] [--torch-adam] [--max-loss X] "
                   "[--keep-gathered]\n", argv[0]);
      return 2;
    }
  }
  ::torch::set_num_threads(1);
  try {
    auto comm = gradwire::Communicator::create();
    ::torch::manual_seed(0);  // rank 0's initial weights are broadcast anyway
    TinyLm model;
    gradwire::torch::ShardedDataParallelOptions o;
    o.stage = stage;
    o.reshard_after_forward = !keep_gathered;
    o.max_grad_norm = 1.0;
    if (torch_adam) {
      o.torch_optimizer = [](std::vector<::torch::Tensor> p) {
        return std::make_unique<::torch::optim::Adam>(p, ::torch::optim::AdamOptions(3e-3));
      };
    } else {
      o.optimizer = gradwire::torch::shard_optimizer(
          ::torch::optim::AdamWOptions(3e-3).weight_decay(0.01));
    }
    // Stage 3 units in forward order: embed (with pos), layer0, layer1, head.
    gradwire::torch::ShardedDataParallel sdp(model, *comm, o);
    auto gen = ::torch::make_generator<at::CPUGeneratorImpl>(1000 + comm->rank());
    double loss_value = 0;
    for (int step = 0; step < steps; ++step) {
      auto seq = make_batch(gen);
      auto input = seq.narrow(0, 0, kSeq), target = seq.narrow(0, 1, kSeq);
      auto logits = model->forward(input, sdp);
      auto loss = ::torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}),
                                                          target.reshape({-1}));
      loss.backward();
      sdp.step();
      // The mean loss over ranks, for the log.
      double l = loss.item<double>();
      comm->allreduce(&l, &l, 1, gradwire::DataType::Float64, gradwire::ReduceOp::Sum).wait();
      loss_value = l / comm->size();
      if (comm->rank() == 0 && (step % 10 == 0 || step == steps - 1)) {
        const auto m = sdp.engine().memory();
        std::printf("step %3d  loss %.4f  engine bytes %zu (master %zu, optimizer %zu, peak "
                    "gathered %zu)\n", step, loss_value, m.total(), m.master, m.optimizer_state,
                    m.peak_gathered);
      }
    }
    if (max_loss >= 0 && !(loss_value < max_loss)) {
      std::fprintf(stderr, "rank %d: final loss %.4f not below %.4f\n", comm->rank(), loss_value,
                   max_loss);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_sharded_lm: %s\n", e.what());
    return 1;
  }
  return 0;
}
