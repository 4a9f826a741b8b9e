// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Launching under Slurm without Slurm (Note [launching under Slurm] in
// src/bootstrap/slurm.cpp): the store's port, srun's
// variables read strictly by Rendezvous::from_environment(), and the check
// that every rank is of one job (Note [same job]). tests/slurm runs the
// real thing.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/slurm.h"
#include "bootstrap/store.h"
#include "gradwire/error.h"
#include "gradwire/options.h"
#include "gradwire/rendezvous.h"
#include "test_util.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;
using Names = std::vector<std::string>;

// `f` must throw InvalidArgument whose message holds every needle.
template <typename F>
void expect_invalid(F&& f, const Names& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << needles.front();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "'" << n << "' not in: " << e.what();
    }
  }
}

// ---- the store's port ----

TEST(SlurmStorePort, EvenInItsRangeAndStepsOfAJobNeverCollide) {
  for (uint64_t job : {0ull, 1ull, 42ull, 4294967295ull}) {
    std::set<uint16_t> ports;
    for (uint64_t step = 0; step < 200; ++step) {
      const uint16_t p = slurm_store_port(job, step);
      EXPECT_GE(p, kSlurmPortBase);
      EXPECT_LT(p, kSlurmPortBase + 2 * kSlurmPortSlots);
      EXPECT_LT(p, 32768) << "inside Linux's ephemeral range";
      EXPECT_EQ(p % 2, 0);
      ports.insert(p);
    }
    EXPECT_EQ(ports.size(), 200u) << "two steps of job " << job << " share a port";
    // Slurm's batch, interactive and extern steps have ids near 2^32.
    EXPECT_NE(slurm_store_port(job, 4294967290ull), slurm_store_port(job, 4294967291ull));
  }
  EXPECT_EQ(slurm_store_port(77, 3), slurm_store_port(77, 3));
  EXPECT_NE(slurm_store_port(77, 0), slurm_store_port(78, 0));
}

// ---- srun's variables ----

class SlurmEnvironment : public ::testing::Test {
 protected:
  gwtest::ScopedEnv env_{{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                          "GRADWIRE_STORE_DIR", "OMPI_COMM_WORLD_SIZE", "GRADWIRE_STORE_PORT",
                          "GRADWIRE_STORE_BIND", "GRADWIRE_JOB_SECRET", "TORCHELASTIC_RUN_ID",
                          "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_PROCID",
                          "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NODEID",
                          "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_STEP_NUM_NODES",
                          "SLURM_JOB_NUM_NODES", "SLURMD_NODENAME", "SLURM_HET_SIZE"}};

  // Task `rank` of a 3-task step on node[01-02], as srun sets it, and
  // nothing else.
  void srun_task(int rank) {
    env_.clear();
    env_.set({{"SLURM_JOB_ID", "4242"},
              {"SLURM_STEP_ID", "5"},
              {"SLURM_STEPID", "5"},
              {"SLURM_PROCID", std::to_string(rank)},
              {"SLURM_NTASKS", "3"},
              {"SLURM_STEP_NUM_TASKS", "3"},
              {"SLURM_LOCALID", std::to_string(rank % 2)},
              {"SLURM_NODEID", std::to_string(rank / 2)},
              {"SLURM_STEP_NODELIST", "node[01-02]"},
              {"SLURM_JOB_NODELIST", "node[01-02]"},
              {"SLURM_STEP_NUM_NODES", "2"},
              {"SLURM_JOB_NUM_NODES", "2"},
              {"SLURMD_NODENAME", rank / 2 == 0 ? "node01" : "node02"}});
  }
  void expect_invalid(const Names& needles) {
    bootstrap::expect_invalid([] { Rendezvous::from_environment(); }, needles);
  }
};

