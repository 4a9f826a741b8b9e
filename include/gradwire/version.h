// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#define GRADWIRE_VERSION_MAJOR 0
#define GRADWIRE_VERSION_MINOR 1
#define GRADWIRE_VERSION_PATCH 0

namespace gradwire {
// The library's version as "major.minor.patch" (of the .so actually loaded).
const char* version();
}  // namespace gradwire
