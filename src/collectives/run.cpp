// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/raise.h"
#include "collectives/collectives.h"

namespace gradwire::collectives {

void no_algorithm(Context& ctx) {
  raise(ErrorCode::Internal, "{}: no algorithm for an internal call", ctx.what());
}

}  // namespace gradwire::collectives
