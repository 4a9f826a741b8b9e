// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fashion-MNIST with elastic membership (gradwire/elastic.h): a rank that
// dies does not stop the job. The survivors notice at the deadline
// (GRADWIRE_TIMEOUT_S), form the next generation among themselves, roll
// back to their last in-memory commit and continue; a replacement started
// later (the same command) joins at the next commit and receives the model
// from a survivor. Nothing goes through the disk.
//
//   d=$(mktemp -d)   # the store: a directory every rank sees, fresh per job
//   for r in 0 1 2; do GRADWIRE_STORE_DIR=$d RANK=$r WORLD_SIZE=3 \
//       build/examples/train_elastic --epochs 2 & done
//   # kill one of them; later start a replacement:
//   GRADWIRE_STORE_DIR=$d RANK=1 WORLD_SIZE=3 build/examples/train_elastic --epochs 2
//
// The global batch (--global-batch) is kept whatever the world size: each
// rank takes every world-th sample of the step's batch, so the step's data
// (and with DDP's averaging, its gradient) does not depend on who is alive.
#include <signal.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "fashion_mnist.h"
#include "training_state.h"
#include "gradwire/elastic.h"
#include "gradwire/torch/elastic.h"

namespace {

using fashion_mnist::Cnn;
using fashion_mnist::Dataset;

struct Args {
  int epochs = 2;
  int64_t global_batch = 96;  // divisible by 1, 2, 3 and 4 ranks
  double lr = 1e-3;
  std::string data = "/usr/share/datasets/fashion-mnist";
  int64_t limit = 0;
  int64_t commit_every = 1;
  uint64_t seed = 1;
  int threads = 1;
  int64_t kill_at_step = -1;
  int kill_rank = -1;
  double min_accuracy = 0;
  std::string compression = "none";  // none | powersgd
  uint64_t powersgd_rank = 4;
  uint64_t powersgd_start = 20;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--epochs N] [--global-batch B] [--lr X] [--data DIR] [--limit N]\n"
               "          [--commit-every STEPS] [--seed S] [--threads T]\n"
               "          [--kill-at-step N --kill-rank R] [--min-accuracy PCT]\n"
               "          [--compression none|powersgd] [--powersgd-rank R] [--powersgd-start S]\n"
               "rendezvous: GRADWIRE_STORE_DIR, RANK, WORLD_SIZE (gradwire/elastic.h)\n",
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
    else if (k == "--global-batch") a.global_batch = std::stoll(value());
    else if (k == "--lr") a.lr = std::stod(value());
    else if (k == "--data") a.data = value();
    else if (k == "--limit") a.limit = std::stoll(value());
    else if (k == "--commit-every") a.commit_every = std::stoll(value());
    else if (k == "--seed") a.seed = std::stoull(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--kill-at-step") a.kill_at_step = std::stoll(value());
    else if (k == "--kill-rank") a.kill_rank = std::stoi(value());
    else if (k == "--min-accuracy") a.min_accuracy = std::stod(value());
    else if (k == "--compression") a.compression = value();
    else if (k == "--powersgd-rank") a.powersgd_rank = std::stoull(value());
    else if (k == "--powersgd-start") a.powersgd_start = std::stoull(value());
    else usage(argv[0]);
  }
  if (a.epochs < 1 || a.global_batch < 1 || a.commit_every < 1) usage(argv[0]);
  if (a.compression != "none" && a.compression != "powersgd") usage(argv[0]);
  return a;
}

