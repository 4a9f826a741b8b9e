// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A consumer of the installed gradwire::torch (the libtorch adapter): builds
// a DDP module type and a 1-bit optimizer type against the installed headers
// and library. Nothing is launched: linking and loading is the check.
#include <gradwire/torch/distributed_data_parallel.h>
#include <gradwire/torch/optim.h>

#include <cstdio>
#include <type_traits>

int main() {
  static_assert(std::is_base_of_v<torch::optim::Optimizer, gradwire::torch::OneBitAdam>);
  std::printf("gradwire::torch consumer: built and loaded\n");
  return 0;
}
