// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Issue 17, item 3 (Note [world generations] in src/bootstrap/tcp_store.cpp):
// every rank destroys its world communicator and creates it again, N times
// in a row with no pause, as torch's destroy_process_group +
// init_process_group do; each world must come up and reduce correctly, and
// the process must not gain threads or file descriptors per world.
//   recreate_world N
#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"

namespace {
int count_entries(const char* dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace gradwire;
  const int n = argc > 1 ? std::atoi(argv[1]) : 10;
  int rank = -1, fds_after_first = 0, threads_after_first = 0;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto comm = Communicator::create();
      rank = comm->rank();
      std::vector<int64_t> v(1000, rank + 1);
      comm->allreduce(v.data(), v.data(), v.size(), DataType::Int64, ReduceOp::Sum).wait();
      const int64_t want = int64_t(comm->size()) * (comm->size() + 1) / 2;
      if (v[0] != want || v[999] != want) {
        std::fprintf(stderr, "[rank %d] world %d: FAIL: allreduce gave %lld, want %lld\n", rank, i,
                     (long long)v[0], (long long)want);
        return 1;
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "[rank %d] world %d: FAIL: %s\n", rank, i, e.what());
      return 1;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int fds = count_entries("/proc/self/fd"), threads = count_entries("/proc/self/task");
    if (i == 0) fds_after_first = fds, threads_after_first = threads;
    std::fprintf(stderr, "[rank %d] world %d up and reduced in %.2f s (%d fds, %d threads)\n", rank,
                 i, s, fds, threads);
  }
  const int fds = count_entries("/proc/self/fd"), threads = count_entries("/proc/self/task");
  // A little slack: libraries (shm, the store) may keep a handle or two.
  if (fds > fds_after_first + 4 || threads > threads_after_first + 2) {
    std::fprintf(stderr, "[rank %d] FAIL: %d worlds left %d fds and %d threads (after the first: "
                 "%d and %d)\n", rank, n, fds, threads, fds_after_first, threads_after_first);
    return 1;
  }
  std::fprintf(stderr, "[rank %d] ok: %d worlds\n", rank, n);
  return 0;
}
