// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/reduce_math.h"
#include "perf_common.h"

namespace gwperf {

using gradwire::DataType;
using gradwire::ReduceOp;
namespace k = gradwire::kernels;

namespace {

void store(DataType dt, std::byte* p, double v) {
  switch (dt) {
    case DataType::Float32: { float f = float(v); std::memcpy(p, &f, 4); break; }
    case DataType::Float64: std::memcpy(p, &v, 8); break;
    case DataType::Float16: { uint16_t h = k::float_to_half(float(v)); std::memcpy(p, &h, 2); break; }
    case DataType::BFloat16: { uint16_t h = k::float_to_bf16(float(v)); std::memcpy(p, &h, 2); break; }
    case DataType::Int32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
    case DataType::Int64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
    case DataType::UInt8: { uint8_t x = uint8_t(v); std::memcpy(p, &x, 1); break; }
  }
}

double load(DataType dt, const std::byte* p) {
  switch (dt) {
    case DataType::Float32: { float f; std::memcpy(&f, p, 4); return f; }
    case DataType::Float64: { double d; std::memcpy(&d, p, 8); return d; }
    case DataType::Float16: { uint16_t h; std::memcpy(&h, p, 2); return k::half_to_float(h); }
    case DataType::BFloat16: { uint16_t h; std::memcpy(&h, p, 2); return k::bf16_to_float(h); }
    case DataType::Int32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DataType::Int64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
    case DataType::UInt8: return double(uint8_t(*p));
  }
  return 0;
}

double pattern(int rank, size_t i) { return double((size_t(rank) + i) % 7); }

}  // namespace

Buffers make_buffers(const Args& a, size_t bytes, gradwire::Communicator& comm) {
  const int rank = comm.rank(), n = comm.size();
  const size_t es = gradwire::element_size(a.dtype);
  Buffers b;
  b.count = bytes / es;
  b.send_count = b.recv_count = b.count;
  if (a.coll == "reduce_scatter") b.recv_count = gradwire::shard_count(b.count, n, rank);
  if (a.coll == "allgather") b.send_count = gradwire::shard_count(b.count, n, rank);
  if (a.coll == "alltoall") b.send_count = b.recv_count = (b.count / n) * n;
  if (a.coll == "barrier") b.send_count = b.recv_count = 0;  // moves nothing: latency only
  if (a.buffers == "shared") {
    b.send_shared = comm.allocate_shared(b.send_count * es);
    b.recv_shared = comm.allocate_shared(b.recv_count * es);
    b.send = {static_cast<std::byte*>(b.send_shared.data()), b.send_count * es};
    b.recv = {static_cast<std::byte*>(b.recv_shared.data()), b.recv_count * es};
  } else {
    b.send_owned.resize(b.send_count * es);
    b.recv_owned.resize(b.recv_count * es);
    b.send = b.send_owned;
    b.recv = b.recv_owned;
  }
  const size_t first = a.coll == "allgather" ? gradwire::shard_offset(b.count, n, rank) : 0;
  for (size_t i = 0; i < b.send_count; ++i) store(a.dtype, b.send.data() + i * es, pattern(rank, first + i));
  if (a.buffers == "cuda") to_device(b, rank);
  return b;
}

int64_t count_wrong(const Args& a, const Buffers& b, int rank, int n) {
  const size_t es = gradwire::element_size(a.dtype);
  int64_t wrong = 0;
  for (size_t i = 0; i < b.recv_count; ++i) {
    double expect = 0;
    if (a.coll == "allreduce" || a.coll == "reduce_scatter") {
      const size_t gi = i + (a.coll == "reduce_scatter" ? gradwire::shard_offset(b.count, n, rank) : 0);
      double acc = pattern(0, gi);
      for (int r = 1; r < n; ++r) {
        const double x = pattern(r, gi);
        switch (a.op) {
          case ReduceOp::Sum: case ReduceOp::Avg: acc += x; break;
          case ReduceOp::Prod: acc *= x; break;
          case ReduceOp::Min: acc = std::min(acc, x); break;
          case ReduceOp::Max: acc = std::max(acc, x); break;
        }
      }
      if (a.op == ReduceOp::Avg) acc = gradwire::is_floating(a.dtype) ? acc / n : std::trunc(acc / n);
      expect = acc;
    } else if (a.coll == "allgather" || a.coll == "broadcast") {
      expect = pattern(0, i);  // allgather: shard owners' patterns line up with i
      if (a.coll == "allgather") {
        int owner = 0;
        while (owner + 1 < n && gradwire::shard_offset(b.count, n, owner + 1) <= i) ++owner;
        expect = pattern(owner, i);
      }
    } else if (a.coll == "sendrecv") {
      expect = pattern((rank + n - 1) % n, i);
    } else if (a.coll == "pingpong") {
      if (rank > 1 || n == 1) return 0;  // idle ranks receive nothing
      expect = pattern(1 - rank, i);
    } else {  // alltoall: block `from` of my receive buffer is block `rank` of their send
      const size_t per = b.recv_count / n, from = i / per;
      expect = pattern(int(from), size_t(rank) * per + i % per);
    }
    // Integer results outside the dtype's range wrap; the pattern keeps
    // sums of up to 36 ranks inside uint8 and products are not checked past it.
    if (a.dtype == DataType::UInt8 && expect > 255) continue;
    const double got = load(a.dtype, b.recv.data() + i * es);
    const double tol = gradwire::is_floating(a.dtype) ? std::fabs(expect) * 1e-2 : 0;
    if (std::fabs(got - expect) > tol) ++wrong;
  }
  return wrong;
}

}  // namespace gwperf
