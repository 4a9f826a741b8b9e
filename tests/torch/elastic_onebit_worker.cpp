// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// One member of an elastic job trained with 1-bit Adam or 1-bit LAMB under
// gradwire::torch::ElasticDistributedDataParallel (Note [1-bit optimizers
// under elastic generations] in src/compress/onebit_optimizers.cpp), run by
// tests/torch/elastic_onebit.sh over a file store: three members, of which
// the one of first rank KILL_RANK SIGKILLs itself after step KILL_AT; the
// other two must recover at world size 2 and train on until a replacement
// (the same program, started once they have recovered) joins at a commit;
// then all three train AFTER_JOIN more steps.
//
//   elastic_onebit_worker adam|lamb AFTER_JOIN FREEZE_STEP KILL_RANK KILL_AT
//
// Commits every 2 steps and KILL_AT is odd, so the survivors have moved
// past their last commit when the step after the kill fails: they must
// roll back. After recover() it checks, and exits 1 naming what differs:
//  - world size 2, and the optimizer's step counter (so its stage: warm-up
//    or frozen variance) at the committed step;
//  - the optimizer's replicated state (moments, frozen variance, LAMB's
//    coefficients) byte for byte the one this member had at that step;
// a joiner checks that its optimizer starts at the committed step; at the
// end every member checks that all members' parameters and optimizer
// states are the same bits and the step counter is the job's. Prints
// "params <digest>" for the script.
#include <ATen/CPUGeneratorImpl.h>
#include <signal.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <memory>
#include <string>

#include "gradwire/elastic.h"
#include "gradwire/error.h"
#include "gradwire/torch/elastic.h"
#include "gradwire/torch/optim.h"

namespace {

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
  std::exit(1);
}

// The step's global batch of 12 samples (the same whoever is alive), every
// world-th row from `rank`.
std::pair<torch::Tensor, torch::Tensor> batch(uint64_t step, int world, int rank) {
  auto gen = at::detail::createCPUGenerator(1000 + step);
  auto x = torch::randn({12, 8}, gen);
  auto y = torch::tanh(x.narrow(1, 0, 4) * 0.7 + 0.1 * torch::randn({12, 4}, gen));
  auto rows = torch::arange(rank, 12, world, torch::kLong);
  return {x.index_select(0, rows), y.index_select(0, rows)};
}

uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s adam|lamb AFTER_JOIN FREEZE_STEP KILL_RANK KILL_AT\n",
                 argv[0]);
    return 2;
  }
  const std::string which = argv[1];
  const uint64_t after_join = std::stoull(argv[2]), freeze = std::stoull(argv[3]);
  const int kill_rank = std::stoi(argv[4]);
  const uint64_t kill_at = std::stoull(argv[5]);
  torch::set_num_threads(1);

  auto group = gradwire::ElasticGroup::join({}, gradwire::Rendezvous::from_environment());
  const int first_rank = group->rank();
  // Different initial models: the optimizer broadcasts rank 0's.
  torch::manual_seed(100 + uint64_t(first_rank));
  torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 4));
  std::unique_ptr<gradwire::torch::OneBitOptimizer> opt;
  if (which == "adam") {
    gradwire::OneBitAdamOptions o;
    o.lr = 1e-2f;
    o.freeze_step = freeze;
    opt = std::make_unique<gradwire::torch::OneBitAdam>(model->parameters(),
                                                         group->communicator(), o);
  } else if (which == "lamb") {
    gradwire::OneBitLambOptions o;
    o.lr = 1e-2f;
    o.freeze_step = freeze;
    opt = std::make_unique<gradwire::torch::OneBitLamb>(model->parameters(),
                                                         group->communicator(), o);
  } else {
    fail(first_rank, "unknown optimizer " + which);
  }
  gradwire::torch::ElasticDDPOptions eo;
  eo.commit_every = 2;
  gradwire::torch::ElasticDistributedDataParallel elastic(*group, model, *opt, eo);
  try {
    elastic.ddp();
    fail(first_rank, "ddp() with a 1-bit optimizer did not throw");
  } catch (const gradwire::Error& e) {
    if (e.code() != gradwire::ErrorCode::InvalidArgument) throw;
  }

  const bool joiner = group->generation() > 0;
  if (joiner) {
    std::printf("rank %d: joined: generation %llu at step %llu\n", group->rank(),
                (unsigned long long)group->generation(), (unsigned long long)elastic.step());
    std::fflush(stdout);
    if (!group->state().restored || opt->core().steps() != elastic.step() ||
        opt->core().compressing() != (elastic.step() >= freeze)) {
      fail(first_rank, "the joiner's optimizer is at step " +
                           std::to_string(opt->core().steps()) + ", the job at " +
                           std::to_string(elastic.step()));
    }
  }
  // The last step: AFTER_JOIN after the commit at which the replacement came in.
  uint64_t end = joiner ? elastic.step() + after_join : UINT64_MAX;

  // This member's replicated optimizer state after each step: what a commit
  // at that step holds.
  std::map<uint64_t, std::string> states;
  states[elastic.step()] = opt->core().save_replicated_state();
  int recoveries = 0;
  while (elastic.step() < end) {
    const uint64_t step = elastic.step();
    try {
      auto [x, y] = batch(step, group->size(), group->rank());
      opt->zero_grad();
      torch::mse_loss(model->forward(x), y).backward();
      opt->step();
      states[step + 1] = opt->core().save_replicated_state();
      if (group->generation() == 0 && first_rank == kill_rank && step + 1 == kill_at) {
        std::printf("rank %d: killed after step %llu\n", first_rank, (unsigned long long)kill_at);
        std::fflush(stdout);
        ::raise(SIGKILL);
      }
      if (elastic.step_done()) {
        end = elastic.step() + after_join;
        std::printf("rank %d: a process joined: generation %llu, world %d, at step %llu\n",
                    group->rank(), (unsigned long long)group->generation(), group->size(),
                    (unsigned long long)elastic.step());
        std::fflush(stdout);
      } else if (recoveries > 0 && end == UINT64_MAX) {
        // Waiting for the replacement: slow steps.
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (elastic.step() > 20000) fail(first_rank, "no process joined");
      }
    } catch (...) {
      const uint64_t before = opt->core().steps();
      elastic.recover(std::current_exception());
      ++recoveries;
      const uint64_t at = elastic.step();
      std::printf("rank %d: recovered: generation %llu, world %d, at step %llu (the optimizer "
                  "had done %llu)\n", group->rank(), (unsigned long long)group->generation(),
                  group->size(), (unsigned long long)at, (unsigned long long)before);
      std::fflush(stdout);
      // The kill's recovery. A later one is a join that failed while the
      // generation formed (seen once on the loaded 2-core machine: the
      // joiner's start-up barrier timed out), retried with the replacement:
      // the state checks below hold for it too.
      if (recoveries == 1 && group->size() != 2) {
        fail(first_rank, "world " + std::to_string(group->size()) + ", not 2");
      }
      if (recoveries == 1 && at >= before) {
        fail(first_rank, "no roll back (committed step " + std::to_string(at) +
                             ", the optimizer had done " + std::to_string(before) + ")");
      }
      if (opt->core().steps() != at) {
        fail(first_rank, "the optimizer is at step " + std::to_string(opt->core().steps()) +
                             " after recovering to the commit of step " + std::to_string(at));
      }
      if (opt->core().compressing() != (at >= freeze)) {
        fail(first_rank, "the optimizer's stage is not the committed one");
      }
      if (opt->core().save_replicated_state() != states.at(at)) {
        fail(first_rank, "the optimizer's state (moments, variance, coefficients) differs from "
                         "the one at step " + std::to_string(at));
      }
    }
  }
  if ((!joiner && recoveries < 1) || group->size() != 3) {
    fail(first_rank, std::to_string(recoveries) + " recoveries, world " +
                         std::to_string(group->size()) + " at the end");
  }
  if (opt->core().steps() != end || !opt->core().compressing()) {
    fail(first_rank, "the optimizer ends at step " + std::to_string(opt->core().steps()) +
                         " (the job at " + std::to_string(end) + ")" +
                         (opt->core().compressing() ? "" : " in its warm-up"));
  }
  // Every member's optimizer state, by digest.
  const std::string mine = opt->core().save_replicated_state();
  const uint64_t digest = fnv1a(mine.data(), mine.size());
  std::vector<uint64_t> digests(size_t(group->size()));
  group->communicator()
      .allgather(&digest, digests.data(), digests.size(), gradwire::DataType::Int64)
      .wait();
  for (int r = 0; r < group->size(); ++r) {
    if (digests[size_t(r)] != digest) {
      fail(first_rank, "rank " + std::to_string(r) + "'s optimizer state differs from this rank's");
    }
  }
  // Every member's parameters, bit for bit.
  std::vector<torch::Tensor> flat_parts;
  for (const auto& p : model->parameters()) flat_parts.push_back(p.detach().reshape({-1}));
  auto flat = torch::cat(flat_parts).contiguous();
  const size_t n = size_t(flat.numel());
  auto all = torch::empty({int64_t(n) * group->size()}, torch::kFloat32);
  group->communicator()
      .allgather(flat.data_ptr<float>(), all.data_ptr<float>(), size_t(all.numel()),
                 gradwire::DataType::Float32)
      .wait();
  for (int r = 0; r < group->size(); ++r) {
    if (std::memcmp(all.data_ptr<float>() + size_t(r) * n, flat.data_ptr<float>(),
                    n * sizeof(float)) != 0) {
      fail(first_rank, "rank " + std::to_string(r) + "'s parameters differ from this rank's");
    }
  }
  if (!torch::isfinite(flat).all().item<bool>()) fail(first_rank, "non-finite parameters");
  std::printf("rank %d: done at step %llu, world %d, params %016llx\n", group->rank(),
              (unsigned long long)elastic.step(), group->size(),
              (unsigned long long)fnv1a(flat.data_ptr<float>(), n * sizeof(float)));
  std::fflush(stdout);
  group->communicator().barrier().wait();
  group->finish();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "elastic_onebit_worker: %s\n", e.what());
  return 1;
}
