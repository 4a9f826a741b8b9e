// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Internal: the per-dtype element functions (from reduce_math.h) that every
// CPU kernel variant uses for its scalar loops and tails, and the macro that
// lays out a KernelTable (Note [cpu kernel dispatch] in dispatch.h).
//
// Include this before any `#pragma GCC target`: these inline functions have
// external linkage and must be compiled for the baseline ISA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gradwire/types.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/elem.h"
#include "kernels/reduce_math.h"

namespace gradwire::kernels::cpu {

using kernels::Elem;

// The element loops, shared by the scalar table and the SIMD tails.
template <DataType dt, Op op>
inline void reduce_elems(void* dst, const void* a, const void* b, size_t begin, size_t end) {
  using S = typename Elem<dt>::S;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  for (size_t i = begin; i < end; ++i) d[i] = Elem<dt>::template reduce<op>(x[i], y[i]);
}

template <DataType dt>
inline void divide_elems(void* dst, int divisor, size_t begin, size_t end) {
  using S = typename Elem<dt>::S;
  auto* d = static_cast<S*>(dst);
  for (size_t i = begin; i < end; ++i) d[i] = Elem<dt>::divide(d[i], divisor);
}

}  // namespace gradwire::kernels::cpu

// A KernelTable initialiser from function templates named reduce_kernel<dt, op>,
// divide_kernel<dt> and the four conversion functions, in the including TU.
#define GW_KERNEL_ROW(dt)                                                                                   \
  {                                                                                                         \
    &reduce_kernel<dt, ::gradwire::kernels::Op::Sum>, &reduce_kernel<dt, ::gradwire::kernels::Op::Min>,     \
        &reduce_kernel<dt, ::gradwire::kernels::Op::Max>, &reduce_kernel<dt, ::gradwire::kernels::Op::Prod> \
  }
#define GW_KERNEL_TABLE()                                                                               \
  ::gradwire::kernels::cpu::KernelTable {                                                               \
    {GW_KERNEL_ROW(::gradwire::DataType::Float32), GW_KERNEL_ROW(::gradwire::DataType::Float64),        \
     GW_KERNEL_ROW(::gradwire::DataType::Float16), GW_KERNEL_ROW(::gradwire::DataType::BFloat16),       \
     GW_KERNEL_ROW(::gradwire::DataType::Int32),   GW_KERNEL_ROW(::gradwire::DataType::Int64),          \
     GW_KERNEL_ROW(::gradwire::DataType::UInt8),   GW_KERNEL_ROW(::gradwire::DataType::Int8),           \
     GW_KERNEL_ROW(::gradwire::DataType::Int16),   GW_KERNEL_ROW(::gradwire::DataType::Bool)},          \
        {&divide_kernel<::gradwire::DataType::Float32>, &divide_kernel<::gradwire::DataType::Float64>,  \
         &divide_kernel<::gradwire::DataType::Float16>, &divide_kernel<::gradwire::DataType::BFloat16>, \
         &divide_kernel<::gradwire::DataType::Int32>,   &divide_kernel<::gradwire::DataType::Int64>,    \
         &divide_kernel<::gradwire::DataType::UInt8>,   &divide_kernel<::gradwire::DataType::Int8>,     \
         &divide_kernel<::gradwire::DataType::Int16>,   &divide_kernel<::gradwire::DataType::Bool>},    \
        &half_to_float_kernel, &float_to_half_kernel, &bf16_to_float_kernel, &float_to_bf16_kernel      \
  }
