// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// ddp_bench: per-step time of data-parallel training with gradwire's
// DistributedDataParallel, for issue 4's comparison against PyTorch DDP
// (gloo); benchmarks/ddp_bench.py is the PyTorch twin and
// benchmarks/ddp_compare runs both and prints the table.
//
//   mpirun -np 1 build/benchmarks/ddp_bench --mode plain   # no DDP, no communicator
//   mpirun -np 1 build/benchmarks/ddp_bench --mode ddp     # DDP over a world of one
//   mpirun -np 2 build/benchmarks/ddp_bench --mode ddp     # 2 ranks
//   mpirun -np 2 build/benchmarks/ddp_bench --mode plain   # 2 independent processes at once
//
// What makes it comparable with ddp_bench.py (keep the two in step):
//  * the model is examples/train_fashion_mnist.cpp's CNN (duplicated here, so
//    the example stays untouched), ~207k float32 parameters;
//  * the data is Fashion-MNIST's training set, normalised as in the example;
//    step s on rank r of a world of w uses images [(s*w + r)*B, ... + B) mod
//    N, unshuffled, so both programs feed every rank identical batches;
//  * per-rank batch B (64), Adam(lr 1e-3), cross-entropy, dropout as in the
//    example (training mode);
//  * one intra-op thread (at::set_num_threads(1)) in both programs, so two
//    ranks on a 2-core host do not oversubscribe the cores with compute;
//  * the timed step is zero_grad + forward + loss + backward (including the
//    gradient averaging DDP does inside backward) + optimizer step; batch
//    selection happens before the clock starts. W warm-up steps (30), then
//    T timed steps (200); the step time is the median over the timed steps
//    on each rank, then the maximum over ranks;
//  * DDP options are the defaults of both libraries (first bucket 1 MiB,
//    then 25 MiB; no gradient views).
// Output: one line starting with "RESULT" (key=value pairs) that
// benchmarks/ddp_compare parses: from rank 0 in ddp mode (already the
// maximum over ranks), from every process in plain mode (no communicator to
// reduce with; the script takes the maximum).
//
// Plain mode with -np 2 runs two independent processes (no communicator, no
// communication) side by side: the cost of two compute processes sharing
// the host's cores, memory bandwidth and background load, without any
// gradient exchange. ddp_compare reports overheads against it as well as
// against the single process that issue 4 names.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "examples/fashion_mnist.h"

namespace {

struct Args {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string mode = "ddp";  // ddp | plain
  int64_t batch = 64;        // per rank
  int warmup = 30;
  int steps = 200;
  int threads = 1;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--mode ddp|plain] [--batch B (per rank)] [--warmup W] [--steps T]\n"
               "          [--threads N] [--data DIR]\n",
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
    if (k == "--mode") a.mode = value();
    else if (k == "--batch") a.batch = std::stoll(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--steps") a.steps = std::stoi(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--data") a.data = value();
    else usage(argv[0]);
  }
  if ((a.mode != "ddp" && a.mode != "plain") || a.batch < 1 || a.steps < 1 || a.warmup < 0) {
    usage(argv[0]);
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int env_int(const char* name, int fallback) {
  const char* s = std::getenv(name);
  return s ? std::atoi(s) : fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  const bool ddp_mode = args.mode == "ddp";
  // The plain baseline creates no Communicator at all (no engine thread), so
  // it is the cost of the same per-rank work with no communication.
  std::unique_ptr<gradwire::Communicator> comm;
  if (ddp_mode) comm = gradwire::Communicator::create();
  const int rank = comm ? comm->rank() : env_int("OMPI_COMM_WORLD_RANK", 0);
  const int world = comm ? comm->size() : env_int("OMPI_COMM_WORLD_SIZE", 1);
  torch::set_num_threads(args.threads);  // 1: two ranks on two cores, no oversubscription
  torch::manual_seed(1 + uint64_t(rank));  // DDP's broadcast makes the replicas equal

  torch::Tensor images, labels;
  {
    fashion_mnist::Dataset train = fashion_mnist::load(args.data, "train");
    images = train.images;
    labels = train.labels;
  }
  const int64_t n_images = labels.size(0);

  fashion_mnist::Cnn model;
  std::optional<gradwire::torch::DistributedDataParallel> ddp;
  if (ddp_mode) ddp.emplace(model, *comm);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));

  std::vector<double> step_s;
  double hidden_sum = 0, comm_sum = 0, comm_hidden_sum = 0;
  std::vector<int64_t> idx(size_t(args.batch));
  for (int s = 0; s < args.warmup + args.steps; ++s) {
    const int64_t first = (int64_t(s) * world + rank) * args.batch;
    for (int64_t j = 0; j < args.batch; ++j) idx[size_t(j)] = (first + j) % n_images;
    auto sel = torch::from_blob(idx.data(), {args.batch}, torch::kLong);
    auto x = images.index_select(0, sel), y = labels.index_select(0, sel);

    const auto t0 = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();  // with DDP: gradients averaged over ranks when this returns
    optimizer.step();
    const auto t1 = std::chrono::steady_clock::now();

    if (s >= args.warmup) {
      step_s.push_back(std::chrono::duration<double>(t1 - t0).count());
      if (ddp) {
        const gradwire::StepStats& st = ddp->last_step_stats();
        hidden_sum += st.hidden_fraction();
        comm_sum += st.communication_time().count();
        comm_hidden_sum += st.hidden_time().count();
      }
    }
  }
  const double n = double(args.steps);
  // [median step, mean comm time, mean hidden time, mean hidden fraction]
  std::vector<double> mine{median(step_s), comm_sum / n, comm_hidden_sum / n, hidden_sum / n};
  std::vector<double> worst = mine, sum = mine;
  if (comm) {
    comm->allreduce(worst.data(), worst.data(), worst.size(), gradwire::DataType::Float64,
                    gradwire::ReduceOp::Max)
        .wait();
    comm->allreduce(sum.data(), sum.data(), sum.size(), gradwire::DataType::Float64,
                    gradwire::ReduceOp::Sum)
        .wait();
  }
  if (rank == 0 || !comm) {
    // step_ms: max over ranks of the per-rank median; comm/hidden: mean over
    // steps and ranks, from the Reducer's own timestamps (StepStats).
    std::printf("RESULT impl=gradwire mode=%s world=%d rank=%d batch=%lld warmup=%d steps=%d "
                "threads=%d step_ms=%.4f",
                args.mode.c_str(), world, rank, (long long)args.batch, args.warmup, args.steps,
                args.threads, worst[0] * 1e3);
    if (ddp) {
      std::printf(" comm_ms=%.4f hidden_ms=%.4f hidden_fraction=%.4f provider=%s",
                  sum[1] / world * 1e3, sum[2] / world * 1e3, sum[3] / world,
                  comm->provider().c_str());
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  ddp.reset();  // before the Communicator
  if (comm) comm->barrier().wait();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ddp_bench: %s\n", e.what());
  return 1;
}
