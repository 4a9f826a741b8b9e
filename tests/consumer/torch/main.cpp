// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A consumer of the installed gradwire::torch (the libtorch adapter): builds
// a DDP module type, a 1-bit optimizer type and the c10d backend against the
// installed headers and library. Nothing is launched: linking and loading is
// the check.
#include <gradwire/torch/distributed_data_parallel.h>
#include <gradwire/torch/optim.h>
#include <gradwire/torch/process_group.h>

#include <cstdio>
#include <type_traits>

int main() {
  static_assert(std::is_base_of_v<torch::optim::Optimizer, gradwire::torch::OneBitAdam>);
  static_assert(std::is_base_of_v<c10d::Backend, gradwire::torch::Backend>);
  // Taken, not called: the symbol must resolve in the installed library.
  volatile auto make = static_cast<c10::intrusive_ptr<c10d::ProcessGroup> (*)(
      c10::intrusive_ptr<gradwire::torch::Backend>, c10::intrusive_ptr<c10d::Store>)>(
      &gradwire::torch::make_process_group);
  (void)make;
  std::printf("gradwire::torch consumer: built and loaded\n");
  return 0;
}
