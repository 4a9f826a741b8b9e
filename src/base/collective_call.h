// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [one collective call]: a collective is described once, as a
// CollectiveCall value, and everything else derives from it: the argument
// checks (validate), the human description in errors and logs
// (describe), the flight recorder's record and the debug fingerprint the
// ranks compare, the routing between the device path, the direct path, the
// hierarchical allreduce and the transport algorithms (runtime/router in
// runtime/communicator.cpp), and what the device backends (NCCL, staged) and
// the direct handshake receive. Before, each public method described its
// call five times (an op string, a describe() string, a flight-recorder
// struct built positionally, an nccl::Collective and a DirectCall, with
// three enums spelling "AllReduce" and "Allreduce"); a new collective now
// adds one enumerator here and one routing case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gradwire/types.h"

namespace gradwire {

// The values are the flight recorder's dump and the fingerprint's wire
// encoding: append only.
enum class CollectiveOp : uint8_t {
  Allreduce,
  ReduceScatter,
  Allgather,
  Broadcast,
  Alltoall,
  Barrier,
  Other,  // gradwire's own exchanges (start-up, split, compression steps), "internal" in dumps
  Reduce,   // rooted (Note [rooted collectives] in collectives/rooted.cpp)
  Gather,
  Scatter,
};
constexpr size_t kCollectiveOps = 10;
// Each op's name in errors, logs and dumps, by its value.
inline constexpr std::string_view kCollectiveOpNames[kCollectiveOps] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall",
    "barrier",   "internal",       "reduce",    "gather",    "scatter"};
// "allreduce", "reduce_scatter", ..., "internal" for Other.
inline std::string_view to_string(CollectiveOp op) {
  return kCollectiveOpNames[size_t(op) < kCollectiveOps ? size_t(op) : kCollectiveOps - 1];
}

// One collective with the public API's meaning of every argument
// (gradwire/communicator.h): `count` is the whole buffer for allreduce,
// reduce_scatter, allgather, broadcast and reduce (ranks' shards by
// shard_count / shard_offset, also when uneven) and the per-rank block for
// alltoall, gather and scatter. `root` is the root of broadcast, reduce,
// gather and scatter.
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::Other;
  DataType dtype = DataType::UInt8;
  ReduceOp redop = ReduceOp::Sum;  // allreduce and reduce_scatter only
  int32_t root = -1;               // broadcast, reduce, gather, scatter
  uint64_t count = 0;
  const void* send = nullptr;
  void* recv = nullptr;

  static CollectiveCall allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                  ReduceOp op) {
    return {CollectiveOp::Allreduce, dtype, op, -1, count, send, recv};
  }
  static CollectiveCall reduce_scatter(const void* send, void* recv, size_t count,
                                       DataType dtype, ReduceOp op) {
    return {CollectiveOp::ReduceScatter, dtype, op, -1, count, send, recv};
  }
  static CollectiveCall allgather(const void* send, void* recv, size_t count, DataType dtype) {
    return {CollectiveOp::Allgather, dtype, ReduceOp::Sum, -1, count, send, recv};
  }
  static CollectiveCall broadcast(const void* send, void* recv, size_t count, DataType dtype,
                                  int root) {
    return {CollectiveOp::Broadcast, dtype, ReduceOp::Sum, root, count, send, recv};
  }
  static CollectiveCall alltoall(const void* send, void* recv, size_t count_per_rank,
                                 DataType dtype) {
    return {CollectiveOp::Alltoall, dtype, ReduceOp::Sum, -1, count_per_rank, send, recv};
  }
  static CollectiveCall barrier() { return {CollectiveOp::Barrier}; }
  static CollectiveCall reduce(const void* send, void* recv, size_t count, DataType dtype,
                               ReduceOp op, int root) {
    return {CollectiveOp::Reduce, dtype, op, root, count, send, recv};
  }
  static CollectiveCall gather(const void* send, void* recv, size_t count_per_rank,
                               DataType dtype, int root) {
    return {CollectiveOp::Gather, dtype, ReduceOp::Sum, root, count_per_rank, send, recv};
  }
  static CollectiveCall scatter(const void* send, void* recv, size_t count_per_rank,
                                DataType dtype, int root) {
    return {CollectiveOp::Scatter, dtype, ReduceOp::Sum, root, count_per_rank, send, recv};
  }
  // A call read back from another rank's bytes (a fingerprint, the direct
  // path's descriptor), for describing it; their parsers check the values.
  static CollectiveCall from_wire(uint8_t op, uint8_t dtype, uint8_t redop, int32_t root,
                                  uint64_t count) {
    return {CollectiveOp(op), DataType(dtype), ReduceOp(redop), root, count};
  }

  bool has_redop() const {
    return op == CollectiveOp::Allreduce || op == CollectiveOp::ReduceScatter ||
           op == CollectiveOp::Reduce;
  }
  bool has_root() const {
    return op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce ||
           op == CollectiveOp::Gather || op == CollectiveOp::Scatter;
  }
  std::string_view name() const { return to_string(op); }
  // "1024 x float32 sum", "8 x int64 from rank 0", "4 x uint8 per rank",
  // "" (barrier, internal).
  std::string describe() const;
  // Bytes this rank reads from `send` and writes to `recv` (rank of size).
  // Inline: every call asks on its caller's thread (Note [the lean inline
  // path] in runtime/communicator.cpp).
  size_t send_bytes(int rank, int size) const;
  size_t recv_bytes(int rank, int size) const;
};

inline size_t CollectiveCall::send_bytes(int rank, int size) const {
  const size_t es = element_size(dtype);
  switch (op) {
    case CollectiveOp::Allgather: return shard_count(count, size, rank) * es;
    case CollectiveOp::Broadcast: return rank == root ? count * es : 0;
    case CollectiveOp::Alltoall: return count * es * size_t(size);
    case CollectiveOp::Scatter: return rank == root ? count * es * size_t(size) : 0;
    case CollectiveOp::Barrier:
    case CollectiveOp::Other: return 0;
    default: return count * es;
  }
}

inline size_t CollectiveCall::recv_bytes(int rank, int size) const {
  const size_t es = element_size(dtype);
  switch (op) {
    case CollectiveOp::ReduceScatter: return shard_count(count, size, rank) * es;
    case CollectiveOp::Alltoall: return count * es * size_t(size);
    case CollectiveOp::Reduce: return rank == root ? count * es : 0;
    case CollectiveOp::Gather: return rank == root ? count * es * size_t(size) : 0;
    case CollectiveOp::Barrier:
    case CollectiveOp::Other: return 0;
    default: return count * es;
  }
}

// The argument checks every path shares, on the calling rank before
// anything is sent: the size fits the address space, buffers are not null
// where bytes are moved, send and receive overlap only in place (the
// in-place rule of each collective), broadcast's root is a rank. Throws
// InvalidArgument naming the rank and the collective.
void validate(const CollectiveCall& call, int rank, int size);

// How an internal exchange names itself in errors and logs, e.g.
// {"allgather", "bootstrap"}; empty: the call's own name and description.
struct CallLabel {
  std::string_view name;
  std::string detail;
};

}  // namespace gradwire
