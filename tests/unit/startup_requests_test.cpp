// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Start-up that does not grow with the job (issue 45): the store requests
// each rank makes while its world communicator is created, counted with
// ranks as threads on an InProcessStore at several world sizes (Note [an
// allgather in two store requests] in src/bootstrap/store_bootstrap.cpp).
// Every rank but 0 makes the same number at every size; rank 0, which
// reads the others' values and publishes them combined, makes one more per
// rank per round.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "gradwire/gradwire.h"

namespace gradwire {
namespace {

using namespace std::chrono_literals;

// Per rank, the store requests its create() made on its own thread (the
// watchdog's once-a-second round runs on another).
std::vector<uint64_t> start_up_requests(int n, double& seconds) {
  auto store = make_in_process_store();
  Options o;
  o.transport.provider = "shm";
  o.timeout = 60s;
  std::vector<uint64_t> requests(static_cast<size_t>(n), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<double> created(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        const uint64_t before = bootstrap::store_requests_on_this_thread();
        auto comm = Communicator::create(o, Rendezvous::in_process(store, r, n));
        requests[size_t(r)] = bootstrap::store_requests_on_this_thread() - before;
        created[size_t(r)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        float x = 1;
        comm->allreduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum).wait();
        if (x != float(n)) throw std::runtime_error("wrong allreduce result");
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  seconds = 0;
  for (double c : created) seconds = std::max(seconds, c);
  return requests;
}

TEST(StartUp, StoreRequestsPerRankDoNotGrowWithTheWorld) {
  std::vector<int> sizes{2, 4, 8, 16};
  std::vector<std::vector<uint64_t>> counts;
  for (int n : sizes) {
    double seconds = 0;
    counts.push_back(start_up_requests(n, seconds));
    const auto& c = counts.back();
    std::printf("world size %2d: rank 0 %3llu store requests, rank 1 %llu, rank %d %llu; "
                "every rank created after %.3f s\n",
                n, (unsigned long long)c[0], (unsigned long long)c[1], n - 1,
                (unsigned long long)c[size_t(n - 1)], seconds);
  }
  const uint64_t other = counts[0][1];
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int r = 1; r < sizes[i]; ++r) {
      EXPECT_EQ(counts[i][size_t(r)], other) << "world size " << sizes[i] << ", rank " << r;
    }
  }
  // Rank 0: a fixed part and (size - 1) reads per allgather round.
  const uint64_t per_rank = counts[1][0] - counts[0][0];  // 2 more ranks
  ASSERT_EQ(per_rank % 2, 0u);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(counts[i][0], counts[0][0] + per_rank / 2 * uint64_t(sizes[i] - 2))
        << "world size " << sizes[i];
  }
}

}  // namespace
}  // namespace gradwire
