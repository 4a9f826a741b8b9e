// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#if GRADWIRE_HAVE_NCCL
#include "device/nccl/collectives.h"

#include "base/raise.h"

namespace gradwire::device::nccl {

ncclDataType_t to_nccl(DataType dtype) {
  switch (dtype) {
    case DataType::Float32: return ncclFloat32;
    case DataType::Float64: return ncclFloat64;
    case DataType::Float16: return ncclFloat16;
    case DataType::BFloat16: return ncclBfloat16;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
    case DataType::UInt8: return ncclUint8;
    case DataType::Int8: return ncclInt8;
    case DataType::Bool: return ncclUint8;  // 0/1 bytes; its ops map in enqueue()
    case DataType::Int16:
      raise(ErrorCode::InvalidArgument, "NCCL has no int16 type: set GRADWIRE_DEVICE_PATH=staged "
            "for int16 device buffers, or use int32");
  }
  raise(ErrorCode::InvalidArgument, "no NCCL type for DataType value {}", int(dtype));
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Prod: return ncclProd;
  }
  raise(ErrorCode::InvalidArgument, "no NCCL reduction for ReduceOp value {}", int(op));
}

void check(const CollectiveCall& c, int rank, int size) {
  (void)to_nccl(c.dtype);
  (void)to_nccl(c.redop);
  validate(c, rank, size);
}

namespace {

void nccl_call(Launch& l, ncclResult_t rc, const char* call) {
  // Inside a group a non-blocking communicator answers ncclSuccess or
  // ncclInProgress; the group's end reports the outcome.
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  raise(rc == ncclInvalidArgument || rc == ncclInvalidUsage ? ErrorCode::InvalidArgument
                                                            : ErrorCode::Transport,
        "{}: {} failed: {}", l.what, call, l.lib.describe(rc, l.comm));
}

void cuda_call(Launch& l, cudaError_t err, const char* call) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  raise(ErrorCode::Transport, "{}: {} failed on the NCCL stream: {}", l.what, call,
        cudaGetErrorString(err));
}

const std::byte* at(const void* p, size_t elements, size_t es) {
  return static_cast<const std::byte*>(p) + elements * es;
}
std::byte* at(void* p, size_t elements, size_t es) {
  return static_cast<std::byte*>(p) + elements * es;
}

void alltoall(Launch& l, const CollectiveCall& c) {
  const size_t es = element_size(c.dtype);
  const size_t block = c.count * es;
  const void* src = c.send;
  if (c.send == c.recv && l.size > 1) {
    // Receives would overwrite blocks not yet sent: send from a copy.
    void* copy = nullptr;
    cuda_call(l, cudaMallocAsync(&copy, block * size_t(l.size), l.stream), "cudaMallocAsync");
    l.free_after.push_back(copy);
    cuda_call(l, cudaMemcpyAsync(copy, c.send, block * size_t(l.size), cudaMemcpyDeviceToDevice,
                                 l.stream),
              "cudaMemcpyAsync");
    src = copy;
  }
  if (src != c.recv) {
    cuda_call(l, cudaMemcpyAsync(at(c.recv, c.count * size_t(l.rank), es),
                                 at(src, c.count * size_t(l.rank), es), block,
                                 cudaMemcpyDeviceToDevice, l.stream),
              "cudaMemcpyAsync");
  }
  const ncclDataType_t dt = to_nccl(c.dtype);
  for (int peer = 0; peer < l.size; ++peer) {
    if (peer == l.rank) continue;
    const size_t off = c.count * size_t(peer);
    nccl_call(l, l.lib.Send(at(src, off, es), c.count, dt, peer, l.comm, l.stream), "ncclSend");
    nccl_call(l, l.lib.Recv(at(c.recv, off, es), c.count, dt, peer, l.comm, l.stream), "ncclRecv");
  }
}

