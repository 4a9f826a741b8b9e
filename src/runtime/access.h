// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Library-internal access to a Communicator's implementation, for parts of
// gradwire that run their own steps on the engine thread (e.g. PowerSGD's
// "orthonormalise, multiply, allreduce" as one queued operation, Note
// [composite operations] in src/compress/powersgd.cpp).
#pragma once

#include "runtime/communicator_impl.h"
#include "gradwire/communicator.h"

namespace gradwire::detail {

struct CommunicatorAccess {
  static CommunicatorImpl& impl(Communicator& comm) { return *comm.impl_; }
  static std::unique_ptr<Communicator> wrap(std::unique_ptr<CommunicatorImpl> impl) {
    return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
  }
};

}  // namespace gradwire::detail
