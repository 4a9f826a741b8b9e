// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Zero-copy views of Python buffers for the direct API: anything that speaks
// the buffer protocol (numpy arrays, bytearray, memoryview, array.array) or
// DLPack (__dlpack__: numpy, torch CPU tensors, JAX, CuPy ...).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>

#include "gradwire/types.h"

namespace gradwire::python {

namespace py = pybind11;

struct BufferView {
  void* data = nullptr;
  size_t count = 0;  // elements
  DataType dtype = DataType::Float32;
  // What must stay alive while gradwire uses `data`: the exporting object,
  // or the DLPack capsule holding the producer's tensor.
  py::object owner;
};

// Throws gradwire::Error(InvalidArgument) naming `what` ("send buffer of
// allreduce") for non-contiguous memory, a dtype gradwire does not reduce,
// device memory, or (if `writable`) a read-only buffer.
BufferView view_buffer(const py::handle& obj, bool writable, const char* what);

}  // namespace gradwire::python
