// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Data-parallel training from C++ with a c10d::ProcessGroup on gradwire
// (gradwire/torch/process_group.h), no Python: code written against
// c10d's ProcessGroup API (or libtorch's c10d::Reducer) runs on gradwire by
// swapping the group. The store and the group are made as
// torch.distributed makes them; rank 0's parameters are broadcast; after
// each backward the gradients are averaged over the group in one coalesced
// allreduce. The task is synthetic (labels from a fixed random "teacher"
// network), so the example needs no data set; rank 0 prints the held-out
// accuracy, and every rank checks that the replicas ended identical.
//
//   build/tests/ranks/gwlaunch -n 2 -- build/examples/train_process_group
//   torchrun --nproc-per-node 2 build/examples/train_process_group
//   mpirun -np 2 build/examples/train_process_group
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "gradwire/error.h"
#include "gradwire/torch/process_group.h"

namespace {

struct Args {
  int64_t steps = 500;         // optimizer steps
  int64_t batch = 32;          // rows per rank and step
  double lr = 0.1;
  double min_accuracy = 0;     // exit 1 below this held-out accuracy (percent; for tests)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + flag);
    const char* v = argv[++i];
    if (flag == "--steps") a.steps = std::atoll(v);
    else if (flag == "--batch") a.batch = std::atoll(v);
    else if (flag == "--lr") a.lr = std::atof(v);
    else if (flag == "--min-accuracy") a.min_accuracy = std::atof(v);
    else throw std::invalid_argument("unknown flag " + flag + " (--steps, --batch, --lr, "
                                     "--min-accuracy)");
  }
  return a;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// Where the store is and who we are: the torchrun convention (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT: torchrun, gwlaunch), or mpirun's
// variables, where rank 0 picks an address and a free port and shares them
// over MPI.
struct Job {
  int rank = 0, size = 1;
  std::string host = "127.0.0.1";
  int port = 29500;
};

Job find_job() {
  Job j;
  if (std::getenv("RANK")) {
    j.rank = env_int("RANK", 0);
    j.size = env_int("WORLD_SIZE", 1);
    if (const char* h = std::getenv("MASTER_ADDR")) j.host = h;
    j.port = env_int("MASTER_PORT", j.port);
  } else if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    j.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    j.size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    const bool one_host = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 0) == j.size;
    const char* master = std::getenv("MASTER_ADDR");
    std::tie(j.host, j.port) = gradwire::torch::mpi_master_address(master ? master : "", one_host);
  }
  return j;
}

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(20, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// Rows [first, first + n) of the synthetic data set: inputs from a seeded
// generator, labels from a fixed teacher, alike on every rank.
std::pair<torch::Tensor, torch::Tensor> rows(int64_t first, int64_t n) {
  auto gen = at::detail::createCPUGenerator(12345);
  const auto teacher = torch::randn({20, 10}, gen);
  auto x = torch::empty({n, 20});
  for (int64_t i = 0; i < n; ++i) {
    auto row_gen = at::detail::createCPUGenerator(uint64_t(1000000 + first + i));
    x[i] = torch::randn({20}, row_gen);
  }
  return {x, torch::matmul(x, teacher).argmax(1)};
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  torch::set_num_threads(1);  // ranks share the host's cores
  const Job job = find_job();

  // The store every rank reaches (rank 0 serves it), and the group: from
  // here on, any code written for c10d::ProcessGroup runs on gradwire.
  c10d::TCPStoreOptions so;
  so.port = uint16_t(job.port);
  so.isServer = job.rank == 0;
  so.numWorkers = size_t(job.size);
  auto store = c10::make_intrusive<c10d::TCPStore>(job.host, so);
  c10::intrusive_ptr<c10d::ProcessGroup> pg =
      gradwire::torch::make_process_group(store, job.rank, job.size);

  torch::manual_seed(uint64_t(job.rank));  // different on purpose: rank 0's win
  Mlp model;
  std::vector<torch::Tensor> params = model->parameters();
  std::vector<torch::Tensor> values;  // detached: the broadcast writes into them
  for (const auto& p : params) values.push_back(p.detach());
  c10d::broadcast_coalesced(pg, values, 1 << 20, 0);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(args.lr).momentum(0.9));

  c10d::AllreduceCoalescedOptions average;
  average.reduceOp = c10d::ReduceOp::AVG;
  for (int64_t step = 0; step < args.steps; ++step) {
    // This rank's shard of the step's global batch.
    auto [x, y] = rows((step * job.size + job.rank) * args.batch, args.batch);
    opt.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    std::vector<torch::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    pg->allreduce_coalesced(grads, average)->wait();  // the mean over ranks, in place
    opt.step();
  }

  // Held-out rows past every training row.
  auto [x, y] = rows(args.steps * job.size * args.batch + 1000000, 2000);
  torch::NoGradGuard no_grad;
  const double accuracy =
      model->forward(x).argmax(1).eq(y).to(torch::kDouble).mean().item<double>() * 100;
  // Identical replicas: the parameters' sum is the same everywhere.
  double sum = 0;
  for (auto& p : params) sum += p.to(torch::kDouble).sum().item<double>();
  std::vector<torch::Tensor> lo{torch::tensor({sum}, torch::kDouble)}, hi{lo[0].clone()};
  c10d::AllreduceOptions min_op, max_op;
  min_op.reduceOp = c10d::ReduceOp::MIN;
  max_op.reduceOp = c10d::ReduceOp::MAX;
  pg->allreduce(lo, min_op)->wait();
  pg->allreduce(hi, max_op)->wait();
  const bool same = lo[0].item<double>() == hi[0].item<double>();
  if (job.rank == 0) {
    std::printf("train_process_group: %d ranks, %lld steps: held-out accuracy %.1f%%; "
                "replicas %s\n",
                job.size, static_cast<long long>(args.steps), accuracy,
                same ? "identical" : "DIFFER");
  }
  pg->barrier()->wait();
  return same && accuracy >= args.min_accuracy ? 0 : 1;
} catch (const gradwire::Error& e) {
  std::fprintf(stderr, "train_process_group: %s\n", e.what());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_process_group: %s\n", e.what());
  return 2;
}
