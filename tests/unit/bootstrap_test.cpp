// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Bootstrap over a store (ranks are threads, each with its own store
// client), the single-process world, and from_environment()'s validation.
// The MPI path is tested under mpirun in tests/ranks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/store.h"
#include "gradwire/error.h"
#include "gradwire/options.h"
#include "gradwire/rendezvous.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;

using gwtest::free_port;

std::unique_ptr<Bootstrap> tcp_rank(uint16_t port, int rank, int size) {
  auto store = make_tcp_store("127.0.0.1", port, rank == 0, Deadline::after(2s));
  return make_store_bootstrap(std::move(store), rank, size, rank);
}

// Deterministic blob of rank `r` in round `n`; sizes differ per rank and
// round, including empty ones.
std::string blob(int n, int r) {
  static const size_t sizes[] = {0, 1, 17, 4096, 70000};
  size_t len = sizes[(n + r) % 5] + (n % 5 == 0 ? 0 : size_t(r));
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) s[i] = char(i * 7 + n * 13 + r);
  return s;
}

std::string fmt_round(int n, int o) {
  return "round " + std::to_string(n) + ": wrong blob of rank " + std::to_string(o) + "; ";
}

// Runs `ranks` threads; returns one error string per rank ("" = passed).
template <typename MakeRank>
std::vector<std::string> run_ranks(int size, const std::vector<int>& ranks, MakeRank make,
                                   int rounds, std::chrono::milliseconds timeout) {
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      try {
        auto b = make(r);
        if (b->rank() != r || b->size() != size) errors[r] = "wrong rank/size; ";
        for (int n = 0; n < rounds; ++n) {
          auto all = b->allgather(blob(n, r), Deadline::after(timeout));
          if (int(all.size()) != size) {
            errors[r] += "wrong result count; ";
            continue;
          }
          for (int o = 0; o < size; ++o) {
            if (all[o] != blob(n, o)) errors[r] += fmt_round(n, o);
          }
        }
      } catch (const std::exception& e) {
        errors[r] += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

class StoreBootstrapWorld : public ::testing::TestWithParam<int> {};

TEST_P(StoreBootstrapWorld, AllgatherOverTcpStore) {
  int size = GetParam();
  uint16_t port = free_port();
  std::vector<int> all(size);
  for (int r = 0; r < size; ++r) all[r] = r;
  auto errors = run_ranks(size, all, [&](int r) { return tcp_rank(port, r, size); }, 6, 2s);
  for (int r = 0; r < size; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(StoreBootstrapWorld, AllgatherOverFileStore) {
  int size = GetParam();
  char tmpl[] = "/tmp/gradwire-bootstrap-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::vector<int> all(size);
  for (int r = 0; r < size; ++r) all[r] = r;
  auto errors = run_ranks(
      size, all, [&](int r) { return make_store_bootstrap(make_file_store(dir), r, size, -1); },
      6, 2s);
  for (int r = 0; r < size; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Sizes, StoreBootstrapWorld, ::testing::Values(1, 2, 3, 4));

// Note [an allgather in two store requests]: over the TCP store, a rank
// other than 0 makes 2 requests a round, rank 0 one per rank.
TEST(StoreBootstrap, AllgatherRequestsPerRank) {
  const int size = 4, rounds = 3;
  const uint16_t port = free_port();
  std::vector<uint64_t> requests(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto b = tcp_rank(port, r, size);
      const uint64_t before = store_requests_on_this_thread();
      for (int n = 0; n < rounds; ++n) b->allgather(blob(n, r), Deadline::after(5s));
      requests[size_t(r)] = store_requests_on_this_thread() - before;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(requests[0], uint64_t(size * rounds));
  for (int r = 1; r < size; ++r) EXPECT_EQ(requests[size_t(r)], uint64_t(2 * rounds)) << r;
}

// Values too large to combine in one (over 8 MiB in all): every rank reads
// every key, as before.
TEST(StoreBootstrap, AllgatherOfLargeValues) {
  auto store = make_in_process_store();
  const int size = 3;
  std::vector<std::vector<std::string>> got(size);
  std::vector<std::thread> threads;
  auto value = [](int r) { return std::string(size_t(3) << 20, char('a' + r)); };
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto b = make_store_bootstrap(share_in_process_store(store), r, size, -1);
      got[size_t(r)] = b->allgather(value(r), Deadline::after(10s));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    ASSERT_EQ(got[size_t(r)].size(), size_t(size));
    for (int o = 0; o < size; ++o) EXPECT_TRUE(got[size_t(r)][size_t(o)] == value(o)) << r << o;
  }
}

TEST(StoreBootstrap, TimeoutNamesEveryMissingRank) {
  uint16_t port = free_port();
  auto t0 = std::chrono::steady_clock::now();
  // Ranks 2 and 3 of 4 never start.
  auto errors = run_ranks(4, {0, 1}, [&](int r) { return tcp_rank(port, r, 4); }, 1, 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  for (int r : {0, 1}) {
    EXPECT_NE(errors[r].find("Timeout"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("ranks 2, 3 did not arrive"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << errors[r];
  }
}

TEST(StoreBootstrap, TimeoutNamesAMissingRankInTheMiddle) {
  char tmpl[] = "/tmp/gradwire-bootstrap-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto errors = run_ranks(
      3, {0, 2}, [&](int r) { return make_store_bootstrap(make_file_store(dir), r, 3, -1); }, 1,
      200ms);
  for (int r : {0, 2}) {
    EXPECT_NE(errors[r].find("rank 1 did not arrive"), std::string::npos) << errors[r];
  }
  std::filesystem::remove_all(dir);
}

TEST(StoreBootstrap, DescribeAndArgumentChecks) {
  uint16_t port = free_port();
  auto b = tcp_rank(port, 0, 1);
  EXPECT_EQ(b->describe(), "torchrun store 127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(b->local_rank(), 0);
  EXPECT_EQ(b->allgather("solo", Deadline::after(1s)), std::vector<std::string>{"solo"});
  auto store = make_tcp_store("127.0.0.1", port, false, Deadline::after(1s));
  EXPECT_THROW(make_store_bootstrap(std::move(store), 2, 2, -1), Error);
}

TEST(SingleProcess, IsAWorldOfOne) {
  auto b = single_process();
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->allgather("x", Deadline::after(1s)), std::vector<std::string>{"x"});
}

// ---- from_environment ----

class FromEnvironment : public ::testing::Test {
 protected:
  void SetUp() override { options_.timeout = 1s; }

  void set(std::map<std::string, std::string> vars) { env_.set(vars); }

  // Every launcher's variables, Slurm's included (the tests may run in a
  // Slurm job), cleared for each test and put back after it.
  gwtest::ScopedEnv env_{{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                          "GRADWIRE_STORE_DIR", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "GRADWIRE_STORE_PORT",
                          "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_STEP_ID",
                          "SLURM_STEPID", "SLURM_NTASKS"}};

  // A complete, valid torchrun environment for a world of one.
  void torchrun_world_of_one(uint16_t port) {
    set({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
         {"MASTER_PORT", std::to_string(port)}});
  }

  // from_environment must fail with InvalidArgument mentioning each of
  // `needles` (the variable's name, its value, ...).
  void expect_invalid(const std::vector<std::string>& needles) {
    try {
      from_environment(options_);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      for (const auto& n : needles) {
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "'" << n << "' not in: " << e.what();
      }
    }
  }

  Options options_;
};

TEST_F(FromEnvironment, NothingSetIsASingleProcess) {
  auto b = from_environment(options_);
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->describe(), "single process");
}

TEST_F(FromEnvironment, TorchrunWorldOfOne) {
  uint16_t port = free_port();
  torchrun_world_of_one(port);
  auto b = from_environment(options_);
  EXPECT_EQ(b->describe(), "torchrun store 127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->local_rank(), 0);
  EXPECT_EQ(b->allgather("a", Deadline::after(1s)), std::vector<std::string>{"a"});
}

TEST_F(FromEnvironment, UnderTorchrunTheStoreTakesTheNextOddPort) {
  // torchrun's agent serves its own store on MASTER_PORT, and its
  // connections to it take even ports (Note [store port under torchrun]).
  uint16_t port = free_port();
  torchrun_world_of_one(port);
  set({{"TORCHELASTIC_RUN_ID", "job-1"}});
  auto b = from_environment(options_);
  const int store_port = port + (port % 2 == 0 ? 1 : 2);
  EXPECT_EQ(store_port % 2, 1);
  EXPECT_EQ(b->describe(), "torchrun store 127.0.0.1:" + std::to_string(store_port));
  b.reset();
  set({{"MASTER_PORT", "65535"}});
  expect_invalid({"MASTER_PORT=65535", "GRADWIRE_STORE_PORT"});
}

TEST_F(FromEnvironment, StorePortOverride) {
  uint16_t port = free_port(), store_port = free_port();
  torchrun_world_of_one(port);
  set({{"GRADWIRE_STORE_PORT", std::to_string(store_port)}, {"TORCHELASTIC_RUN_ID", "job-1"}});
  auto b = from_environment(options_);
  EXPECT_EQ(b->describe(), "torchrun store 127.0.0.1:" + std::to_string(store_port));
  set({{"GRADWIRE_STORE_PORT", "http"}});
  expect_invalid({"GRADWIRE_STORE_PORT", "http"});
}

TEST_F(FromEnvironment, LocalRankIsOptional) {
  uint16_t port = free_port();
  torchrun_world_of_one(port);
  ::unsetenv("LOCAL_RANK");
  EXPECT_EQ(from_environment(options_)->local_rank(), -1);
}

TEST_F(FromEnvironment, ClientUsesOptionsTimeout) {
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
       {"MASTER_PORT", std::to_string(free_port())}});
  options_.timeout = 200ms;
  auto t0 = std::chrono::steady_clock::now();
  try {
    from_environment(options_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 800ms);
}

TEST_F(FromEnvironment, FileStore) {
  char tmpl[] = "/tmp/gradwire-env-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  set({{"GRADWIRE_STORE_DIR", tmpl}, {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  auto b = from_environment(options_);
  EXPECT_EQ(b->describe(), std::string("file store ") + tmpl);
  EXPECT_EQ(b->local_rank(), -1);
  std::filesystem::remove_all(tmpl);
}

TEST_F(FromEnvironment, MalformedRank) {
  torchrun_world_of_one(free_port());
  set({{"WORLD_SIZE", "4"}, {"RANK", "abc"}});
  expect_invalid({"RANK='abc' is not an integer", "0 <= RANK < WORLD_SIZE=4"});
  for (const char* bad : {"4", "-1", " 1", "1 ", "+1", "0x1", "1.0", "", "99999999999"}) {
    set({{"RANK", bad}});
    expect_invalid({std::string("RANK='") + bad + "'", "WORLD_SIZE=4"});
  }
}

TEST_F(FromEnvironment, MalformedWorldSize) {
  torchrun_world_of_one(free_port());
  for (const char* bad : {"0", "-2", "two", ""}) {
    set({{"WORLD_SIZE", bad}});
    expect_invalid({std::string("WORLD_SIZE='") + bad + "'", "WORLD_SIZE >= 1"});
  }
}

TEST_F(FromEnvironment, MalformedLocalRank) {
  torchrun_world_of_one(free_port());
  for (const char* bad : {"1", "-1", "x"}) {
    set({{"LOCAL_RANK", bad}});
    expect_invalid({std::string("LOCAL_RANK='") + bad + "'"});
  }
}

TEST_F(FromEnvironment, MalformedMasterPortAndAddr) {
  torchrun_world_of_one(free_port());
  for (const char* bad : {"0", "65536", "-1", "29500x", "port", ""}) {
    set({{"MASTER_PORT", bad}});
    expect_invalid({std::string("MASTER_PORT='") + bad + "'", "1..65535"});
  }
  torchrun_world_of_one(free_port());
  set({{"MASTER_ADDR", ""}});
  expect_invalid({"MASTER_ADDR=''", "empty"});
  set({{"MASTER_ADDR", "host name"}});
  expect_invalid({"MASTER_ADDR='host name'"});
}

TEST_F(FromEnvironment, MissingVariablesAreNamed) {
  const std::vector<std::string> torchrun = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  for (const auto& missing : torchrun) {
    torchrun_world_of_one(free_port());
    ::unsetenv(missing.c_str());
    expect_invalid({missing + " is not set"});
  }
  // Any single torchrun variable selects the TCP store and names the rest.
  for (const auto& only : torchrun) {
    for (const auto& v : torchrun) ::unsetenv(v.c_str());
    set({{only, only == "MASTER_ADDR" ? "127.0.0.1" : "1"}});
    expect_invalid({"is not set", only + "="});
  }
}

TEST_F(FromEnvironment, FileStoreNeedsRankAndWorldSize) {
  set({{"GRADWIRE_STORE_DIR", "/tmp/gradwire-env-test-unused"}, {"WORLD_SIZE", "2"}});
  expect_invalid({"RANK is not set", "GRADWIRE_STORE_DIR"});
  set({{"RANK", "2"}});
  expect_invalid({"RANK='2'", "WORLD_SIZE=2"});
  set({{"GRADWIRE_STORE_DIR", ""}, {"RANK", "0"}});
  expect_invalid({"GRADWIRE_STORE_DIR=''"});
}

}  // namespace
}  // namespace gradwire::bootstrap
