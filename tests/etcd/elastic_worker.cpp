// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A training loop for the etcd tests (tests/etcd/*.sh), without torch so
// that it costs the 2-core CI almost nothing: each step's global batch of
// --batch items is split by the current world size and rank, every item
// adds a small integer "gradient" to a vector of --dim doubles, and an
// allreduce sums them. Every sum is an integer below 2^53, so it is exact
// in any order: the parameters after N steps are the same whatever the
// world sizes, kills, rollbacks and joins along the way, and the worker
// checks them against a serial computation at the end (a lost or doubled
// step, or a joiner without the state, changes them).
//
//   GRADWIRE_ETCD_ENDPOINTS=http://10.0.0.9:2379 GRADWIRE_ETCD_PREFIX=/job/ \
//   GRADWIRE_ELASTIC_MIN_SIZE=2 GRADWIRE_ELASTIC_MAX_SIZE=3 elastic_worker --steps 300
//   elastic_worker --fixed        (a fixed world: RANK and WORLD_SIZE set too)
//
// Prints (times in ms since the epoch, for the tests' figures):
//   joined: generation G, world W, rank R, at step S
//   step S done at T (world W)
//   generation G failed at T: <error>
//   recovered: generation G, world W, rank R, at step S at T
//   first step after recovery done at T
//   final: step S, world W, generation G, recoveries N, digest D (expected E)
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/elastic.h"
#include "gradwire/error.h"
#include "gradwire/gradwire.h"

namespace {

struct Args {
  uint64_t steps = 300;
  int step_ms = 20;
  size_t dim = 4096;
  int batch = 12;
  bool fixed = false;
};

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The gradient of item i at step s, element j: an integer in [-6, 6].
double item(uint64_t s, int i, size_t j) {
  return double(int64_t((s * 31 + uint64_t(i) * 7 + j * 3) % 13) - 6);
}

void local_gradient(uint64_t s, int batch, int world, int rank, std::vector<double>& g) {
  std::fill(g.begin(), g.end(), 0.0);
  for (int i = rank; i < batch; i += world) {
    for (size_t j = 0; j < g.size(); ++j) g[j] += item(s, i, j);
  }
}

uint64_t digest(const std::vector<double>& p) {
  uint64_t h = 1469598103934665603ull;
  for (double x : p) {
    uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

std::string bytes_of(const std::vector<double>& p) {
  return std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(double));
}

int fixed_world(const Args& a) {
  auto comm = gradwire::Communicator::create({}, gradwire::Rendezvous::from_environment());
  std::vector<double> p(a.dim, 0.0), g(a.dim);
  for (uint64_t s = 0; s < a.steps; ++s) {
    local_gradient(s, a.batch, comm->size(), comm->rank(), g);
    comm->allreduce(g.data(), g.data(), g.size(), gradwire::DataType::Float64,
                    gradwire::ReduceOp::Sum).wait();
    for (size_t j = 0; j < p.size(); ++j) p[j] += g[j];
  }
  std::vector<double> e(a.dim, 0.0), ge(a.dim);
  for (uint64_t s = 0; s < a.steps; ++s) {
    local_gradient(s, a.batch, 1, 0, ge);
    for (size_t j = 0; j < e.size(); ++j) e[j] += ge[j];
  }
  std::printf("fixed world: rank %d of %d, %" PRIu64 " steps, digest %016" PRIx64 " (expected %016" PRIx64 ")\n",
              comm->rank(), comm->size(), a.steps, digest(p), digest(e));
  return digest(p) == digest(e) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--steps") a.steps = std::stoull(value());
    else if (k == "--step-ms") a.step_ms = std::stoi(value());
    else if (k == "--dim") a.dim = std::stoull(value());
    else if (k == "--batch") a.batch = std::stoi(value());
    else if (k == "--fixed") a.fixed = true;
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--step-ms MS] [--dim D] [--batch B] [--fixed]\n",
                   argv[0]);
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (a.fixed) return fixed_world(a);

  auto group = gradwire::ElasticGroup::join({}, gradwire::Rendezvous::from_environment());
  std::vector<double> p(a.dim, 0.0), g(a.dim);
  uint64_t step = 0;
  auto adopt = [&]() {
    const auto& st = group->state();
    if (!st.restored) {
      std::fill(p.begin(), p.end(), 0.0);
      step = 0;
      return;
    }
    if (st.shared.size() != p.size() * sizeof(double)) {
      throw gradwire::Error(gradwire::ErrorCode::Protocol, "committed state of the wrong size");
    }
    std::memcpy(p.data(), st.shared.data(), st.shared.size());
    step = st.step;
  };
  adopt();
  std::printf("joined: generation %" PRIu64 ", world %d, rank %d, at step %" PRIu64 "\n",
              group->generation(), group->size(), group->rank(), step);
  if (!group->state().restored) group->commit(0, bytes_of(p));
  bool after_recovery = false;
  while (step < a.steps) {
    try {
      local_gradient(step, a.batch, group->size(), group->rank(), g);
      group->communicator()
          .allreduce(g.data(), g.data(), g.size(), gradwire::DataType::Float64,
                     gradwire::ReduceOp::Sum)
          .wait();
      for (size_t j = 0; j < p.size(); ++j) p[j] += g[j];
      ++step;
      const long long t = now_ms();
      std::printf("step %" PRIu64 " done at %lld (world %d)\n", step, t, group->size());
      if (after_recovery) {
        std::printf("first step after recovery done at %lld\n", t);
        after_recovery = false;
      }
      if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
      if (group->commit(step, bytes_of(p))) {
        adopt();
        std::printf("a process joined: generation %" PRIu64 ", world %d, at step %" PRIu64 "\n",
                    group->generation(), group->size(), step);
      }
    } catch (const std::exception& e) {
      std::printf("generation %" PRIu64 " failed at %lld: %s\n", group->generation(), now_ms(),
                  e.what());
      group->recover(std::current_exception());
      adopt();
      after_recovery = true;
      std::printf("recovered: generation %" PRIu64 ", world %d, rank %d, at step %" PRIu64
                  " at %lld\n", group->generation(), group->size(), group->rank(), step, now_ms());
    }
  }
  std::vector<double> e(a.dim, 0.0), ge(a.dim);
  for (uint64_t s = 0; s < a.steps; ++s) {
    local_gradient(s, a.batch, 1, 0, ge);
    for (size_t j = 0; j < e.size(); ++j) e[j] += ge[j];
  }
  std::printf("final: step %" PRIu64 ", world %d, generation %" PRIu64 ", recoveries %" PRIu64
              ", digest %016" PRIx64 " (expected %016" PRIx64 ")\n",
              step, group->size(), group->generation(), group->recoveries(), digest(p), digest(e));
  group->communicator().barrier().wait();
  group->finish();
  return digest(p) == digest(e) ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "elastic_worker: %s\n", e.what());
  return 1;
}
