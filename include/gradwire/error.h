// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <stdexcept>
#include <string>
#include <string_view>

namespace gradwire {

// Every failure a caller must know about is a gradwire::Error carrying one of
// these codes. Retriable conditions (a full queue, -FI_EAGAIN) never surface
// here: they are handled where they occur.
enum class ErrorCode {
  InvalidArgument,  // the caller passed something that can never work
  Timeout,          // a deadline passed while waiting for a peer or the engine
  PeerLost,         // a peer is gone (connection reset, process died)
  Mismatch,         // ranks disagree (sizes, dtypes, collectives, providers)
  Transport,        // the fabric reported an error we cannot attribute further
  Internal,         // a bug in gradwire; please report it
  Aborted,          // the communicator was aborted by an earlier error
  Protocol,         // a peer sent bytes gradwire cannot parse, or speaks an incompatible
                    // protocol version; that peer was dropped
  Unauthenticated,  // a peer could not prove the job secret (GRADWIRE_JOB_SECRET), or
                    // this process could not prove it to the peer
};

GRADWIRE_API std::string_view to_string(ErrorCode code);

class GRADWIRE_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  // The message without the "gradwire <Code>: " prefix that what() carries.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace gradwire
