// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// One rank of sigterm_test (Note [foreign signal handlers]): creates the
// world communicator from the environment (file store), runs one allreduce,
// then, by scenario, waits to be SIGTERMed
//   idle        asleep after the allreduce
//   collective  rank 1 inside an allreduce rank 0 never joins
//   exiting     rank 1 inside its exit handlers (returned from main; an
//               atexit handler sleeps, the communicator is destroyed after it)
// Each step is announced on stdout ("ready", "in-collective", "exiting") for
// the driver, which sends the signal then.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"

namespace {

std::unique_ptr<gradwire::Communicator> g_comm;  // destroyed by exit()

void say(const char* what) {
  std::printf("%s\n", what);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario != "idle" && scenario != "collective" && scenario != "exiting") {
    std::fprintf(stderr, "usage: sigterm_rank idle|collective|exiting\n");
    return 2;
  }
  try {
    g_comm = gradwire::Communicator::create();
    std::vector<float> x(1024, 1.0f);
    g_comm->allreduce(x.data(), x.data(), x.size(), gradwire::DataType::Float32,
                      gradwire::ReduceOp::Sum)
        .wait();
    say("ready");
    if (scenario == "idle" || g_comm->rank() == 0) {
      for (;;) pause();
    }
    if (scenario == "collective") {
      auto w = g_comm->allreduce(x.data(), x.data(), x.size(), gradwire::DataType::Float32,
                                 gradwire::ReduceOp::Sum);
      say("in-collective");
      w.wait();
      std::fprintf(stderr, "sigterm_rank: the allreduce rank 0 never joined completed\n");
      return 3;
    }
    // exiting: runs after main returns, before g_comm is destroyed.
    std::atexit([] {
      say("exiting");
      usleep(300 * 1000);
    });
    return 0;
  } catch (const gradwire::Error& e) {
    std::fprintf(stderr, "sigterm_rank: %s\n", e.what());
    return 4;
  }
}
