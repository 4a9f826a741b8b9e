// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Never hang silently (issue 8): failure scenarios for the watchdog, the
// flight recorder and debug-mode mismatch detection; launched by gwlaunch
// through check_fr.sh (see CMakeLists). Each rank exits 0 only if it saw the
// error it should, naming what it should, within twice the deadline.
//
//   watchdog_test sigkill    rank 1 SIGKILLs itself during allreduces: the
//                            others fail with PeerLost or Timeout
//   watchdog_test sigstop    rank 1 SIGSTOPs itself: the others fail with
//                            Timeout naming rank 1 and saying that ranks 0
//                            and 2 reached the collective and rank 1 did
//                            not (Note [reach report]), then SIGKILL it
//   watchdog_test sigstop-store  the same with rank 0, which serves the
//                            store: the others' errors say, at most 2 s
//                            after their deadline, that which ranks reached
//                            the collective is unknown (the store did not
//                            answer in time, or failed once rank 0 was
//                            killed)
//   watchdog_test sigkill-store  rank 0, which serves the store, SIGKILLs
//                            itself: the others fail with PeerLost or
//                            Timeout, and every "likely cause" names rank 0,
//                            never a live rank (issue 17 item 7)
//   watchdog_test linger     rank 1 SIGSTOPs itself; rank 0 (the store's
//                            server) exits within 3 s of its error, not
//                            after the store's 5 s linger (issue 17)
//   watchdog_test idle       rank 1 skips an allreduce and stays idle: the
//                            others time out; rank 1 hears of it through the
//                            store, dumps, and its next collective fails
//                            with Aborted naming the reporting rank; all
//                            say that rank 1 did not reach allreduce #2
//   watchdog_test extra|op|count|dtype
//                            rank 0 calls an extra allreduce / rank 1 calls
//                            broadcast instead of allreduce / counts differ /
//                            dtypes differ: with GRADWIRE_DEBUG=DETAIL every
//                            rank fails with Mismatch naming the field
//   watchdog_test abort-policy  GRADWIRE_ASYNC_ERROR_HANDLING=abort: rank 0
//                            skips; both processes abort (SIGABRT) after
//                            dumping
// GW_TEST_SHARED_BUFFERS=1 runs them on the direct path,
// GW_TEST_DEVICE_BUFFERS=1 on CUDA buffers through the staged path.
#include <signal.h>
#include <unistd.h>

#if GW_TEST_CUDA
#include <cuda_runtime.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/gradwire.h"

using namespace gradwire;
using Clock = std::chrono::steady_clock;

namespace {

double timeout_s() {
  const char* v = std::getenv("GRADWIRE_TIMEOUT_S");
  return v ? std::atof(v) : 300.0;
}
std::string fr_dir() {
  const char* v = std::getenv("GRADWIRE_FR_DIR");
  return v ? v : "/tmp/gradwire-fr";
}

int judge(int rank, const std::string& mode, const Error* e, std::vector<ErrorCode> allowed,
          std::vector<std::string> needles, Clock::time_point start) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (!e) {
    std::fprintf(stderr, "[rank %d] %s: FAIL: no error was raised\n", rank, mode.c_str());
    return 1;
  }
  bool code_ok = false;
  for (auto c : allowed) code_ok |= e->code() == c;
  bool text_ok = true;
  for (auto& n : needles) {
    if (std::string(e->what()).find(n) == std::string::npos) {
      std::fprintf(stderr, "[rank %d] %s: missing '%s'\n", rank, mode.c_str(), n.c_str());
      text_ok = false;
    }
  }
  const bool fast = elapsed <= 2 * timeout_s() + 2;
  const bool ok = code_ok && text_ok && fast;
  std::fprintf(stderr, "[rank %d] %s: %s after %.2f s: %s\n", rank, mode.c_str(),
               ok ? "ok" : "FAIL", elapsed, e->what());
  return ok ? 0 : 1;
}

// Note [reach report]: "allreduce #N: reached by ranks 0, 2; not reached by
// rank 1 (last seen starting #N-1)", for the collective the error is about.
std::string reach_sentence(const Error& e) {
  std::smatch m;
  const std::string what = e.what();
  if (!std::regex_search(what, m, std::regex("allreduce #([0-9]+)"))) return "allreduce #?";
  const int n = std::stoi(m[1]);
  return "allreduce #" + std::to_string(n) + ": reached by ranks 0, 2; not reached by rank 1 " +
         "(last seen starting #" + std::to_string(n - 1) + ")";
}

