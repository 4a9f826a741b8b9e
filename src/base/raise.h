// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Helpers to raise gradwire::Error with fmt-formatted messages.
#pragma once

#include <fmt/format.h>

#include "gradwire/error.h"

namespace gradwire {

template <typename... Args>
[[noreturn]] void raise(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

#define GW_CHECK(cond, ...)                                                   \
  do {                                                                        \
    if (!(cond)) ::gradwire::raise(::gradwire::ErrorCode::Internal, __VA_ARGS__); \
  } while (0)

}  // namespace gradwire
