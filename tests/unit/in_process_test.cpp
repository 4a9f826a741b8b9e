// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// N ranks as threads of one process through an explicit Rendezvous over an
// InProcessStore (Note [explicit rendezvous] in
// src/bootstrap/environment.cpp): collectives at world sizes 1-4 on both
// providers, split, a rank that never joins, a rank that leaves mid-job,
// and rendezvous values that cannot work. Each test runs in its own process
// (gtest_discover_tests), so one test's failure flag never reaches another.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/gradwire.h"

namespace gradwire {
namespace {

using namespace std::chrono_literals;

Options options_for(const std::string& provider, std::chrono::milliseconds timeout = 60s) {
  Options o;
  o.transport.provider = provider;
  o.timeout = timeout;
  return o;
}

// Runs body(rank, comm) on `n` threads, each a rank of one job; rethrows the
// first failure on the calling thread.
void run_ranks(int n, const Options& options,
               const std::function<void(int, Communicator&)>& body) {
  auto store = make_in_process_store();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(options, Rendezvous::in_process(store, r, n));
        body(r, *comm);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

class InProcess : public ::testing::TestWithParam<std::string> {};

TEST_P(InProcess, CollectivesAtEveryWorldSize) {
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE("world size " + std::to_string(n));
    run_ranks(n, options_for(GetParam()), [n](int rank, Communicator& comm) {
      ASSERT_EQ(comm.rank(), rank);
      ASSERT_EQ(comm.size(), n);
      const size_t count = 1003;  // not divisible by 2, 3 or 4
      // allreduce, in place and out of place
      std::vector<int64_t> a(count), out(count);
      for (size_t i = 0; i < count; ++i) a[i] = int64_t(i) * (rank + 1);
      comm.allreduce(a.data(), out.data(), count, DataType::Int64, ReduceOp::Sum).wait();
      comm.allreduce(a.data(), a.data(), count, DataType::Int64, ReduceOp::Sum).wait();
      const int64_t factor = int64_t(n) * (n + 1) / 2;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], int64_t(i) * factor) << i;
        ASSERT_EQ(a[i], int64_t(i) * factor) << i;
      }
      // reduce_scatter then allgather of the shards
      std::vector<float> full(count, float(rank + 1));
      std::vector<float> shard(shard_count(count, n, rank));
      comm.reduce_scatter(full.data(), shard.data(), count, DataType::Float32, ReduceOp::Max)
          .wait();
      for (float v : shard) ASSERT_EQ(v, float(n));
      std::vector<float> gathered(count);
      comm.allgather(shard.data(), gathered.data(), count, DataType::Float32).wait();
      for (float v : gathered) ASSERT_EQ(v, float(n));
      // broadcast from the last rank, alltoall, barrier
      std::vector<int32_t> b(7, rank == n - 1 ? 42 : -1);
      comm.broadcast(b.data(), b.data(), b.size(), DataType::Int32, n - 1).wait();
      for (int32_t v : b) ASSERT_EQ(v, 42);
      std::vector<int32_t> send(size_t(n) * 3), recv(size_t(n) * 3);
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < 3; ++k) send[size_t(j) * 3 + k] = rank * 100 + j * 10 + k;
      comm.alltoall(send.data(), recv.data(), 3, DataType::Int32).wait();
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < 3; ++k) ASSERT_EQ(recv[size_t(i) * 3 + k], i * 100 + rank * 10 + k);
      comm.barrier().wait();
      // a sub-communicator of the even ranks
      std::vector<int> evens;
      for (int r = 0; r < n; r += 2) evens.push_back(r);
      auto sub = comm.split(evens);
      ASSERT_EQ(sub != nullptr, rank % 2 == 0);
      if (sub) {
        int32_t one = 1;
        sub->allreduce(&one, &one, 1, DataType::Int32, ReduceOp::Sum).wait();
        ASSERT_EQ(one, int32_t(evens.size()));
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, InProcess, ::testing::Values("shm", "tcp;ofi_rxm", "net"),
                         [](const auto& info) {
                           return info.param == "tcp;ofi_rxm" ? std::string("tcp_ofi_rxm")
                                                              : std::string(info.param);
                         });

TEST(InProcessFaults, ARankThatNeverJoinsIsNamedAtTheDeadline) {
  auto store = make_in_process_store();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Communicator::create(options_for("shm", 1500ms), Rendezvous::in_process(store, 0, 2));
    FAIL() << "a world of 2 was created without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

// On tcp;ofi_rxm: libfabric 1.17's shm provider crashes (SIGSEGV in a spin
// lock of the peer's region) when it sends to an endpoint of the same
// process that was closed, which only thread-ranks can do; separate
// processes get PeerLost or Timeout there (faults.* ctest entries).
TEST(InProcessFaults, ARankThatLeavesMidJobIsNamedOnTheOther) {
  run_ranks(2, options_for("tcp;ofi_rxm", 3s), [](int rank, Communicator& comm) {
    comm.barrier().wait();
    if (rank == 1) return;  // leaves: its communicator is destroyed
    std::this_thread::sleep_for(200ms);
    std::vector<float> x(1 << 16, 1.0f);
    try {
      comm.allreduce(x.data(), x.data(), x.size(), DataType::Float32, ReduceOp::Sum).wait();
      ADD_FAILURE() << "an allreduce completed without rank 1";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::Timeout || e.code() == ErrorCode::PeerLost) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  });
}

TEST(InProcessFaults, RendezvousValuesThatCannotWorkNameTheField) {
  auto expect_invalid = [](const Rendezvous& r, const std::string& field) {
    try {
      Communicator::create(options_for("shm", 2s), r);
      ADD_FAILURE() << "accepted a rendezvous with a bad " << field;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto store = make_in_process_store();
  expect_invalid(Rendezvous::in_process(store, 2, 2), "Rendezvous::rank=2");
  expect_invalid(Rendezvous::in_process(store, 0, 0), "Rendezvous::size=0");
  expect_invalid(Rendezvous::in_process(nullptr, 0, 2), "Rendezvous::store is null");
  expect_invalid(Rendezvous::tcp("", 29400, 0, 2), "Rendezvous::host");
  expect_invalid(Rendezvous::tcp("127.0.0.1", 0, 0, 2), "Rendezvous::port");
  expect_invalid(Rendezvous::tcp("127.0.0.1", 29400, 0, 2, "short"), "secret");
  expect_invalid(Rendezvous::file("", 0, 2), "Rendezvous::dir");
}

}  // namespace
}  // namespace gradwire
