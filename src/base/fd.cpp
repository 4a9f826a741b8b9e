// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/fd.h"

#include <fmt/format.h>

#include <cstring>

namespace gradwire {

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* s = strerror_r(err, buf, sizeof(buf));
  return s ? std::string(s) : fmt::format("errno {}", err);
}

}  // namespace gradwire
