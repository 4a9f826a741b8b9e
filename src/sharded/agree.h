// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [every rank raises the same error]: a step that can fail on some
// ranks only (a file that one rank cannot read, a shard that does not
// cover one rank's pieces) must not leave the others waiting in the next
// collective until the deadline. Each rank runs the step under attempt(),
// then agree() allgathers every rank's outcome (a fixed-size record: the
// error code and the start of the message) and, if any failed, raises the
// first failure on every rank, naming the ranks that failed. Used by the
// sharded engine and by checkpoints (src/checkpoint/).
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "gradwire/communicator.h"
#include "gradwire/error.h"

namespace gradwire::sharded {

struct Outcome {
  int code = -1;  // -1: success, else an ErrorCode
  std::string message;
};

template <typename Fn>
Outcome attempt(Fn&& fn) {
  Outcome s;
  try {
    fn();
  } catch (const Error& e) {
    s.code = int(e.code());
    s.message = e.message();
  } catch (const std::exception& e) {
    s.code = int(ErrorCode::Internal);
    s.message = e.what();
  }
  return s;
}

// Collective: returns if every rank succeeded, else raises on every rank.
void agree(Communicator& comm, const Outcome& mine, std::string_view phase);

}  // namespace gradwire::sharded
