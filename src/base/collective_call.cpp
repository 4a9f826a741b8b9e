// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/collective_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "base/raise.h"

namespace gradwire {

namespace {

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

const std::byte* at(const void* p, size_t bytes) {
  return static_cast<const std::byte*>(p) + bytes;
}

}  // namespace

// A new op that reads and writes like the others needs no case here: the
// default describes it by its count, dtype, reduce op and root.
std::string CollectiveCall::describe() const {
  switch (op) {
    case CollectiveOp::Barrier:
    case CollectiveOp::Other: return "";
    case CollectiveOp::Broadcast:
      return fmt::format("{} x {} from rank {}", count, to_string(dtype), root);
    case CollectiveOp::Alltoall: return fmt::format("{} x {} per rank", count, to_string(dtype));
    case CollectiveOp::Allgather: return fmt::format("{} x {}", count, to_string(dtype));
    case CollectiveOp::Allreduce:
    case CollectiveOp::ReduceScatter:
      return fmt::format("{} x {} {}", count, to_string(dtype), to_string(redop));
    case CollectiveOp::Reduce:
      return fmt::format("{} x {} {} to rank {}", count, to_string(dtype), to_string(redop), root);
    case CollectiveOp::Gather:
      return fmt::format("{} x {} per rank to rank {}", count, to_string(dtype), root);
    case CollectiveOp::Scatter:
      return fmt::format("{} x {} per rank from rank {}", count, to_string(dtype), root);
    default: break;
  }
  std::string s = fmt::format("{} x {}", count, to_string(dtype));
  if (has_redop()) s += fmt::format(" {}", to_string(redop));
  if (has_root()) s += fmt::format(" at rank {}", root);
  return s;
}

void validate(const CollectiveCall& c, int rank, int size) {
  if (c.op == CollectiveOp::Barrier || c.op == CollectiveOp::Other) return;
  // Enum values arrive from casts (Python, C callers): refused here, on the
  // caller's thread, so the communicator stays usable (communicator.h).
  if (static_cast<size_t>(c.dtype) >= std::size(kAllDataTypes)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got DataType({}), which is not a data type "
          "(float32, float64, float16, bfloat16, int32, int64, uint8, int8, int16, bool)", rank,
          c.name(), int(c.dtype));
  }
  if (c.has_redop() && static_cast<size_t>(c.redop) >= std::size(kAllReduceOps)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got ReduceOp({}), which is not a reduce "
          "operation (sum, avg, min, max, prod)", rank, c.name(), int(c.redop));
  }
  if (c.has_redop() && c.dtype == DataType::Bool && c.redop == ReduceOp::Avg) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} of bool with avg: an average of booleans is not "
          "a boolean (sum is logical or, prod logical and)", rank, c.name());
  }
  const size_t es = element_size(c.dtype);
  size_t total = 0;  // multiplications, not two 64-bit divisions (~80 cycles)
  if (__builtin_mul_overflow(c.count, es, &total) ||
      __builtin_mul_overflow(total, size_t(std::max(1, size)), &total)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} of {} elements of {} overflows the "
          "address space", rank, c.name(), c.count, to_string(c.dtype));
  }
  if (c.has_root() && (c.root < 0 || c.root >= size)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} root {} is not a rank of this "
          "communicator (size {})", rank, c.name(), c.root, size);
  }
  const size_t sb = c.send_bytes(rank, size), rb = c.recv_bytes(rank, size);
  if (sb > 0 && c.send == nullptr) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got a null send buffer for {} bytes", rank,
          c.name(), sb);
  }
  if (rb > 0 && c.recv == nullptr) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got a null receive buffer for {} bytes", rank,
          c.name(), rb);
  }
  // In place is send == recv, or, for the sharded collectives, the shard at
  // its offset inside the full buffer; any other overlap is refused.
  const void* in_place = c.recv;
  const char* rule = "send == recv";
  // (The shard's offset only where it is used: two 64-bit divisions.)
  if (c.op == CollectiveOp::ReduceScatter) {
    in_place = at(c.send, shard_offset(c.count, size, rank) * es);
    rule = "recv == send + shard_offset(count, size, rank)";
  } else if (c.op == CollectiveOp::Allgather) {
    in_place = at(c.recv, shard_offset(c.count, size, rank) * es);
    rule = "send == recv + shard_offset(count, size, rank)";
  } else if (c.op == CollectiveOp::Gather) {
    in_place = at(c.recv, size_t(rank) * c.count * es);
    rule = "on the root, send == recv + rank * count";
  } else if (c.op == CollectiveOp::Scatter) {
    in_place = at(c.send, size_t(rank) * c.count * es);
    rule = "on the root, recv == send + rank * count";
  }
  const bool recv_side =
      c.op == CollectiveOp::ReduceScatter || c.op == CollectiveOp::Scatter;
  const bool same = recv_side ? c.recv == in_place : c.send == in_place;
  if (!same && overlaps(c.send, sb, c.recv, rb)) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: {} send and receive buffers overlap without being in place ({})", rank,
          c.name(), rule);
  }
}

}  // namespace gradwire
