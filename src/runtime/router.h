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
// A strategy that takes a call either submits it itself (the device
// backend has its own queue), or joins the call's chain: the strategies
// that took it, in order, up to the first that will not decline. The
// chain runs as one task in the communicator's order, each strategy in
// turn until one ran the call: the one-host path may still decline on the
// engine thread, jointly on every rank (the direct handshake finds a rank
// whose buffers lie outside the shared windows while the copy path is
// off), and the next strategy runs it. A new path is a Strategy in
// runtime/strategies.cpp and a place in Router's list.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "base/collective_call.h"
#include "base/deadline.h"
#include "base/work_state.h"
#include "collectives/context.h"
#include "gradwire/work.h"
#include "shm/shm.h"

namespace gradwire {

class CommunicatorImpl;

namespace route {

// What the strategies of one call keep between its submission and its
// run, and across a run that a WouldBlock cut short (Note [inline small
// collectives] in runtime/engine.h).
struct State {
  shm::Windows* windows = nullptr;  // the one-host path's
  bool small_call = false;          // through the slots (Note [small collectives])
  shm::SmallState small;
  shm::DirectCall located;  // direct or copy path: the call's buffers in the windows
  shm::DirectState direct;
};

// A strategy's answer for one call.
struct Offer {
  enum class Kind : uint8_t {
    Declines,   // not this strategy's
    Takes,      // runs it, or declines at run time (then the next one)
    Last,       // runs it: later strategies are not asked
    Submitted,  // submitted it itself; `work` is its Work
  };
  Kind kind = Kind::Declines;
  // It may run on the caller's thread when the engine is idle (Note
  // [inline small collectives]): it makes no provider call.
  bool inline_ok = false;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  // Caller's thread, from what every rank knows alike. Submitted: `work`
  // is set.
  virtual Offer offer(const CollectiveCall& call, Clock::time_point now, State& state,
                      Work& work) = 0;
  // Engine thread (or the caller's, if every strategy of the chain said
  // inline_ok): runs the call; false if it declined, jointly on every rank.
  virtual bool run(collectives::Context& ctx, const CollectiveCall& call, State& state) = 0;
};

// The strategies that took one call, in order.
struct Chain {
  std::array<Strategy*, 4> at{};
  uint8_t n = 0;
};

// The communicator's strategies, in the order above (strategies.cpp).
std::vector<std::unique_ptr<Strategy>> strategies_for(CommunicatorImpl& comm);

}  // namespace route
}  // namespace gradwire
