// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The victim and the judge of tests/ranks/checkpoint_crash.sh.
//
//   checkpoint_writer write DIR MB   resumes after the newest checkpoint
//                                    and saves the next ones forever (MB MiB
//                                    per shard), printing "committed N"
//                                    after each (rank 0)
//   checkpoint_writer verify DIR     loads the newest checkpoint, checks
//                                    every byte of this rank's shard and
//                                    prints "loaded N" (rank 0)
#include <cstdio>
#include <string>

#include "gradwire/checkpoint.h"
#include "gradwire/gradwire.h"

namespace {

// Rank r's shard at step s: a pattern that makes any mix of two saves, or
// of two ranks, detectable.
std::map<std::string, std::string> entries(uint64_t step, int rank, size_t bytes) {
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = char((i * 2654435761u + step * 97 + size_t(rank) * 13) >> 7);
  return {{"data", std::move(data)}, {"step", std::to_string(step)}, {"rank", std::to_string(rank)}};
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s write DIR MB | verify DIR\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  auto comm = gradwire::Communicator::create();
  const int rank = comm->rank();
  if (mode == "write" && argc == 4) {
    const size_t bytes = std::stoul(argv[3]) << 20;
    auto last = gradwire::load_latest_checkpoint(*comm, dir);
    for (uint64_t step = last ? last->step() + 1 : 1;; ++step) {
      gradwire::save_checkpoint(*comm, dir, step, entries(step, rank, bytes));
      if (rank == 0) {
        std::printf("committed %llu\n", (unsigned long long)step);
        std::fflush(stdout);
      }
    }
  }
  if (mode == "verify") {
    auto c = gradwire::load_latest_checkpoint(*comm, dir);
    if (!c) {
      if (rank == 0) std::printf("loaded none\n");
      return 0;
    }
    const size_t bytes = c->get("data").size();
    if (c->entries() != entries(c->step(), rank, bytes)) {
      std::fprintf(stderr, "rank %d: checkpoint %s does not hold step %llu's data of rank %d\n",
                   rank, c->path().c_str(), (unsigned long long)c->step(), rank);
      return 1;
    }
    if (rank == 0) std::printf("loaded %llu\n", (unsigned long long)c->step());
    return 0;
  }
  std::fprintf(stderr, "bad arguments\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "checkpoint_writer: %s\n", e.what());
  return 1;
}
