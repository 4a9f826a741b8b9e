// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Open MPI's collectives on the same buffers, in the same process and run
// (`--compare mpi`): the fairest comparison this machine allows.
// The C API only (Open MPI would otherwise pull in its C++ bindings).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

#include "perf_common.h"

namespace gwperf {

using gradwire::DataType;
using gradwire::ReduceOp;

bool mpi_available() {
  int init = 0;
  MPI_Initialized(&init);
  return init && std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

// Note [which state the VM is in]: on the 2-core VM the host places the two
// vCPUs on one core complex of its EPYC or on two, and moves them within
// minutes. A cache line's round trip between them (50-140 ns against
// 340-440) tells which; copies between ranks ran up to 5x apart in the two
// states (docs/benchmark-history.md, "copies into lines a peer reads"). So
// every run prints it, and figures say which state they came from.
double cacheline_round_trip_ns(int rank) {
  if (!mpi_available()) return -1;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int me = 0, size = 0;
  MPI_Comm_rank(node, &me);
  MPI_Comm_size(node, &size);
  double ns = -1;
  if (size >= 2) {
    void* base = nullptr;
    MPI_Win win;
    MPI_Win_allocate_shared(me == 0 ? 64 : 0, 1, MPI_INFO_NULL, node, &base, &win);
    MPI_Aint bytes = 0;
    int unit = 0;
    MPI_Win_shared_query(win, 0, &bytes, &unit, &base);
    auto* line = static_cast<std::atomic<uint64_t>*>(base);
    if (me == 0) line->store(0);
    MPI_Barrier(node);
    constexpr uint64_t kRounds = 20000;
    if (me <= 1) {
      const auto t0 = std::chrono::steady_clock::now();
      for (uint64_t i = 0; i < kRounds; ++i) {
        const uint64_t wait = 2 * i + uint64_t(me), next = wait + 1;
        // Yield now and then: with more ranks than cores the peer may need
        // this core to answer.
        for (int polls = 1; line->load(std::memory_order_acquire) != wait; ++polls) {
          if (polls % 1024 == 0) sched_yield();
        }
        line->store(next, std::memory_order_release);
      }
      ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
           double(kRounds);
    }
    MPI_Barrier(node);
    MPI_Win_free(&win);
  }
  MPI_Bcast(&ns, 1, MPI_DOUBLE, 0, node);
  MPI_Comm_free(&node);
  return ns;
}

namespace {

bool mpi_type(DataType dt, MPI_Datatype* out) {
  switch (dt) {
    case DataType::Float32: *out = MPI_FLOAT; return true;
    case DataType::Float64: *out = MPI_DOUBLE; return true;
    case DataType::Int32: *out = MPI_INT32_T; return true;
    case DataType::Int64: *out = MPI_INT64_T; return true;
    case DataType::UInt8: *out = MPI_UINT8_T; return true;
    default: return false;  // Open MPI 4.1 has no 16-bit float types
  }
}

bool mpi_op(ReduceOp op, MPI_Op* out) {
  switch (op) {
    case ReduceOp::Sum: *out = MPI_SUM; return true;
    case ReduceOp::Min: *out = MPI_MIN; return true;
    case ReduceOp::Max: *out = MPI_MAX; return true;
    case ReduceOp::Prod: *out = MPI_PROD; return true;
    default: return false;  // no average in MPI
  }
}

}  // namespace

Row run_mpi(const Args& a, Buffers& b, int rank, int n) {
  Row row;
  row.impl = "mpi";
  MPI_Datatype type;
  MPI_Op op = MPI_SUM;
  const bool reduces = a.coll == "allreduce" || a.coll == "reduce_scatter";
  if (!mpi_type(a.dtype, &type) || (reduces && !mpi_op(a.op, &op))) {
    row.available = false;
    return row;
  }
  std::vector<int> counts(n), displs(n);
  for (int r = 0; r < n; ++r) {
    counts[r] = int(gradwire::shard_count(b.count, n, r));
    displs[r] = int(gradwire::shard_offset(b.count, n, r));
  }
  const Coll kind = coll_kind(a.coll);
  auto launch = [&] {
    if (kind == Coll::Allreduce) {
      MPI_Allreduce(b.send.data(), b.recv.data(), int(b.count), type, op, MPI_COMM_WORLD);
    } else if (kind == Coll::ReduceScatter) {
      MPI_Reduce_scatter(b.send.data(), b.recv.data(), counts.data(), type, op, MPI_COMM_WORLD);
    } else if (kind == Coll::Allgather) {
      MPI_Allgatherv(b.send.data(), int(b.send_count), type, b.recv.data(), counts.data(),
                     displs.data(), type, MPI_COMM_WORLD);
    } else if (kind == Coll::Barrier) {
      MPI_Barrier(MPI_COMM_WORLD);
    } else if (kind == Coll::Broadcast) {
      // In place on the receive buffer, seeded from the root's send buffer.
      if (rank == 0) std::copy(b.send.begin(), b.send.end(), b.recv.begin());
      MPI_Bcast(b.recv.data(), int(b.count), type, 0, MPI_COMM_WORLD);
    } else if (kind == Coll::Sendrecv) {
      MPI_Sendrecv(b.send.data(), int(b.count), type, (rank + 1) % n, 0, b.recv.data(),
                   int(b.count), type, (rank + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (kind == Coll::Pingpong) {
      if (rank == 0 && n > 1) {
        MPI_Send(b.send.data(), int(b.count), type, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(b.recv.data(), int(b.count), type, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(b.recv.data(), int(b.count), type, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(b.send.data(), int(b.count), type, 0, 0, MPI_COMM_WORLD);
      }
    } else {
      MPI_Alltoall(b.send.data(), int(b.send_count / n), type, b.recv.data(), int(b.recv_count / n),
                   type, MPI_COMM_WORLD);
    }
  };
  if (a.check) {
    std::fill(b.recv.begin(), b.recv.end(), std::byte{0});
    launch();
    row.wrong = count_wrong(a, b, rank, n);
  }
  for (int i = 0; i < a.warmup; ++i) launch();
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.iters; ++i) launch();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
              a.iters;
  if (a.coll == "pingpong") us /= 2;  // one way
  double slowest = 0;
  MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int64_t wrong = 0;
  MPI_Allreduce(&row.wrong, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  row.time_us = slowest;
  row.wrong = wrong;
  return row;
}

}  // namespace gwperf
