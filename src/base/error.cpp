// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "gradwire/error.h"

#include "gradwire/version.h"

namespace gradwire {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::PeerLost: return "PeerLost";
    case ErrorCode::Mismatch: return "Mismatch";
    case ErrorCode::Transport: return "Transport";
    case ErrorCode::Internal: return "Internal";
    case ErrorCode::Aborted: return "Aborted";
    case ErrorCode::Protocol: return "Protocol";
    case ErrorCode::Unauthenticated: return "Unauthenticated";
  }
  return "Unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error("gradwire " + std::string(to_string(code)) + ": " + message),
      code_(code),
      message_(message) {}

const char* version() { return "0.1.0"; }

}  // namespace gradwire
