// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>

#include "runtime/communicator_impl.h"

namespace gradwire {

// Requires world.host_local and world.cross_host (setup::create_world).
// Throws what a phase throws (its message names its communicator).
void hierarchical_allreduce(CommunicatorImpl& world, const void* send, void* recv, size_t count,
                            DataType dtype, ReduceOp op);

}  // namespace gradwire