TEST_F(SlurmEnvironment, ReadsAnSrunTask) {
  srun_task(1);
  const Rendezvous r = Rendezvous::from_environment();
  EXPECT_EQ(r.kind, Rendezvous::Kind::TcpStore);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.size, 3);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.host, "node01");
  EXPECT_EQ(r.port, slurm_store_port(4242, 5));
  EXPECT_EQ(r.job, "Slurm job 4242 step 5");
  EXPECT_TRUE(r.secret.empty());
  const std::string secret(32, 's');
  env_.set({{"GRADWIRE_STORE_PORT", "29999"}, {"GRADWIRE_JOB_SECRET", secret}});
  const Rendezvous r2 = Rendezvous::from_environment();
  EXPECT_EQ(r2.port, 29999);
  EXPECT_EQ(r2.secret, secret);
  // Without the step's list, the job's.
  env_.unset({"SLURM_STEP_NODELIST"});
  env_.set({{"SLURM_JOB_NODELIST", "gpu-a[7-8]"}});
  EXPECT_EQ(Rendezvous::from_environment().host, "gpu-a7");
  EXPECT_EQ(Rendezvous::from_slurm().host, "gpu-a7");
}

// Note [launcher order]: launchers started inside a job win over SLURM_*.
TEST_F(SlurmEnvironment, MpirunAndTorchrunInsideAJobWin) {
  srun_task(1);
  env_.set({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", "29400"}});
  Rendezvous r = Rendezvous::from_environment();
  EXPECT_EQ(r.kind, Rendezvous::Kind::TcpStore);
  EXPECT_EQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.size, 1);
  EXPECT_TRUE(r.job.empty());
  env_.set({{"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(Rendezvous::from_environment().kind, Rendezvous::Kind::Mpi);
  // A partial torchrun setting says that Slurm's variables were hidden.
  env_.unset({"OMPI_COMM_WORLD_SIZE", "RANK", "WORLD_SIZE", "MASTER_PORT"});
  expect_invalid({"WORLD_SIZE is not set", "MASTER_ADDR='127.0.0.1' is set", "under srun"});
}

TEST_F(SlurmEnvironment, MissingVariablesAreNamed) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"SLURM_PROCID", "SLURM_PROCID is not set"},
      {"SLURM_JOB_ID", "SLURM_JOB_ID is not set"},
  };
  for (const auto& [var, needle] : cases) {
    srun_task(1);
    env_.unset({var});
    expect_invalid({needle, "a task that srun started (SLURM_STEP_ID='5')", "srun"});
  }
  srun_task(1);
  env_.unset({"SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"});
  expect_invalid({"SLURM_STEP_NUM_TASKS is not set", "SLURM_NTASKS"});
  srun_task(1);
  env_.unset({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
  expect_invalid({"SLURM_JOB_NODELIST is not set", "SLURM_STEP_NODELIST"});
  // Either task count alone will do; SLURM_STEPID alone marks a step too.
  srun_task(2);
  env_.unset({"SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID"});
  EXPECT_EQ(Rendezvous::from_environment().size, 3);
}

TEST_F(SlurmEnvironment, MalformedVariablesAreNamed) {
  const std::vector<std::pair<std::map<std::string, std::string>, Names>> cases = {
      {{{"SLURM_PROCID", "abc"}}, {"SLURM_PROCID='abc'", "0..2"}},
      {{{"SLURM_PROCID", "3"}}, {"SLURM_PROCID='3'", "0..2"}},
      {{{"SLURM_PROCID", " 1"}}, {"SLURM_PROCID=' 1'"}},
      {{{"SLURM_STEP_ID", "x"}}, {"SLURM_STEP_ID='x'"}},
      {{{"SLURM_JOB_ID", "-1"}}, {"SLURM_JOB_ID='-1'"}},
      {{{"SLURM_JOB_ID", "99999999999"}}, {"SLURM_JOB_ID='99999999999'"}},
      {{{"SLURM_LOCALID", "9"}}, {"SLURM_LOCALID='9'"}},
      {{{"SLURM_STEP_NUM_TASKS", "0"}}, {"SLURM_STEP_NUM_TASKS='0'"}},
      {{{"SLURM_STEP_NODELIST", "node[01-02"}},
       {"SLURM_STEP_NODELIST='node[01-02'", "never closed"}},
      {{{"SLURM_STEP_NODELIST", "node[01-03]"}}, {"names 3 nodes but SLURM_STEP_NUM_NODES=2"}},
      {{{"SLURM_STEP_NODELIST", "n[1-4]"}, {"SLURM_STEP_NUM_NODES", "4"}},
       {"names 4 nodes for a step of 3 tasks"}},
      {{{"GRADWIRE_STORE_PORT", "0"}}, {"GRADWIRE_STORE_PORT='0'"}},
      {{{"GRADWIRE_JOB_SECRET", "short"}}, {"GRADWIRE_JOB_SECRET"}},
      {{{"GRADWIRE_STORE_BIND", ""}}, {"GRADWIRE_STORE_BIND=''"}},
  };
  for (const auto& [vars, needles] : cases) {
    srun_task(1);
    env_.set(vars);
    expect_invalid(needles);
  }
}

TEST_F(SlurmEnvironment, TaskCountsThatDisagreeAreRefused) {
  srun_task(1);
  env_.set({{"SLURM_NTASKS", "2"}});
  expect_invalid({"SLURM_STEP_NUM_TASKS=3 but SLURM_NTASKS=2"});
  srun_task(1);
  env_.set({{"SLURM_HET_SIZE", "2"}});
  expect_invalid({"SLURM_HET_SIZE='2'", "heterogeneous"});
}

// Note [launching under Slurm]: the batch script has SLURM_PROCID=0 and the
// job's SLURM_NTASKS, but no SLURM_STEP_ID; it is not a task.
TEST_F(SlurmEnvironment, ABatchScriptIsNotATask) {
  env_.set({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"},
            {"SLURM_NTASKS", "4"}, {"SLURM_JOB_NODELIST", "vm"}});
  expect_invalid({"SLURM_NTASKS=4 is set but SLURM_STEP_ID is not", "batch script",
                  "job 7", "srun"});
  env_.set({{"SLURM_NTASKS", "1"}});
  EXPECT_EQ(Rendezvous::from_environment().kind, Rendezvous::Kind::Single);
  env_.unset({"SLURM_NTASKS", "SLURM_PROCID"});  // an salloc shell without -n
  EXPECT_EQ(Rendezvous::from_environment().kind, Rendezvous::Kind::Single);
  env_.set({{"SLURM_NTASKS", "four"}});
  expect_invalid({"SLURM_NTASKS='four'"});
}

TEST_F(SlurmEnvironment, OneTaskInAJobOfSeveralNodesIsRefused) {
  srun_task(0);
  env_.set({{"SLURM_NTASKS", "1"}, {"SLURM_STEP_NUM_TASKS", "1"},
            {"SLURM_STEP_NODELIST", "node01"}, {"SLURM_STEP_NUM_NODES", "1"}});
  expect_invalid({"SLURM_STEP_NUM_TASKS=1", "SLURM_JOB_NUM_NODES=2", "srun"});
  env_.set({{"SLURM_JOB_NUM_NODES", "1"}});
  const Rendezvous r = Rendezvous::from_environment();
  EXPECT_EQ(r.kind, Rendezvous::Kind::TcpStore);
  EXPECT_EQ(r.size, 1);
}

TEST_F(SlurmEnvironment, RankZeroMustBeOnTheFirstNode) {
  srun_task(0);
  env_.set({{"SLURMD_NODENAME", "node02"}});
  expect_invalid({"SLURM_PROCID=0 runs on node node02", "first node node01", "distribution"});
  srun_task(0);
  env_.unset({"SLURMD_NODENAME"});
  env_.set({{"SLURM_NODEID", "1"}});
  expect_invalid({"SLURM_NODEID=1", "first node node01"});
}

TEST_F(SlurmEnvironment, AStoreOnLoopbackOutOfOtherNodesReachIsRefused) {
  srun_task(0);
  env_.set({{"SLURM_STEP_NODELIST", "localhost,node02"}, {"SLURMD_NODENAME", "localhost"}});
  expect_invalid({"localhost", "loopback", "GRADWIRE_STORE_BIND"});
  env_.set({{"GRADWIRE_STORE_BIND", "127.0.0.1"}});
  EXPECT_EQ(Rendezvous::from_environment().bind_host, "127.0.0.1");
}

// A one-task step end to end: rank 0 serves the store and checks the job.
TEST_F(SlurmEnvironment, AOneTaskStepBootstraps) {
  srun_task(0);
  const uint16_t port = gwtest::free_port();
  env_.set({{"SLURM_NTASKS", "1"}, {"SLURM_STEP_NUM_TASKS", "1"},
            {"SLURM_STEP_NODELIST", "localhost"}, {"SLURM_STEP_NUM_NODES", "1"},
            {"SLURM_JOB_NUM_NODES", "1"},
            {"SLURMD_NODENAME", "localhost"}, {"GRADWIRE_STORE_PORT", std::to_string(port)}});
  Options options;
  options.timeout = 2s;
  auto b = bootstrap::from_environment(options);
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->allgather("x", Deadline::after(1s)), Names{"x"});
}

// ---- Note [same job] ----

// Ranks as threads through make(), each with its own job and size.
std::vector<std::string> join(const std::vector<std::pair<std::string, int>>& ranks) {
  const uint16_t port = gwtest::free_port();
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        Rendezvous r = Rendezvous::tcp("127.0.0.1", port, int(i), ranks[i].second);
        r.job = ranks[i].first;
        Options options;
        options.timeout = 1s;
        auto b = make(r, options);
        b->allgather("x", Deadline::after(1s));
      } catch (const Error& e) {
        errors[i] = std::string(ErrorCode::Timeout == e.code() ? "Timeout: " : "") + e.what();
      }
    });
    if (i == 0) std::this_thread::sleep_for(50ms);  // rank 0 serves first
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(SameJob, RanksOfOneJobJoin) {
  const std::string job = "Slurm job 1 step 0";
  EXPECT_EQ(join({{job, 3}, {job, 3}, {job, 3}}), (Names{"", "", ""}));
}

