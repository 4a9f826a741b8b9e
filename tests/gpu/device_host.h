// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A device::Host (Note [device host] in src/device/backend.h) built from a
// Communicator's public API, so that GPU tests can drive the device layer's
// Router and backends directly (a group launch, a backend created before
// any collective) without reaching into the runtime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "device/backend.h"
#include "gradwire/communicator.h"
#include "gradwire/error.h"

namespace gwgpu {

// Every rank's blob, over `comm`'s public allgather (collective).
inline std::vector<std::string> allgather_blobs(gradwire::Communicator& comm,
                                                const std::string& mine) {
  using gradwire::DataType;
  const int n = comm.size();
  std::vector<int64_t> lengths(size_t(n), 0);
  int64_t my_len = int64_t(mine.size());
  comm.allgather(&my_len, lengths.data(), size_t(n), DataType::Int64).wait();
  const size_t max_len = size_t(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(max_len);
  std::vector<char> all(max_len * size_t(n));
  if (max_len > 0) comm.allgather(padded.data(), all.data(), all.size(), DataType::UInt8).wait();
  std::vector<std::string> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) out[size_t(r)].assign(all.data() + size_t(r) * max_len, size_t(lengths[size_t(r)]));
  return out;
}

// The Host a device Router of `comm` needs for the NCCL backend (which uses
// only the blob exchange); the staged backend's engine submission is not
// available this way and fails with Internal if used.
inline gradwire::device::Host host_of(gradwire::Communicator& comm) {
  gradwire::device::Host h;
  h.rank = comm.rank();
  h.size = comm.size();
  h.name = "world";
  h.options = comm.options();
  h.allgather_blobs = [&comm](const std::string& mine) { return allgather_blobs(comm, mine); };
  h.submit = [](const gradwire::CollectiveCall&, std::function<void(gradwire::collectives::Context&)>,
                const gradwire::CallLabel&) -> gradwire::Work {
    throw gradwire::Error(gradwire::ErrorCode::Internal,
                          "gwgpu::host_of: the staged backend needs the runtime's engine");
  };
  return h;
}

}  // namespace gwgpu
