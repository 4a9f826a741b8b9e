// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Reducer's stall inspector (Note [stall inspector]) across real ranks:
// rank 1 holds back the gradient of Bucket 1 for HOLD seconds.
//
//   stall_test warn HOLD      the step completes; the ranks log the stall
//                             report (checked by expect_output.sh)
//   stall_test shutdown HOLD  GRADWIRE_STALL_SHUTDOWN_S < HOLD: every rank's
//                             finalize() fails with the stall message
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gradwire/gradwire.h"
#include "gradwire/reducer.h"

using namespace gradwire;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: stall_test warn|shutdown HOLD_SECONDS\n");
    return 2;
  }
  const std::string mode = argv[1];
  const double hold = std::atof(argv[2]);
  auto comm = Communicator::create();
  const int rank = comm->rank();
  const std::vector<GradientInfo> gs = {{1000, DataType::Float32, gradwire::Device::host(), "a"},
                                        {1000, DataType::Float32, gradwire::Device::host(), "b"},
                                        {1000, DataType::Float32, gradwire::Device::host(), "c"}};
  ReducerOptions opt;
  opt.caps = BucketCaps{4000, 4000};  // one gradient per Bucket: c, b, a
  Reducer reducer(*comm, gs, opt);
  std::vector<std::vector<float>> grads(3, std::vector<float>(1000, float(rank + 1)));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    reducer.mark_ready(2, grads[2].data());
    if (rank == 1) std::this_thread::sleep_for(std::chrono::duration<double>(hold));
    reducer.mark_ready(1, grads[1].data());
    reducer.mark_ready(0, grads[0].data());
    reducer.finalize();
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string m = e.what();
    const bool ok = mode == "shutdown" && m.find("stall: ") != std::string::npos &&
                    m.find("bucket 1 (1000 x float32: b)") != std::string::npos;
    std::fprintf(stderr, "[rank %d] stall %s: %s after %.2f s: %s\n", rank, mode.c_str(),
                 ok ? "ok" : "FAIL", s, m.c_str());
    return ok ? 0 : 1;
  }
  const bool ok = mode == "warn" && grads[1][0] == float(comm->size() + 1) / 2;
  std::fprintf(stderr, "[rank %d] stall %s: %s: step completed\n", rank, mode.c_str(),
               ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
