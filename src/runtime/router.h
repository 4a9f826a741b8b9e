// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [ordered strategies]: how a collective finds its way. A
// communicator asks its strategies in a fixed order, on the caller's
// thread, whether each runs the call; each decides from what every rank
// knows alike (the call, and the communicator's set-up, which every rank
// agreed on at creation), so every rank routes the call the same way:
//   1. device        CUDA buffers: the device backend (NCCL, or staged)
//                    takes the whole call (Note [device-buffer dispatch]);
//   2. one host      the shm layer (Note [the one-host path] in shm/shm.h):
//                    small collectives through the control segments' slots,
//                    allreduce/reduce_scatter/allgather straight between
//                    shared buffers or through the staging areas;
//   3. hierarchical  large allreduces across hosts (Note [hierarchical
//                    allreduce] in collectives/hierarchy.cpp);
//   4. transport     gradwire's algorithms over the transport
//                    (collectives/), which takes everything left.
// The first strategy that takes a call starts it: the device backend
// through its own queue, the others as one task in the communicator's
// order (on the caller's thread when the engine is idle and the strategy
// makes no provider call, Note [inline small collectives]). A strategy may
// still decline on the engine thread, jointly on every rank (the one-host
// path's handshake finds a rank whose buffers lie outside the shared
// windows while the copy path is off); then the next strategy that takes
// the call runs it in the same task (Router::after). A new path is a
// Strategy in runtime/strategies.cpp and its place in the list.
//
// The price of the objects is two or three virtual calls a collective:
// each strategy submits its own task with a lambda of its own type (Note
// [the lean inline path] in communicator.cpp), so an 8-byte broadcast on
// one host costs what it did when the router was one function.
#pragma once

#include <array>
#include <memory>
#include <string_view>
#include <vector>

#include "base/collective_call.h"
#include "base/deadline.h"
#include "collectives/context.h"
#include "gradwire/work.h"

namespace gradwire {

class CommunicatorImpl;

namespace route {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  // Caller's thread, from what every rank knows alike: if this strategy
  // takes `call`, starts it, sets `work` and returns true.
  virtual bool start(const CollectiveCall& call, Clock::time_point now, Work& work) = 0;
  // Whether start() would take `call`: for finding who runs a call that an
  // earlier strategy declined on the engine thread.
  virtual bool takes(const CollectiveCall& call) = 0;
  // Engine thread: runs `call` within the running task (after an earlier
  // strategy declined it). Only engine strategies are asked.
  virtual void run(collectives::Context& ctx, const CollectiveCall& call) = 0;
};

class Router {
 public:
  // The four strategies of the note, in order (strategies.cpp).
  explicit Router(CommunicatorImpl& comm);
  ~Router();
  // Validated `call`: the first strategy that takes it starts it.
  Work start(const CollectiveCall& call, Clock::time_point now) {
    Work work;
    for (Strategy* s : order_) {
      if (s->start(call, now, work)) break;  // the transport takes everything
    }
    return work;
  }
  // Engine thread: runs `call` by the first strategy after `declined` that
  // takes it (every rank finds the same one).
  void after(const Strategy& declined, collectives::Context& ctx, const CollectiveCall& call);

 private:
  static constexpr size_t kStrategies = 4;
  std::array<std::unique_ptr<Strategy>, kStrategies> owned_;
  std::array<Strategy*, kStrategies> order_{};  // the loop reads no vector's bounds
};

}  // namespace route
}  // namespace gradwire
