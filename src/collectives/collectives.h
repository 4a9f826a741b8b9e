// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The collectives as free functions over a Context, one file each. They run
// on the communicator's engine thread; arguments were validated on
// submission (see communicator.cpp), so these only check invariants.
#pragma once

#include <cstddef>

#include "collectives/context.h"
#include "gradwire/types.h"

namespace gradwire::collectives {

void allreduce(Context& ctx, const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op);
void reduce_scatter(Context& ctx, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op);
void allgather(Context& ctx, const void* send, void* recv, size_t count, DataType dtype);
void broadcast(Context& ctx, const void* send, void* recv, size_t count, DataType dtype, int root);
void alltoall(Context& ctx, const void* send, void* recv, size_t count_per_rank, DataType dtype);
void barrier(Context& ctx);

// Building blocks shared between collectives.
void allreduce_recursive_doubling(Context& ctx, void* data, size_t count, DataType dtype,
                                  ReduceOp op);

}  // namespace gradwire::collectives
