// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The world of the libtorch multi-rank test binaries, created in main
// (world_main.cpp) from whatever launched them (gwlaunch or mpirun). Not
// tests/ranks/harness: that one uses the system's fmt, and libtorch's
// headers bring another fmt that must not meet it in one binary.
#pragma once

#include "gradwire/gradwire.h"

namespace gwtorchtest {
gradwire::Communicator& world();
}  // namespace gwtorchtest
