// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// link_bench: per-step training time on a communication-bound configuration
// (a wide MLP, small batches), with and without gradient compression, for
// the bandwidth-limited link of benchmarks/netns-link. benchmarks/link_bench.py
// is the PyTorch DDP twin (gloo, with and without its PowerSGD hook);
// benchmarks/link_compare runs everything in one go and prints the table.
//
//   link_bench --mode none|powersgd|onebit-adam|onebit-lamb [--hidden H]
//              [--batch B] [--warmup W] [--steps T] [--rank R] [--device cpu|cuda]
//
// --device cuda: the model, the data and the gradients on the GPU (device
// Buckets; PowerSGD on the device, issue 16); each step ends with a
// synchronisation of the GPU so that the time is the step's. Ranks may share
// one GPU on the staged path (benchmarks/gpu-bench).
//
// Launched with the torchrun convention (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) in each namespace. Synthetic data (random images and labels
// from a fixed seed): only the step time matters here. Timed step =
// zero_grad + forward + backward (+ DDP's averaging) + optimizer step; the
// compression stages start after 5 steps (start_powerSGD_iter / freeze_step),
// inside the warm-up, so every timed step is a compressed one. One intra-op
// thread per rank. Median over the timed steps per rank, maximum over ranks.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gradwire/compress.h"
#include "gradwire/gradwire.h"
#include "gradwire/torch/distributed_data_parallel.h"
#include "gradwire/torch/optim.h"

namespace {

// This binary links libtorch's CPU libraries only (Note [finding libtorch]
// in src/torch/torch.cmake), so torch's CUDA backend, which registers itself
// when libtorch_cuda.so loads, is absent until we load it from beside
// libtorch_cpu.so. A CUDA program of a user links it directly.
void load_torch_cuda() {
  // By name: the RUNPATH this binary got from libtorch's CMake package holds
  // torch's library folder (as tests/torch/ddp_test.cpp does).
  if (!dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL)) {
    throw std::runtime_error(std::string("cannot load libtorch_cuda.so: ") + dlerror());
  }
}

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int64_t hidden)
      : fc1(register_module("fc1", torch::nn::Linear(784, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

}  // namespace

int main(int argc, char** argv) try {
  std::string mode = "none";
  int64_t hidden = 2048, batch = 32;
  int warmup = 10, steps = 30;
  size_t rank_r = 4;
  std::string device_name = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--mode") mode = v;
    else if (a == "--hidden") hidden = std::stoll(v);
    else if (a == "--batch") batch = std::stoll(v);
    else if (a == "--warmup") warmup = std::stoi(v);
    else if (a == "--steps") steps = std::stoi(v);
    else if (a == "--rank") rank_r = std::stoull(v);
    else if (a == "--device") device_name = v;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
    ++i;
  }
  torch::set_num_threads(1);
  auto comm = gradwire::Communicator::create();
  const int rank = comm->rank(), world = comm->size();
  torch::manual_seed(1234);
  Mlp net(hidden);
  if (device_name != "cpu") load_torch_cuda();
  const torch::Device device(device_name);
  const bool cuda = device.is_cuda();
  net->to(device);
  std::shared_ptr<torch::nn::Module> module = net.ptr();
  std::unique_ptr<gradwire::torch::DistributedDataParallel> ddp;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::shared_ptr<gradwire::PowerSGDState> psgd;
  if (mode == "none" || mode == "powersgd") {
    gradwire::torch::DDPOptions o;
    if (mode == "powersgd") {
      gradwire::PowerSGDOptions po;
      po.matrix_approximation_rank = rank_r;
      po.start_powersgd_iter = 5;
      psgd = std::make_shared<gradwire::PowerSGDState>(po);
      o.comm_hook = gradwire::powersgd_hook(psgd);
    }
    ddp = std::make_unique<gradwire::torch::DistributedDataParallel>(module, *comm, o);
    opt = std::make_unique<torch::optim::Adam>(module->parameters(), torch::optim::AdamOptions(1e-3));
  } else if (mode == "onebit-adam") {
    gradwire::OneBitAdamOptions o;
    o.freeze_step = 5;
    opt = std::make_unique<gradwire::torch::OneBitAdam>(module->parameters(), *comm, o);
  } else if (mode == "onebit-lamb") {
    gradwire::OneBitLambOptions o;
    o.freeze_step = 5;
    opt = std::make_unique<gradwire::torch::OneBitLamb>(module->parameters(), *comm, o);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  int64_t params = 0;
  for (const auto& p : module->parameters()) params += p.numel();

  auto gen = torch::make_generator<torch::CPUGeneratorImpl>(uint64_t(7 + rank));
  std::vector<double> times;
  for (int s = 0; s < warmup + steps; ++s) {
    auto x = torch::randn({batch, 784}, gen).to(device);
    auto y = torch::randint(0, 10, {batch}, gen, torch::kLong).to(device);
    if (cuda) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    opt->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt->step();
    if (cuda) torch::cuda::synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= warmup) times.push_back(dt);
  }
  std::sort(times.begin(), times.end());
  double median = times.empty() ? 0 : times[times.size() / 2];
  comm->allreduce(&median, &median, 1, gradwire::DataType::Float64, gradwire::ReduceOp::Max).wait();
  if (rank == 0) {
    std::printf("RESULT impl=gradwire mode=%s world=%d params=%lld hidden=%lld batch=%lld "
                "step_ms=%.2f provider=%s device=%s\n",
                mode.c_str(), world, (long long)params, (long long)hidden, (long long)batch,
                median * 1e3, comm->provider().c_str(), device_name.c_str());
  }
  comm->barrier().wait();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "link_bench: %s\n", e.what());
  return 1;
}
