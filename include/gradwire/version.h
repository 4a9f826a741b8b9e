// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#define GRADWIRE_VERSION_MAJOR 0
#define GRADWIRE_VERSION_MINOR 1
#define GRADWIRE_VERSION_PATCH 0

#include <string>

namespace gradwire {
// The library's version as "major.minor.patch" (of the .so actually loaded).
GRADWIRE_API const char* version();
// The NCCL that collectives on CUDA buffers would use: "2.28.9", or
// "unavailable (<why>)" when it cannot be loaded, or "not built" when this
// gradwire has no NCCL backend. Loads NCCL on first call (Note [loading NCCL]).
GRADWIRE_API std::string nccl_version();
// The libfabric that collectives on host buffers use: "1.17", or
// "unavailable (<why>)" when it cannot be loaded. Loads it on first call
// (Note [loading libfabric]).
GRADWIRE_API std::string libfabric_version();
}  // namespace gradwire
