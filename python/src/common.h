// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What both extension modules (gradwire._C and gradwire._C_torch) share:
// the Python exception classes, interruptible waiting, and keeping Python
// buffers alive while a collective may still write them.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "gradwire/error.h"
#include "gradwire/options.h"
#include "gradwire/work.h"

namespace gradwire::python {

namespace py = pybind11;

// Creates gradwire.Error (a RuntimeError) and one subclass per ErrorCode in
// `m`, and registers the translator from gradwire::Error. The translator is
// global to every module sharing pybind11's internals (torch._C included), so
// a gradwire::Error thrown under torch's own bindings (Work.wait) becomes the
// same Python class.
void register_errors(py::module_& m);

// Options from Communicator.create's keyword arguments (module.cpp),
// checked: timeout in seconds.
Options make_options(std::optional<double> timeout, std::optional<std::string> provider,
                     std::optional<std::string> iface);

// Waits for `work` with the GIL released, in slices, checking for signals
// between slices (Note [interruptible wait]). `timeout_s` < 0: no timeout of
// our own (the communicator's deadline still bounds every collective).
// Returns false if `timeout_s` passed first; rethrows the Work's error.
bool wait_interruptibly(const Work& work, double timeout_s);

// Note [pinned buffers]: the engine thread may write a buffer until its Work
// completes, even after the Python Work object is gone or a KeyboardInterrupt
// left the wait. pin() takes a reference to each object for as long as
// `work` runs. The completion callback runs on the engine thread without the
// GIL, so it only moves the references to a list that the next call holding
// the GIL (release_unpinned) drops.
void pin(const Work& work, const std::vector<py::object>& objects);
void release_unpinned();

}  // namespace gradwire::python