// Milliseconds since the epoch: the recovery-time figures compare the
// clocks of several processes on one host.
long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Positions of this rank's samples in global step `step`: the step's batch
// of the epoch's permutation, every world-th element from `rank`.
std::vector<int64_t> step_indices(int64_t n, int64_t global_batch, uint64_t seed, int64_t step,
                                  int world, int rank) {
  const int64_t steps_per_epoch = (n + global_batch - 1) / global_batch;
  const int64_t epoch = step / steps_per_epoch, j = step % steps_per_epoch;
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
  std::mt19937_64 rng(seed * 1000003u + uint64_t(epoch));
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> mine;
  for (int64_t p = j * global_batch + rank; p < std::min(n, (j + 1) * global_batch); p += world) {
    mine.push_back(perm[size_t(p)]);
  }
  return mine;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  torch::set_num_threads(args.threads);
  Dataset train = fashion_mnist::load(args.data, "train");
  Dataset test = fashion_mnist::load(args.data, "t10k");
  if (args.limit > 0 && args.limit < train.size()) {
    train.images = train.images.narrow(0, 0, args.limit);
    train.labels = train.labels.narrow(0, 0, args.limit);
  }
  const int64_t steps_per_epoch = (train.size() + args.global_batch - 1) / args.global_batch;
  const uint64_t total_steps = uint64_t(steps_per_epoch * args.epochs);

  auto group = gradwire::ElasticGroup::join({}, gradwire::Rendezvous::from_environment());
  const int first_rank = group->rank();  // --kill-rank names a rank of the first generation
  const bool original = group->generation() == 0;
  // Each rank its own dropout stream (the same one on every rank would drop
  // the same units of each rank's share of the batch); DDP broadcasts rank
  // 0's initial model.
  torch::manual_seed(args.seed * 1000 + uint64_t(first_rank));
  Cnn model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(args.lr));
  gradwire::torch::ElasticDDPOptions options;
  options.commit_every = uint64_t(args.commit_every);
  if (args.compression == "powersgd") {
    // PowerSGD's state (Q, counters, this rank's error feedback) is
    // committed and restored with the model.
    gradwire::PowerSGDOptions po;
    po.matrix_approximation_rank = args.powersgd_rank;
    po.start_powersgd_iter = args.powersgd_start;
    po.random_seed = args.seed;
    options.powersgd = std::make_shared<gradwire::PowerSGDState>(po);
    options.ddp.comm_hook = gradwire::powersgd_hook(options.powersgd);
  }
  // DDP over the group's communicator, rebuilt (and the model and optimizer
  // restored) whenever the membership changes.
  gradwire::torch::ElasticDistributedDataParallel ddp(*group, model, optimizer, options);
  uint64_t evaluated = UINT64_MAX;  // the step whose test accuracy was last computed
  double accuracy = 0;
  long long recovered_at = -1;      // when this rank last left recover(), for the first step
  auto report = [&](const char* why) {
    std::printf("rank %d: %s: generation %llu, world %d, at step %llu (%s)\n", group->rank(), why,
                (unsigned long long)group->generation(), group->size(),
                (unsigned long long)ddp.step(),
                group->state().restored ? "committed state" : "initial state");
    std::fflush(stdout);
    evaluated = UINT64_MAX;  // every member evaluates alike after a change
  };
  report(original ? "started" : "joined");

  auto evaluate = [&]() {
    torch::NoGradGuard no_grad;
    model->eval();
    const int world = group->size(), rank = group->rank();
    std::vector<double> counts{0, 0};
    for (int64_t k = rank * 1000; k < test.size(); k += int64_t(world) * 1000) {
      const int64_t n = std::min<int64_t>(1000, test.size() - k);
      auto pred = model->forward(test.images.narrow(0, k, n)).argmax(1);
      counts[0] += double(pred.eq(test.labels.narrow(0, k, n)).sum().item<int64_t>());
      counts[1] += double(n);
    }
    group->communicator()
        .allreduce(counts.data(), counts.data(), 2, gradwire::DataType::Float64,
                   gradwire::ReduceOp::Sum)
        .wait();
    model->train();
    return 100.0 * counts[0] / counts[1];
  };

  for (;;) {
    try {
      const uint64_t step = ddp.step();
      if (step > 0 && step % uint64_t(steps_per_epoch) == 0 && evaluated != step) {
        accuracy = evaluate();
        evaluated = step;
        if (group->rank() == 0) {
          std::printf("epoch %llu/%d  test acc %.2f%%  world %d\n",
                      (unsigned long long)(step / uint64_t(steps_per_epoch)), args.epochs,
                      accuracy, group->size());
          std::fflush(stdout);
        }
      }
      if (step >= total_steps) break;
      auto idx = step_indices(train.size(), args.global_batch, args.seed, int64_t(step),
                              group->size(), group->rank());
      auto sel = torch::from_blob(idx.data(), {int64_t(idx.size())}, torch::kLong);
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(
          model->forward(train.images.index_select(0, sel)), train.labels.index_select(0, sel));
      loss.backward();  // DDP averages the gradients over the members
      optimizer.step();
      if (recovered_at >= 0) {
        const long long t = now_ms();
        std::printf("rank %d: first step after recovery done at %lld ms (step %llu, %lld ms "
                    "after recover() returned)\n", group->rank(), t,
                    (unsigned long long)(step + 1), t - recovered_at);
        std::fflush(stdout);
        recovered_at = -1;
      }
      if (original && int64_t(step + 1) == args.kill_at_step && first_rank == args.kill_rank) {
        std::printf("rank %d: killed at step %llu at %lld ms\n", first_rank,
                    (unsigned long long)(step + 1), now_ms());
        std::fflush(stdout);
        ::raise(SIGKILL);
      }
      if (ddp.step_done()) report("a process joined");  // commits (every --commit-every steps)
    } catch (...) {
      std::printf("rank %d: generation %llu failed at step %llu at %lld ms\n", group->rank(),
                  (unsigned long long)group->generation(), (unsigned long long)ddp.step(),
                  now_ms());
      std::fflush(stdout);
      ddp.recover(std::current_exception());
      recovered_at = now_ms();
      report("recovered");
    }
  }
  std::printf("rank %d state at step %llu: world %d, generation %llu, recoveries %llu, params "
              "%s\n", group->rank(), (unsigned long long)ddp.step(), group->size(),
              (unsigned long long)group->generation(), (unsigned long long)group->recoveries(),
              training_state::params_digest(*model).c_str());
  if (group->rank() == 0) std::printf("final test accuracy %.2f%%\n", accuracy);
  std::fflush(stdout);
  group->communicator().barrier().wait();
  group->finish();  // a process still waiting to join gives up now
  if (accuracy < args.min_accuracy) {
    std::fprintf(stderr, "test accuracy %.2f%% is below --min-accuracy %.2f%%\n", accuracy,
                 args.min_accuracy);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_elastic: %s\n", e.what());
  return 1;
}