// True if every "likely cause: rank N" in the error names `rank`.
bool blames_only(const Error& e, int rank) {
  const std::string what = e.what();
  const std::regex cause("likely cause: rank ([0-9]+)");
  bool ok = true;
  for (auto it = std::sregex_iterator(what.begin(), what.end(), cause);
       it != std::sregex_iterator(); ++it) {
    if (std::stoi((*it)[1]) != rank) {
      std::fprintf(stderr, "FAIL: the error blames live rank %s: %s\n", (*it)[1].str().c_str(),
                   what.c_str());
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: watchdog_test sigkill|sigstop|sigstop-store|sigkill-store|linger|idle|extra|op|count|dtype\n");
    return 2;
  }
  const std::string mode = argv[1];
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create();
  } catch (const Error& e) {
    std::fprintf(stderr, "start-up failed: %s\n", e.what());
    return 1;
  }
  const int rank = comm->rank();
  std::vector<float> buf(4096, 1.0f);
  float* data = buf.data();
  // GW_TEST_SHARED_BUFFERS=1: the same faults on the direct path (buffers
  // from allocate_shared; waits on peers' flags instead of messages).
  gradwire::SharedBuffer shared;
  if (const char* v = std::getenv("GW_TEST_SHARED_BUFFERS"); v && std::string(v) == "1") {
    shared = comm->allocate_shared(buf.size() * sizeof(float));
    data = shared.as<float>();
    std::fill(data, data + buf.size(), 1.0f);
  }
  // GW_TEST_DEVICE_BUFFERS=1: the same faults on CUDA buffers, through the
  // staged path (GRADWIRE_DEVICE_PATH=staged, so the ranks can share one
  // GPU). Every rank skips, saying so, without a usable CUDA device.
  if (const char* v = std::getenv("GW_TEST_DEVICE_BUFFERS"); v && std::string(v) == "1") {
#if GW_TEST_CUDA
    int devices = 0;
    void* dev = nullptr;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
        cudaSetDevice(rank % devices) != cudaSuccess ||
        cudaMalloc(&dev, buf.size() * sizeof(float)) != cudaSuccess) {
      std::printf("SKIPPED: no CUDA device\n");
      return 0;
    }
    cudaMemcpy(dev, buf.data(), buf.size() * sizeof(float), cudaMemcpyHostToDevice);
    data = static_cast<float*>(dev);  // freed at exit
#else
    std::printf("SKIPPED: no CUDA device (built without CUDA)\n");
    return 0;
#endif
  }
  auto allreduce = [&](size_t n = 4096, DataType dt = DataType::Float32) {
    return comm->allreduce(data, data, n, dt, ReduceOp::Sum);
  };
  comm->barrier().wait();
  const auto t0 = Clock::now();

  if (mode == "sigkill" || mode == "sigstop" || mode == "sigstop-store" ||
      mode == "sigkill-store") {
    const bool store_stops = mode == "sigstop-store" || mode == "sigkill-store";
    const bool killed = mode == "sigkill" || mode == "sigkill-store";
    const int victim = store_stops ? 0 : 1, killer = store_stops ? 1 : 0;
    if (rank == victim) {
      for (int i = 0; i < 20; ++i) allreduce().wait();
      if (killed) raise(SIGKILL);
      std::ofstream(fr_dir() + "/stopped.pid") << getpid() << "\n";
      // Idle a while first, as a rank that hangs outside a collective
      // would: its watchdog publishes its progress once a second (Note
      // [reach report]); one frozen sooner would show an earlier collective.
      // Rank 0 stops 0.5 s before the others' deadline: their reading of
      // the store then hangs, and only the 2 s bound ends it.
      std::this_thread::sleep_for(std::chrono::milliseconds(store_stops ? 2500 : 2000));
      raise(SIGSTOP);
      return 1;  // never: the killer kills it
    }
    int code = 1;
    try {
      for (int i = 0; i < 100000; ++i) allreduce().wait();
      code = judge(rank, mode, nullptr, {}, {}, t0);
    } catch (const Error& e) {
      if (mode == "sigkill") {
        code = judge(rank, mode, &e, {ErrorCode::PeerLost, ErrorCode::Timeout},
                     {"allreduce #"}, t0);
      } else if (mode == "sigkill-store") {
        code = judge(rank, mode, &e, {ErrorCode::PeerLost, ErrorCode::Timeout},
                     {"allreduce #", "likely cause: rank 0 "}, t0);
        if (!blames_only(e, 0)) code = 1;
      } else if (store_stops) {
        code = judge(rank, mode, &e, {ErrorCode::Timeout},
                     {"allreduce #", "(which ranks reached it is unknown: "}, t0);
      } else {
        code = judge(rank, mode, &e, {ErrorCode::Timeout}, {"rank 1", reach_sentence(e)}, t0);
      }
    }
    if (!killed && rank == killer) {
      int pid = 0;
      std::ifstream(fr_dir() + "/stopped.pid") >> pid;
      if (pid > 0) kill(pid, SIGKILL);
    }
    return code;
  }

  // Note [a failed job does not linger]: rank 1 stops (SIGSTOP) and keeps
  // its store connection; ranks 0 and 2 time out. Rank 0, which serves the
  // store, must exit within kFailedJobLinger (1.5 s) of its error, not the
  // store's 5 s linger. Rank 2 measures it (steady_clock is CLOCK_MONOTONIC:
  // one clock for every process of the host), then kills rank 1.
  if (mode == "linger") {
    if (rank == 1) {
      std::ofstream(fr_dir() + "/stopped.pid") << getpid() << "\n";
      raise(SIGSTOP);
      return 1;  // never: rank 2 kills it
    }
    int code = 1;
    try {
      for (int i = 0; i < 100000; ++i) allreduce().wait();
      code = judge(rank, mode, nullptr, {}, {}, t0);
    } catch (const Error& e) {
      code = judge(rank, mode, &e, {ErrorCode::Timeout}, {"rank 1"}, t0);
    }
    const std::string exit_file = fr_dir() + "/rank0.exit";
    if (rank == 0) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          Clock::now().time_since_epoch()).count();
      std::ofstream(exit_file + ".tmp") << getpid() << " " << ns << "\n";
      std::rename((exit_file + ".tmp").c_str(), exit_file.c_str());
      return code;  // the store server lingers in the static destructors
    }
    comm.reset();  // rank 2's own store connections go: only rank 1 holds one
    long long pid = 0, ns = 0;
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (!(std::ifstream(exit_file) >> pid >> ns) && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto gone = [&] {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      if (!std::getline(stat, line)) return true;
      const size_t paren = line.rfind(')');
      return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'Z';
    };
    while (pid > 0 && !gone() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double lingered =
        (std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
             .count() - ns) / 1e9;
    const bool ok = pid > 0 && gone() && lingered <= 3.0;
    std::fprintf(stderr, "[rank 2] linger: %s: rank 0 exited %.2f s after its error\n",
                 ok ? "ok" : "FAIL", lingered);
    int stopped = 0;
    std::ifstream(fr_dir() + "/stopped.pid") >> stopped;
    if (stopped > 0) kill(stopped, SIGKILL);
    return ok ? code : 1;
  }

  if (mode == "idle") {
    if (rank == 1) {
      // Skips allreduce #2 and waits long enough to hear of the others'
      // timeout through the store (Note [watchdog]).
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s() + 2.5));
      try {
        allreduce().wait();
        return judge(rank, mode, nullptr, {}, {}, t0);
      } catch (const Error& e) {
        return judge(rank, mode, &e, {ErrorCode::Aborted},
                     {"reported a failure", "allreduce #2", reach_sentence(e)}, t0);
      }
    }
    try {
      allreduce().wait();
      return judge(rank, mode, nullptr, {}, {}, t0);
    } catch (const Error& e) {
      return judge(rank, mode, &e, {ErrorCode::Timeout}, {"allreduce #2", "rank 1", reach_sentence(e)},
                   t0);
    }
  }

  if (mode == "abort-policy") {
    // GRADWIRE_ASYNC_ERROR_HANDLING=abort: rank 1 times out waiting for
    // rank 0 and aborts its process; rank 0 (which serves the store, so it
    // must be the one that hears) learns of it and aborts too. Returning
    // at all is a failure (gwlaunch --ignore's both ranks; the check on the
    // dumps needs both).
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s() + 4));
      std::fprintf(stderr, "[rank 0] abort-policy: FAIL: still alive\n");
      return 0;
    }
    try {
      allreduce().wait();
    } catch (const Error& e) {
      std::fprintf(stderr, "[rank 1] abort-policy: FAIL: raised instead of aborting: %s\n", e.what());
    }
    return 0;
  }

  // Mismatch scenarios (run with GRADWIRE_DEBUG=DETAIL).
  std::vector<std::string> needles = {"ranks called different collectives"};
  try {
    if (mode == "extra") {
      if (rank == 0) allreduce().wait();
      comm->barrier().wait();
      needles.push_back("differs in op");
    } else if (mode == "op") {
      if (rank == 1) comm->broadcast(buf.data(), buf.data(), 4096, DataType::Float32, 0).wait();
      else allreduce().wait();
      needles.push_back("broadcast #2");
    } else if (mode == "count") {
      allreduce(1000 * size_t(rank + 1)).wait();
      needles.push_back("differs in count");
    } else if (mode == "dtype") {
      allreduce(1000, rank == 1 ? DataType::Float64 : DataType::Float32).wait();
      needles.push_back("differs in dtype");
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
    return judge(rank, mode, nullptr, {}, {}, t0);
  } catch (const Error& e) {
    // Within a second, not at the deadline.
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (elapsed > 1.0) {
      std::fprintf(stderr, "[rank %d] %s: FAIL: took %.2f s\n", rank, mode.c_str(), elapsed);
      return 1;
    }
    return judge(rank, mode, &e, {ErrorCode::Mismatch}, needles, t0);
  }
}
