// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// SIGTERM ends a rank promptly with the default status (killed by SIGTERM,
// 143 to a shell), idle, inside a collective and while exiting (Note
// [foreign signal handlers]). Each case starts 2 sigterm_rank processes on
// a file store, SIGTERMs rank 1 when it announces the moment, then rank 0;
// both must die of SIGTERM within 10 s. Before the fix, PSM's handler made
// every SIGTERMed rank exit(1), and some hung for ever while exiting.
//
//   gradwire_sigterm_test <path of sigterm_rank> [--gtest_* ...]
//   GW_SIGTERM_ROUNDS (default 50): rounds per scenario
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

namespace {

std::string g_rank_program;

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;  // the child's stdout
};

Child start(int rank, const std::string& scenario, const std::string& store) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    setenv("GRADWIRE_STORE_DIR", store.c_str(), 1);
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("GRADWIRE_TIMEOUT_S", "60", 1);
    execl(g_rank_program.c_str(), g_rank_program.c_str(), scenario.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

// The next line the child prints ("" at end of file).
std::string next_line(const Child& c) {
  char buf[256];
  if (std::fgets(buf, sizeof(buf), c.out) == nullptr) return "";
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Waits up to `limit` for the child; SIGKILLs it after that. Returns its
// wait status, or -1 when it had to be killed (a hang).
int reap(const Child& c, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) return status;
    if (std::chrono::steady_clock::now() > end) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string describe(int status) {
  if (status == -1) return "still running 10 s after SIGTERM (hung; killed)";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// A killed rank cannot unlink its libfabric shm region (gw_<pid>_...).
void remove_shm_of(pid_t pid) {
  const std::string prefix = "gw_" + std::to_string(pid) + "_";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path(), ec);
  }
}

int rounds() {
  const char* v = std::getenv("GW_SIGTERM_ROUNDS");
  return v ? std::atoi(v) : 50;
}

void run_scenario(const std::string& scenario, const char* moment) {
  std::mt19937 rng(12345);
  for (int round = 0; round < rounds(); ++round) {
    char tmpl[] = "/tmp/gw_sigterm_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string store = tmpl;
    Child r0 = start(0, scenario, store);
    Child r1 = start(1, scenario, store);
    ASSERT_EQ(next_line(r0), "ready") << scenario << " round " << round;
    ASSERT_EQ(next_line(r1), "ready") << scenario << " round " << round;
    if (std::string(moment) != "ready") {
      ASSERT_EQ(next_line(r1), moment) << scenario << " round " << round;
    }
    // Somewhere in the moment: at once, or a little later.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    kill(r1.pid, SIGTERM);
    const int s1 = reap(r1, std::chrono::seconds(10));
    kill(r0.pid, SIGTERM);
    const int s0 = reap(r0, std::chrono::seconds(10));
    std::fclose(r0.out);
    std::fclose(r1.out);
    std::filesystem::remove_all(store);
    remove_shm_of(r0.pid);
    remove_shm_of(r1.pid);
    ASSERT_TRUE(s1 != -1 && WIFSIGNALED(s1) && WTERMSIG(s1) == SIGTERM)
        << scenario << " round " << round << ": rank 1 (SIGTERMed " << moment << ") "
        << describe(s1) << "; expected to be killed by SIGTERM (status 143)";
    ASSERT_TRUE(s0 != -1 && WIFSIGNALED(s0) && WTERMSIG(s0) == SIGTERM)
        << scenario << " round " << round << ": rank 0 (SIGTERMed after rank 1) " << describe(s0)
        << "; expected to be killed by SIGTERM (status 143)";
  }
}

TEST(Sigterm, Idle) { run_scenario("idle", "ready"); }
TEST(Sigterm, InACollective) { run_scenario("collective", "in-collective"); }
TEST(Sigterm, WhileExiting) { run_scenario("exiting", "exiting"); }

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: gradwire_sigterm_test <sigterm_rank> [--gtest_*]\n");
    return 2;
  }
  g_rank_program = argv[1];
  signal(SIGPIPE, SIG_IGN);
  return RUN_ALL_TESTS();
}
