// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A one-core memory bandwidth probe, so collective figures can be read as
// a fraction of what the machine can physically move: a large memcpy and
// an `a += b` loop over float32 (gradwire's own vectorised kernel).
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "perf_common.h"

namespace gwperf {

MemoryBandwidth probe_memory_bandwidth(size_t bytes) {
  std::vector<std::byte> a(bytes, std::byte{1}), b(bytes, std::byte{2});
  MemoryBandwidth m;
  m.memcpy_gbs = double(bytes) / best_seconds(5, [&] { std::memcpy(a.data(), b.data(), bytes); }) / 1e9;
  m.add_gbs = double(bytes) / best_seconds(5, [&] {
    gradwire::kernels::reduce(a.data(), a.data(), b.data(), bytes / 4, gradwire::DataType::Float32,
                              gradwire::ReduceOp::Sum);
  }) / 1e9;
  return m;
}

}  // namespace gwperf
