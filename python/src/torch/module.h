// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The parts of gradwire._C_torch (module.cpp binds the rest).
#pragma once

#include <pybind11/pybind11.h>

namespace gradwire::python {

namespace py = pybind11;

// gradwire's PowerSGD as a DDP comm hook (powersgd.cpp).
void register_powersgd(py::module_& m);

// gradwire::torch::ShardedDataParallel for Python modules (sharded.cpp).
void register_sharded(py::module_& m);

}  // namespace gradwire::python