// Note [rooted collectives] in collectives/rooted.cpp: linear, as ncclSend
// and ncclRecv in one group (the caller's ncclGroupStart/End, as alltoall).
void rooted(Launch& l, const CollectiveCall& c) {
  const size_t es = element_size(c.dtype);
  const size_t block = c.count * es;
  const ncclDataType_t dt = to_nccl(c.dtype);
  const bool gather = c.op == CollectiveOp::Gather;
  if (l.rank != c.root) {
    if (gather) {
      nccl_call(l, l.lib.Send(c.send, c.count, dt, c.root, l.comm, l.stream), "ncclSend");
    } else {
      nccl_call(l, l.lib.Recv(c.recv, c.count, dt, c.root, l.comm, l.stream), "ncclRecv");
    }
    return;
  }
  const size_t mine = c.count * size_t(l.rank);
  void* dst = gather ? at(c.recv, mine, es) : c.recv;
  const void* src = gather ? c.send : at(const_cast<void*>(c.send), mine, es);
  if (dst != src) {
    cuda_call(l, cudaMemcpyAsync(dst, src, block, cudaMemcpyDeviceToDevice, l.stream),
              "cudaMemcpyAsync");
  }
  for (int peer = 0; peer < l.size; ++peer) {
    if (peer == l.rank) continue;
    const size_t off = c.count * size_t(peer);
    if (gather) {
      nccl_call(l, l.lib.Recv(at(c.recv, off, es), c.count, dt, peer, l.comm, l.stream),
                "ncclRecv");
    } else {
      nccl_call(l, l.lib.Send(at(const_cast<void*>(c.send), off, es), c.count, dt, peer, l.comm,
                              l.stream),
                "ncclSend");
    }
  }
}

}  // namespace

void enqueue(Launch& l, const CollectiveCall& c) {
  using K = CollectiveOp;
  const ncclDataType_t dt = to_nccl(c.dtype);
  // Bool (types.h): Sum is logical or (max of 0/1), Prod logical and (min).
  const ReduceOp redop = c.dtype != DataType::Bool ? c.redop
                         : c.redop == ReduceOp::Sum ? ReduceOp::Max
                         : c.redop == ReduceOp::Prod ? ReduceOp::Min
                                                     : c.redop;
  const ncclRedOp_t op = to_nccl(redop);
  const size_t es = element_size(c.dtype);
  const size_t n = size_t(l.size);
  if (c.op == K::Barrier) {
    nccl_call(l, l.lib.AllReduce(l.barrier_word, l.barrier_word, 1, ncclInt32, ncclSum, l.comm,
                                 l.stream),
              "ncclAllReduce (barrier)");
    return;
  }
  if (c.count == 0) return;  // the same on every rank: nothing to move
  switch (c.op) {
    case K::Allreduce:
      nccl_call(l, l.lib.AllReduce(c.send, c.recv, c.count, dt, op, l.comm, l.stream),
                "ncclAllReduce");
      return;
    case K::ReduceScatter:
      if (c.count % n == 0) {
        nccl_call(l, l.lib.ReduceScatter(c.send, c.recv, c.count / n, dt, op, l.comm, l.stream),
                  "ncclReduceScatter");
        return;
      }
      for (int r = 0; r < l.size; ++r) {
        const size_t cnt = shard_count(c.count, l.size, r);
        if (cnt == 0) continue;
        // recvbuff is read only on the root; elsewhere any valid pointer.
        void* recv = r == l.rank ? c.recv : const_cast<void*>(c.send);
        nccl_call(l, l.lib.Reduce(at(c.send, shard_offset(c.count, l.size, r), es), recv, cnt, dt,
                                  op, r, l.comm, l.stream),
                  "ncclReduce");
      }
      return;
    case K::Allgather:
      if (c.count % n == 0) {
        nccl_call(l, l.lib.AllGather(c.send, c.recv, c.count / n, dt, l.comm, l.stream),
                  "ncclAllGather");
        return;
      }
      for (int r = 0; r < l.size; ++r) {
        const size_t cnt = shard_count(c.count, l.size, r);
        if (cnt == 0) continue;
        std::byte* dst = at(c.recv, shard_offset(c.count, l.size, r), es);
        const void* src = r == l.rank ? c.send : dst;
        nccl_call(l, l.lib.Broadcast(src, dst, cnt, dt, r, l.comm, l.stream), "ncclBroadcast");
      }
      return;
    case K::Broadcast:
      nccl_call(l, l.lib.Broadcast(l.rank == c.root ? c.send : c.recv, c.recv, c.count, dt, c.root,
                                   l.comm, l.stream),
                "ncclBroadcast");
      return;
    case K::Alltoall:
      alltoall(l, c);
      return;
    case K::Barrier:
      return;
    case K::Reduce:
      // recvbuff is read only on the root; elsewhere any valid pointer.
      nccl_call(l, l.lib.Reduce(c.send, l.rank == c.root ? c.recv : const_cast<void*>(c.send),
                                c.count, dt, op, c.root, l.comm, l.stream),
                "ncclReduce");
      return;
    case K::Gather:
    case K::Scatter:
      rooted(l, c);
      return;
    case K::Other:
      break;
  }
  raise(ErrorCode::Internal, "{}: NCCL has no internal collective", l.what);
}

}  // namespace gradwire::device::nccl
#endif  // GRADWIRE_HAVE_NCCL
