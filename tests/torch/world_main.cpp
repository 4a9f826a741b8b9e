// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The gtest main of the libtorch multi-rank tests: creates the world
// (failing clearly if it cannot), lets only rank 0 narrate, runs every test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <memory>

#include "tests/torch/world.h"

namespace gwtorchtest {
namespace {
std::unique_ptr<gradwire::Communicator> g_world;
}
gradwire::Communicator& world() { return *g_world; }
}  // namespace gwtorchtest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Ranks share the cores; intra-op threads would only contend.
  ::torch::set_num_threads(1);
  try {
    gwtorchtest::g_world = gradwire::Communicator::create();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot create the world communicator: %s\n", e.what());
    return 1;
  }
  if (gwtorchtest::world().rank() != 0) GTEST_FLAG_SET(brief, true);
  const int rc = RUN_ALL_TESTS();
  gwtorchtest::g_world.reset();
  return rc;
}
