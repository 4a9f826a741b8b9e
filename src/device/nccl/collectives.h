// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// How each gradwire collective maps onto NCCL calls (only with NCCL):
//   allreduce       ncclAllReduce (Avg: ncclAvg; integers truncate, floats
//                   NCCL pre-multiplies by 1/n, so not bitwise the CPU path)
//   reduce_scatter  ncclReduceScatter when count % size == 0; otherwise one
//                   ncclReduce per rank onto that rank's (uneven) shard
//   allgather       ncclAllGather when even; otherwise one ncclBroadcast of
//                   each rank's shard
//   broadcast       ncclBroadcast
//   alltoall        ncclSend/ncclRecv per peer in the group, the own block by
//                   cudaMemcpyAsync; in place goes through a stream-ordered
//                   copy of the send buffer
//   barrier         ncclAllReduce of one int32 in device scratch
// Every call is made between the caller's ncclGroupStart and ncclGroupEnd.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "device/nccl/library.h"
#include "device/backend.h"

namespace gradwire::device::nccl {

ncclDataType_t to_nccl(DataType dtype);
ncclRedOp_t to_nccl(ReduceOp op);

// "1024 x float32 sum", "1024 x float32 from rank 0", ...


// Throws InvalidArgument for what NCCL cannot run: a dtype or reduce op it
// lacks, and every check of validate() (base/collective_call.h).
void check(const CollectiveCall& c, int rank, int size);

struct Launch {
  const Library& lib;
  ncclComm_t comm;
  cudaStream_t stream;
  int rank, size;
  void* barrier_word;            // one int32 of device memory
  std::vector<void*> free_after;  // stream-ordered scratch: cudaFreeAsync after ncclGroupEnd
  const std::string& what;        // for messages
};

// Issues the NCCL calls of `c` (inside a group). Throws gradwire::Error
// naming `launch.what` on an NCCL or CUDA error; the caller still closes
// the group.
void enqueue(Launch& launch, const CollectiveCall& c);

}  // namespace gradwire::device::nccl
