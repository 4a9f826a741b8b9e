// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Shared pieces of gradwire-perf: arguments, buffers, the fill pattern and
// its expected results, and the row printer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"

namespace gwperf {

// The fastest of `reps` runs of fn, in seconds (the probes and kernel
// benchmarks report best-of: the least disturbed run).
template <typename Fn>
double best_seconds(int reps, Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct Args {
  size_t min_bytes = 8, max_bytes = size_t(64) << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  bool check = true, blocking = true;
  gradwire::DataType dtype = gradwire::DataType::Float32;
  gradwire::ReduceOp op = gradwire::ReduceOp::Sum;
  std::string coll = "allreduce";
  std::string compare;  // "" or "mpi"
  std::string json;     // output file, or ""
  // "private": std::vector memory; "shared": Communicator::allocate_shared
  // (the direct path between the ranks of one host; Open MPI runs on the
  // same buffers); "cuda": cudaMalloc on the rank's GPU (local rank modulo
  // the device count), i.e. the NCCL or staged path (GRADWIRE_DEVICE_PATH).
  std::string buffers = "private";
  // The memory bandwidth probe's buffer size (two of them); 0 skips it, so
  // that a peak RSS shows the collective's own memory.
  int probe_mib = 256;
};
Args parse_args(int argc, char** argv);

// The buffers of one collective at one size, laid out as gradwire's API
// wants them (reduce_scatter/allgather shard `count` with shard_count).
struct Buffers {
  size_t count = 0;       // elements of the full buffer
  size_t send_count = 0;  // elements this rank sends
  size_t recv_count = 0;  // elements this rank receives
  std::span<std::byte> send, recv;
  std::vector<std::byte> send_owned, recv_owned;           // --buffers private
  gradwire::SharedBuffer send_shared, recv_shared;         // --buffers shared
  // --buffers cuda: the device buffers; send/recv above are their host
  // mirrors (filled, then uploaded; downloaded for the check).
  std::shared_ptr<void> send_dev, recv_dev;
  void* send_ptr() const { return send_dev ? send_dev.get() : send.data(); }
  void* recv_ptr() const { return recv_dev ? recv_dev.get() : recv.data(); }
};
Buffers make_buffers(const Args& a, size_t bytes, gradwire::Communicator& comm);

// Small integers every dtype holds exactly: element i of rank r is (r+i)%7,
// so sums over a few ranks are exact in every dtype. Returns the number of
// received elements that differ from what the collective should produce.
int64_t count_wrong(const Args& a, const Buffers& b, int rank, int world);

double bus_factor(const std::string& coll, int world);
// sendrecv and pingpong: point-to-point, not collectives.
inline bool is_p2p(const std::string& coll) { return coll == "sendrecv" || coll == "pingpong"; }
// Args::coll decided once, before the timed loop: comparing the name with
// each operation's at every call was ~6 % of an 8-byte broadcast's time
// (a perf profile, issue 18), on both sides of a comparison.
enum class Coll { Allreduce, ReduceScatter, Allgather, Broadcast, Barrier, Alltoall, Sendrecv, Pingpong };
inline Coll coll_kind(const std::string& coll) {
  if (coll == "allreduce") return Coll::Allreduce;
  if (coll == "reduce_scatter") return Coll::ReduceScatter;
  if (coll == "allgather") return Coll::Allgather;
  if (coll == "broadcast") return Coll::Broadcast;
  if (coll == "barrier") return Coll::Barrier;
  if (coll == "sendrecv") return Coll::Sendrecv;
  if (coll == "pingpong") return Coll::Pingpong;
  return Coll::Alltoall;
}

// --buffers cuda (perf_cuda.cpp): picks this rank's GPU and puts b's send
// and receive buffers there (uploading the send pattern); clears the device
// receive buffer; brings it back into b.recv. Without CUDA: exit with usage.
void to_device(Buffers& b, int rank);
void clear_device_recv(Buffers& b);
void download_recv(Buffers& b);

struct Row {
  std::string impl;  // "gradwire" or "mpi"
  size_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = 0;
  bool available = true;  // false: the implementation cannot run this case
};

// Measured single-core memory bandwidth of this machine, GB/s.
struct MemoryBandwidth {
  double memcpy_gbs = 0;     // bytes copied per second
  double add_gbs = 0;        // a += b, bytes of a per second
};
MemoryBandwidth probe_memory_bandwidth(size_t bytes);

// MPI's collective on the same buffers (only under mpirun).
bool mpi_available();
// The round trip of a cache line between the first two ranks of this
// rank's host, in ns (Note [which state the VM is in]); -1 without mpirun
// or a second rank on the host.
double cacheline_round_trip_ns(int rank);
Row run_mpi(const Args& a, Buffers& b, int rank, int world);

}  // namespace gwperf
