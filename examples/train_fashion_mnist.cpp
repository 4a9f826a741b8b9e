// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Data-parallel training of a small CNN on Fashion-MNIST with gradwire's
// DistributedDataParallel. Every rank holds a replica; a distributed sampler
// gives each rank its own shard of the training set every epoch (reshuffled
// per epoch from a seed all ranks share); gradients are averaged during
// backward. Rank 0 prints per-epoch progress. With --checkpoint DIR every
// rank writes its shard of a gradwire checkpoint (model, optimizer, the
// Reducer's plan, PowerSGD's or the 1-bit optimizers' error buffers, RNG,
// progress) at each epoch's end and every --checkpoint-every steps;
// --resume continues from the newest one bit for bit.
//
//   mpirun -np 2 build/examples/train_fashion_mnist --epochs 2
//   build/tests/ranks/gwlaunch -n 2 -- build/examples/train_fashion_mnist
//
// Data: the Debian package dataset-fashion-mnist (gzipped IDX files in
// /usr/share/datasets/fashion-mnist; scripts/install-torch installs it).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <stdexcept>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/gradwire.h"
#include "gradwire/compress.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "gradwire/torch/optim.h"
#include "fashion_mnist.h"
#include "gradwire/checkpoint.h"
#include "training_state.h"

namespace {

using fashion_mnist::Cnn;
using fashion_mnist::Dataset;
using fashion_mnist::load;

struct Args {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string model = "cnn";
  std::string checkpoint = "fashion_mnist_checkpoint";  // a directory; '' = none
  int64_t checkpoint_every = 0;  // steps between checkpoints (0: at epoch ends only)
  bool resume = false;           // continue from the newest checkpoint in `checkpoint`
  int64_t max_steps = 0;         // stop after this many optimizer steps (0: all epochs)
  // Testing (tests/ranks/checkpoint_resume.sh): SIGKILL every rank right
  // after this step; on resume, zero the compression error buffers (what
  // DeepSpeed does) to show that they matter.
  int64_t kill_at_step = -1;
  // Which rank --kill-at-step kills (-1: every rank). Under torchrun only in
  // the first generation (TORCHELASTIC_RESTART_COUNT 0), so a restarted job
  // resumes and finishes (tests/ranks/torchrun_restart.sh).
  int kill_rank = -1;
  bool drop_error_buffers = false;
  int epochs = 2;
  int64_t batch = 64;  // per rank
  double lr = -1;  // default: 1e-3 (Adam), 1e-2 (1-bit LAMB: LAMB's steps are relative to
                   // ||w||), 0.05 (SGD with momentum)
  // Optimizer under DDP (none, fp16, powersgd): adam, or sgd (momentum 0.9,
  // the setting of the PowerSGD paper's experiments).
  std::string optimizer = "adam";
  uint64_t seed = 1;
  int threads = 0;          // 0: cores / ranks on this host
  int64_t limit = 0;        // use only the first `limit` training images (0: all)
  double min_accuracy = 0;  // exit 1 if the final test accuracy is lower (CI)
  // Gradient compression: none, fp16 (DDP hook), powersgd (DDP hook),
  // onebit-adam or onebit-lamb (optimizers that average gradients themselves,
  // no DDP).
  std::string compression = "none";
  size_t powersgd_rank = 4;
  double powersgd_min_rate = 2.0;  // PowerSGD's min_compression_rate (torch's default)
  // Steps before compression starts (PowerSGD's plain-allreduce phase, the
  // 1-bit optimizers' exact warm-up); -1: one epoch. With 3 epochs, a
  // one-epoch warm-up puts 1-bit Adam within 0.03 points of uncompressed
  // Adam; a 200-step one lost 4.7 points (BENCHMARKS.md).
  int64_t powersgd_start = -1;
  int64_t freeze_step = -1;
  // 1-bit LAMB's compression-stage coefficients: live (LAMB's own, every
  // step) or frozen (the paper's; Note [live LAMB coefficients]).
  std::string lamb_coefficients = "live";
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--epochs N] [--batch B (per rank)] [--lr X] [--model cnn|mlp]\n"
               "          [--data DIR] [--checkpoint DIR ('' = none)] [--checkpoint-every STEPS]\n"
               "          [--resume] [--max-steps N] [--seed S] [--threads T]\n"
               "          [--kill-at-step N] [--kill-rank R]\n"
               "          [--limit N] [--min-accuracy PCT] [--optimizer adam|sgd]\n"
               "          [--compression none|fp16|powersgd|onebit-adam|onebit-lamb] [--fp16]\n"
               "          [--powersgd-rank R] [--powersgd-start STEPS] [--freeze-step STEPS]\n"
               "          [--lamb-coefficients live|frozen]\n"
               "          (compression starts after one epoch unless the STEPS are given)\n",
               argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (k == "--epochs") a.epochs = std::stoi(value());
    else if (k == "--batch") a.batch = std::stoll(value());
    else if (k == "--lr") a.lr = std::stod(value());
    else if (k == "--model") a.model = value();
    else if (k == "--optimizer") a.optimizer = value();
    else if (k == "--data") a.data = value();
    else if (k == "--checkpoint") a.checkpoint = value();
    else if (k == "--checkpoint-every") a.checkpoint_every = std::stoll(value());
    else if (k == "--resume") a.resume = true;
    else if (k == "--max-steps") a.max_steps = std::stoll(value());
    else if (k == "--kill-at-step") a.kill_at_step = std::stoll(value());
    else if (k == "--kill-rank") a.kill_rank = std::stoi(value());
    else if (k == "--drop-error-buffers") a.drop_error_buffers = true;
    else if (k == "--seed") a.seed = std::stoull(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--limit") a.limit = std::stoll(value());
    else if (k == "--min-accuracy") a.min_accuracy = std::stod(value());
    else if (k == "--fp16") a.compression = "fp16";
    else if (k == "--compression") a.compression = value();
    else if (k == "--powersgd-rank") a.powersgd_rank = std::stoull(value());
    else if (k == "--powersgd-min-rate") a.powersgd_min_rate = std::stod(value());
    else if (k == "--powersgd-start") a.powersgd_start = std::stoll(value());
    else if (k == "--freeze-step") a.freeze_step = std::stoll(value());
    else if (k == "--lamb-coefficients") a.lamb_coefficients = value();
    else usage(argv[0]);
  }
  if (a.model != "cnn" && a.model != "mlp") usage(argv[0]);
  if (a.lamb_coefficients != "live" && a.lamb_coefficients != "frozen") usage(argv[0]);
  if (a.optimizer != "adam" && a.optimizer != "sgd") usage(argv[0]);
  if (a.lr < 0) {
    a.lr = a.compression == "onebit-lamb" ? 1e-2 : a.optimizer == "sgd" ? 0.05 : 1e-3;
  }
  if (a.compression != "none" && a.compression != "fp16" && a.compression != "powersgd" &&
      a.compression != "onebit-adam" && a.compression != "onebit-lamb") {
    usage(argv[0]);
  }
  return a;
}

