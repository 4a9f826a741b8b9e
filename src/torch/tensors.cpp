// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "tensors.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "gradwire/error.h"

namespace gradwire::torch::detail {

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::InvalidArgument, msg);
}

std::optional<DataType> element_type(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DataType::Float32;
    case at::kDouble: return DataType::Float64;
    case at::kHalf: return DataType::Float16;
    case at::kBFloat16: return DataType::BFloat16;
    case at::kInt: return DataType::Int32;
    case at::kLong: return DataType::Int64;
    case at::kByte: return DataType::UInt8;
    case at::kChar: return DataType::Int8;
    case at::kShort: return DataType::Int16;
    case at::kBool: return DataType::Bool;
    // As Gloo and NCCL do (Note [complex as pairs of reals]).
    case at::kComplexFloat: return DataType::Float32;
    case at::kComplexDouble: return DataType::Float64;
    case at::kComplexHalf: return DataType::Float16;
    default: return std::nullopt;
  }
}

DataType to_dtype(const at::Tensor& t, const std::string& what) {
  if (const auto d = element_type(t.scalar_type())) return *d;
  invalid(what + ": dtype " + std::string(c10::toString(t.scalar_type())) +
          " is not supported by the gradwire backend (float32/64, float16, bfloat16, "
          "int8/16/32/64, uint8, bool, complex64/128, complex32)");
}

// Note [complex as pairs of reals]: a complex tensor of n elements is 2n
// reals to gradwire; sums and averages are the same element by element, so
// only SUM and AVG are accepted for it (as in Gloo; to_op in c10d_backend.cpp).
size_t count_of(const at::Tensor& t) { return size_t(t.numel()) * (t.is_complex() ? 2 : 1); }

bool supported_device(const c10::Device& device) { return device.is_cpu() || device.is_cuda(); }

Stream current_stream(const c10::Device& device) {
  if (!device.is_cuda()) return Stream();
  return Stream(c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle());
}

void check_tensor(const at::Tensor& t, const std::string& what) {
  if (!supported_device(t.device())) {
    invalid(what + ": tensors on " + t.device().str() +
            " are not supported by the gradwire backend (CPU and CUDA tensors are)");
  }
  if (t.layout() != at::kStrided) invalid(what + ": sparse tensors are not supported");
  if (!t.is_contiguous()) {
    invalid(what + ": the tensor is not contiguous (gradwire reduces in place; pass "
                   "tensor.contiguous() and copy back)");
  }
  (void)to_dtype(t, what);
}

}  // namespace gradwire::torch::detail