TEST(SameJob, ARankOfAnotherJobIsRefusedWithoutTouchingTheStore) {
  const auto e = join({{"Slurm job 1 step 0", 2}, {"Slurm job 9 step 3", 2}});
  EXPECT_NE(e[1].find("rank 1 of Slurm job 9 step 3 reached the store"), std::string::npos)
      << e[1];
  EXPECT_NE(e[1].find("rank 0 there is of Slurm job 1 step 0"), std::string::npos) << e[1];
  EXPECT_NE(e[1].find("GRADWIRE_STORE_PORT"), std::string::npos) << e[1];
  // Rank 0 never saw it: it waits for its own rank 1 (here, in vain).
  EXPECT_NE(e[0].find("Timeout: "), std::string::npos) << e[0];
  EXPECT_NE(e[0].find("rank 1's job identity"), std::string::npos) << e[0];
}

TEST(SameJob, RanksThatCountAnotherSizeAreRefusedOnBothSides) {
  const auto e = join({{"Slurm job 1 step 0", 2}, {"Slurm job 1 step 0", 3}});
  EXPECT_NE(e[1].find("rank 1 counts 3 ranks in Slurm job 1 step 0 but rank 0 counts 2"),
            std::string::npos)
      << e[1];
  EXPECT_NE(e[0].find("rank 1 counts 3 ranks in Slurm job 1 step 0 but rank 0 counts 2"),
            std::string::npos)
      << e[0];
  EXPECT_EQ(e[0].find("Timeout"), std::string::npos) << e[0];
}

}  // namespace
}  // namespace gradwire::bootstrap