// ---------------------------------------------------------------- data

// Like torch.utils.data.DistributedSampler: one permutation per epoch from
// (seed, epoch), identical on every rank; padded by wrapping around to a
// multiple of the world size so every rank runs the same number of steps
// (DDP needs that); rank r takes positions r, r + world, ...
std::vector<int64_t> shard_indices(int64_t n, int world, int rank, uint64_t seed, int epoch,
                                   bool shuffle) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
  if (shuffle) {
    std::mt19937_64 rng(seed * 1000003u + uint64_t(epoch));
    std::shuffle(perm.begin(), perm.end(), rng);
  }
  const int64_t per_rank = (n + world - 1) / world;
  std::vector<int64_t> mine;
  for (int64_t k = 0; k < per_rank; ++k) mine.push_back(perm[size_t((k * world + rank) % n)]);
  return mine;
}

// ---------------------------------------------------------------- models


struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(784, 256))),
        fc2(register_module("fc2", torch::nn::Linear(256, 128))),
        fc3(register_module("fc3", torch::nn::Linear(128, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1(x.flatten(1)));
    return fc3(torch::relu(fc2(x)));
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

int local_ranks(int world) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"}) {
    if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
  }
  return world;
}

// Milliseconds since the epoch, comparable between processes of one host.
long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Sums `values` over ranks (float64).
void allreduce_sum(gradwire::Communicator& comm, std::vector<double>& values) {
  comm.allreduce(values.data(), values.data(), values.size(), gradwire::DataType::Float64,
                 gradwire::ReduceOp::Sum)
      .wait();
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  auto comm = gradwire::Communicator::create();
  const int rank = comm->rank(), world = comm->size();
  const int threads = args.threads > 0 ? args.threads
                                       : std::max(1, int(std::thread::hardware_concurrency()) /
                                                         local_ranks(world));
  torch::set_num_threads(threads);
  torch::manual_seed(args.seed + uint64_t(rank));  // DDP's broadcast makes replicas equal

  Dataset train = load(args.data, "train"), test = load(args.data, "t10k");
  if (args.limit > 0 && args.limit < train.size()) {
    train.images = train.images.narrow(0, 0, args.limit);
    train.labels = train.labels.narrow(0, 0, args.limit);
  }
  // Optimizer steps per epoch on every rank (the sampler gives each rank
  // ceil(N / world) images).
  const int64_t steps_per_epoch =
      ((train.size() + world - 1) / world + args.batch - 1) / args.batch;
  const uint64_t powersgd_start =
      uint64_t(args.powersgd_start >= 0 ? args.powersgd_start : steps_per_epoch);
  const uint64_t freeze_step = uint64_t(args.freeze_step >= 0 ? args.freeze_step : steps_per_epoch);
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(torch::Tensor)> forward;
  if (args.model == "cnn") {
    Cnn m;
    module = m.ptr();
    forward = [m](torch::Tensor x) mutable { return m->forward(x); };
  } else {
    Mlp m;
    module = m.ptr();
    forward = [m](torch::Tensor x) mutable { return m->forward(x); };
  }
  // DDP averages the gradients during backward (optionally through a
  // compression hook); the 1-bit optimizers average them in step() instead.
  const bool onebit = args.compression.rfind("onebit", 0) == 0;
  std::unique_ptr<gradwire::torch::DistributedDataParallel> ddp;
  std::shared_ptr<gradwire::PowerSGDState> powersgd;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (!onebit) {
    gradwire::torch::DDPOptions options;
    if (args.compression == "fp16") options.comm_hook = gradwire::fp16_compress_hook();
    if (args.compression == "powersgd") {
      gradwire::PowerSGDOptions po;
      po.matrix_approximation_rank = args.powersgd_rank;
      po.start_powersgd_iter = powersgd_start;
      po.min_compression_rate = args.powersgd_min_rate;
      po.random_seed = args.seed;
      powersgd = std::make_shared<gradwire::PowerSGDState>(po);
      options.comm_hook = gradwire::powersgd_hook(powersgd);
    }
    ddp = std::make_unique<gradwire::torch::DistributedDataParallel>(module, *comm, options);
    if (args.optimizer == "sgd") {
      optimizer = std::make_unique<torch::optim::SGD>(
          module->parameters(), torch::optim::SGDOptions(args.lr).momentum(0.9));
    } else {
      optimizer = std::make_unique<torch::optim::Adam>(module->parameters(),
                                                       torch::optim::AdamOptions(args.lr));
    }
  } else if (args.compression == "onebit-adam") {
    gradwire::OneBitAdamOptions o;
    o.lr = float(args.lr);
    o.freeze_step = freeze_step;
    optimizer = std::make_unique<gradwire::torch::OneBitAdam>(module->parameters(), *comm, o);
  } else {
    gradwire::OneBitLambOptions o;
    o.lr = float(args.lr);
    o.freeze_step = freeze_step;
    o.live_coefficients = args.lamb_coefficients == "live";
    optimizer = std::make_unique<gradwire::torch::OneBitLamb>(module->parameters(), *comm, o);
  }
  // Bytes this rank sends per step, for the compression ratio.
  auto wire_bytes = [&]() -> double {
    if (auto* a = dynamic_cast<gradwire::torch::OneBitAdam*>(optimizer.get())) {
      return double(a->core().last_wire_bytes());
    }
    if (auto* l = dynamic_cast<gradwire::torch::OneBitLamb*>(optimizer.get())) {
      return double(l->core().last_wire_bytes());
    }
    return -1;
  };

  int64_t n_params = 0;
  for (const auto& p : module->parameters()) n_params += p.numel();
  if (rank == 0) {
    std::printf("fashion-mnist: %s (%lld parameters), %d ranks x batch %lld, %lld training "
                "images, %d torch threads per rank, provider %s, compression %s, %s lr %g\n",
                args.model.c_str(), (long long)n_params, world, (long long)args.batch,
                (long long)train.size(), threads, comm->provider().c_str(),
                args.compression.c_str(), onebit ? args.compression.c_str() : args.optimizer.c_str(),
                args.lr);
    std::fflush(stdout);
  }

  // Test accuracy: each rank scores a strided shard, the counts are summed.
  auto evaluate = [&]() {
    torch::NoGradGuard no_grad;
    module->eval();
    auto idx = shard_indices(test.size(), world, rank, 0, 0, false);
    if (test.size() % world) idx.resize(size_t(test.size() / world + (rank < test.size() % world)));
    std::vector<double> counts{0, double(idx.size())};
    for (size_t k = 0; k < idx.size(); k += 1000) {
      const size_t n = std::min<size_t>(1000, idx.size() - k);
      auto sel = torch::from_blob(idx.data() + k, {int64_t(n)}, torch::kLong);
      auto pred = forward(test.images.index_select(0, sel)).argmax(1);
      counts[0] += double(pred.eq(test.labels.index_select(0, sel)).sum().item<int64_t>());
    }
    allreduce_sum(*comm, counts);
    module->train();
    return 100.0 * counts[0] / counts[1];
  };

  // ---------------------------------------------------------- checkpoints
  // This rank's entries: everything a resumed run needs to continue bit for
  // bit (Note [checkpoint layout] in src/checkpoint/checkpoint.cpp).
  auto onebit_adam = dynamic_cast<gradwire::torch::OneBitAdam*>(optimizer.get());
  auto onebit_lamb = dynamic_cast<gradwire::torch::OneBitLamb*>(optimizer.get());
  auto save = [&](int64_t global_step) {
    std::map<std::string, std::string> entries;
    entries["model"] = training_state::module_bytes(*module);
    entries["optimizer"] = training_state::optimizer_bytes(*optimizer);
    entries["rng"] = training_state::rng_bytes();
    if (ddp) entries["ddp"] = ddp->save_state();
    if (powersgd) entries["powersgd"] = powersgd->save_state();
    gradwire::CheckpointOptions options;
    options.meta["model"] = args.model;
    options.meta["compression"] = args.compression;
    gradwire::save_checkpoint(*comm, args.checkpoint, uint64_t(global_step), entries, options);
    if (rank == 0) {
      std::printf("checkpoint step %lld written to %s\n", (long long)global_step,
                  args.checkpoint.c_str());
      std::fflush(stdout);
    }
  };
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const bool first_generation = restarts == nullptr || std::string(restarts) == "0";
  int64_t global_step = 0;
  int64_t resumed_step = -1;  // set by a resume until the first step after it
  if (args.resume && !args.checkpoint.empty()) {
    if (auto c = gradwire::load_latest_checkpoint(*comm, args.checkpoint)) {
      if (c->meta().at("model") != args.model || c->meta().at("compression") != args.compression) {
        throw std::runtime_error("checkpoint " + c->path() + " is of model " +
                                 c->meta().at("model") + " with compression " +
                                 c->meta().at("compression") + ", not this run's");
      }
      training_state::load_module(*module, c->get("model"));
      training_state::load_optimizer(*optimizer, c->get("optimizer"));
      training_state::load_rng(c->get("rng"));
      if (ddp) ddp->load_state(c->get("ddp"));
      if (powersgd) powersgd->load_state(c->get("powersgd"));
      if (args.drop_error_buffers) {
        if (powersgd) powersgd->reset_error_feedback();
        if (onebit_adam) onebit_adam->core().reset_error_feedback();
        if (onebit_lamb) onebit_lamb->core().reset_error_feedback();
      }
      global_step = int64_t(c->step());
      resumed_step = global_step;
      if (rank == 0) {
        std::printf("resumed from %s (step %lld)%s\n", c->path().c_str(),
                    (long long)global_step,
                    args.drop_error_buffers ? " without its error-feedback buffers" : "");
      }
    } else if (rank == 0) {
      std::printf("no checkpoint in %s: starting afresh\n", args.checkpoint.c_str());
    }
    std::fflush(stdout);  // a launcher may stop this process before stdout's buffer is full
  }
  const int64_t total_steps = args.max_steps > 0
                                  ? std::min<int64_t>(args.max_steps, steps_per_epoch * args.epochs)
                                  : steps_per_epoch * args.epochs;

  double test_accuracy = 0;
  for (int epoch = int(global_step / steps_per_epoch); epoch < args.epochs; ++epoch) {
    if (global_step >= total_steps) break;
    const auto t0 = std::chrono::steady_clock::now();
    auto idx = shard_indices(train.size(), world, rank, args.seed, epoch, true);
    std::vector<double> stats{0, 0, 0};  // loss sum, correct, samples
    double hidden = 0;
    int64_t steps = 0;
    // A resumed epoch skips the batches its checkpoint had already taken.
    const size_t first = size_t(global_step - int64_t(epoch) * steps_per_epoch) * size_t(args.batch);
    for (size_t k = first; k < idx.size() && global_step < total_steps; k += size_t(args.batch)) {
      const int64_t n = std::min<int64_t>(args.batch, int64_t(idx.size() - k));
      auto sel = torch::from_blob(idx.data() + k, {n}, torch::kLong);
      auto x = train.images.index_select(0, sel), y = train.labels.index_select(0, sel);
      optimizer->zero_grad();
      auto logits = forward(x);
      auto loss = torch::nn::functional::cross_entropy(logits, y);
      loss.backward();  // with DDP: gradients are averaged over ranks when this returns
      optimizer->step();
      ++global_step;
      if (resumed_step >= 0 && rank == 0) {
        // Issue 20's recovery-time figure (benchmarks/elastic_recovery).
        std::printf("first step after resuming done at %lld ms (step %lld)\n", wall_ms(),
                    (long long)global_step);
        std::fflush(stdout);
        resumed_step = -1;
      }
      stats[0] += loss.item<double>() * double(n);
      stats[1] += double(logits.argmax(1).eq(y).sum().item<int64_t>());
      stats[2] += double(n);
      if (ddp) hidden += ddp->last_step_stats().hidden_fraction();
      ++steps;
      const bool epoch_end = k + size_t(args.batch) >= idx.size();
      if (!args.checkpoint.empty() &&
          (epoch_end || (args.checkpoint_every > 0 && global_step % args.checkpoint_every == 0))) {
        save(global_step);
      }
      if (global_step == args.kill_at_step && (args.kill_rank < 0 || args.kill_rank == rank) &&
          first_generation) {
        std::printf("rank %d: killed at step %lld (--kill-at-step) at %lld ms\n", rank,
                    (long long)global_step, wall_ms());
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
    }
    if (global_step % steps_per_epoch != 0) break;  // --max-steps ended it mid-epoch
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    allreduce_sum(*comm, stats);
    test_accuracy = evaluate();
    if (rank == 0) {
      std::printf("epoch %d/%d  loss %.4f  train acc %.2f%%  test acc %.2f%%  %.1f s  "
                  "%.0f samples/s  comm hidden behind backward %.0f%%\n",
                  epoch + 1, args.epochs, stats[0] / std::max(stats[2], 1.0),
                  100.0 * stats[1] / std::max(stats[2], 1.0), test_accuracy, seconds,
                  stats[2] / seconds, 100.0 * hidden / double(std::max<int64_t>(steps, 1)));
      const double uncompressed = 2.0 * double(world - 1) / world * 4.0 * double(n_params);
      if (wire_bytes() >= 0 && world > 1) {
        std::printf("  wire bytes per step (last step, this rank): %.0f = 1/%.1f of float32 "
                    "averaging\n", wire_bytes(), uncompressed / std::max(wire_bytes(), 1.0));
      }
      if (powersgd && powersgd->numel_after_compression() > 0) {
        std::printf("  PowerSGD elements before/after compression so far: %.1fx\n",
                    double(powersgd->numel_before_compression()) /
                        double(powersgd->numel_after_compression()));
      }
      std::fflush(stdout);
    }
  }
  // Digests of this rank's state, for the resume test: parameters, the
  // optimizer's state, and the compression state with its error buffers.
  std::string compression_state;
  if (powersgd) compression_state = powersgd->save_state();
  if (onebit_adam) compression_state = onebit_adam->core().save_state();
  if (onebit_lamb) compression_state = onebit_lamb->core().save_state();
  std::printf("rank %d state at step %lld: params %s optimizer %s compression %s\n", rank,
              (long long)global_step, training_state::params_digest(*module).c_str(),
              onebit ? gradwire::sha256_hex(compression_state).c_str()
                     : training_state::optimizer_digest(*optimizer).c_str(),
              gradwire::sha256_hex(compression_state).c_str());
  std::fflush(stdout);
  if (rank == 0 && global_step == steps_per_epoch * args.epochs) {
    std::printf("final test accuracy %.2f%%\n", test_accuracy);
  }
  comm->barrier().wait();
  if (test_accuracy < args.min_accuracy) {
    if (rank == 0) {
      std::fprintf(stderr, "test accuracy %.2f%% is below --min-accuracy %.2f%%\n",
                   test_accuracy, args.min_accuracy);
    }
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
  return 1;
}
