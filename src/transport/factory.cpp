// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// transport::open: the one place that knows which transports exist (Note
// [transport contract]). A new transport adds a row here.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/raise.h"
#include "transport/ofi/transport.h"
#include "transport/transport.h"

namespace gradwire::transport {

namespace {

struct Kind {
  const char* name;
  std::unique_ptr<Transport> (*open)(const Config&);
  std::vector<std::string> (*providers)();
};

constexpr Kind kKinds[] = {
    {"ofi", &ofi::open, &ofi::available_providers},
};

const Kind& find(const std::string& kind) {
  for (const Kind& k : kKinds) {
    if (kind == k.name) return k;
  }
  raise(ErrorCode::InvalidArgument, "unknown transport '{}'; this build has: {}", kind,
        fmt::join(transport_kinds(), ", "));
}

}  // namespace

std::vector<std::string> transport_kinds() {
  std::vector<std::string> names;
  for (const Kind& k : kKinds) names.emplace_back(k.name);
  return names;
}

std::unique_ptr<Transport> open(const std::string& kind, const Config& config) {
  return find(kind).open(config);
}

std::vector<std::string> available_providers(const std::string& kind) {
  return find(kind).providers();
}

}  // namespace gradwire::transport
