// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The workload of tests/ranks/netfault.sh: N allreduces (float32 sum, sizes
// from 1 KiB to 4 MiB, inputs seeded by rank and iteration), and the
// SHA-256 of every result, which must not depend on what the network did
// to the packets on the way.
//
// With NETFAULT_GROUP set, the allreduces run on a sub-communicator of
// every rank in reverse order (group rank 0 is the last world rank), for
// tests/ranks/hostlost.sh.
//
//   netfault_allreduce ITERATIONS
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gradwire/checkpoint.h"
#include "gradwire/gradwire.h"

int main(int argc, char** argv) try {
  const int iterations = argc > 1 ? std::stoi(argv[1]) : 200;
  auto world = gradwire::Communicator::create();
  std::unique_ptr<gradwire::Communicator> group;
  gradwire::Communicator* comm = world.get();
  if (std::getenv("NETFAULT_GROUP")) {
    std::vector<int> reversed;
    for (int r = world->size() - 1; r >= 0; --r) reversed.push_back(r);
    group = world->split(reversed);
    comm = group.get();
  }
  std::string all;
  for (int i = 0; i < iterations; ++i) {
    const size_t count = size_t(256) << (i % 13);  // 1 KiB .. 4 MiB of float32
    std::vector<float> data(count);
    std::mt19937 rng(uint32_t(i * 1000 + world->rank()));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : data) x = dist(rng);
    comm->allreduce(data.data(), data.data(), count, gradwire::DataType::Float32,
                    gradwire::ReduceOp::Sum)
        .wait();
    all += gradwire::sha256_hex(
        std::string_view(reinterpret_cast<const char*>(data.data()), count * sizeof(float)));
  }
  std::printf("rank %d: %d allreduces, digest %s\n", world->rank(), iterations,
              gradwire::sha256_hex(all).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "netfault_allreduce: %s\n", e.what());
  return 1;
}
