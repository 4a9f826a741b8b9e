// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gwlaunch: a fork launcher in the torchrun convention, for tests and
// benchmarks without mpirun. Starts N copies of a program with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free
// MASTER_PORT; waits for all of them with a deadline; kills every rank that
// is still running when the deadline passes or (after a grace period) when
// another rank failed. Exit status: 0 if every rank exited 0.
// Every rank gets the job secret GRADWIRE_JOB_SECRET (README "Running
// securely"): gwlaunch's own if it has one, else 32 random bytes (OpenSSL
// RAND_bytes, hex) generated for this job.
//
//   gwlaunch -n 4 [--timeout 120] [--skip R] [--ignore R] -- prog args...
//
// --skip R         never start rank R (tests of a peer that does not show up)
// --ignore R       rank R's exit status does not count (it kills itself on purpose)
// --bad-secret R   rank R gets a different secret than the others (a test hook)
// --no-secret R    rank R gets no secret at all (a test hook)
#include <arpa/inet.h>
#include <dirent.h>
#include <openssl/rand.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("gwlaunch: cannot find a free port");
    std::exit(2);
  }
  close(fd);
  return ntohs(a.sin_port);
}

// Note [stale shm regions]: libfabric's shm provider names its shared-memory
// regions "<pid>:<domain>:<endpoint>" in /dev/shm and removes them in a
// signal handler, which SIGKILL (and a process leaving a stuck engine
// behind) never runs. Left over, they fill the tmpfs (16 MiB each) and a
// later process that gets the same pid can fail fi_enable with EBUSY. A
// launcher knows when its rank is gone, so it removes them, as a job
// scheduler's epilogue would.
void remove_shm_regions(pid_t pid) {
  const std::string prefix = std::to_string(pid) + ":";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        unlink(("/dev/shm/" + std::string(e->d_name)).c_str());
    }
    closedir(d);
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: gwlaunch -n N [--timeout S] [--skip R] [--ignore R] [--bad-secret R] "
               "[--no-secret R] -- program [args...]\n");
  std::exit(2);
}

std::string random_secret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) {
    std::fprintf(stderr, "gwlaunch: OpenSSL RAND_bytes failed; cannot generate a job secret\n");
    std::exit(2);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char b : raw) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  double timeout_s = 600;
  std::set<int> skip, ignore, bad_secret, no_secret;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "-n") n = std::atoi(next());
    else if (a == "--timeout") timeout_s = std::atof(next());
    else if (a == "--skip") skip.insert(std::atoi(next()));
    else if (a == "--ignore") ignore.insert(std::atoi(next()));
    else if (a == "--bad-secret") bad_secret.insert(std::atoi(next()));
    else if (a == "--no-secret") no_secret.insert(std::atoi(next()));
    else if (a == "--") { ++i; break; }
    else usage();
  }
  if (n < 1 || i >= argc) usage();

  const std::string port = std::to_string(free_port());
  const char* given = std::getenv("GRADWIRE_JOB_SECRET");
  const std::string secret = given ? given : random_secret();
  const std::string other_secret = random_secret();
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    if (skip.count(r)) continue;
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("gwlaunch: fork");
      return 2;
    }
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      if (no_secret.count(r)) {
        unsetenv("GRADWIRE_JOB_SECRET");
      } else {
        setenv("GRADWIRE_JOB_SECRET", (bad_secret.count(r) ? other_secret : secret).c_str(), 1);
      }
      execvp(argv[i], argv + i);
      std::fprintf(stderr, "gwlaunch: cannot run %s: %s\n", argv[i], std::strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
  }

  using Clock = std::chrono::steady_clock;
  auto secs = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const auto deadline = Clock::now() + secs(timeout_s);
  auto kill_deadline = Clock::time_point::max();
  int failures = 0, running = 0;
  for (pid_t p : pids) running += p > 0;
  while (running > 0) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      remove_shm_regions(p);
      int r = 0;
      while (r < n && pids[r] != p) ++r;
      --running;
      if (r < n) pids[r] = -1;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && r < n && !ignore.count(r)) {
        ++failures;
        if (WIFSIGNALED(status)) {
          std::fprintf(stderr, "gwlaunch: rank %d killed by signal %d\n", r, WTERMSIG(status));
        } else {
          std::fprintf(stderr, "gwlaunch: rank %d exited with status %d\n", r, WEXITSTATUS(status));
        }
        // The others get a grace period to report their own errors.
        if (kill_deadline == Clock::time_point::max())
          kill_deadline = Clock::now() + secs(timeout_s / 2);
      }
      continue;
    }
    const auto now = Clock::now();
    if (now > deadline || now > kill_deadline) {
      std::fprintf(stderr, "gwlaunch: %s; killing the remaining ranks:",
                   now > deadline ? "timed out" : "a rank failed");
      for (int r = 0; r < n; ++r) {
        if (pids[r] > 0) {
          std::fprintf(stderr, " %d", r);
          kill(pids[r], SIGKILL);
        }
      }
      std::fprintf(stderr, "\n");
      for (pid_t q; (q = waitpid(-1, nullptr, 0)) > 0;) remove_shm_regions(q);
      return now > deadline ? 124 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return failures ? 1 : 0;
}
