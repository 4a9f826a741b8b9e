// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Tensors as gradwire sees them, written once for the whole libtorch
// adapter: the DDP module (distributed_data_parallel.cpp, consistency.cpp),
// the optimizers (optim.cpp) and the c10d backend (c10d_*.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <optional>
#include <string>

#include "gradwire/device_stream.h"
#include "gradwire/types.h"

namespace gradwire::torch::detail {

// InvalidArgument with `msg`.
[[noreturn]] void invalid(const std::string& msg);

// gradwire's element type for a torch dtype; a complex dtype's is its real
// part's (Note [complex as pairs of reals] in tensors.cpp). nullopt
// for a dtype gradwire has no type for (uint16, float8, ...).
std::optional<DataType> element_type(c10::ScalarType t);

// The same for a tensor that the c10d backend reduces or moves; an
// InvalidArgument naming the dtype and `what` where there is none.
DataType to_dtype(const at::Tensor& t, const std::string& what);

// Elements as gradwire counts them: 2 x numel for complex tensors.
size_t count_of(const at::Tensor& t);

// Whether gradwire's collectives take memory on `device`: host memory and
// CUDA devices (the latter through the device path, Note [device-buffer
// dispatch]).
bool supported_device(const c10::Device& device);

// PyTorch's current stream on `device` (Stream{} for host memory and the
// default stream): where work on that device's tensors is being enqueued
// now, which a collective must follow (Note [producer stream]).
Stream current_stream(const c10::Device& device);
inline Stream current_stream(const at::Tensor& t) { return current_stream(t.device()); }
// The gradwire Device of a tensor: its CUDA device, or host memory.
inline Device device_of(const at::Tensor& t) {
  return t.is_cuda() ? Device::cuda(int(t.device().index())) : Device::host();
}

// What the c10d backend takes: CPU or CUDA, strided, contiguous, a dtype
// with an element type. InvalidArgument naming `what` otherwise.
void check_tensor(const at::Tensor& t, const std::string& what);

}  // namespace gradwire::torch::detail
